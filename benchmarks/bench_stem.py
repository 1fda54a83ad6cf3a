"""Benchmark STEM's pool construction and localization trials against a straightforward pandas version.

What is compared, and why:

* **Pool construction.** :func:`evalprism.stem.build_pool` from a long correctness DataFrame
  (validation, one factorize per key column, IRV matrix, kinds, TI, per-benchmark anomaly rates,
  difficulty shares, D and weights) against what a user would write with pandas: ``pivot`` to a
  wide items x models table, ``diff`` along the family for monotonicity, row sums for TI and a
  ``groupby`` per benchmark. Both must give the same anomaly rates and TI histogram.
* **Localization trials.** :func:`evalprism.stem.evaluate` (1,000 trials of 100 items: STEM plus
  both baselines, the new model's alignment to the pool included) against a pandas loop that per
  trial draws the balanced subset with ``groupby("ti").sample``, scores it by ``groupby`` and
  applies the same boundary rule. The pandas loop is timed on a share of the trials and
  extrapolated; the STEM positions of those trials must be equally accurate.

Data: a planted 2PL family of 10 members (abilities evenly spaced, parameter counts doubling) and
one new model, on 1,000,000 items in two benchmarks (10 million correctness rows for the family).
Run ``python benchmarks/bench_stem.py`` (about a minute) or ``--quick`` (100,000 items). The
script prints one table and always exits 0; PASS/MISS refer to the targets below.
"""

from __future__ import annotations

import argparse
import os
import platform
from collections.abc import Sequence

import numpy as np
import pandas as pd
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

TARGET_POOL_S = 2.0  # 1,000,000 items x 10 models
TARGET_TRIALS_S = 1.0  # 1,000 localization trials
FULL_ITEMS = 1_000_000


