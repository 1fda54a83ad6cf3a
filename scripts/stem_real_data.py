"""STEM on real per-item correctness: leave-one-out and cross-family localization (issue 5).

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

Each located model gets ``--trials`` trials of ``--items`` items by STEM, random sampling and the
Bayesian interval posterior; a trial is correct when it places the model at its ground-truth
position (members with a lower full-benchmark reference score).

    python scripts/stem_real_data.py --out out/stem-real [--trials 100] [--items 100] [--seed 0]
        [--weighting balanced|stratified]

Writes ``models.csv`` (one row per located model) and ``table.csv`` (accuracy per family and
setting), and prints the table in Markdown.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from evalprism.io.correctness import encode_correctness, read_correctness, read_models
from evalprism.stem import build_pool, run_trials

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
FAMILIES = {
    "zeroeval": {
        "Qwen2.5-Instruct": ["Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct", "Qwen2.5-32B-Instruct", "Qwen2.5-72B-Instruct"],
        "Llama-3.1-Instruct": ["Meta-Llama-3.1-8B-Instruct", "Meta-Llama-3.1-70B-Instruct", "Llama-3.1-405B-Inst@sambanova"],
        "gemma-2-it": ["gemma-2-2b-it", "gemma-2-9b-it", "gemma-2-27b-it"],
    },
    "mmlu_pro": {"Llama-2": ["Llama-2-7b-hf", "Llama-2-13b-hf", "Llama-2-70b-hf"]},
}
BENCHMARKS = {"zeroeval": ["math-l5", "crux"], "mmlu_pro": ["mmlu_pro"]}


def locate_all(dataset: str, items: int, trials: int, seed: int, weighting: str) -> list[dict]:
    table = read_correctness(DATA / dataset / "scores_long.csv")
    table = table[table["benchmark"].isin(BENCHMARKS[dataset])]
    enc = encode_correctness(table)
    meta = read_models(DATA / dataset / "model_meta.csv")
    have = table.groupby("model")["benchmark"].nunique()
    complete = set(have[have == len(BENCHMARKS[dataset])].index)
    rows = []
    for family, members in FAMILIES[dataset].items():
        fam_rows = meta[meta["model"].isin(members)]
        kin = set(meta.loc[meta["family"].isin(set(fam_rows["family"])), "model"])
        for held in members:  # leave-one-out
            pool = build_pool(enc, fam_rows[fam_rows["model"] != held], min_models=2)
            rows.append(_trial_row(dataset, family, "leave-one-out", pool, enc, held, items, trials, seed, weighting))
        pool = build_pool(enc, fam_rows)
        for other in sorted(complete - kin):
            rows.append(_trial_row(dataset, family, "other families", pool, enc, other, items, trials, seed,
                                   weighting))
    return rows


def _trial_row(dataset, family, setting, pool, enc, model, items, trials, seed, weighting) -> dict:
    t = run_trials(pool, enc, items=items, trials=trials, seed=seed, model=model, weighting=weighting)
    return {"dataset": dataset, "family": family, "setting": setting, "pool": " < ".join(pool.members["model"]),
            "model": model, "reference_score": round(t.reference_score, 2), "true_position": t.truth,
            "members": pool.n, "stem": t.accuracy("stem"), "random": t.accuracy("random"),
            "bayesian": t.accuracy("bayesian"), "stem_modal": int(pd.Series(t.positions).mode()[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weighting", choices=["balanced", "stratified"], default="balanced",
                        help="STEM's decision: TI levels equal (paper) or by their pool size")
    args = parser.parse_args()
    rows = []
    for dataset in FAMILIES:
        rows += locate_all(dataset, args.items, args.trials, args.seed, args.weighting)
    models = pd.DataFrame(rows)
    table = (models.groupby(["dataset", "family", "setting"], sort=False)
             .agg(models=("model", "size"), stem=("stem", "mean"), random=("random", "mean"),
                  bayesian=("bayesian", "mean")).reset_index())
    overall = models.groupby("setting", sort=False).agg(models=("model", "size"), stem=("stem", "mean"),
                                                        random=("random", "mean"), bayesian=("bayesian", "mean"))
    overall = overall.reset_index().assign(dataset="all", family="all")
    table = pd.concat([table, overall[table.columns]], ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    models.to_csv(args.out / "models.csv", index=False)
    table.to_csv(args.out / "table.csv", index=False)
    print(markdown(table))


def markdown(frame: pd.DataFrame) -> str:
    """A Markdown table (floats to 3 places)."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in row] for row in frame.itertuples(index=False)]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in cells])


if __name__ == "__main__":
    main()
