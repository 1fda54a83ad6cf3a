"""Benchmark `evalprism compare` on 0/1 scores against the plain loop a user would write.

Target (issue 41): 20 runs x 100,000 items of 0/1 scores, all 190 pairs, at least 3x faster than
the loop (in CPU seconds). evalprism: the whole command in-process (read the score table, per-item
scores, 190 pairs x (difference, SE, interval, exact McNemar, MDE, variance parts), BH, and writing
the output directory: comparisons.csv, items.csv with --items (1.9 M rows) or without it, report,
run.json). Peer: for each pair, ``statsmodels.stats.contingency_tables.mcnemar(exact=True)`` on the
2x2 table, the paired mean, its SE and t interval with scipy, then ``multipletests(method="fdr_bh")``.
The peer writes nothing; evalprism is timed with and without items.csv.

Run ``python benchmarks/bench_compare_binary.py`` (about a minute) or ``--quick`` (10,000 items).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd


def _table(runs: int, items: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    p = rng.beta(2, 2, items)
    scores = np.stack([(rng.random(items) < np.clip(p + 0.002 * k, 0, 1)) for k in range(runs)]).astype(float)
    return pd.DataFrame(
        {
            "model": np.repeat([f"ckpt{k:02d}" for k in range(runs)], items),
            "item_id": np.tile(np.arange(items), runs),
            "score": scores.ravel(),
        }
    )


def _ours(path: Path, out: Path, items_table: bool) -> float:
    import sys

    from evalprism.cli import main

    argv = ["evalprism", "compare", str(path), "--out", str(out), "-q", *([] if items_table else ["--no-items"])]
    old, sys.argv = sys.argv, argv
    start = time.process_time()
    try:
        main()
    except SystemExit as exc:
        assert not exc.code, exc.code
    finally:
        sys.argv = old
    return time.process_time() - start


def _peer(table: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    from scipy import stats
    from statsmodels.stats.contingency_tables import mcnemar
    from statsmodels.stats.multitest import multipletests

    start = time.process_time()
    wide = table.pivot(index="item_id", columns="model", values="score")
    rows = []
    for a, b in combinations(wide.columns, 2):
        x, y = wide[a].to_numpy(), wide[b].to_numpy()
        d = y - x
        n = len(d)
        se = d.std(ddof=1) / np.sqrt(n)
        half = stats.t.ppf(0.975, n - 1) * se
        cells = [[int(((x == 1) & (y == 1)).sum()), int(((x == 1) & (y == 0)).sum())],
                 [int(((x == 0) & (y == 1)).sum()), int(((x == 0) & (y == 0)).sum())]]  # fmt: skip
        p = mcnemar(cells, exact=True).pvalue
        rows.append((a, b, d.mean(), se, d.mean() - half, d.mean() + half, p))
    out = pd.DataFrame(rows, columns=["run_a", "run_b", "difference", "se", "low", "high", "p"])
    out["p_adj"] = multipletests(out["p"], method="fdr_bh")[1]
    return time.process_time() - start, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs, items = 20, (10_000 if args.quick else 100_000)
    table = _table(runs, items)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scores.parquet"
        table.to_parquet(path)
        peer, ref = _peer(table)
        without = _ours(path, Path(tmp) / "lean", items_table=False)
        with_items = _ours(path, Path(tmp) / "full", items_table=True)
        got = pd.read_csv(Path(tmp) / "lean" / "comparisons.csv").query("benchmark == 'all'")
    same = np.allclose(got["p"].to_numpy(), ref["p"].to_numpy(), rtol=1e-9, atol=0)
    print(f"{runs} runs x {items:,} items of 0/1 scores, {len(ref)} pairs (CPU seconds, one process)")
    print(f"plain scipy/statsmodels loop (no output):   {peer:7.2f} s")
    print(
        f"evalprism compare --no-items (all outputs):   {without:7.2f} s   ratio {peer / without:.1f}x (target >= 3x)"
    )
    print(f"evalprism compare with items.csv:             {with_items:7.2f} s   ratio {peer / with_items:.1f}x")
    print(f"McNemar p-values equal statsmodels' on every pair: {same}")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} (other processes distort every timing)")


if __name__ == "__main__":
    main()
