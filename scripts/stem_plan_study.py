"""STEM on real data: plan the items, run only those, locate from them (`stem plan` -> `stem locate --plan`,
issue 26's target).

Every family x setting cell of :mod:`stem_real_data` (ZeroEval MATH level 5 + CRUXEval: Qwen2.5-Instruct,
Llama-3.1-Instruct, gemma-2-it; MMLU-Pro: Llama-2; leave-one-out and other families; by name, ``gsm8k``:
ZeroEval's GSM8K with Llama-3.1-Instruct, the 2PL's ceiling), with the same pools,
reference panels (every complete model except the located one and other providers' copies of it) and ground
truth (the position and full-pool score from the model's answers on every pool item, ``target_of``). Each
model is an unseen checkpoint that answered only the items an arm gives it:

- ``plan-A``: ``make_plan(pool, items, seed, "stratified")``, then ``locate_models`` on the model's rows on the
  planned items alone with ``plan=plan`` and ``method="stratified"`` (estimator A on the plan's design);
- ``plan-B``: the same with ``method="auto"`` for both (the default; with a panel of 10+ models it is B, the IRT
  difference estimator on the plan's stratified sample; the chosen method is recorded per run);
- ``random`` (random-K): ``items`` items drawn uniformly from the model's rows on the pool (``default_rng([seed, 1])``),
  located without a plan by ``method="stratified"``: the score is the benchmark-weighted mean of the drawn
  items (stem_real_data's ``random``), its standard error that of a simple random sample within each benchmark.

An arm is a function ``(pool, model_rows, target, seed) -> (estimate, se, position)``, ``model_rows`` the model's
rows on every pool item (an arm chooses which of them the model "answered"); :func:`arms` builds the dict, so
another design (e.g. an adaptive one) is a few lines there. Every run catches ``Exception``: an
``EvalprismError`` is counted as a refusal, anything else as a traceback, with type and message; the study
never stops.

Per cell and arm: the models' mean placement accuracy (share of runs whose position equals the truth), the
difference of each plan arm to random sampling of the same size with a 95% interval over the cell's M models (models fixed, seeds
random; the arms' runs are independent, so ``mean +- 1.96 sqrt(sum_m (var_a,m / S_a + var_r,m / S_r)) / M``),
the coverage of nominal 95% intervals ``|estimate - full-pool score| <= 1.96 se`` with a Clopper-Pearson
interval over all runs, the mean and RMSE of ``estimate - full-pool score`` (points), refusals and tracebacks.
The target (issue 26): accuracy >= random sampling of the same size, coverage 0.93-0.97, 0 tracebacks, in every cell.

    PYTHONPATH=src python scripts/stem_plan_study.py --out out/stem-plan [--seeds 20] [--items 50 100]
        [--random-draws 1000] [--datasets zeroeval mmlu_pro gsm8k] [--max-models N]

Calibration (issue 42): the stated confidence of each run's placement in bins against the share placed
right (Clopper-Pearson), over all runs and over the runs that commit (an abstention, "cannot tell which side
of X", is neither right nor wrong); the abstention rate; coverage is of the stated interval (at the ceiling,
the one-sided "at or above L").

Writes ``runs.csv`` (one row per run), ``cells.csv`` (per plan size x cell x arm and overall per setting) and
``tables.md``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stem_real_data import DEFAULT_DATASETS, FAMILIES, copies_of, family_jobs, load

from evalprism.errors import EvalprismError
from evalprism.stats.binomial import clopper_pearson
from evalprism.stem import attach_panel, build_pool, locate_models, make_plan
from evalprism.stem.estimate import design_estimate, pool_strata, positions_of, score_confidence
from evalprism.stem.options import LocateOptions, PlanOptions, PoolOptions
from evalprism.stem.resolution import abstention
from evalprism.stem.target import target_of

Z95 = 1.959963984540054
BASELINE = "random"
#: an arm: (pool, the model's rows on every pool item, its full-pool Target, seed) -> (estimate, se, position)
Arm = Callable[[Any, pd.DataFrame, Any, int], tuple[float, float, int]]


# ---------------------------------------------------------------------------------------------------- arms


def _keys(frame: pd.DataFrame) -> pd.Series:
    return frame["benchmark"].astype(str) + "\x1f" + frame["item_id"].astype(str)


def _located(pool, answers: pd.DataFrame, plan=None, **options) -> tuple[float, float, int, dict]:
    loc = locate_models(pool, answers, LocateOptions(**options), plan=plan, progress=False).results[0][0]
    return loc.estimate, loc.standard_error, loc.position, stated(loc)


def stated(loc) -> dict:
    """What a localization states besides its estimate: the method, the point placement's confidence,
    whether it abstains ("cannot tell which side of X") and the positions its wider interval holds,
    and at the ceiling the one-sided bound ("at or above L")."""
    a = loc.abstention
    return {
        "method": loc.method,
        "confidence": loc.confidence,
        "abstained": a is not None,
        "abstention_from": np.nan if a is None else a.positions[0],
        "abstention_to": np.nan if a is None else a.positions[1],
        "ceiling_bound": np.nan if loc.ceiling_bound is None else loc.ceiling_bound,
    }


def plan_arm(items: int, method: str) -> Arm:
    """Plan ``items`` items (``make_plan``), give the model's rows on them alone, locate with ``plan``."""

    def run(pool, rows: pd.DataFrame, target, seed: int):
        plan = make_plan(pool, PlanOptions(items=items, seed=seed, method=method))
        answers = rows[_keys(rows).isin(set(_keys(plan.items)))]
        return _located(pool, answers, plan=plan, method=method)

    return run


