"""STEM: locating an unknown model on a model family (seed 003).

- :func:`build_pool` -> :class:`Pool`: IRVs over the family ordered by params, significant
  transition samples and transition indices, per-benchmark anomaly rates, difficulty polarization,
  discriminability and weights; ``pool.audit()`` or :func:`audit_family` -> :class:`Audit` (the
  contamination report). Each entry takes its data and the command's options object
  (:mod:`~evalprism.stem.options`); the commands read their files through
  :mod:`~evalprism.stem.from_files`.
- :func:`locate_model` -> :class:`Localization`: accuracy per TI level on a balanced subset and the
  capability boundary as an interval between two family members, with a confidence.
- :func:`attach_panel`: other models' results on the pool's items as the reference panel of the IRT
  estimator (issue 17's B).
- :func:`run_trials` -> :class:`Trials`: repeated trials of every method (the paper's rule, A, B,
  random sampling, the Bayesian interval posterior: the entries of
  :data:`~evalprism.stem.methods.METHODS`) against the full-benchmark ground truth.
- :func:`locate_models` -> :class:`LocationResult`: several models at once, what the CLI writes; a
  model with answers on part of the pool (a plan's items or any subset) is located from them alone
  (:mod:`~evalprism.stem.subset`).
- :func:`make_plan` -> :class:`Plan`: which items to run a new model on (``stem plan``);
  :func:`plan_stage` and :class:`AdaptiveSession`: an adaptive plan's later stages, picked from the
  model's answers so far (:mod:`~evalprism.stem.adaptive`).

The rules chosen where the paper is silent are stated in the docstrings of
:mod:`evalprism.stats.irv`, :mod:`~evalprism.stem.discriminability`, :mod:`~evalprism.stem.pool`,
:mod:`~evalprism.stem.balanced`, :mod:`~evalprism.stem.rule` and :mod:`~evalprism.stem.baselines`.

The package runs one way: from the pool, the designs and the estimators, through the trial engine,
to one model's localization and the commands' results. Layers, lowest first: each module imports (at its top or inside a function) only modules
listed before it, and each formula lives in one of them (tests/test_stem_layers.py holds every
module to this list; an import under ``if TYPE_CHECKING:`` names a type for an annotation, runs
nothing and is not counted):

- ``options``: the commands' options, declared once (:mod:`evalprism.io.options`)
- ``discriminability``: benchmark discriminability, weights and the reference score
- ``simulate``: a planted model family (tests, the demo, the benchmark)
- ``estimate``: estimator A (strata, allocation, the stratified draw, the design estimate), the
  placement of any score estimate, and a drawn :class:`~evalprism.stem.estimate.Sample`
- ``resolution``: what a score estimate can tell about the members around it: the design's
  resolution and abstention near a member
- ``irt``: estimator B's 2PL (fit, ability, the difference estimate)
- ``baselines``: random sampling and the Bayesian interval posterior
- ``target``: a model aligned to the pool, the items it can be scored on, its full-pool truth
- ``balanced``: the paper's balanced subset (the design of its rule)
- ``rule``: the paper's rule (the capability boundary and its rule strength)
- ``adaptive``: an adaptive plan's later stages (2PL information) and its estimate (the calibrated
  IRT ability posterior)
- ``confidence``: A's and B's standard errors on a plan calibrated on the panel (split-conformal)
  and the 2PL's ceiling (a one-sided "at or above" interval)
- ``methods``: the registry of methods (:data:`~evalprism.stem.methods.METHODS`: what each draws
  and how it estimates, one typed estimate), which one ``auto`` chooses, B's sample design
- ``report``: the HTML reports and located.csv's table; below every result, since each result's
  ``save`` writes its report
- ``pool``: the STS pool of the family and the contamination audit (:class:`Pool`)
- ``plan``: which items a new model should run (A's design over the whole pool)
- ``trials``: the trial engine: every method's draws and estimates in T trials (:class:`Trials`)
- ``location_result``: the command's result, what ``stem locate`` writes (:class:`LocationResult`)
- ``placement``: one model's placement from one sample (:class:`Localization`)
- ``subset``: a model located from its own answers on part of the pool or a plan's items
- ``staging``: the adaptive loop (``stem plan --plan --answers``, :class:`AdaptiveSession`)
- ``locate_one``: the entry function for one model, :func:`locate_model`: trial 0 of the engine,
  or :mod:`~evalprism.stem.subset`
- ``evaluate``: :func:`run_trials` and :func:`locate_models`
- ``from_files``: the commands from their files (:func:`~evalprism.stem.from_files.pool_from_files`,
  ``audit_from_files``, ``locate_from_files``, ``plan_from_files``)

The names load from their submodules on first use (:mod:`evalprism._lazy`): building a pool does
not import the localization and its trials.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.stem.evaluate import locate_models, run_trials
    from evalprism.stem.locate_one import locate_model
    from evalprism.stem.location_result import LocationResult
    from evalprism.stem.placement import Localization
    from evalprism.stem.plan import Plan, make_plan
    from evalprism.stem.pool import (
        Audit,
        Pool,
        attach_panel,
        audit_family,
        build_pool,
    )
    from evalprism.stem.staging import AdaptiveSession, plan_stage
    from evalprism.stem.trials import Trials

__all__ = [
    "AdaptiveSession",
    "Audit",
    "Localization",
    "LocationResult",
    "Plan",
    "Pool",
    "Trials",
    "attach_panel",
    "audit_family",
    "build_pool",
    "locate_model",
    "locate_models",
    "make_plan",
    "plan_stage",
    "run_trials",
]

lazy_package(
    __name__,
    {
        "evaluate": ["locate_models", "run_trials"],
        "locate_one": ["locate_model"],
        "location_result": ["LocationResult"],
        "placement": ["Localization"],
        "plan": ["Plan", "make_plan"],
        "pool": ["Audit", "Pool", "attach_panel", "audit_family", "build_pool"],
        "staging": ["AdaptiveSession", "plan_stage"],
        "trials": ["Trials"],
    },
)
