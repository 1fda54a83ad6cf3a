"""STEM on real per-item correctness: leave-one-out and cross-family localization by every method
(issues 5 and 17).

Data (``../shared/data``, Apache-2.0, not shipped): ZeroEval greedy runs on MATH level 5 and
CRUXEval (``zeroeval/scores_long.csv``) and MMLU-Pro 5-shot CoT (``mmlu_pro/scores_long.csv``).

Families and what is located:

- ZeroEval, pool over MATH-L5 + CRUXEval together (weights by discriminability): Qwen2.5-Instruct
  3/7/32/72B, Llama-3.1-Instruct 8/70/405B (the complete 405B run, ``@sambanova``), gemma-2-it
  2/9/27B. MMLU-Pro: Llama-2 7/13/70B (base).
- Leave-one-out: each member is held out and located on the pool of the others (a 3-member family
  leaves a 2-member pool with 3 intervals; the library's 3-member minimum is lowered to 2 here).
- Cross-family: every model with rows on all pool benchmarks and not of the family (other
  providers' copies of a member are left out) is located on the full family.

Methods, all on the same trials (:mod:`evalprism.stem.trials`): the paper's rule (balanced
subset; ``--weighting``), A (stratified by benchmark x members right), B (IRT difference estimator on
the random sample), random sampling and the Bayesian interval posterior. B's reference panel for a
located model X: every model of the dataset with rows on all pool benchmarks (the family included),
never X itself nor another provider's copy of X (same metadata family and size).

For every family x setting cell and overall, the accuracy of each method and its difference to
random sampling with a paired 95% interval: per model the trials are paired (same seed, same
trial index), the interval is ``mean +- 1.96 sqrt(sum_m var_m / T) / M`` over the cell's M models
(the models fixed, the trials random). Calibration: the share of trials whose nominal 95% interval
``T +- 1.96 se`` holds the reference score (A and B).

    python scripts/stem_real_data.py --out out/stem-real [--trials 1000] [--items 100 50 200] [--seed 0]
        [--weighting balanced|stratified] [--datasets zeroeval mmlu_pro] [--max-models N]

``--max-models N`` locates at most N models per family x setting cell (a smoke run).

Writes, per item count, ``models_<items>.csv`` (one row per located model and method) and
``cells_<items>.csv`` (per family x setting and overall: accuracy, paired difference to random,
score RMSE, coverage), and prints the tables in Markdown (also saved as ``tables.md``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.io.correctness import EncodedCorrectness, encode_correctness, read_models
from evalprism.io.items import read_correctness
from evalprism.stem import build_pool
from evalprism.stem.methods import TRIAL_METHODS
from evalprism.stem.options import PoolOptions
from evalprism.stem.pool import attach_panel
from evalprism.stem.target import target_of
from evalprism.stem.trials import Z95, trial_run

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FAMILIES = {
    "zeroeval": {
        "Qwen2.5-Instruct": [
            "Qwen2.5-3B-Instruct",
            "Qwen2.5-7B-Instruct",
            "Qwen2.5-32B-Instruct",
            "Qwen2.5-72B-Instruct",
        ],
        "Llama-3.1-Instruct": [
            "Meta-Llama-3.1-8B-Instruct",
            "Meta-Llama-3.1-70B-Instruct",
            "Llama-3.1-405B-Inst@sambanova",
        ],
        "gemma-2-it": ["gemma-2-2b-it", "gemma-2-9b-it", "gemma-2-27b-it"],
    },
    "mmlu_pro": {"Llama-2": ["Llama-2-7b-hf", "Llama-2-13b-hf", "Llama-2-70b-hf"]},
    # ZeroEval's GSM8K alone: members at 84-96% and most other checkpoints near 100% (the 2PL's ceiling, issue 42)
    "gsm8k": {
        "Llama-3.1-Instruct": [
            "Meta-Llama-3.1-8B-Instruct",
            "Meta-Llama-3.1-70B-Instruct",
            "Llama-3.1-405B-Inst@sambanova",
        ]
    },
}
BENCHMARKS = {"zeroeval": ["math-l5", "crux"], "mmlu_pro": ["mmlu_pro"], "gsm8k": ["gsm"]}
#: each dataset's folder under ../shared/data
FOLDER = {"zeroeval": "zeroeval", "mmlu_pro": "mmlu_pro", "gsm8k": "zeroeval"}
#: the datasets a study runs unless told (the estimator study's; gsm8k is the ceiling check, asked for by name)
DEFAULT_DATASETS = ["zeroeval", "mmlu_pro"]
METHODS = tuple(entry.name for entry in TRIAL_METHODS)  # paper, stratified, irt, random, bayesian
LABELS = {
    "paper": "STEM paper rule",
    "random": "random sampling",
    "stratified": "A: stratified by (benchmark x members right)",
    "irt": "B: random sample + IRT difference estimator",
    "bayesian": "Bayesian interval posterior",
}


def copies_of(meta: pd.DataFrame, model: str) -> set[str]:
    """``model`` and every other provider's run of it (same metadata family and size)."""
    row = meta[meta["model"] == model]
    if row.empty:
        return {model}
    fam, size = row["family"].iloc[0], row["params"].iloc[0]
    same = meta[(meta["family"] == fam) & np.isclose(meta["params"].astype(float), float(size))]
    return set(same["model"]) | {model}


