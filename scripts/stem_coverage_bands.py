"""Real data: estimator A's 95% interval coverage by full-benchmark score band (issue 26).

Every non-family model with answers on the whole pool, 300 trials of 100 items each: ZeroEval MATH-L5 +
CRUXEval on the Qwen2.5-Instruct family, and ZeroEval GSM on the Llama-3.1-Instruct family (GSM is where
models near 100% are). Covered when |estimate - full-benchmark reference score| <= 1.96 se. Run from the
repository root:

    PYTHONPATH=src python scripts/stem_coverage_bands.py [--trials 300] [--models N] [--out coverage.csv]

``--models N`` locates only the first N models of each pool (a smoke run); ``--out`` writes the per-model
coverage (bench, model, score, coverage, band) as CSV.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.io.correctness import encode_correctness, read_models
from evalprism.io.items import read_correctness
from evalprism.stem import build_pool
from evalprism.stem.evaluate import run_trials
from evalprism.stem.options import PoolOptions

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "zeroeval"
QWEN = ["Qwen2.5-3B-Instruct", "Qwen2.5-7B-Instruct", "Qwen2.5-32B-Instruct", "Qwen2.5-72B-Instruct"]
LLAMA = ["Meta-Llama-3.1-8B-Instruct", "Meta-Llama-3.1-70B-Instruct", "Llama-3.1-405B-Inst@sambanova"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the ZeroEval folder (scores_long.csv, model_meta.csv)")
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--models", type=int, default=None, help="at most this many located models per pool")
    parser.add_argument("--out", type=Path, default=None, help="write the per-model coverage here (CSV)")
    args = parser.parse_args()
    rows = []
    for benches, members in ((["crux", "math-l5"], QWEN), (["gsm"], LLAMA)):
        table = read_correctness(args.data / "scores_long.csv").table
        table = table[table["benchmark"].isin(benches)]
        meta = read_models(args.data / "model_meta.csv")
        have = table.groupby("model")["benchmark"].nunique()
        others = sorted(set(have[have == len(benches)].index) - set(members))[: args.models]
        pool = build_pool(encode_correctness(table), meta[meta["model"].isin(members)], PoolOptions(min_models=2))
        for model in others:
            t = table[table.model == model]
            if len(t) < len(pool.items):
                continue
            tr = run_trials(pool, t, items=100, trials=args.trials, seed=0, model=model)
            s, se = tr.estimates["stratified"].score, tr.estimates["stratified"].standard_error
            covered = np.mean(np.abs(s - tr.reference_score) <= 1.959964 * se)
            rows.append((",".join(benches), model, tr.reference_score, covered))
    f = pd.DataFrame(rows, columns=["bench", "model", "score", "coverage"])
    f["band"] = pd.cut(f.score, [0, 50, 80, 90, 95, 100])
    if args.out is not None:
        f.to_csv(args.out, index=False)
    print(f.groupby("band", observed=True).coverage.agg(["count", "mean", "min"]).round(3))


if __name__ == "__main__":
    main()
