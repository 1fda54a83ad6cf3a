"""STEM on real data: plan the items, run only those, locate from them (`stem plan` -> `stem locate --plan`,
issue 26's target).

Every family x setting cell of :mod:`stem_real_data` (ZeroEval MATH level 5 + CRUXEval: Qwen2.5-Instruct,
Llama-3.1-Instruct, gemma-2-it; MMLU-Pro: Llama-2; leave-one-out and other families), with the same pools,
reference panels (every complete model except the located one and other providers' copies of it) and ground
truth (the position and full-pool score from the model's answers on every pool item, ``target_of``). Each
model is an unseen checkpoint that answered only the items an arm gives it:

- ``plan-A``: ``make_plan(pool, items, seed, "stratified")``, then ``locate_models`` on the model's rows on the
  planned items alone with ``plan=plan`` and ``method="stratified"`` (estimator A on the plan's design);
- ``plan-B``: the same with ``method="auto"`` for both (the default; with a panel of 10+ models it is B, the IRT
  difference estimator on the plan's stratified sample; the chosen method is recorded per run);
- ``random-100``: ``items`` items drawn uniformly from the model's rows on the pool (``default_rng([seed, 1])``),
  located without a plan by ``method="stratified"``: the score is the benchmark-weighted mean of the drawn
  items (stem_real_data's ``random``), its standard error that of a simple random sample within each benchmark.

An arm is a function ``(pool, model_rows, target, seed) -> (estimate, se, position)``, ``model_rows`` the model's
rows on every pool item (an arm chooses which of them the model "answered"); :func:`arms` builds the dict, so
another design (e.g. an adaptive one) is a few lines there. Every run catches ``Exception``: an
``EvalprismError`` is counted as a refusal, anything else as a traceback, with type and message; the study
never stops.

Per cell and arm: the models' mean placement accuracy (share of runs whose position equals the truth), the
difference of each plan arm to random-100 with a 95% interval over the cell's M models (models fixed, seeds
random; the arms' runs are independent, so ``mean +- 1.96 sqrt(sum_m (var_a,m / S_a + var_r,m / S_r)) / M``),
the coverage of nominal 95% intervals ``|estimate - full-pool score| <= 1.96 se`` with a Clopper-Pearson
interval over all runs, the mean and RMSE of ``estimate - full-pool score`` (points), refusals and tracebacks.
The target (issue 26): accuracy >= random-100, coverage 0.93-0.97, 0 tracebacks, in every cell.

    PYTHONPATH=src python scripts/stem_plan_study.py --out out/stem-plan [--seeds 20] [--items 100]
        [--random-draws 1000] [--datasets zeroeval mmlu_pro] [--max-models N]

Writes ``runs.csv`` (one row per run), ``cells.csv`` (per cell x arm and overall per setting) and ``tables.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binom

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stem_real_data import FAMILIES, copies_of, family_jobs, load

from evalprism.errors import EvalprismError
from evalprism.stats.binomial import clopper_pearson
from evalprism.stem import attach_panel, build_pool, locate_models, make_plan
from evalprism.stem.options import LocateOptions, PlanOptions, PoolOptions
from evalprism.stem.target import target_of

Z95 = 1.959963984540054
BASELINE = "random-100"
#: an arm: (pool, the model's rows on every pool item, its full-pool Target, seed) -> (estimate, se, position)
Arm = Callable[[Any, pd.DataFrame, Any, int], tuple[float, float, int]]


# ---------------------------------------------------------------------------------------------------- arms


def _keys(frame: pd.DataFrame) -> pd.Series:
    return frame["benchmark"].astype(str) + "\x1f" + frame["item_id"].astype(str)


def _located(pool, answers: pd.DataFrame, plan=None, **options) -> tuple[float, float, int, dict]:
    loc = locate_models(pool, answers, LocateOptions(**options), plan=plan, progress=False).results[0][0]
    return loc.estimate, loc.standard_error, loc.position, {"method": loc.method}


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
    out: dict[str, Any] = {
        "arm": name,
        "seed": seed,
        "estimate": np.nan,
        "se": np.nan,
        "position": np.nan,
        "method": None,
        "error_type": None,
        "error": None,
        "traceback": False,
    }
    started = time.perf_counter()
    try:
        result = arm(pool, rows, target, seed)
        est, se, pos = result[:3]
        out.update(estimate=est, se=se, position=pos, **(result[3] if len(result) > 3 else {}))
    except Exception as exc:
        out.update(error_type=type(exc).__name__, error=str(exc)[:300], traceback=not isinstance(exc, EvalprismError))
    out["seconds"] = time.perf_counter() - started
    ok = out["error_type"] is None
    out["hit"] = float(out["position"] == target.truth) if ok else np.nan
    out["score_error"] = out["estimate"] - target.reference_score if ok else np.nan
    out["covered"] = float(abs(out["score_error"]) <= Z95 * out["se"]) if ok else np.nan
    return out


def run_study(datasets: list[str], items: int, seeds: int, random_draws: int, max_models: int | None) -> pd.DataFrame:
    study = arms(items)
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
                "items": items,
                "reference_score": target.reference_score,
                "true_position": target.truth,
                "members": pool.n,
                "panel_models": pool.panel_size(model),
            }
            for name, arm in study.items():
                for seed in range(random_draws if name == BASELINE else seeds):
                    records.append({**base, **run_arm(name, arm, pool, rows, target, seed)})
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
    both = a.join(b, lsuffix="_a", rsuffix="_b", how="inner")
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
        f"### {items} items: plan arms {seeds} seeds per model, {BASELINE} {draws} draws per model",
        "",
        (
            "Accuracy (share of runs placed at the true position, mean over models), the plan arm minus "
            f"{BASELINE} with its 95% interval (seeds as the random unit: a cell's models share each seed's plan; "
            "over the models with runs in both arms: a model whose plan runs were all refused is left out of both), "
            f"coverage of nominal 95% intervals (covered runs / runs, Clopper-Pearson "
            "95%), and issue 26's target (accuracy >= random-100, coverage 0.93-0.97, 0 tracebacks):"
        ),
        "",
        (
            "| dataset | family | setting | models | arm | accuracy | random-100 | difference [95%] | "
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
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=20, help="plan seeds per model and plan arm")
    parser.add_argument(
        "--random-draws", type=int, default=1000, help=f"{BASELINE} draws per model (random sampling of the same size)"
    )
    parser.add_argument("--datasets", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--max-models", type=int, default=None, help="at most this many models per cell (smoke runs)")
    args = parser.parse_args()
    started = time.perf_counter()
    runs = run_study(args.datasets, args.items, args.seeds, args.random_draws, args.max_models)
    cells = summarise(runs)
    seconds = time.perf_counter() - started
    md = tables(cells, runs, args.seeds, args.random_draws, args.items, seconds)
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    cells.to_csv(args.out / "cells.csv", index=False)
    (args.out / "tables.md").write_text(md + "\n", encoding="utf-8")
    print(md)


if __name__ == "__main__":
    main()