def random_arm(items: int) -> Arm:
    """``items`` of the model's pool rows drawn uniformly, located without a plan (simple random sample)."""

    def run(pool, rows: pd.DataFrame, target, seed: int):
        rng = np.random.default_rng([seed, 1])
        answers = rows.iloc[np.sort(rng.choice(len(rows), min(items, len(rows)), replace=False))]
        return _located(pool, answers, method="stratified")

    return run


def random_runs(pool, rows: pd.DataFrame, target, items: int, draws: int) -> list[dict]:
    """:func:`random_arm`'s ``draws`` runs at once (the same draws, ``default_rng([seed, 1])``): the design
    estimate of a simple random sample within each benchmark, vectorised over the draws (locate_models
    per draw dominated the study's time); the first draws are checked against :func:`random_arm`."""
    strata = pool_strata(pool)
    where = pd.Series(np.arange(len(pool.items)), index=_keys(pool.items))
    row_index = where.loc[_keys(rows)].to_numpy()
    size = min(items, len(rows))
    picked = np.stack(
        [row_index[np.sort(np.random.default_rng([t, 1]).choice(len(rows), size, replace=False))] for t in range(draws)]
    )
    nb = len(strata.weights)
    est, var = design_estimate(
        (target.outcome[picked] == 1).astype(float),
        pool.bench_code[picked],
        np.arange(nb),
        strata.bench_size,
        strata.weights,
        strata.bench_size,
        binary=True,
    )
    est, se = 100 * est, 100 * np.sqrt(var)
    names = pool.members["model"].tolist()
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    position, confidence = positions_of(est, mu), score_confidence(est, se, mu)
    out = []
    for t in range(draws):
        a = abstention(float(est[t]), float(se[t]), names, mu)
        stated_t = {
            "method": "stratified",
            "confidence": float(confidence[t]),
            "abstained": a is not None,
            "abstention_from": np.nan if a is None else a.positions[0],
            "abstention_to": np.nan if a is None else a.positions[1],
            "ceiling_bound": np.nan,
        }
        out.append(
            finished({"arm": BASELINE, "seed": t, "seconds": np.nan}, (est[t], se[t], position[t], stated_t), target)
        )
    for t in range(min(2, draws)):  # the vectorised path is random_arm's
        check = random_arm(items)(pool, rows, target, t)
        assert np.allclose([check[0], check[1], check[2]], [est[t], se[t], position[t]]), (check, est[t], se[t])
    return out


def arms(items: int) -> dict[str, Arm]:
    """The arms of the study; the baseline (:data:`BASELINE`) runs ``--random-draws`` seeds, the others ``--seeds``."""
    return {"plan-A": plan_arm(items, "stratified"), "plan-B": plan_arm(items, "auto"), BASELINE: random_arm(items)}


# ---------------------------------------------------------------------------------------------------- runs


