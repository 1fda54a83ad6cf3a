"""The adaptive loop of ``stem plan`` and its Python API (issue 26, part 3).

``stem plan POOL --method adaptive --items 25 --out S1`` writes stage 1 (:func:`plan_stage` without
answers); ``stem plan POOL --stage 2 --plan S1 --answers ANSWERS --items 25 --out S2`` reads the
model's answers on S1's items and writes S2 = S1's rows plus stage 2's (:func:`next_stage`), with the
localization so far in its report; and so on. ``stem locate POOL ANSWERS --plan SK`` reads the
answers on every stage's items with the adaptive estimator (:mod:`evalprism.stem.adaptive`).

The same loop in Python, with answers given as a correctness table (benchmark, item_id, model,
score) or as a mapping ``(benchmark, item_id) -> 1/0``::

    session = AdaptiveSession(pool, seed=0)
    items = session.plan_items(25)        # stage 1: DataFrame of benchmark, item_id
    current = session.update(answers_1)   # a Localization from the answers so far
    items = session.plan_items(25)        # stage 2, picked from them
    final = session.update(answers_2)
    session.plan.save("plan")             # every stage, as `stem plan` writes it
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.options import check_applies
from evalprism.stem.adaptive import PanelFits, ability_posterior, pick_informative
from evalprism.stem.estimate import pool_strata
from evalprism.stem.options import PlanOptions
from evalprism.stem.placement import Localization
from evalprism.stem.plan import PLAN_COLUMNS, Plan, SoFar, later_stage_options, make_plan, plan_rows
from evalprism.stem.pool import Pool
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import NO_ROW, Target, target_of


def next_stage(
    pool: Pool, plan: Plan, target: Target, options: PlanOptions, progress: bool = False
) -> tuple[Plan, Localization]:
    """Stage K+1 of an adaptive ``plan`` (stages 1..K) from the model's answers on its items: the
    plan with the new stage's ``options.items`` rows appended (inclusion probability and design
    weight empty: an adaptive stage is not a probability sample), and the localization from the
    answers so far. When that localization's confidence already reaches ``options.target_confidence``,
    no item is added and the plan says why (``summary.stopped``). The plan keeps the panel's
    leave-one-out fits its calibration ran on, so that reading it again does not fit them again."""
    if not plan.adaptive:
        raise EvalprismError(
            f"plan: not an adaptive plan (its method is {plan.summary.method!r}); plan stage 1 with "
            "`stem plan --method adaptive`",
            parameter="plan",
        )
    target_confidence = options.target_confidence
    if target_confidence is not None and not 0 < target_confidence < 1:
        raise EvalprismError(
            f"target confidence: expected a probability between 0 and 1, got {target_confidence}",
            parameter="target_confidence",
        )
    current = locate_subset(pool, target, plan=plan, progress=progress)  # refuses a planned item without an answer
    fits = PanelFits.of(pool)  # the calibration's leave-one-out fits: the next stage's plan carries them
    stage = int(plan.items["stage"].max()) + 1
    summary = replace(plan.summary, stage=stage, so_far=_so_far(current))
    if target_confidence is not None and current.confidence >= target_confidence:
        stopped = (
            f"the interval from stages 1-{stage - 1} has confidence {current.confidence:.3f}, at "
            f"least the target {target_confidence}: no item added; locate the model now"
        )
        stopped_plan = Plan(
            items=plan.items.copy(), options=options, summary=replace(summary, stopped=stopped), panel_fits=fits
        )
        return stopped_plan, current
    frame = pd.concat(
        [plan.items.astype({"item_id": str}), _stage_rows(pool, plan, target, options.items, stage)], ignore_index=True
    )[PLAN_COLUMNS]
    stages = tuple(int(k) for k in frame.groupby("stage", sort=True).size())
    summary = replace(summary, items=len(frame), items_requested=options.items, stages=stages)
    return Plan(items=frame, options=options, summary=summary, panel_fits=fits), current


def _stage_rows(pool: Pool, plan: Plan, target: Target, items: int, stage: int) -> pd.DataFrame:
    """The rows of stage ``stage``: ``items`` pool items not yet planned, the most informative given
    the model's answers on the plan's items (:func:`~evalprism.stem.adaptive.pick_informative`)."""
    idx = plan_rows(pool, plan)
    y = (target.outcome[idx] == 1).astype(float)
    fit = pool.irt_fit(exclude=target.model)
    new = pick_informative(fit, ability_posterior(fit, idx, y), idx, items, np.random.default_rng([plan.seed, stage]))
    if len(new) == 0:
        raise EvalprismError(
            f"items: all {len(pool.items):,} pool items are planned already; locate the model now", parameter="items"
        )
    strata = pool_strata(pool)
    stratum_of = np.empty(len(pool.items), dtype=np.int64)
    stratum_of[strata.items] = strata.stratum
    h = stratum_of[new]
    rows = pd.DataFrame(
        {
            "benchmark": pool.items["benchmark"].to_numpy()[new],
            "item_id": pool.items["item_id"].to_numpy()[new],
            "stratum": h,
            "members_right": strata.right[h],
            "stratum_size": strata.size[h],
            "stratum_drawn": np.nan,
            "inclusion_probability": np.nan,
            "design_weight": np.nan,
            "stage": stage,
        }
    )
    return rows.astype({"item_id": str})


def plan_stage(
    pool: Pool,
    options: PlanOptions | None = None,
    *,
    previous: Plan | None = None,
    answers: pd.DataFrame | None = None,
    progress: bool = False,
) -> tuple[Plan, Localization | None]:
    """What ``stem plan`` does: without ``previous``, a plan by ``options.method`` (default ``auto``;
    ``adaptive``: its stage 1) with ``options.seed`` (default 0; :func:`~evalprism.stem.plan.make_plan`);
    with ``previous`` (an adaptive plan, whose seed and method carry on) and the model's ``answers``
    on its items, the next stage (:func:`next_stage`) and the localization so far. ``options.stage``,
    when given, must be that next stage; ``options.model``: the model of ``answers`` to plan for."""
    o = options or PlanOptions()
    check_applies(
        "answers",
        None if answers is None else "given",
        previous is not None,
        "applies to a later stage of an adaptive plan (planned from the previous stage's plan)",
    )
    later_stage_options(o, previous)
    if previous is None:
        return make_plan(pool, o), None
    check_applies("method", o.method, False, "the plan's own carries on (a later stage continues the plan it extends)")
    if o.seed is not None and o.seed != previous.seed:
        raise EvalprismError(
            f"seed {o.seed}: the plan was made with seed {previous.seed} and its later stages use it; drop seed",
            parameter="seed",
        )
    last = int(previous.items["stage"].max())
    if o.stage is not None and o.stage != last + 1:
        raise EvalprismError(
            f"stage {o.stage}: the plan has {last} stage{'s' if last != 1 else ''}, so the next is stage {last + 1}",
            parameter="stage",
        )
    if answers is None:
        raise EvalprismError(
            "answers: a later stage is picked from the model's answers on the previous stages' items; "
            "give them with answers",
            parameter="answers",
        )
    return next_stage(pool, previous, target_of(pool, answers, o.model), o, progress)


def _so_far(loc: Localization) -> SoFar:
    """The localization from the previous stages, as the next stage's plan records and reports it."""
    assert loc.estimate is not None and loc.standard_error is not None  # an adaptive plan's estimate has both
    return SoFar(
        interval=loc.interval,
        estimate=round(float(loc.estimate), 2),
        standard_error=round(float(loc.standard_error), 2),
        confidence=round(float(loc.confidence), 4),
        items=len(loc.subset),
    )


