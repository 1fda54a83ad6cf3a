"""Benchmark `evalprism compare` against the loop a user would write with scipy.

Target (issue 28): 50 runs x 100,000 items, every run against a baseline, 10,000 sign-flip
permutations per pair, <= 30 s on 2 cores. The scores are continuous (0..1), so every pair takes
the permutation path (0/1 scores would take exact McNemar and need no permutations).

evalprism: :func:`evalprism.compare.compare_runs` end to end on one in-memory score table
(reading and validating 5,000,000 rows, per-item means, 49 pairs x (difference, SE, interval, MDE,
batched sign-flip test), BH). Peer: ``scipy.stats.permutation_test(..., permutation_type="samples")``
on the paired differences, one call per pair (vectorised, 10,000 resamples), timed on a few pairs and
extrapolated to 49. Both p-values are printed for the timed pairs (they agree to Monte Carlo error).

Run ``python benchmarks/bench_compare.py`` (about a minute) or ``--quick`` (10,000 items).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from scipy import stats

from evalprism.compare import CompareOptions


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--peer-pairs", type=int, default=2)
    args = parser.parse_args()
    runs, items, permutations = 50, (10_000 if args.quick else 100_000), 10_000
    rng = np.random.default_rng(0)
    base = rng.random(items)
    table = pd.DataFrame(
        {
            "model": np.repeat([f"m{k:02d}" for k in range(runs)], items),
            "item_id": np.tile(np.arange(items), runs),
            "score": np.concatenate([np.clip(base + 0.001 * k + rng.normal(0, 0.1, items), 0, 1) for k in range(runs)]),
        }
    )
    from evalprism.compare import compare_runs

    t = time.perf_counter()
    result = compare_runs([table], CompareOptions(baseline="m00", permutations=permutations, seed=0))
    ours = time.perf_counter() - t
    overall = result.overall()

    scores = table["score"].to_numpy().reshape(runs, items)
    t = time.perf_counter()
    peer_p = []
    for k in range(1, 1 + args.peer_pairs):
        d = scores[k] - scores[0]
        res = stats.permutation_test(
            (d,),
            lambda x, axis: np.abs(np.mean(x, axis=axis)),
            permutation_type="samples",
            n_resamples=permutations,
            vectorized=True,
            alternative="greater",
            batch=200,
            random_state=k,
        )
        peer_p.append(res.pvalue)
    peer = (time.perf_counter() - t) / args.peer_pairs * (runs - 1)
    print(f"{runs} runs x {items:,} items, {runs - 1} pairs against a baseline, {permutations:,} permutations")
    print(f"evalprism compare_runs: {ours:8.1f} s   target <= 30 s: {'PASS' if ours <= 30 else 'MISS'}")
    print(
        f"scipy permutation_test loop (extrapolated from {args.peer_pairs} pairs): {peer:8.1f} s   ratio {peer / ours:.1f}x"
    )
    for k, p in enumerate(peer_p, 1):
        print(f"  pair m{k:02d}: evalprism p = {overall.loc[k - 1, 'p']:.4f}, scipy p = {p:.4f}")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} (other processes distort every timing)")


if __name__ == "__main__":
    main()
