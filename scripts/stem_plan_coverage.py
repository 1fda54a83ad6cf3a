"""Real data: plan 100 items, give a held-out model's answers on just those items to `stem locate`,
and check its 95% interval against the model's full-benchmark (full-pool) score (issue 26).

Pool: ZeroEval MATH level 5 + CRUXEval, family Qwen2.5-Instruct (3, 7, 32, 72B), reference panel
= every other model with rows on both benchmarks except the located model and its other-provider
copies. For each located model and plan seed: ``make_plan`` -> the model's rows on the planned items
only -> ``locate_models(..., plan=plan)``; covered when |estimate - full-pool score| <= 1.96 se.
Run from the repository root:

    PYTHONPATH=src python scripts/stem_plan_coverage.py [--seeds 20] [--items 100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stem_real_data import BENCHMARKS, DATA, FAMILIES, copies_of

from evalprism.io.correctness import encode_correctness, read_correctness, read_models
from evalprism.stem import build_pool, locate_models, make_plan
from evalprism.stem.pool import attach_panel
from evalprism.stem.target import target_of
from evalprism.stem.trials import Z95

LOCATED = ["Meta-Llama-3.1-8B-Instruct", "claude-3-opus-20240229", "gpt-4o-2024-08-06"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--family", default="Qwen2.5-Instruct")
    parser.add_argument("--models", nargs="*", default=LOCATED)
    args = parser.parse_args()
    table = read_correctness(DATA / "zeroeval" / "scores_long.csv")
    table = table[table["benchmark"].isin(BENCHMARKS["zeroeval"])]
    enc = encode_correctness(table)
    meta = read_models(DATA / "zeroeval" / "model_meta.csv")
    have = table.groupby("model")["benchmark"].nunique()
    complete = set(have[have == len(BENCHMARKS["zeroeval"])].index)
    members = FAMILIES["zeroeval"][args.family]
    total = {"stratified": [], "irt": []}
    for model in args.models:
        pool = build_pool(enc, meta[meta["model"].isin(members)], min_models=2)
        attach_panel(pool, enc, sorted(complete - set(members) - copies_of(meta, model)))
        truth = target_of(pool, enc, model).reference_score
        rows = table[table["model"] == model]
        for method in ("stratified", "irt"):
            hits, errors = [], []
            for seed in range(args.seeds):
                plan = make_plan(pool, items=args.items, seed=seed, method=method)
                keys = set(zip(plan.items["benchmark"], plan.items["item_id"], strict=True))
                answers = rows[[k in keys for k in zip(rows["benchmark"], rows["item_id"], strict=True)]]
                loc = locate_models(pool, answers, plan=plan, method=method, progress=False).results[0][0]
                errors.append(loc.estimate - truth)
                hits.append(abs(loc.estimate - truth) <= Z95 * loc.standard_error)
            total[method] += hits
            print(f"{model:32s} {method:10s} full-pool score {truth:6.2f}  coverage {np.mean(hits):.2f} "
                  f"({sum(hits)}/{len(hits)})  mean error {np.mean(errors):+.2f}  RMSE {np.sqrt(np.mean(np.square(errors))):.2f}"
                  f"  panel {pool.panel_size(model)}", flush=True)
    for method, hits in total.items():
        print(f"overall {method}: coverage {np.mean(hits):.3f} ({sum(hits)}/{len(hits)})")


if __name__ == "__main__":
    main()