def load(dataset: str) -> tuple[pd.DataFrame, EncodedCorrectness, pd.DataFrame, set[str]]:
    """The dataset's rows on its pool benchmarks, encoded, its model metadata, and the models with rows
    on every pool benchmark (the ones located and the panel's candidates)."""
    table = read_correctness(DATA / FOLDER[dataset] / "scores_long.csv").table
    table = table[table["benchmark"].isin(BENCHMARKS[dataset])]
    meta = read_models(DATA / FOLDER[dataset] / "model_meta.csv")
    have = table.groupby("model")["benchmark"].nunique()
    return table, encode_correctness(table), meta, set(have[have == len(BENCHMARKS[dataset])].index)


def family_jobs(meta: pd.DataFrame, members: list[str], complete: set[str]) -> list[tuple[str, str, pd.DataFrame]]:
    """(located model, setting, the pool's member rows) of one family: each member left out of the pool
    of the others, then every complete model of another metadata family on the whole family."""
    fam_rows = meta[meta["model"].isin(members)]
    kin = set(meta.loc[meta["family"].isin(set(fam_rows["family"])), "model"])
    jobs = [(held, "leave-one-out", fam_rows[fam_rows["model"] != held]) for held in members]
    return jobs + [(other, "other families", fam_rows) for other in sorted(complete - kin)]


def at_most(jobs: list[tuple[str, str, pd.DataFrame]], max_models: int | None) -> list[tuple[str, str, pd.DataFrame]]:
    """The first ``max_models`` jobs of each setting (every job: None), in their order."""
    if max_models is None:
        return jobs
    seen: dict[str, int] = {}
    kept = []
    for job in jobs:
        seen[job[1]] = seen.get(job[1], 0) + 1
        if seen[job[1]] <= max_models:
            kept.append(job)
    return kept


def locate_all(
    dataset: str, items: list[int], trials: int, seed: int, weighting: str, max_models: int | None = None
) -> list[dict]:
    _, enc, meta, complete = load(dataset)
    rows = []
    for family, members in FAMILIES[dataset].items():
        jobs = at_most(family_jobs(meta, members, complete), max_models)
        for model, setting, pool_rows in jobs:
            pool = build_pool(enc, pool_rows, PoolOptions(min_models=2))
            panel = sorted(complete - set(pool.members["model"]) - copies_of(meta, model))
            attach_panel(pool, enc, panel)
            target = target_of(pool, enc, model)
            started = time.perf_counter()
            fit = pool.irt_fit(exclude=model)
            for k in items:
                run = trial_run(
                    pool, target, k, trials, seed, weighting=weighting, method="auto", design="random"
                ).trials
                rows.append(_row(dataset, family, setting, pool, run, k, fit.info))
            print(
                f"  {dataset} {family} {setting} {model}: truth {target.truth}, panel {pool.panel_size(model)}, "
                f"{time.perf_counter() - started:.1f} s",
                flush=True,
            )
    return rows