def simulate(n_items: int, n_models: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Family correctness (long), the new model's correctness, and the family metadata."""
    rng = np.random.default_rng(seed)
    b = rng.normal(0.0, 1.5, n_items)
    a = rng.lognormal(np.log(2.0), 0.3, n_items)
    members = np.linspace(-2.0, 2.0, n_models)
    theta = np.append(members, members[n_models // 2:n_models // 2 + 2].mean())  # midway between two members
    names = [f"fam-{i}" for i in range(n_models)] + ["new"]
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    score = (rng.random(p.shape) < p).astype(np.int8)
    score[rng.random(p.shape) < 0.01] = -1
    ids = np.char.add("q", np.arange(n_items).astype(str))
    bench = np.where(np.arange(n_items) % 2 == 0, "bench-a", "bench-b")

    def long(rows: slice) -> pd.DataFrame:
        k = len(names[rows])
        return pd.DataFrame({"model": pd.array(np.repeat(names[rows], n_items), dtype="str"),
                             "benchmark": pd.array(np.tile(bench, k), dtype="str"),
                             "item_id": pd.array(np.tile(ids, k), dtype="str"),
                             "score": score[rows].ravel()})

    meta = pd.DataFrame({"model": names[:-1], "params": 2.0 ** np.arange(n_models), "family": "fam"})
    return long(slice(0, n_models)), long(slice(n_models, None)), meta


def pandas_pool(df: pd.DataFrame, meta: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The straightforward pandas version: anomaly rate per benchmark and TI histogram."""
    order = meta.sort_values("params")["model"].tolist()
    wide = df.pivot(index=["benchmark", "item_id"], columns="model", values="score")[order].dropna()
    right = (wide == 1).astype(int)
    monotone = (right.diff(axis=1).iloc[:, 1:] >= 0).all(axis=1)
    ti = len(order) - right.sum(axis=1) + 1
    anomaly = (~monotone).groupby(level="benchmark").mean()
    return anomaly, ti[monotone].value_counts().sort_index()


def pandas_trials(pool_df: pd.DataFrame, new: pd.DataFrame, n_members: int, items: int, trials: int,
                  seed: int) -> np.ndarray:
    """Per trial: balanced subset by groupby-sample, per-level accuracy, the same boundary rule."""
    merged = pool_df[pool_df["ti"].notna()].merge(new[["benchmark", "item_id", "score"]], on=["benchmark", "item_id"])
    m = items // (n_members + 1)
    positions = []
    for t in range(trials):
        subset = merged.groupby("ti", group_keys=False).sample(n=m, random_state=seed + t)
        per = subset.assign(right=subset["score"] == 1).groupby("ti")["right"].agg(["sum", "count"])
        position = 0
        for j in range(1, n_members + 1):
            above = per.loc[per.index > j, "sum"].sum()
            wrong = (per.loc[per.index <= j, "count"] - per.loc[per.index <= j, "sum"]).sum()
            position += int(above > wrong)
        positions.append(position)
    return np.array(positions)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 items instead of 1,000,000")
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--peer-trials", type=int, default=50, help="pandas trials actually run (extrapolated)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.items = 100_000 if args.quick else FULL_ITEMS
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from evalprism.stem import build_pool, run_trials

    args = parse_args(argv)
    print(f"python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} cores; {args.items:,} items x {args.models} models", flush=True)
    load_before = os.getloadavg()
    report = Report()
    log(f"simulating {args.items:,} items x {args.models + 1} models")
    family, new, meta = simulate(args.items, args.models, args.seed)
    full = args.items == FULL_ITEMS

    report.section(f"pool construction ({len(family):,} correctness rows)")
    log("evalprism build_pool")
    pool, ours = timed(lambda: build_pool(family, meta))
    log("pandas pivot + diff + groupby")
    (anomaly, hist), peer = timed(lambda: pandas_pool(family, meta))
    same = (np.allclose(pool.benchmarks.set_index("benchmark")["anomaly_rate"].sort_index(), anomaly.sort_index())
            and (np.bincount(pool.ti[pool.ti > 0])[1:] == hist.to_numpy()).all())
    report.add(Row(what="build_pool from a long DataFrame", n=f"{args.items:,} x {args.models}", ours=fmt_s(ours),
                   peer=f"pandas {fmt_s(peer)}", ratio=fmt_x(peer / ours),
                   quality="same anomaly rates and TI histogram" if same else "DIFFERENT",
                   target=f"<= {TARGET_POOL_S:g} s at 1M items", status=status(ours <= TARGET_POOL_S if full else None)))

    report.section(f"{args.trials:,} localization trials of 100 items")
    log("evalprism evaluate")
    result, ours_t = timed(lambda: run_trials(pool, new, items=100, trials=args.trials, seed=args.seed))
    pool_df = pool.pool_frame()
    peer_n = min(args.peer_trials, args.trials)
    log(f"pandas loop, {peer_n} trials")
    peer_pos, peer_t = timed(lambda: pandas_trials(pool_df, new, pool.n, 100, peer_n, args.seed))
    peer_total = peer_t * args.trials / peer_n
    report.add(Row(what="evaluate: STEM + random + Bayesian, alignment included", n=f"{args.trials:,}",
                   ours=fmt_s(ours_t), peer=f"pandas (STEM only) {fmt_s(peer_total)}"
                   + ("" if peer_n == args.trials else f" (from {peer_n})"), ratio=fmt_x(peer_total / ours_t),
                   quality=f"STEM accuracy {result.accuracy('stem'):.0%} vs pandas "
                           f"{(peer_pos == result.truth).mean():.0%} (truth {result.truth})",
                   target=f"<= {TARGET_TRIALS_S:g} s", status=status(ours_t <= TARGET_TRIALS_S)))
    report.notes.append(f"baselines in the same trials: random sampling {result.accuracy('random'):.0%}, "
                        f"Bayesian {result.accuracy('bayesian'):.0%} correct")
    report.notes.append(load_note(load_before))
    print_table(report, "STEM: pool construction and localization trials", quality="agreement")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
