"""Validation and the locate command's work: :func:`run_trials` (repeated trials of every method
against a model's full-pool truth) and :func:`locate_models` (several models at once, what
``evalprism stem locate`` writes).

The trials themselves are :mod:`~evalprism.stem.trials`' (the draws and every method's estimates);
a model with answers on every pool item is located from trial 0 of its run
(:func:`~evalprism.stem.locate_one.localize`), so when its trials run that trial is computed once; a
model with answers on part of the pool is located from them alone (:mod:`~evalprism.stem.subset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.io.options import check_applies
from evalprism.stem.locate_one import localize, locate_target
from evalprism.stem.location_result import LocateSummary, LocationResult, PlanUsed
from evalprism.stem.methods import METHODS, choose_method
from evalprism.stem.options import LocateOptions
from evalprism.stem.placement import Answered, Localization
from evalprism.stem.rule import Weighting
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import NO_ROW, Target, answered_whole_pool, target_of
from evalprism.stem.trials import TrialRun, Trials, trial_run
from evalprism.vocabularies import Design, LocateMethod

if TYPE_CHECKING:
    from evalprism.stem.plan import Plan
    from evalprism.stem.pool import Pool


def run_trials(
    pool: Pool,
    new_correctness: pd.DataFrame | EncodedCorrectness,
    items: int = 100,
    trials: int = 100,
    seed: int = 0,
    *,
    model: str | None = None,
    weighting: Weighting = "balanced",
    method: LocateMethod = "auto",
    design: Design | None = None,
    progress: bool = False,
) -> Trials:
    """``trials`` localizations of one model with ``items`` items each, by every method; ``method``
    chooses which one :attr:`Trials.positions` holds (:mod:`evalprism.stem.trials`)."""
    if trials < 1:
        raise EvalprismError(f"trials: expected at least 1, got {trials}")
    target = target_of(pool, new_correctness, model)
    if not answered_whole_pool(target):
        raise EvalprismError(
            f"model '{target.model}' answered {int((target.outcome != NO_ROW).sum()):,} of the "
            f"{len(pool.items):,} pool items; trials compare samples with the full-pool truth and need "
            "answers on the whole pool (locate it from its answers with locate_model)"
        )
    return trial_run(
        pool, target, items, trials, seed, progress=progress, weighting=weighting, method=method, design=design
    ).trials


def locate_models(
    pool: Pool,
    new_correctness: pd.DataFrame | EncodedCorrectness,
    options: LocateOptions | None = None,
    *,
    plan: Plan | None = None,
    progress: bool = True,
) -> LocationResult:
    """Locate each of ``options.model`` (default: every model in ``new_correctness``).

    A model with answers on every pool item gets the validation view: one sample of ``items`` items
    (:func:`~evalprism.stem.locate_model`, by ``method``) and, when ``trials`` > 0, ``trials``
    repeated trials of every method against its full-pool truth. A model with answers on part of
    the pool, or any model when a ``plan`` (:class:`~evalprism.stem.plan.Plan`) is given, is located
    from those answers alone, its full-pool score estimated by the plan's design or, without a plan,
    as a simple random sample of the pool (:mod:`evalprism.stem.subset`); trials need the whole pool.

    ``items`` (default 100), ``seed`` (default 0), ``weighting`` (default ``balanced``) and ``design``
    of ``options`` (:class:`~evalprism.stem.options.LocateOptions`) steer the sample drawn from a
    whole-pool model; when no model is sampled (every one is located from its answers alone, a plan's
    items or part of the pool, and no trials run) giving any of them is refused, since it would
    change nothing."""
    o = options or LocateOptions()
    enc = new_correctness if isinstance(new_correctness, EncodedCorrectness) else encode_correctness(new_correctness)
    names = list(o.model) if o.model else enc.model_names.tolist()
    targets = [target_of(pool, enc, name) for name in names]
    wholes = [answered_whole_pool(target) for target in targets]
    _check_sample_options(pool, names, wholes, plan, o)
    items = 100 if o.items is None else o.items
    seed = 0 if o.seed is None else o.seed
    weighting = o.weighting or "balanced"
    results = []
    notes: list[str] = []
    partial: list[tuple[str, int, str]] = []  # (model, items answered, design) of models that answered part of the pool
    for target, whole in zip(targets, wholes, strict=True):
        run = (
            trial_run(
                pool,
                target,
                items,
                o.trials,
                seed,
                progress=progress,
                weighting=weighting,
                method=o.method,
                design=o.design,
            )
            if o.trials > 0 and whole
            else None
        )
        if plan is not None or not whole:
            loc = locate_subset(pool, target, plan=plan, method=o.method, design_note=notes, progress=progress)
            if not whole:
                partial.append((target.model, _answered(loc), loc.draw.design))
        else:
            loc = _locate_whole(pool, target, run, items, seed, weighting, o.method, o.design)
            if items > loc.draw.available:
                notes.append(more_items_than_answered(target.model, items, loc.draw.available, o.trials))
        results.append((loc, None if run is None else run.trials))
    notes += partial_answers_notes(partial, len(pool.items), o.trials)
    summary = _summary(pool, names, plan, items, o.trials, seed, weighting, o.method, o.design)
    return LocationResult(pool=pool, results=results, options=o, summary=summary, notes=tuple(notes))


def _answered(loc: Localization) -> int:
    """How many pool items a model located from its own answers answered."""
    assert isinstance(loc.draw, Answered)  # a model located from its answers alone
    return loc.draw.answered


def _locate_whole(
    pool: Pool,
    target: Target,
    run: TrialRun | None,
    items: int,
    seed: int,
    weighting: Weighting,
    method: LocateMethod,
    design: Design | None,
) -> Localization:
    """A model that answered the whole pool, from trial 0 of its trials when they ran (the same draw
    and estimate as a run of one), else from a run of one."""
    if run is not None:
        return localize(pool, target, run)
    return locate_target(pool, target, items, seed, weighting, method=method, design=design)


def _check_sample_options(
    pool: Pool, names: list[str], wholes: list[bool], plan: Plan | None, o: LocateOptions
) -> None:
    """Refuse the options that steer a sample when no model is sampled (every one located from its
    own answers alone and no trials run), and those of a method no sampled model is located by."""
    sampled = any(whole and (plan is None or o.trials > 0) for whole in wholes)
    why = (
        "every model is located from its own answers alone ("
        + ("the plan's items" if plan is not None else "answers on part of the pool")
        + ") and no trials run, so no sample is drawn"
    )
    for name, value in (("items", o.items), ("seed", o.seed), ("weighting", o.weighting), ("design", o.design)):
        check_applies(name, value, sampled, why)
    _check_method_options(pool, names, wholes, o.method, o.trials, o.weighting, o.design)


def _summary(
    pool: Pool,
    names: list[str],
    plan: Plan | None,
    items: int,
    trials: int,
    seed: int,
    weighting: str,
    method: str,
    design: str | None,
) -> LocateSummary:
    """What the run decided, its options resolved (run.json's ``results``)."""
    return LocateSummary(
        family=pool.family,
        members=tuple(str(m) for m in pool.members["model"]),
        items=items,
        trials=trials,
        seed=seed,
        missing=pool.missing,
        weighting=weighting,
        method=method,
        design=design or "random",
        models=tuple(names),
        panel_models=pool.panel_size(),
        irt=pool.irt_kind,
        plan=None if plan is None else _plan_used(plan),
    )


def _plan_used(plan: Plan) -> PlanUsed:
    """The plan as a localization records it."""
    s = plan.summary
    return PlanUsed(items=s.items, seed=s.seed, method=s.method, design=s.design, strata=s.strata)


def _check_method_options(
    pool: Pool,
    names: list[str],
    wholes: list[bool],
    method: str,
    trials: int,
    weighting: str | None,
    design: str | None,
) -> None:
    """Refuse ``weighting`` (the paper rule's) when no sampled model is located by the paper's rule,
    trials or not: in trials it would change the paper rule's column alone, which ``method paper``
    compares the same way (the trials run every method), so accepting it beside another method
    only makes a user believe the localization was weighted. Refuse ``design`` (the IRT
    estimator's) when no trials run and no sampled model is located by the IRT estimator (trials
    compare every method on the design's sample, so it applies there)."""
    chosen = sorted({choose_method(pool, name, method) for name, whole in zip(names, wholes, strict=True) if whole})
    said = f"method '{method}'" + (f" (here: {', '.join(chosen)})" if method == "auto" else "")
    steered = {option for name in chosen for option in METHODS[name].steered_by}
    check_applies(
        "weighting",
        weighting,
        "weighting" in steered,
        f"it weights the TI levels of the paper's rule, and {said} is located without it"
        + (
            " (in trials it would change the paper rule's column alone: use method paper to compare it)"
            if trials > 0
            else " and no trials run"
        ),
    )
    if trials > 0:
        return
    if pool.panel is not None:  # without a panel resolve_design says why
        check_applies(
            "design",
            design,
            "design" in steered,
            f"it chooses the IRT estimator's sample, and {said} is located without it and no trials run",
        )


def partial_answers_notes(partial: list[tuple[str, int, str]], pool_items: int, trials: int) -> list[str]:
    """One note per design for the models that answered part of the pool (38 planned checkpoints make one
    line, not 38): how many answered how much, and that their full-pool scores are estimates."""
    notes = []
    for design in dict.fromkeys(d for _, _, d in partial):
        group = [(name, answered) for name, answered, d in partial if d == design]
        counts = sorted({answered for _, answered in group})
        answered = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}-{counts[-1]:,}"
        who, whose = (
            (f"'{group[0][0]}' answered", "its full-pool score is")
            if len(group) == 1
            else (f"{len(group)} models answered", "their full-pool scores are")
        )
        notes.append(
            f"{who} {answered} of the {pool_items:,} pool items: {whose} estimated under the "
            f"design '{design}'; no truth to compare with"
            + (" and no trials (they need answers on the whole pool)" if trials > 0 else "")
        )
    return notes


def more_items_than_answered(model: str, items: int, available: int, trials: int) -> str:
    """What happens when ``items`` exceeds the pool items a model can be scored on: every method
    draws all it can (a clamp, said once per model rather than refused: other models of the same
    run may have answered enough)."""
    text = (
        f"'{model}' can be scored on {available:,} pool items, fewer than the {items:,} asked (items): every "
        "method drew all it could, so the estimates are its full-benchmark score (standard error 0)"
    )
    if trials > 1:
        text += " and the trials repeat one another"
    return text + f"; ask for fewer than {available:,} items to test a sample"


__all__ = ["locate_models", "more_items_than_answered", "partial_answers_notes", "run_trials"]
