"""Calibrated confidence on a plan's items and the 2PL's ceiling (issue 42, item 1): the conformal
quantile and the ceiling's one-sided interval by hand; on a planted 2PL world WITH a ceiling (a third
of the panel right on nearly every item), every reference-panel model (family and panel) located by leave-one-out through plans
of 50 and 100 items with A, B and an adaptive plan: the 95% intervals cover 0.93-0.97, the stated placement confidence
matches the share placed right per bin, and the one-sided 'at or above' bound holds at the ceiling."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from test_stem_estimators import FAMILY_THETA, sample_2pl

from evalprism.stem import build_pool, make_plan
from evalprism.stem.adaptive import CALIBRATION_RUNS, panel_runs, run_plan
from evalprism.stem.confidence import (
    CEILING_WRONG,
    NEIGHBOURS,
    REDRAWS,
    Z_ONE_SIDED,
    PanelPlanRuns,
    at_ceiling,
    calibration_of,
    ceiling_bound,
    conformal_quantile,
    panel_plan_runs,
)
from evalprism.stem.estimate import pool_strata, positions_of, score_confidence
from evalprism.stem.methods import METHODS, Evidence
from evalprism.stem.options import PlanOptions
from evalprism.stem.plan import plan_rows
from evalprism.stem.resolution import ceiling_abstention
from evalprism.stem.subset import locate_subset, planned_sample
from evalprism.stem.target import NO_ROW, target_of, usable_items

Z95 = 1.959963984540054
SEEDS = 8


def test_conformal_quantile_is_the_rank_ceil_level_k_plus_1() -> None:
    scores = np.arange(1.0, 40.0)  # 39 scores: rank ceil(0.95 * 40) = 38
    assert conformal_quantile(scores, 0.95) == 38.0
    assert conformal_quantile(np.arange(1.0, 20.0), 0.95) == 19.0  # 19 scores: the largest
    assert conformal_quantile(np.array([3.0, 1.0]), 0.95) == 3.0  # too few: the largest


def test_the_ceiling_is_fewer_than_five_wrong_and_its_interval_is_one_sided() -> None:
    assert at_ceiling(CEILING_WRONG - 1) and not at_ceiling(CEILING_WRONG)
    names, mu = ["s", "m", "l"], np.array([50.0, 80.0, 95.0])
    # 98 +- 2 at the ceiling: L = 98 - 1.645 * 2 = 94.71 < 95: above m, cannot tell which side of l
    bound = ceiling_bound(98.0, 2.0)
    assert bound == pytest.approx(98.0 - Z_ONE_SIDED * 2.0)
    a = ceiling_abstention(98.0, 2.0, bound, names, mu)
    assert a is not None and a.member == "l" and a.lower == "m" and a.upper is None and a.straddled == ("l",)
    assert a.interval == f"at or above {bound:.1f} (the items' ceiling), above m, cannot tell which side of l"
    assert a.p_below == pytest.approx(0.0668072, abs=1e-6)  # Phi((95 - 98) / 2)
    assert a.confidence == pytest.approx(1.0, abs=1e-12) and a.positions == (2, 3)
    # a bound above every member: told, no abstention
    assert ceiling_abstention(99.0, 1.0, ceiling_bound(99.0, 1.0), names, mu) is None


def test_the_factor_is_local_in_share_right() -> None:
    """Panel runs whose stated se is right for weak models and a third of the truth for strong ones: a
    model near the strong ones gets their factor (about 3), one near the weak ones none (1)."""
    rng = np.random.default_rng(0)
    n = 400
    wrong = np.where(np.arange(n) < n // 2, 60, 8)  # 100 items: 40% right, or 92% right
    z = rng.normal(0.0, 1.0, n) * np.where(wrong == 8, 3.0, 1.0)
    runs = PanelPlanRuns(
        models=[f"m{k}" for k in range(40)],
        errors=z * 0.01,
        variances=np.full(n, 0.01**2),
        wrong=wrong,
        model_of=np.repeat(np.arange(40), 10),
        draw=np.tile(np.arange(10), 40),
        items=100,
    )
    strong, weak = calibration_of(runs, 0.92), calibration_of(runs, 0.40)
    # the 58th of 60 |3 z|: about 3 x 2.13 / 1.96 = 3.3, a sample quantile of 60 runs
    assert strong.neighbours == NEIGHBOURS and 2.5 <= strong.factor <= 4.5, strong.factor
    assert weak.factor == pytest.approx(1.0, abs=0.1), weak.factor
    assert strong.ceiling_pooled and strong.ceiling_runs == 0  # no run at the ceiling


def _ceiling_world(seed: int = 0, n_items: int = 1000, n_panel: int = 30) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A 2PL world with a ceiling: easy items (c ~ N(1, 1.5)) and a panel of abilities N(0.5, 1.3),
    so about a third of the panel is right on all but a few of 50 planned items."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0.5, 2.5, n_items)
    c = rng.normal(1.0, 1.5, n_items)
    names = list(FAMILY_THETA) + [f"panel-{k}" for k in range(n_panel)]
    theta = np.array(list(FAMILY_THETA.values()) + list(rng.normal(0.5, 1.3, n_panel)))
    return sample_2pl(rng, names, theta, a, c)


@pytest.fixture(scope="module")
def world():
    table, meta = _ceiling_world()
    family = table[table["model"].isin(list(FAMILY_THETA))]
    panel = table[table["model"].str.startswith("panel-")]
    pool = build_pool(family, meta, panel=panel)
    targets = {m: target_of(pool, table[table["model"] == m]) for m in table["model"].unique()}  # family too
    return pool, targets


def _evidence(pool, target, plan):
    strata = pool_strata(pool)
    sample, _ = planned_sample(pool, target, plan, strata, usable_items(pool, target), [])
    return Evidence(pool, replace(target, model="(nobody)"), sample, strata, plan=plan)


def _located(pool, targets, method: str, items: int, seed: int) -> pd.DataFrame:
    """Every panel model located by leave-one-out through one plan: what `stem locate --plan` states
    (its calibration from the other panel models' runs; checked against locate_subset below)."""
    plan = make_plan(pool, PlanOptions(items=items, seed=seed, method=method))
    runs = panel_plan_runs(_evidence(pool, next(iter(targets.values())), plan), METHODS[method], seed)
    assert runs is not None and len(runs.errors) == len(targets) * (REDRAWS + 1)
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    rows = []
    for k, model in enumerate(runs.models):
        own = (runs.model_of == k) & (runs.draw == 0)  # the model's own run through the plan itself
        cal = calibration_of(runs.without(model), 1.0 - float(runs.wrong[own][0]) / runs.items)
        truth = targets[model].reference_score
        estimate = truth + 100 * float(runs.errors[own][0])
        top = bool(at_ceiling(int(runs.wrong[own][0])))
        se = cal.standard_error(100 * float(np.sqrt(runs.variances[own][0])), top)
        rows.append(_row(model, estimate, se, truth, top, mu, targets[model].truth))
    return _covered(pd.DataFrame(rows))


def _located_adaptive(pool, targets, items: int, seed: int) -> pd.DataFrame:
    """Every reference-panel model through an adaptive plan of items / 2 + items / 2 (its calibration's
    own runs, :func:`~evalprism.stem.adaptive.panel_runs`), each corrected and stated with the calibration
    of the other models' runs (leave-one-out, as `stem locate --plan` states it for a model outside the panel)."""
    stage1 = plan_rows(pool, make_plan(pool, PlanOptions(items=items // 2, seed=seed, method="adaptive")))
    runs = panel_runs(pool, stage1, [items // 2], seed)
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    rows = []
    for k, model in enumerate(runs.names):
        others = np.arange(len(runs.names)) != k
        cal = runs.calibration(np.flatnonzero(others))
        y = (targets[model].outcome == 1).astype(float)
        for run in range(CALIBRATION_RUNS):
            planned = run_plan(pool.irt_fit(exclude=model), y, stage1, [items // 2], seed + 7919 * (run + 1))
            truth = targets[model].reference_score
            estimate = 100 * cal.corrected(truth / 100 + float(runs.errors[k, run]))
            se = 100 * cal.standard_error(float(runs.variances[k, run]))
            top = bool(at_ceiling(int((y[planned] == 0).sum())))
            rows.append(_row(model, estimate, se, truth, top, mu, targets[model].truth))
    return _covered(pd.DataFrame(rows))


def _row(model: str, estimate: float, se: float, truth: float, top: bool, mu: np.ndarray, position: int) -> dict:
    """One located run as the tests read it."""
    return {
        "model": model,
        "estimate": estimate,
        "se": se,
        "truth": truth,
        "ceiling": top,
        "bound": ceiling_bound(estimate, se) if top else np.nan,
        "confidence": float(score_confidence(np.array([estimate]), np.array([se]), mu)[0]),
        "right": int(positions_of(np.array(estimate), mu)) == position,
    }


def _covered(out: pd.DataFrame) -> pd.DataFrame:
    """Whether each run's stated interval holds the truth (at the ceiling: at or above the bound)."""
    out["covered"] = np.where(
        out["ceiling"], out["truth"] >= out["bound"], np.abs(out["estimate"] - out["truth"]) <= Z95 * out["se"]
    )
    return out


@pytest.fixture(scope="module")
def located(world) -> dict[tuple[str, int], pd.DataFrame]:
    pool, targets = world
    cells = {
        (method, items): pd.concat([_located(pool, targets, method, items, seed) for seed in range(SEEDS)])
        for method in ("stratified", "irt")
        for items in (50, 100)
    }
    for items in (50, 100):
        cells["adaptive", items] = pd.concat([_located_adaptive(pool, targets, items, s) for s in range(SEEDS // 2)])
    return cells


def test_the_shortcut_is_what_locate_states(world) -> None:
    """The leave-one-out shortcut above gives locate_subset's own estimate and standard error."""
    pool, targets = world
    model = "panel-3"
    plan = make_plan(pool, PlanOptions(items=50, seed=0, method="irt"))
    rows = np.flatnonzero(
        pool.items.set_index(["benchmark", "item_id"]).index.isin(plan.items.set_index(["benchmark", "item_id"]).index)
    )
    outcome = np.full_like(targets[model].outcome, NO_ROW)
    outcome[rows] = targets[model].outcome[rows]
    loc = locate_subset(pool, replace(targets[model], outcome=outcome), plan=plan, method="irt")
    mine = _located(pool, targets, "irt", 50, 0).set_index("model").loc[model]
    assert loc.estimate == pytest.approx(mine["estimate"], abs=1e-9)
    assert loc.standard_error == pytest.approx(mine["se"], abs=1e-9)
    assert loc.draw.calibration is not None and loc.draw.calibration.models == len(targets) - 1


def test_part_of_the_panel_is_at_the_ceiling(located) -> None:
    share = np.mean([frame["ceiling"].mean() for (_, items), frame in located.items() if items == 50])
    assert 0.1 <= share <= 0.5, share  # 0.17 of the runs through 50 planned items


def test_calibrated_intervals_cover_095_for_every_method_at_50_and_100_items(located) -> None:
    """Over the reference-panel models (leave-one-out): A and B through 8 plans (272 runs a cell), the
    adaptive plan through 4 (272 runs); 1,632 runs pooled (1 binomial sd 0.005), a cell 0.013."""
    pooled = pd.concat(located.values())
    assert 0.93 <= pooled["covered"].mean() <= 0.97, pooled["covered"].mean()
    for cell, frame in located.items():
        top = frame[frame["ceiling"]]
        print(cell, f"coverage {frame['covered'].mean():.3f}", f"ceiling {len(top)}, {top['covered'].mean():.3f}")
        print(f"  placed right {frame['right'].mean():.3f}")
        assert 0.90 <= frame["covered"].mean() <= 0.99, (cell, frame["covered"].mean())


def test_the_ceiling_bound_holds(located) -> None:
    top = pd.concat(located.values()).query("ceiling")
    assert len(top) >= 100 and top["covered"].mean() >= 0.90, (len(top), top["covered"].mean())


def test_stated_placement_confidence_matches_the_share_placed_right(located) -> None:
    """Per confidence bin with at least 40 runs: the share right within 3 binomial sd + 0.02 of the stated."""
    pooled = pd.concat(located.values())
    bins = pd.cut(pooled["confidence"], [0.0, 0.5, 0.8, 0.9, 0.95, 1.0])
    table = pooled.groupby(bins, observed=True).agg(
        runs=("right", "size"), stated=("confidence", "mean"), right=("right", "mean")
    )
    print(table)
    for interval, row in table.iterrows():
        if row["runs"] < 40:
            continue
        sd = np.sqrt(row["stated"] * (1 - row["stated"]) / row["runs"])
        assert abs(row["right"] - row["stated"]) <= 3 * sd + 0.02, (interval, row.to_dict())


def test_each_method_states_the_confidence_it_earns(located) -> None:
    """Per method (50- and 100-item plans pooled), every confidence bin with at least 40 runs places the
    share right within 3 binomial sd of the mean stated. Fails for the adaptive estimate without the
    panel's correction of its shrinkage: 0.5-0.8 stated 0.645 on average over 236 runs, 0.542 right
    (3.3 sd)."""
    for method in ("stratified", "irt", "adaptive"):
        pooled = pd.concat([located[method, items] for items in (50, 100)])
        bins = pd.cut(pooled["confidence"], [0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0])
        table = pooled.groupby(bins, observed=True).agg(
            runs=("right", "size"), stated=("confidence", "mean"), right=("right", "mean")
        )
        print(method, table, sep="\n")
        for interval, row in table[table["runs"] >= 40].iterrows():
            sd = np.sqrt(row["stated"] * (1 - row["stated"]) / row["runs"])
            assert abs(row["right"] - row["stated"]) <= 3 * sd, (method, interval, row.to_dict())