def _row(dataset, family, setting, pool, t, items, fit_info) -> dict:
    row = {
        "dataset": dataset,
        "family": family,
        "setting": setting,
        "items": items,
        "pool": " < ".join(pool.members["model"]),
        "model": t.model,
        "reference_score": round(t.reference_score, 3),
        "true_position": t.truth,
        "members": pool.n,
        "panel_models": t.sampling.panel_models,
        "irt_fit_seconds": fit_info.get("seconds"),
        "trials": len(t.positions),
        "_hits": {m: t.positions_of(m) == t.truth for m in t.methods},
        "_errors": {m: np.abs(t.positions_of(m) - t.truth) for m in t.methods},
        "_score_err": {m: t.estimates[m].score - t.reference_score for m in t.score_methods},
        "_covered": {
            m: np.abs(t.estimates[m].score - t.reference_score) <= Z95 * t.estimates[m].standard_error
            for m in t.error_methods
        },
    }
    for m in t.methods:
        row[m] = t.accuracy(m)
    return row


def cell_stats(rows: list[dict]) -> dict:
    """Accuracy per method over the models of a cell, the paired difference to random with its 95%
    interval, mean absolute position error, score RMSE and 95% coverage."""
    out: dict = {"models": len(rows)}
    m_count = len(rows)
    for m in METHODS:
        hits = [r["_hits"][m] for r in rows]
        out[m] = float(np.mean([h.mean() for h in hits]))
        out[f"{m}_mae"] = float(np.mean([r["_errors"][m].mean() for r in rows]))
        if m != "random":
            d = [h.astype(float) - r["_hits"]["random"] for h, r in zip(hits, rows, strict=True)]
            mean = float(np.mean([x.mean() for x in d]))
            se = np.sqrt(sum(x.var(ddof=1) / len(x) for x in d)) / m_count
            out[f"{m}_vs_random"] = mean
            out[f"{m}_vs_random_low"] = mean - Z95 * se
            out[f"{m}_vs_random_high"] = mean + Z95 * se
            e = [r["_errors"][m].astype(float) - r["_errors"]["random"] for r in rows]
            mean_e = float(np.mean([x.mean() for x in e]))
            se_e = np.sqrt(sum(x.var(ddof=1) / len(x) for x in e)) / m_count
            out[f"{m}_mae_vs_random"] = mean_e
            out[f"{m}_mae_vs_random_low"] = mean_e - Z95 * se_e
            out[f"{m}_mae_vs_random_high"] = mean_e + Z95 * se_e
    for m in ("stratified", "irt", "random"):
        err = np.concatenate([r["_score_err"][m] for r in rows])
        out[f"{m}_rmse"] = float(np.sqrt(np.mean(err**2)))
        out[f"{m}_bias"] = float(np.mean(err))
    for m in ("stratified", "irt"):
        out[f"{m}_coverage"] = float(np.concatenate([r["_covered"][m] for r in rows]).mean())
    return out


def summarise(rows: list[dict], items: int) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    rows = [r for r in rows if r["items"] == items]
    cells = []
    keys = list(dict.fromkeys((r["dataset"], r["family"], r["setting"]) for r in rows))
    for dataset, family, setting in keys:
        sel = [r for r in rows if (r["dataset"], r["family"], r["setting"]) == (dataset, family, setting)]
        cells.append({"dataset": dataset, "family": family, "setting": setting, **cell_stats(sel)})
    for setting in ("leave-one-out", "other families"):
        sel = [r for r in rows if r["setting"] == setting]
        cells.append({"dataset": "all", "family": "all", "setting": setting, **cell_stats(sel)})
    cells.append({"dataset": "all", "family": "all", "setting": "all", **cell_stats(rows)})
    cells = pd.DataFrame(cells)
    models = pd.DataFrame([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows])
    return models, cells, tables(cells, items, len(rows[0]["_hits"]["paper"]))


