"""Benchmark: training every baseline router of `p2l bench` against training the P2L ridge head, same data.

Issue 40's target: training every baseline (kNN with k by 5-fold CV, the MLP, RouteLLM's mf, the
per-benchmark leaderboard) on 10,000 items x 30 models, embeddings given, takes at most 2x the CPU time
of the P2L ridge head on the same data (the head `p2l train` fits on frozen features: its penalty by
5-fold cross-validation over the training prompts, then the fit on all of them; ``bt``, so the battles
are every two models scored differently on an item, as `p2l train` converts graded logs).

Data: unit-norm 384-d synthetic embeddings (MiniLM's width) in 20 clusters; each cluster has its own
best models; 0/1 scores drawn from per-(cluster, model) accuracies; 10 benchmarks.

Run ``python benchmarks/bench_router_baselines.py`` (``--items 2000`` for a quick run). Times are CPU
seconds (user + sys of this process, every thread), which other processes disturb less than wall time;
run it on a quiet machine (``uptime`` load below 1.5).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np

T = TypeVar("T")


def cpu_timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the CPU seconds (user + sys, all threads) it took."""
    start = os.times()
    out = fn()
    end = os.times()
    return out, (end.user - start.user) + (end.system - start.system)


def world(n: int, m: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Features (n, dim), 0/1 scores (n, m) and benchmark names (n,) of the planted world above."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, 20, n)
    x = rng.normal(size=(20, dim))[cluster] + 0.5 * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    accuracy = rng.uniform(0.2, 0.9, size=(20, m))
    scores = (rng.random((n, m)) < accuracy[cluster]).astype(np.float64)
    return x, scores, np.array([f"bench{c % 10}" for c in cluster])


def fit_baselines(x: np.ndarray, scores: np.ndarray, bench: np.ndarray) -> dict[str, float]:
    """CPU seconds to fit (and predict the training items with) each registry baseline."""
    from evalprism.p2l.routers import ROUTERS, get_router

    times = {}
    for name in ROUTERS:
        _, seconds = cpu_timed(lambda name=name: get_router(name).build(0).fit(x, scores, bench).predict(x, bench))
        times[name] = seconds
        print(f"{name:>24}: {seconds:8.1f} s CPU", flush=True)
    return times


def fit_p2l_ridge(x: np.ndarray, scores: np.ndarray) -> float:
    """CPU seconds of the P2L ridge head on the battles of the graded items: penalty by 5-fold CV over
    the prompts (as `p2l train` does), then the fit on all battles."""
    import torch

    from evalprism.p2l.head import CoefficientHead
    from evalprism.p2l.marginal import Leaderboard
    from evalprism.p2l.ridge import RidgeBattles, choose_penalty, fit_penalised
    from evalprism.p2l.routers.matrix_factorization import decisive_pairs
    from evalprism.stats.outcomes import A_WINS
    from evalprism.stats.pairwise import PairCounts

    item, win, lose = decisive_pairs(scores)
    m = scores.shape[1]
    weights = np.zeros((item.size, 4))
    weights[:, A_WINS] = 1.0
    battles = RidgeBattles(item, win, lose, weights)
    names = [f"m{j}" for j in range(m)]

    def marginal_of(mask: np.ndarray) -> Leaderboard:
        pairs = PairCounts.from_battles(win[mask], lose[mask], np.zeros(int(mask.sum()), np.int64), m)
        return Leaderboard.from_counts(pairs, "bt", ci=None, names=names).pinned(pairs)

    def warm(head: CoefficientHead, board: Leaderboard) -> None:
        with torch.no_grad():
            head.linear.weight.zero_()
            head.linear.bias[:m] = torch.as_tensor(board.coefs, dtype=torch.float32)

    def run() -> None:
        prompts = [f"item {i}" for i in range(x.shape[0])]
        table = choose_penalty(x, prompts, battles, "bt", marginal_of, warm, seed=0)
        head = CoefficientHead(x.shape[1], m, "bt")
        warm(head, marginal_of(np.ones(item.size, bool)))
        fit_penalised(head, x, battles, float(table.loc[table["chosen"], "penalty"].iloc[0]))

    return cpu_timed(run)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=30)
    parser.add_argument("--dim", type=int, default=384)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} (timings are trustworthy below 1.5)")
    x, scores, bench = world(args.items, args.models, args.dim, 0)
    baselines = fit_baselines(x, scores, bench)
    total = sum(baselines.values())
    print(f"{'every baseline':>24}: {total:8.1f} s CPU", flush=True)
    ridge = fit_p2l_ridge(x, scores)
    print(f"{'P2L ridge head':>24}: {ridge:8.1f} s CPU")
    ratio = total / ridge
    print(f"ratio baselines / ridge: {ratio:.2f}x (target <= 2x: {'PASS' if ratio <= 2 else 'MISS'})")
    print(f"at {time.strftime('%H:%M:%S')}, {args.items:,} items x {args.models} models, dim {args.dim}")


if __name__ == "__main__":
    main()
