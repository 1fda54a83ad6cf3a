"""Locating one model on the family (seed 003, Key Design 3): :func:`locate_model`, the entry function.

A model with answers on every pool item is located from one sample: trial 0 of the trial engine
(:func:`~evalprism.stem.trials.trial_run`) with the same seed, so :func:`locate_model` with a seed
is trial 0 of :func:`~evalprism.stem.run_trials` with that seed. The chosen method's sample and
estimate become a :class:`~evalprism.stem.placement.Localization` (:func:`localize`): the paper's
rule on the balanced subset (:mod:`~evalprism.stem.balanced`, :mod:`~evalprism.stem.rule`), or the
score estimate of A or B (:mod:`~evalprism.stem.estimate`, :mod:`~evalprism.stem.irt`). A model with
answers on part of the pool, or located by a plan, is located from those answers alone
(:mod:`~evalprism.stem.subset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from evalprism.io.correctness import EncodedCorrectness
from evalprism.stem.methods import METHODS
from evalprism.stem.placement import Localization, paper_localization, score_localization
from evalprism.stem.rule import Weighting
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import Target, answered_whole_pool, target_of
from evalprism.stem.trials import TrialRun, trial_run
from evalprism.vocabularies import Design, LocateMethod

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool


def locate_model(
    pool: Pool,
    new_correctness: pd.DataFrame | EncodedCorrectness,
    items: int = 100,
    seed: int = 0,
    *,
    model: str | None = None,
    weighting: Weighting = "balanced",
    method: LocateMethod = "auto",
    design: Design | None = None,
    plan: Any = None,
) -> Localization:
    """Locate one model (``model``, or the only model in ``new_correctness``) on the pool's family.

    Answers on every pool item: from one sample of ``items`` items by ``method`` (auto | paper |
    stratified | irt: see :mod:`evalprism.stem.methods`), trial 0 of
    :func:`~evalprism.stem.run_trials` with the same seed. Answers on part of the pool, or a
    ``plan`` (:class:`~evalprism.stem.plan.Plan`): from those answers alone, an estimate of the
    full-pool score (:mod:`evalprism.stem.subset`)."""
    target = target_of(pool, new_correctness, model)
    if plan is not None or not answered_whole_pool(target):
        return locate_subset(pool, target, plan=plan, method=method)
    return locate_target(pool, target, items, seed, weighting, method=method, design=design)


def locate_target(
    pool: Pool,
    target: Target,
    items: int = 100,
    seed: int = 0,
    weighting: Weighting = "balanced",
    *,
    method: LocateMethod = "auto",
    design: Design | None = None,
) -> Localization:
    """:func:`locate_model` for an aligned :class:`~evalprism.stem.target.Target` (trial 0 of seed ``seed``)."""
    run = trial_run(pool, target, items, 1, seed, weighting=weighting, method=method, design=design)  # checks design
    return localize(pool, target, run)


def localize(pool: Pool, target: Target, run: TrialRun) -> Localization:
    """The localization of trial 0 of ``run`` (a run of any number of trials: trial 0 is the same) by
    the run's chosen method, from the sample it drew: the paper's rule on its balanced subset, or the
    score estimate of A or B on the sample it was made from."""
    trials = run.trials
    sampling = trials.sampling
    method = METHODS[trials.method]
    kind = method.draw_for(sampling.design)
    if not method.estimates_score:
        return paper_localization(pool, target, run.levels, run.first(kind), run.samples[kind].group, sampling)
    estimate = trials.estimates[method.name]
    score, se = estimate.score, estimate.standard_error
    assert score is not None and se is not None  # a method that places a model by its score has both
    return score_localization(pool, target, run.first(kind), float(score[0]), float(se[0]), sampling, method.name)