def jobs(dataset: str) -> Iterator[tuple[str, str, str, Any, pd.DataFrame, Any]]:
    """(family, setting, model, pool, the model's rows on the pool, its Target) for every cell of
    stem_real_data.py; the pool carries the reference panel without the model and its copies."""
    table, enc, meta, complete = load(dataset)
    by_model = dict(tuple(table.groupby("model", sort=False)))
    for family, members in FAMILIES[dataset].items():
        for model, setting, pool_rows in family_jobs(meta, members, complete):
            pool = build_pool(enc, pool_rows, PoolOptions(min_models=2))
            attach_panel(pool, enc, sorted(complete - set(pool.members["model"]) - copies_of(meta, model)))
            target = target_of(pool, enc, model)
            rows = by_model[model]
            rows = rows[_keys(rows).isin(set(_keys(pool.items)))].reset_index(drop=True)
            yield family, setting, model, pool, rows, target


def run_arm(name: str, arm: Arm, pool, rows: pd.DataFrame, target, seed: int) -> dict:
    """One run: the arm's estimate, se and position against the truth, or the exception it raised."""
    out: dict[str, Any] = {"arm": name, "seed": seed}
    started = time.perf_counter()
    try:
        result = arm(pool, rows, target, seed)
    except Exception as exc:
        result = None
        out.update(error_type=type(exc).__name__, error=str(exc)[:300], traceback=not isinstance(exc, EvalprismError))
    out["seconds"] = time.perf_counter() - started
    return finished(out, result, target)


def finished(out: dict, result: tuple | None, target) -> dict:
    """A run's record: its estimate, se, position and what it states (None: it failed, ``out`` says
    how), scored against the truth (hit, score error, coverage of the stated interval, and whether an
    abstention's wider interval holds the true position)."""
    out = {
        "estimate": np.nan,
        "se": np.nan,
        "position": np.nan,
        "method": None,
        "error_type": None,
        "error": None,
        "traceback": False,
        **out,
    }
    ok = result is not None
    if ok:
        est, se, pos = result[:3]
        out.update(estimate=est, se=se, position=pos, **(result[3] if len(result) > 3 else {}))
    out["hit"] = float(out["position"] == target.truth) if ok else np.nan
    out["score_error"] = out["estimate"] - target.reference_score if ok else np.nan
    out["covered"] = float(covers(out, target.reference_score)) if ok else np.nan
    if "abstention_from" in out:
        held = out["abstention_from"] <= target.truth <= out["abstention_to"]
        out["abstention_holds_truth"] = float(held) if out["abstained"] else np.nan
    return out


def covers(run: dict, truth: float) -> bool:
    """Whether the stated 95% interval holds the full-pool score: ``estimate +- 1.96 se``, or at the
    ceiling the one-sided "at or above L" (``truth >= L``)."""
    bound = run.get("ceiling_bound", np.nan)
    if bound is not None and not np.isnan(bound):
        return bool(truth >= bound)
    return bool(abs(run["estimate"] - truth) <= Z95 * run["se"])


def run_study(
    datasets: list[str], sizes: list[int], seeds: int, random_draws: int, max_models: int | None
) -> pd.DataFrame:
    """Every arm at every plan size in ``sizes`` for every located model (one pool per model, so the
    panel's 2PL fits that B's calibration makes are shared by its seeds and plan sizes)."""
    records = []
    for dataset in datasets:
        counts: dict[tuple[str, str], int] = {}
        for family, setting, model, pool, rows, target in jobs(dataset):
            counts[family, setting] = counts.get((family, setting), 0) + 1
            if max_models is not None and counts[family, setting] > max_models:
                continue
            started = time.perf_counter()
            base = {
                "dataset": dataset,
                "family": family,
                "setting": setting,
                "model": model,
                "reference_score": target.reference_score,
                "true_position": target.truth,
                "members": pool.n,
                "panel_models": pool.panel_size(model),
            }
            for items in sizes:
                for name, arm in arms(items).items():
                    if name == BASELINE:
                        done = random_runs(pool, rows, target, items, random_draws)
                    else:
                        done = [run_arm(name, arm, pool, rows, target, seed) for seed in range(seeds)]
                    records += [{**base, "items": items, **r} for r in done]
            print(
                f"  {dataset} {family} {setting} {model}: truth {target.truth}, score {target.reference_score:.1f}, "
                f"{time.perf_counter() - started:.1f} s",
                flush=True,
            )
    return pd.DataFrame(records)


# ----------------------------------------------------------------------------------------------- summaries

#: a located model: the same model located on another family's pool is another unit
UNIT = ["dataset", "family", "setting", "model"]


