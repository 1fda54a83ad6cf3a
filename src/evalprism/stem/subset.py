"""Locating a model from its answers on part of the pool (issue 26, part 2).

When a model has answered fewer items than the pool holds (the items of a plan, or any subset), the
answered items are a sample and what is estimated is its **full-pool** weighted score
``sum_b w_b S_b`` over every pool item, never the score on the answered items:

- with a plan (``stem plan``'s ``plan.csv``): the plan's stratified design (strata benchmark x
  members right, ``N_h`` pool items, ``n_h`` answered), the estimators of
  :mod:`evalprism.stem.estimate` (A) and :func:`evalprism.stem.irt.difference_estimate` (B) with
  ``group = stratum``;
- without a plan: the answered items are taken as a simple random sample of the pool within each
  benchmark (``group = benchmark``, ``N_b`` pool items), an assumption the output says.

The finite-population correction ``1 - n_h / N_h`` uses the pool's sizes. Every planned item needs
an answer row (a missing one is refused, naming it: the design's weights would be wrong); answers
outside the plan are left out and counted. Without a plan, every pool benchmark needs an answered
item. The truth (the full-pool score and position) exists only when the model answered every pool
item; then it is reported beside the estimate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.stats.pairwise import Z95
from evalprism.stem.estimate import design_estimate
from evalprism.stem.localization import Localization, score_localization
from evalprism.stem.plan import Plan, plan_rows, pool_strata
from evalprism.stem.pool import Pool
from evalprism.stem.target import NO_ROW, Target, answered_whole_pool, usable_items


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
    from evalprism.stem.methods import choose_method

    notes = design_note if design_note is not None else []
    if method == "paper":
        raise EvalprismError(
            "method paper draws its own balanced subset from answers on the whole pool; for answers "
            "on part of the pool use auto, stratified or irt",
            parameter="method",
        )
    adaptive = plan is not None and plan.options.get("method") == "adaptive"
    if adaptive and method != "auto":
        raise EvalprismError(
            f"method {method}: an adaptive plan is read with its own estimator (the IRT ability "
            "posterior, calibrated on the panel); its stage-1 design-based estimate is reported "
            "beside it; drop method",
            parameter="method",
        )
    chosen = "adaptive" if adaptive else choose_method(pool, target.model, method)
    usable = usable_items(pool, target)
    whole = answered_whole_pool(target)
    strata = pool_strata(pool)
    nb = len(strata.weights)
    if plan is not None:
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
                f"({plan.items['benchmark'].iat[i]}, {plan.items['item_id'].iat[i]})"
                for i in np.flatnonzero(lacking)[:5]
            )
            raise EvalprismError(
                f"model '{target.model}' has no usable answer on {int(lacking.sum())} of the "
                f"{len(idx)} planned items (first: {first}); run them, or locate without plan "
                "(its answers are then taken as a simple random sample of the pool)",
                parameter="plan",
            )
        outside = int(usable.sum()) - len(idx)
        if outside > 0 and not whole:
            notes.append(
                f"'{target.model}': {outside:,} answered items outside the plan were left out (the plan's "
                "design weights hold for its own items only)"
            )
        group, group_bench, group_size = codes, strata.bench, strata.size.astype(float)
        design = "plan: " + (str(plan.options.get("design")) if adaptive else "stratified (benchmark x members right)")
    else:
        idx = pool.item_order[usable[pool.item_order]]  # content order
        group = pool.bench_code[idx]
        have = np.bincount(group, minlength=nb)
        if (have == 0).any():
            missing = [b for b, k in zip(pool.benchmarks["benchmark"], have, strict=True) if k == 0]
            raise EvalprismError(
                f"model '{target.model}' answered no item of benchmark(s) {', '.join(missing)}; the "
                "full-pool score needs at least one answered item of every pool benchmark"
            )
        group_bench, group_size = np.arange(nb), strata.bench_size
        design = "simple random sample of the pool within each benchmark (assumed: no plan given)"
    y = (target.outcome[idx] == 1).astype(float)[None, :]
    weights = np.asarray(strata.weights)
    extra: dict[str, Any] = {}
    if adaptive:
        est, var, extra = _adaptive(pool, target, plan, idx, notes, progress)  # type: ignore[arg-type]
    elif chosen == "irt":
        from evalprism.stem.irt import difference_estimate

        by_bench = [strata.items[pool.bench_code[strata.items] == b] for b in range(nb)]
        est, var, _ = difference_estimate(
            pool.irt_fit(exclude=target.model),
            idx[None, :],
            y,
            np.ones(y.shape, dtype=bool),
            group[None, :],
            group_bench,
            group_size,
            weights,
            strata.bench_size,
            by_bench,
        )
    else:
        est, var = design_estimate(y, group, group_bench, group_size, weights, strata.bench_size, binary=True)
    estimate, se = 100.0 * float(est[0]), 100.0 * float(np.sqrt(var[0]))
    options: dict[str, Any] = {
        "items": len(idx),
        "pool_items": len(pool.items),
        "answered": int((target.outcome != NO_ROW).sum()),
        "design": design,
        "method": chosen,
        "method_requested": method,
        "whole_pool": whole,
        "missing": pool.options.get("missing", "wrong"),
        "panel_models": pool.panel_size(target.model),
        "available": len(pool.items),
        **extra,
    }
    if se == 0:
        notes.append(
            f"'{target.model}': its {len(idx):,} answers do not vary within any "
            f"{'stratum' if plan is not None else 'benchmark'} (e.g. all right or all wrong), so the estimated "
            "standard error is 0 and the confidence 1, which understates the uncertainty"
        )
    view = (
        target
        if whole
        else Target(model=target.model, outcome=target.outcome, scores=target.scores, reference_score=None, truth=None)
    )  # type: ignore[arg-type]
    return score_localization(pool, view, idx, estimate, se, options, chosen)


def _adaptive(
    pool: Pool, target: Target, plan: Plan, idx: np.ndarray, notes: list[str], progress: bool
) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """The adaptive estimate (fractions, as the design estimators return) and, beside it, the
    design-based estimate B from the plan's stage-1 items alone (a probability sample)."""
    from evalprism.stem.adaptive import adaptive_estimate

    estimate, se, info = adaptive_estimate(pool, target, plan, idx, progress=progress)
    first = plan.items["stage"].to_numpy() == 1
    stage1 = Plan(items=plan.items[first].reset_index(drop=True), options={**plan.options, "method": "irt"})
    check = locate_subset(pool, target, plan=stage1, method="irt")
    info["stage1_check"] = {
        "items": int(first.sum()),
        "estimate": round(float(check.estimate), 4),
        "standard_error": round(float(check.standard_error), 4),
    }
    if abs(estimate - check.estimate) > Z95 * check.standard_error:
        notes.append(
            f"'{target.model}': the adaptive estimate {estimate:.1f} is more than 1.96 standard errors from "
            f"the design-based estimate {check.estimate:.1f} ± {check.standard_error:.1f} of its "
            f"{int(first.sum())} stage-1 items: the panel's 2PL may not fit this model (contamination, "
            "another kind of model); the stage-1 estimate assumes no model and is the safer of the two"
        )
    return np.array([estimate / 100]), np.array([(se / 100) ** 2]), {"adaptive": info}