def tables(cells: pd.DataFrame, items: int, trials: int) -> str:
    overall = cells[cells["dataset"] == "all"].set_index("setting")
    per_cell = cells[cells["dataset"] != "all"]
    loo, other = overall.loc["leave-one-out"], overall.loc["other families"]
    lines = [
        f"### {items} items, {trials:,} trials",
        "",
        (
            f"| {items} items, {trials:,} trials | leave-one-out ({int(loo['models'])}) | other families "
            f"({int(other['models'])}) | worst family cell | score RMSE (pp) |"
        ),
        "|---|---|---|---|---|",
    ]
    for m in METHODS:
        rmse = f"{overall.loc['all', f'{m}_rmse']:.2f}" if f"{m}_rmse" in overall.columns else "-"
        lines.append(f"| {LABELS[m]} | {loo[m]:.3f} | {other[m]:.3f} | {per_cell[m].min():.3f} | {rmse} |")
    lines += [
        "",
        "Difference to random sampling, paired 95% interval (accuracy; mean absolute position error):",
        "",
        "| dataset | family | setting | models | "
        + " | ".join(f"{m} vs random" for m in ("paper", "stratified", "irt"))
        + " |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in cells.itertuples(index=False):
        r = r._asdict()
        parts = [
            f"{r[m + '_vs_random']:+.3f} [{r[m + '_vs_random_low']:+.3f}, {r[m + '_vs_random_high']:+.3f}]"
            for m in ("paper", "stratified", "irt")
        ]
        lines.append(f"| {r['dataset']} | {r['family']} | {r['setting']} | {r['models']} | " + " | ".join(parts) + " |")
    lines += [
        "",
        "| dataset | family | setting | " + " | ".join(f"MAE {m}" for m in METHODS) + " | A MAE vs random | "
        "B MAE vs random |",
        "|---|---|---|" + "---|" * (len(METHODS) + 2),
    ]
    for r in cells.itertuples(index=False):
        r = r._asdict()
        maes = " | ".join(f"{r[m + '_mae']:.3f}" for m in METHODS)
        diffs = " | ".join(
            f"{r[m + '_mae_vs_random']:+.3f} [{r[m + '_mae_vs_random_low']:+.3f}, {r[m + '_mae_vs_random_high']:+.3f}]"
            for m in ("stratified", "irt")
        )
        lines.append(f"| {r['dataset']} | {r['family']} | {r['setting']} | {maes} | {diffs} |")
    lines += [
        "",
        "Score estimates: RMSE and mean error (pp) and the coverage of nominal 95% intervals:",
        "",
        (
            "| dataset | family | setting | RMSE A | RMSE B | RMSE random | bias A | bias B | bias random | "
            "coverage A | coverage B |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in cells.itertuples(index=False):
        r = r._asdict()
        lines.append(
            f"| {r['dataset']} | {r['family']} | {r['setting']} | {r['stratified_rmse']:.2f} | "
            f"{r['irt_rmse']:.2f} | {r['random_rmse']:.2f} | {r['stratified_bias']:+.2f} | "
            f"{r['irt_bias']:+.2f} | {r['random_bias']:+.2f} | {r['stratified_coverage']:.3f} | "
            f"{r['irt_coverage']:.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--items", type=int, nargs="+", default=[100])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", default=DEFAULT_DATASETS, choices=list(FAMILIES))
    parser.add_argument(
        "--weighting",
        choices=["balanced", "stratified"],
        default="balanced",
        help="the paper rule's decision: TI levels equal (paper) or by their pool size",
    )
    parser.add_argument("--max-models", type=int, default=None, help="at most this many models per cell (smoke runs)")
    args = parser.parse_args()
    started = time.perf_counter()
    rows = []
    for dataset in args.datasets:
        rows += locate_all(dataset, args.items, args.trials, args.seed, args.weighting, args.max_models)
    args.out.mkdir(parents=True, exist_ok=True)
    text = []
    for k in args.items:
        models, cells, md = summarise(rows, k)
        models.to_csv(args.out / f"models_{k}.csv", index=False)
        cells.to_csv(args.out / f"cells_{k}.csv", index=False)
        text.append(md)
    text.append(f"\n({time.perf_counter() - started:.0f} s)")
    (args.out / "tables.md").write_text("\n\n".join(text) + "\n", encoding="utf-8")
    print("\n\n".join(text))


if __name__ == "__main__":
    main()