class AdaptiveSession:
    """The adaptive loop in Python (module docstring): :meth:`plan_items` gives the next stage's
    items, :meth:`update` takes the model's answers on them and returns the localization so far."""

    def __init__(self, pool: Pool, seed: int = 0, model: str = "new model") -> None:
        self.pool = pool
        self.seed = seed
        self.model = model
        self.plan: Plan | None = None
        self._outcome = np.full(len(pool.items), NO_ROW, dtype=np.int8)
        self._keys = pd.MultiIndex.from_arrays(
            [pool.items["benchmark"].astype(str).to_numpy(), pool.items["item_id"].astype(str).to_numpy()]
        )

    def _target(self) -> Target:
        return Target(
            model=self.model, outcome=self._outcome.copy(), scores=np.zeros(0), reference_score=None, truth=None
        )

    def plan_items(self, items: int) -> pd.DataFrame:
        """The next stage's items (benchmark, item_id): stage 1 the stratified plan, later stages
        the most informative items given every answer so far."""
        if self.plan is None:
            self.plan = make_plan(self.pool, PlanOptions(items=items, seed=self.seed, method="adaptive"))
            new = self.plan.items
        else:
            self.plan, _ = next_stage(self.pool, self.plan, self._target(), PlanOptions(items=items))
            new = self.plan.items[self.plan.items["stage"] == self.plan.items["stage"].max()]
        return new[["benchmark", "item_id"]].reset_index(drop=True)

    def update(self, answers: pd.DataFrame | Mapping[tuple[str, str], int]) -> Localization:
        """Record answers (1 right, 0 wrong) and locate the model from every answer so far."""
        if self.plan is None:
            raise EvalprismError("update: no items planned yet; call plan_items first")
        pairs: Iterable[tuple[str, str, Any]]
        if isinstance(answers, pd.DataFrame):
            pairs = zip(answers["benchmark"].astype(str), answers["item_id"].astype(str), answers["score"], strict=True)
        else:
            pairs = ((str(b), str(i), v) for (b, i), v in answers.items())
        for bench, item, value in pairs:
            where = self._keys.get_loc((bench, item)) if (bench, item) in self._keys else -1
            if where < 0:
                raise EvalprismError(f"answers: item ({bench}, {item}) is not in the pool")
            if value not in (0, 1, -1):
                raise EvalprismError(f"answers: item ({bench}, {item}) has score {value!r}; expected 1, 0 or -1")
            self._outcome[where] = int(value)
        return locate_subset(self.pool, self._target(), plan=self.plan)


__all__ = ["AdaptiveSession", "next_stage", "plan_stage"]
