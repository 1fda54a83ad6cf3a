"""STEM: locating an unknown model on a model family (seed 003).

- :func:`build_pool` (or :func:`build_pool_from_files`) -> :class:`Pool`: IRVs over the family ordered by params, significant
  transition samples and transition indices, per-benchmark anomaly rates, difficulty polarization,
  discriminability and weights; ``pool.audit()`` -> :class:`Audit` (the contamination report).
- :func:`locate_model` -> :class:`Localization`: accuracy per TI level on a balanced subset and the
  capability boundary as an interval between two family members, with a confidence.
- :func:`attach_panel`: other models' results on the pool's items as the reference panel of the IRT
  estimator (issue 17's B).
- :func:`run_trials` -> :class:`Trials`: repeated trials of every method (the paper's rule, A, B,
  random sampling, the Bayesian interval posterior) against the full-benchmark ground truth.
- :func:`locate_models` -> :class:`LocationResult`: several models at once, what the CLI writes; a
  model with answers on part of the pool (a plan's items or any subset) is located from them alone
  (:mod:`~evalprism.stem.subset`).
- :func:`make_plan` -> :class:`Plan`: which items to run a new model on (``stem plan``);
  :func:`plan_stage` and :class:`AdaptiveSession`: an adaptive plan's later stages, picked from the
  model's answers so far (:mod:`~evalprism.stem.adaptive`).

The rules chosen where the paper is silent are stated in the docstrings of
:mod:`evalprism.stats.irv`, :mod:`~evalprism.stem.discriminability`, :mod:`~evalprism.stem.pool`,
:mod:`~evalprism.stem.locate` and :mod:`~evalprism.stem.baselines`.

The names load from their submodules on first use (:mod:`evalprism._lazy`): building a pool does
not import the localization and its trials.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.stem.evaluate import Trials, locate_models, run_trials
    from evalprism.stem.located import LocationResult
    from evalprism.stem.locate import Localization, locate_model
    from evalprism.stem.plan import Plan, make_plan
    from evalprism.stem.pool import Audit, Pool, attach_panel, build_pool, build_pool_from_files
    from evalprism.stem.staging import AdaptiveSession, plan_stage

__all__ = [
    "AdaptiveSession",
    "Audit",
    "Localization",
    "LocationResult",
    "Plan",
    "Pool",
    "Trials",
    "attach_panel",
    "build_pool",
    "build_pool_from_files",
    "locate_model",
    "locate_models",
    "make_plan",
    "plan_stage",
    "run_trials",
]

lazy_package(__name__, {
    "evaluate": ["Trials", "locate_models", "run_trials"],
    "located": ["LocationResult"],
    "locate": ["Localization", "locate_model"],
    "plan": ["Plan", "make_plan"],
    "pool": ["Audit", "Pool", "attach_panel", "build_pool", "build_pool_from_files"],
    "staging": ["AdaptiveSession", "plan_stage"],
})
