"""Locating a model from its answers on part of the pool (issue 26, part 2).

When a model has answered fewer items than the pool holds (the items of a plan, or any subset), the
answered items are a sample and what is estimated is its **full-pool** weighted score
``sum_b w_b S_b`` over every pool item, never the score on the answered items:

- with a plan (``stem plan``'s ``plan.csv``): the plan's stratified design (strata benchmark x
  members right, ``N_h`` pool items, ``n_h`` answered), the estimators of
  :mod:`evalprism.stem.estimate` (A) and :func:`evalprism.stem.irt.difference_estimate` (B) with
  ``group = stratum``; an adaptive plan is read with its own estimator (the ``adaptive`` entry of
  :data:`~evalprism.stem.methods.METHODS`), the design-based B of its stage-1 items as its cross-check;
- without a plan: the answered items are taken as a simple random sample of the pool within each
  benchmark (``group = benchmark``, ``N_b`` pool items), an assumption the output says.

On a plan, A's and B's standard errors are calibrated on the pool's own panel and a model right on
almost every planned item gets a one-sided "at or above" interval (:mod:`evalprism.stem.confidence`);
an adaptive plan's localization leads with one estimate by the rule
:data:`~evalprism.stem.adaptive.LEAD_RULE` (the adaptive one, or the stage-1 design-based one when the
two disagree), the other shown as a cross-check.

The finite-population correction ``1 - n_h / N_h`` uses the pool's sizes. Every planned item needs
an answer row (a missing one is refused, naming it: the design's weights would be wrong); answers
outside the plan are left out and counted. Without a plan, every pool benchmark needs an answered
item. The truth (the full-pool score and position) exists only when the model answered every pool
item; then it is reported beside the estimate.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.stem.adaptive import (
    FITS_STALE,
    LEAD_STAGE1,
    MIN_CALIBRATION_MODELS,
    Stage1Check,
    leads_with,
    use_stored_fits,
)
from evalprism.stem.confidence import PlanCalibration, at_ceiling, calibrate_plan, ceiling_bound
from evalprism.stem.estimate import Sample, Strata, pool_strata
from evalprism.stem.methods import METHODS, Evidence, Method, choose_method
from evalprism.stem.placement import Answered, Localization, score_localization
from evalprism.stem.plan import Plan, plan_rows
from evalprism.stem.pool import Pool
from evalprism.stem.target import NO_ROW, Target, answered_whole_pool, usable_items
from evalprism.vocabularies import LocateMethod, choices


def locate_subset(
    pool: Pool,
    target: Target,
    *,
    plan: Plan | None = None,
    method: str = "auto",
    design_note: list[str] | None = None,
    progress: bool = False,
) -> Localization:
    """Place ``target`` from the pool items it answered (module docstring); ``design_note`` collects
    what the user should be told (items left out, the design assumed, a standard error of 0). An
    adaptive plan is read with its own estimator (:mod:`evalprism.stem.adaptive`), which calibrates on
    the panel (``progress``: a bar for that)."""
    notes = design_note if design_note is not None else []
    chosen = subset_method(pool, target, plan, method)
    strata = pool_strata(pool)
    usable = usable_items(pool, target)
    whole = answered_whole_pool(target)
    if plan is not None:
        sample, design = planned_sample(pool, target, plan, strata, usable, notes)
    else:
        sample, design = answered_sample(pool, target, strata, usable)
    fits = use_stored_fits(pool, plan.panel_fits) if plan is not None and plan.adaptive else None
    evidence = Evidence(pool, target, sample, strata, plan=plan, progress=progress)
    estimate = chosen.estimate(evidence)
    adaptive = estimate.adaptive
    assert estimate.score is not None and estimate.standard_error is not None  # every subset method has both
    score, se = float(estimate.score[0]), float(estimate.standard_error[0])
    if plan is not None and plan.adaptive and adaptive is not None and fits is not None:
        check = _stage1_check(pool, target, plan)
        adaptive = replace(adaptive, stage1_check=check, fits=fits, lead=leads_with(score, se, check))
        if adaptive.lead == LEAD_STAGE1:
            notes.append(_stage1_lead_note(target, score, se, check))
            score, se = check.estimate, check.standard_error
        if fits == FITS_STALE:
            notes.append(f"'{target.model}': the adaptive calibration's panel fits were {fits}")
    idx = sample.picked[0]
    top = bool(at_ceiling(int((target.outcome[idx] != 1).sum())))
    calibration = None
    if plan is not None and not plan.adaptive:
        calibration = calibrate_plan(evidence, chosen, plan.seed)
        se = _calibrated_se(target, calibration, se, top, notes)
    draw = Answered(
        items=len(idx),
        pool_items=len(pool.items),
        answered=int((target.outcome != NO_ROW).sum()),
        design=design,
        method=chosen.name,
        method_requested=method,
        whole_pool=whole,
        missing=pool.missing,
        panel_models=pool.panel_size(target.model),
        available=len(pool.items),
        adaptive=adaptive,
        calibration=calibration,
    )
    if se == 0:
        notes.append(
            f"'{target.model}': its {len(idx):,} answers do not vary within any "
            f"{'stratum' if plan is not None else 'benchmark'} (e.g. all right or all wrong), so the estimated "
            "standard error is 0 and the confidence 1, which understates the uncertainty"
        )
    view = target if whole else target.without_truth()  # the truth needs answers on every pool item
    bound = ceiling_bound(score, se) if top and plan is not None else None
    return score_localization(pool, view, idx, score, se, draw, chosen.name, ceiling=bound)


def _calibrated_se(
    target: Target, calibration: PlanCalibration | None, se: float, top: bool, notes: list[str]
) -> float:
    """``se`` calibrated on the panel (:mod:`~evalprism.stem.confidence`), or as stated with a note
    when the panel has too few complete models to calibrate it."""
    if calibration is None:
        notes.append(
            f"'{target.model}': its standard error is the design's alone, not calibrated on the panel (that "
            f"needs {MIN_CALIBRATION_MODELS} reference-panel models with answers on every pool item); "
            "near the top of the family it is too small"
        )
        return se
    return calibration.standard_error(se, top)


def subset_method(pool: Pool, target: Target, plan: Plan | None, method: str) -> Method:
    """The method that reads a model's answers on part of the pool: an adaptive plan's own
    estimator, else ``method`` as :func:`~evalprism.stem.methods.choose_method` resolves it; a
    method that draws its own sample from answers on the whole pool (the paper's rule) is refused."""
    entry = METHODS.get(method) if method in choices(LocateMethod) else None  # auto: not an entry
    if entry is not None and not entry.estimates_score:
        *some, last = ["auto"] + [m for m in choices(LocateMethod) if m in METHODS and METHODS[m].estimates_score]
        raise EvalprismError(
            f"method {method} draws its own {entry.draws} subset from answers on the whole pool; for answers "
            f"on part of the pool use {', '.join(some)} or {last}",
            parameter="method",
        )
    if plan is not None and plan.adaptive:
        if method != "auto":
            raise EvalprismError(
                f"method {method}: an adaptive plan is read with its own estimator (the IRT ability "
                "posterior, calibrated on the panel); its stage-1 design-based estimate is reported "
                "beside it; drop method",
                parameter="method",
            )
        return METHODS["adaptive"]
    return METHODS[choose_method(pool, target.model, method)]


def planned_sample(
    pool: Pool, target: Target, plan: Plan, strata: Strata, usable: np.ndarray, notes: list[str]
) -> tuple[Sample, str]:
    """The plan's items as a sample of its stratified design (groups: its strata), and the design's
    words; refuses a plan made on another pool's strata and a planned item without a usable answer,
    and notes the answered items outside the plan (left out)."""
    idx = plan_rows(pool, plan)
    codes = plan.items["stratum"].to_numpy(dtype=np.int64)
    ok = (codes >= 0) & (codes < len(strata.size))
    if (
        not ok.all()
        or not (strata.size[np.clip(codes, 0, len(strata.size) - 1)] == plan.items["stratum_size"].to_numpy()).all()
    ):
        raise EvalprismError(
            "plan.csv: its strata do not match this pool's (benchmark x members right); the plan "
            "was made on another pool: plan again with `evalprism stem plan`"
        )
    lacking = ~usable[idx]
    if lacking.any():
        first = ", ".join(
            f"({plan.items['benchmark'].iat[i]}, {plan.items['item_id'].iat[i]})" for i in np.flatnonzero(lacking)[:5]
        )
        raise EvalprismError(
            f"model '{target.model}' has no usable answer on {int(lacking.sum())} of the "
            f"{len(idx)} planned items (first: {first}); run them, or locate without plan "
            "(its answers are then taken as a simple random sample of the pool)",
            parameter="plan",
        )
    outside = int(usable.sum()) - len(idx)
    if outside > 0 and not answered_whole_pool(target):
        notes.append(
            f"'{target.model}': {outside:,} answered items outside the plan were left out (the plan's "
            "design weights hold for its own items only)"
        )
    design = "plan: " + (str(plan.summary.design) if plan.adaptive else "stratified (benchmark x members right)")
    sample = Sample(picked=idx[None, :], group=codes, group_size=strata.size.astype(float), group_bench=strata.bench)
    return sample, design


def answered_sample(pool: Pool, target: Target, strata: Strata, usable: np.ndarray) -> tuple[Sample, str]:
    """Every item the model can be scored on (content order), taken as a simple random sample of the
    pool within each benchmark (groups: benchmarks), and the design's words; refused when a pool
    benchmark has no answered item."""
    nb = len(strata.weights)
    idx = pool.item_order[usable[pool.item_order]]  # content order
    group = pool.bench_code[idx]
    have = np.bincount(group, minlength=nb)
    if (have == 0).any():
        missing = [b for b, k in zip(pool.benchmarks["benchmark"], have, strict=True) if k == 0]
        raise EvalprismError(
            f"model '{target.model}' answered no item of benchmark(s) {', '.join(missing)}; the "
            "full-pool score needs at least one answered item of every pool benchmark"
        )
    sample = Sample(picked=idx[None, :], group=group, group_size=strata.bench_size, group_bench=np.arange(nb))
    return sample, "simple random sample of the pool within each benchmark (assumed: no plan given)"


def _stage1_check(pool: Pool, target: Target, plan: Plan) -> Stage1Check:
    """Beside the adaptive estimate, the design-based estimate B from the plan's stage-1 items alone
    (a probability sample; its standard error calibrated on the panel as any plan's is)."""
    first = plan.items["stage"].to_numpy() == 1
    stage1 = replace(plan, items=plan.items[first].reset_index(drop=True), summary=replace(plan.summary, method="irt"))
    check = locate_subset(pool, target, plan=stage1, method="irt")
    assert check.estimate is not None and check.standard_error is not None
    return Stage1Check(
        items=int(first.sum()),
        estimate=round(float(check.estimate), 4),
        standard_error=round(float(check.standard_error), 4),
    )


def _stage1_lead_note(target: Target, estimate: float, se: float, check: Stage1Check) -> str:
    """Why the localization of an adaptive plan leads with its stage-1 estimate (:data:`LEAD_RULE`)."""
    return (
        f"'{target.model}': the adaptive estimate {estimate:.1f} ± {se:.1f} and the design-based estimate "
        f"{check.estimate:.1f} ± {check.standard_error:.1f} of its {check.items} stage-1 items differ by more than "
        "1.96 standard errors of their difference: the panel's 2PL does not fit this model as it fits the panel's "
        "(contamination, another kind of model), so its localization leads with the stage-1 estimate, which "
        "assumes no model; the adaptive estimate is shown as a cross-check"
    )