def arm_stats(runs: pd.DataFrame) -> dict:
    """Accuracy (mean over located models of each one's hit rate), coverage with a Clopper-Pearson 95%
    interval, mean error and RMSE (points), refusals and tracebacks of one arm's runs in one cell."""
    ok = runs[runs["error_type"].isna()]
    covered, n = int(ok["covered"].sum()), len(ok)
    low, high = clopper_pearson(np.array([covered]), np.array([n])) if n else (np.array([np.nan]),) * 2
    return {
        "models": len(runs.groupby(UNIT)),
        "runs": len(runs),
        "accuracy": float(ok.groupby(UNIT)["hit"].mean().mean()) if n else np.nan,
        "covered": covered,
        "coverage": covered / n if n else np.nan,
        "coverage_low": float(low[0]),
        "coverage_high": float(high[0]),
        "mean_error": float(ok["score_error"].mean()),
        "rmse": float(np.sqrt((ok["score_error"] ** 2).mean())),
        "mean_se": float(ok["se"].mean()),
        "refusals": int((runs["error_type"].notna() & ~runs["traceback"]).sum()),
        "tracebacks": int(runs["traceback"].sum()),
    }


def difference(arm: pd.DataFrame, base: pd.DataFrame) -> dict:
    """Over the located models with runs in both arms: their count, the baseline's accuracy on them, and the
    mean of (arm accuracy - baseline accuracy) with two 95% intervals, models fixed, seeds random.

    ``vs_random_low/high``: seeds as the random unit. A plan depends only on (pool, items, seed), so the models
    of a cell located on one pool share seed s's plan (and random-100's draw s picks the same rows of every
    complete model): their runs at one seed are correlated. The interval is ``d +- 1.96 sqrt(var_s(a_s) / S +
    var_t(r_t) / T)``, ``a_s`` the mean hit over the models at plan seed s, ``r_t`` the same at draw t.
    ``vs_random_low/high_independent``: the per-model formula of stem_real_data.py, ``mean +- 1.96
    sqrt(sum_m (var_a,m / S + var_r,m / T)) / M``, which takes every model's seeds as independent draws (too
    narrow when they are shared)."""
    a_ok, b_ok = arm[arm["error_type"].isna()], base[base["error_type"].isna()]
    a = a_ok.groupby(UNIT)["hit"].agg(["mean", "var", "count"])
    b = b_ok.groupby(UNIT)["hit"].agg(["mean", "var", "count"])
    both = a.join(b, suffixes=("_a", "_b"), how="inner")
    if both.empty:
        return {
            "compared": 0,
            "random_on_compared": np.nan,
            "vs_random": np.nan,
            "vs_random_low": np.nan,
            "vs_random_high": np.nan,
            "vs_random_low_independent": np.nan,
            "vs_random_high_independent": np.nan,
        }
    diff = float((both["mean_a"] - both["mean_b"]).mean())
    se_ind = float(np.sqrt((both["var_a"] / both["count_a"] + both["var_b"] / both["count_b"]).sum())) / len(both)
    keep = pd.MultiIndex.from_frame(both.reset_index()[UNIT])
    per_seed = [g[pd.MultiIndex.from_frame(g[UNIT]).isin(keep)].groupby("seed")["hit"].mean() for g in (a_ok, b_ok)]
    se = float(np.sqrt(sum(x.var(ddof=1) / len(x) for x in per_seed)))
    return {
        "compared": len(both),
        "random_on_compared": float(both["mean_b"].mean()),
        "vs_random": diff,
        "vs_random_low": diff - Z95 * se,
        "vs_random_high": diff + Z95 * se,
        "vs_random_low_independent": diff - Z95 * se_ind,
        "vs_random_high_independent": diff + Z95 * se_ind,
    }


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell x arm, then per setting over all cells ("all", "all", setting), then overall."""
    groups: list[tuple[str, str, str, pd.DataFrame]] = [
        (d, f, s, g) for (d, f, s), g in runs.groupby(["dataset", "family", "setting"], sort=False)
    ]
    groups += [("all", "all", s, g) for s, g in runs.groupby("setting", sort=False)]
    groups += [("all", "all", "all", runs)]
    rows = []
    for dataset, family, setting, g in groups:
        base = g[g["arm"] == BASELINE]
        for name, a in g.groupby("arm", sort=False):
            row = {"dataset": dataset, "family": family, "setting": setting, "arm": name, **arm_stats(a)}
            if name != BASELINE:
                row.update(difference(a, base))
                row["target_accuracy"] = bool(row["vs_random"] >= 0)
                row["target_coverage"] = bool(0.93 <= row["coverage"] <= 0.97)
                row["target_tracebacks"] = row["tracebacks"] == 0
                row["target_met"] = row["target_accuracy"] and row["target_coverage"] and row["target_tracebacks"]
            rows.append(row)
    return pd.DataFrame(rows)


#: lower edges of the bins of stated confidence (the last bin holds 1.0)
BINS = (0.0, 0.5, 0.8, 0.9, 0.95, 0.99)
#: how far a bin's share right may sit from its mean stated confidence (issue 42)
TOLERANCE = 0.03


def _bin_verdict(stated: float, right: float, low: float, high: float) -> str:
    """Within :data:`TOLERANCE`; else whether the bin's Clopper-Pearson interval holds the stated value
    (too few runs to tell) or not (missed)."""
    if abs(right - stated) <= TOLERANCE:
        return "within 0.03"
    if low <= stated <= high:
        return f"off by {right - stated:+.3f}, too few to tell (interval holds the stated)"
    return f"MISSED: off by {right - stated:+.3f}"


def calibration(runs: pd.DataFrame) -> pd.DataFrame:
    """Stated confidence of the point placement in :data:`BINS` against the share placed right, per plan
    size and arm, over every completed run ("all") and over the runs that commit to a placement
    ("committed": no abstention). A run that abstains is neither right nor wrong; "all" scores its point
    placement, which the confidence is the probability of."""
    ok = runs[runs["error_type"].isna() & runs["confidence"].notna()]
    labels = [f"{a:.2f}-{b:.2f}" for a, b in itertools.pairwise(BINS)] + [f">={BINS[-1]:.2f}"]
    ok = ok.assign(bin=pd.cut(ok["confidence"], [*BINS, np.inf], right=False, labels=labels))
    rows = []
    for scope, part in (("all", ok), ("committed", ok[~ok["abstained"].astype(bool)])):
        for (items, arm, label), g in part.groupby(["items", "arm", "bin"], sort=True, observed=True):
            right, n = int(g["hit"].sum()), len(g)
            low, high = clopper_pearson(np.array([right]), np.array([n]))
            stated = float(g["confidence"].mean())
            rows.append(
                {
                    "items": items,
                    "arm": arm,
                    "scope": scope,
                    "bin": label,
                    "runs": n,
                    "stated": stated,
                    "right": right / n,
                    "right_low": float(low[0]),
                    "right_high": float(high[0]),
                    "verdict": _bin_verdict(stated, right / n, float(low[0]), float(high[0])),
                }
            )
    return pd.DataFrame(rows)


def abstentions(runs: pd.DataFrame) -> pd.DataFrame:
    """Per plan size and arm: completed runs, the share that abstain ("cannot tell which side of X"),
    the accuracy and mean stated confidence of those that commit, how often an abstention's wider
    interval holds the true position, and the runs at the ceiling ("at or above L") with the share
    whose bound holds the full-pool score."""
    ok = runs[runs["error_type"].isna()]
    rows = []
    for (items, arm), g in ok.groupby(["items", "arm"], sort=True):
        gone = g["abstained"].astype(bool)
        top = g["ceiling_bound"].notna()
        rows.append(
            {
                "items": items,
                "arm": arm,
                "runs": len(g),
                "abstained": int(gone.sum()),
                "abstention_rate": float(gone.mean()),
                "committed_accuracy": float(g.loc[~gone, "hit"].mean()),
                "committed_stated": float(g.loc[~gone, "confidence"].mean()),
                "abstention_holds_truth": float(g.loc[gone, "abstention_holds_truth"].astype(float).mean()),
                "ceiling_runs": int(top.sum()),
                "ceiling_covered": float(g.loc[top, "covered"].mean()) if top.any() else np.nan,
            }
        )
    return pd.DataFrame(rows)


def calibration_tables(bins: pd.DataFrame, gone: pd.DataFrame) -> str:
    """The calibration and abstention tables (markdown)."""
    lines = [
        "Stated confidence of the placement vs share placed right, per bin (Clopper-Pearson 95% of the share; "
        f"target: within {TOLERANCE} of the mean stated). 'all': every completed run, its point placement scored; "
        "'committed': the runs that do not abstain. random: uncalibrated (no plan: the design's normal interval):",
        "",
        "| items | arm | scope | confidence bin | runs | mean stated | share right [95%] | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in bins.to_dict("records"):
        lines.append(
            f"| {r['items']} | {r['arm']} | {r['scope']} | {r['bin']} | {r['runs']:,} | {r['stated']:.3f} | "
            f"{r['right']:.3f} [{r['right_low']:.3f}, {r['right_high']:.3f}] | {r['verdict']} |"
        )
    lines += [
        "",
        "Abstention ('cannot tell which side of X': neither right nor wrong), the committed runs' accuracy and mean "
        "stated confidence, and the ceiling's one-sided 'at or above L' (covered: the full-pool score >= L):",
        "",
        "| items | arm | runs | abstained | rate | committed: accuracy | committed: mean stated | "
        "abstentions holding the true position | at the ceiling | ceiling bound covers |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in gone.to_dict("records"):
        lines.append(
            f"| {r['items']} | {r['arm']} | {r['runs']:,} | {r['abstained']:,} | {r['abstention_rate']:.3f} | "
            f"{r['committed_accuracy']:.3f} | {r['committed_stated']:.3f} | {r['abstention_holds_truth']:.3f} | "
            f"{r['ceiling_runs']:,} | {r['ceiling_covered']:.3f} |"
        )
    return "\n".join(lines)


def _verdict(r: dict) -> str:
    if r["target_met"]:
        return "met"
    missed = []
    if not r["target_accuracy"]:
        missed.append("accuracy" + (" (worse: interval below 0)" if r["vs_random_high"] < 0 else " (interval holds 0)"))
    if not r["target_coverage"]:
        inside = r["coverage_low"] <= 0.97 and r["coverage_high"] >= 0.93
        missed.append("coverage" + (" (interval overlaps 0.93-0.97)" if inside else " (interval outside 0.93-0.97)"))
    if not r["target_tracebacks"]:
        missed.append("tracebacks")
    return "MISSED: " + ", ".join(missed)


def tables(cells: pd.DataFrame, runs: pd.DataFrame, seeds: int, draws: int, items: int, seconds: float) -> str:
    plan_arms = [a for a in cells["arm"].unique() if a != BASELINE]
    lines = [
        f"### {items} items: plan arms {seeds} seeds per model, {BASELINE}-{items} {draws} draws per model",
        "",
        (
            "Accuracy (share of runs placed at the true position, mean over models), the plan arm minus "
            f"{BASELINE} with its 95% interval (seeds as the random unit: a cell's models share each seed's plan; "
            "over the models with runs in both arms: a model whose plan runs were all refused is left out of both), "
            f"coverage of nominal 95% intervals (covered runs / runs, Clopper-Pearson "
            f"95%), and the target (accuracy >= {BASELINE}-{items}, coverage 0.93-0.97, 0 tracebacks):"
        ),
        "",
        (
            f"| dataset | family | setting | models | arm | accuracy | {BASELINE}-{items} | difference [95%] | "
            "[95%, seeds independent per model] | coverage [95%] | target |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, g in cells.groupby(["dataset", "family", "setting"], sort=False):
        for r in g[g["arm"] != BASELINE].to_dict("records"):
            lines.append(
                f"| {' | '.join(key)} | {int(r['compared'])} | {r['arm']} | {r['accuracy']:.3f} | "
                f"{r['random_on_compared']:.3f} | "
                f"{r['vs_random']:+.3f} [{r['vs_random_low']:+.3f}, {r['vs_random_high']:+.3f}] | "
                f"[{r['vs_random_low_independent']:+.3f}, {r['vs_random_high_independent']:+.3f}] | "
                f"{r['coverage']:.3f} ({r['covered']:,}/{r['runs'] - r['refusals'] - r['tracebacks']:,}) "
                f"[{r['coverage_low']:.3f}, {r['coverage_high']:.3f}] | {_verdict(r)} |"
            )
    lines += [
        "",
        (
            "Score estimates (points of the full-pool weighted score): mean error, RMSE, mean standard error; "
            "coverage per arm; failed runs:"
        ),
        "",
        (
            "| dataset | family | setting | arm | models | runs | mean error | RMSE | mean se | coverage [95%] | refusals | "
            "tracebacks |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in cells.to_dict("records"):
        lines.append(
            f"| {r['dataset']} | {r['family']} | {r['setting']} | {r['arm']} | {r['models']} | {r['runs']:,} | "
            f"{r['mean_error']:+.2f} | {r['rmse']:.2f} | {r['mean_se']:.2f} | {r['coverage']:.3f} "
            f"[{r['coverage_low']:.3f}, {r['coverage_high']:.3f}] | {r['refusals']} | {r['tracebacks']} |"
        )
    ok = runs[runs["error_type"].isna() & runs["arm"].isin(plan_arms)]
    per_model = (
        ok.groupby([*UNIT, "arm"], sort=False)
        .agg(
            coverage=("covered", "mean"),
            accuracy=("hit", "mean"),
            mean_error=("score_error", "mean"),
            mean_se=("se", "mean"),
            score=("reference_score", "first"),
            runs=("hit", "size"),
        )
        .reset_index()
    )
    low = per_model[per_model["coverage"] <= 0.8]
    lines += [
        "",
        (
            f"Models whose plan-arm intervals covered the full-pool score in at most 80% of their runs "
            f"({len(low)} of {len(per_model)} model x arm; with {seeds} runs at a true 95% that happens with "
            f"probability {binom.cdf(np.floor(0.8 * seeds), seeds, 0.95):.3f} per model):"
        ),
        "",
    ]
    if len(low):
        lines += [
            (
                "| dataset | family | setting | model | arm | full-pool score | coverage | accuracy | mean error | "
                "mean se |"
            ),
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in low.to_dict("records"):
            lines.append(
                f"| {r['dataset']} | {r['family']} | {r['setting']} | {r['model']} | {r['arm']} | "
                f"{r['score']:.1f} | {r['coverage']:.2f} | {r['accuracy']:.2f} | {r['mean_error']:+.2f} | "
                f"{r['mean_se']:.2f} |"
            )
    else:
        lines.append("(none)")
    failed = runs[runs["error_type"].notna()]
    if len(failed):
        lines += ["", "Failed runs (model, arm: runs, type, first message):", ""]
        for (model, arm, t), g in failed.groupby(["model", "arm", "error_type"], sort=False):
            lines.append(
                f"- {model}, {arm}: {len(g)} run(s) in {g['family'].nunique()} pool(s), {t}: {g['error'].iloc[0]}"
            )
    if "method" in runs:
        chosen = runs[runs["arm"].isin(plan_arms)].groupby("arm")["method"].value_counts()
        lines += [
            "",
            "Estimator used per plan arm (runs): " + "; ".join(f"{a} {m}: {n:,}" for (a, m), n in chosen.items()),
        ]
    lines.append(f"\n({seconds:.0f} s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--items", type=int, nargs="+", default=[100], help="plan sizes (random sampling: the same)")
    parser.add_argument("--seeds", type=int, default=20, help="plan seeds per model and plan arm")
    parser.add_argument(
        "--random-draws", type=int, default=1000, help=f"{BASELINE} draws per model (random sampling of the same size)"
    )
    parser.add_argument("--datasets", nargs="+", default=DEFAULT_DATASETS, choices=list(FAMILIES))
    parser.add_argument("--max-models", type=int, default=None, help="at most this many models per cell (smoke runs)")
    parser.add_argument("--runs", nargs="+", type=Path, help="summarise these runs.csv files instead of running")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.runs:
        runs = pd.concat([pd.read_csv(path) for path in args.runs], ignore_index=True)
        runs["abstained"] = runs["abstained"].astype("boolean").fillna(False).astype(bool)
    else:
        runs = run_study(args.datasets, args.items, args.seeds, args.random_draws, args.max_models)
    seconds = time.perf_counter() - started
    per_size = [(int(k), summarise(runs[runs["items"] == k])) for k in sorted(runs["items"].unique())]
    cells = pd.concat([c.assign(items=k) for k, c in per_size], ignore_index=True)
    md = "\n\n".join(
        tables(c, runs[runs["items"] == k], args.seeds, args.random_draws, k, seconds) for k, c in per_size
    )
    md += "\n\n### Calibration and abstention\n\n" + calibration_tables(calibration(runs), abstentions(runs))
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    cells.to_csv(args.out / "cells.csv", index=False)
    (args.out / "tables.md").write_text(md + "\n", encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
