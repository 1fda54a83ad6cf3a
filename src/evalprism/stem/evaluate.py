"""Validation and the locate command's work: :func:`run_trials` (repeated trials of every method
against a model's full-pool truth) and :func:`locate_models` (several models at once, what
``evalprism stem locate`` writes).

The trials themselves are :mod:`~evalprism.stem.trials`' (the draws and every method's estimates);
a model with answers on every pool item is located from trial 0 of its run
(:func:`~evalprism.stem.locate_one.localize`), so when its trials run that trial is computed once; a
model with answers on part of the pool is located from them alone (:mod:`~evalprism.stem.subset`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.io.options import check_applies, check_number, check_seed
from evalprism.stem.locate_one import localize, locate_target
from evalprism.stem.location_result import LocationResult
from evalprism.stem.methods import METHODS, choose_method
from evalprism.stem.placement import Localization
from evalprism.stem.rule import Weighting
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import NO_ROW, Target, answered_whole_pool, target_of
from evalprism.stem.trials import TrialRun, Trials, trial_run
from evalprism.vocabularies import Design, LocateMethod

if TYPE_CHECKING:
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
    models: list[str] | None = None,
    *,
    items: int | None = None,
    trials: int = 100,
    seed: int | None = None,
    weighting: Weighting | None = None,
    method: LocateMethod = "auto",
    design: Design | None = None,
    plan: Any = None,
    progress: bool = True,
) -> LocationResult:
    """Locate each of ``models`` (default: every model in ``new_correctness``).

    A model with answers on every pool item gets the validation view: one sample of ``items`` items
    (:func:`~evalprism.stem.locate_model`, by ``method``) and, when ``trials`` > 0, ``trials``
    repeated trials of every method against its full-pool truth. A model with answers on part of
    the pool, or any model when a ``plan`` (:class:`~evalprism.stem.plan.Plan`) is given, is located
    from those answers alone, its full-pool score estimated by the plan's design or, without a plan,
    as a simple random sample of the pool (:mod:`evalprism.stem.subset`); trials need the whole pool.

    ``items`` (default 100), ``seed`` (default 0), ``weighting`` (default ``balanced``) and ``design`` steer the sample
    drawn from a whole-pool model; when no model is sampled (every one is located from its answers
    alone, a plan's items or part of the pool, and no trials run) giving any of them is refused,
    since it would change nothing."""
    seed = check_seed(seed)
    check_number("trials", trials)
    if items is not None:
        check_number("items", items)
    enc = new_correctness if isinstance(new_correctness, EncodedCorrectness) else encode_correctness(new_correctness)
    names = models or enc.model_names.tolist()
    targets = [target_of(pool, enc, name) for name in names]
    wholes = [answered_whole_pool(target) for target in targets]
    _check_sample_options(pool, names, wholes, plan, trials, items, seed, weighting, method, design)
    items = 100 if items is None else items
    seed = 0 if seed is None else seed
    weighting = weighting or "balanced"
    results = []
    notes: list[str] = []
    partial: list[tuple[str, int, str]] = []  # (model, items answered, design) of models that answered part of the pool
    for target, whole in zip(targets, wholes, strict=True):
        run = (
            trial_run(
                pool, target, items, trials, seed, progress=progress, weighting=weighting, method=method, design=design
            )
            if trials > 0 and whole
            else None
        )
        if plan is not None or not whole:
            loc = locate_subset(pool, target, plan=plan, method=method, design_note=notes, progress=progress)
            if not whole:
                partial.append((target.model, loc.options["answered"], loc.options["design"]))
        else:
            loc = _locate_whole(pool, target, run, items, seed, weighting, method, design)
            if items > loc.options["available"]:
                notes.append(more_items_than_answered(target.model, items, loc.options["available"], trials))
        results.append((loc, None if run is None else run.trials))
    options = _run_options(pool, names, plan, new_correctness, items, trials, seed, weighting, method, design)
    notes += partial_answers_notes(partial, len(pool.items), trials)
    if notes:
        options["notes"] = notes
    return LocationResult(pool=pool, results=results, options=options)


def _locate_whole(
    pool: Pool,
    target: Target,
    run: TrialRun | None,
    items: int,
    seed: int,
    weighting: Weighting,
    method: str,
    design: Design | None,
) -> Localization:
    """A model that answered the whole pool, from trial 0 of its trials when they ran (the same draw
    and estimate as a run of one), else from a run of one."""
    if run is not None:
        return localize(pool, target, run)
    return locate_target(pool, target, items, seed, weighting, method=method, design=design)


def _check_sample_options(
    pool: Pool,
    names: list[str],
    wholes: list[bool],
    plan: Any,
    trials: int,
    items: int | None,
    seed: int | None,
    weighting: str | None,
    method: str,
    design: str | None,
) -> None:
    """Refuse the options that steer a sample when no model is sampled (every one located from its
    own answers alone and no trials run), and those of a method no sampled model is located by."""
    sampled = any(whole and (plan is None or trials > 0) for whole in wholes)
    why = (
        "every model is located from its own answers alone ("
        + ("the plan's items" if plan is not None else "answers on part of the pool")
        + ") and no trials run, so no sample is drawn"
    )
    for name, value in (("items", items), ("seed", seed), ("weighting", weighting), ("design", design)):
        check_applies(name, value, sampled, why)
    _check_method_options(pool, names, wholes, method, trials, weighting, design)


def _run_options(
    pool: Pool,
    names: list[str],
    plan: Any,
    new_correctness: Any,
    items: int,
    trials: int,
    seed: int,
    weighting: str,
    method: str,
    design: str | None,
) -> dict[str, Any]:
    """What the run was asked and read (run.json's ``options``)."""
    options: dict[str, Any] = {
        "family": pool.family,
        "members": pool.members["model"].tolist(),
        "items": items,
        "trials": trials,
        "seed": seed,
        "missing": pool.options.get("missing", "wrong"),
        "weighting": weighting,
        "method": method,
        "design": design or "random",
        "models": names,
        "panel_models": pool.panel_size(),
        "irt": pool.options.get("irt") if pool.panel is not None else None,
    }
    if plan is not None:
        options["plan"] = {k: plan.options.get(k) for k in ("items", "seed", "method", "design", "strata")}
    read = getattr(new_correctness, "attrs", {}).get("choices", [])  # what the harness readers chose and left out
    if read:
        options["read"] = list(read)
    return options


def _check_method_options(
    pool: Pool,
    names: list[str],
    wholes: list[bool],
    method: str,
    trials: int,
    weighting: str | None,
    design: str | None,
) -> None:
    """Refuse ``weighting`` (the paper rule's) and ``design`` (the IRT estimator's) when the sample they
    steer is not drawn: no trials run (trials compare every method, so both apply there) and the
    chosen method of every sampled model is another one."""
    if trials > 0:
        return
    chosen = sorted({choose_method(pool, name, method) for name, whole in zip(names, wholes, strict=True) if whole})
    said = f"method '{method}'" + (f" (here: {', '.join(chosen)})" if method == "auto" else "")
    steered = {option for name in chosen for option in METHODS[name].steered_by}
    check_applies(
        "weighting",
        weighting,
        "weighting" in steered,
        f"it weights the TI levels of the paper's rule, and {said} is located without it and no trials run",
    )
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
