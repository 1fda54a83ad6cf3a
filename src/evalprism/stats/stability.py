"""Choosing K by clustering stability under resampling of questions (issue 18, section 3).

The silhouette prefers a coarse split of a quality continuum (K = 2 on real ECDF data). Stability asks
instead whether a clustering with K clusters is reproducible: draw two random subsets of the
questions (each :data:`FRACTION` of them, without replacement: whole questions, all their settings,
because settings of one question are not independent), cluster each subset's settings with
k-medoids on the exact W1 distances, extend both clusterings to every setting (nearest medoid), and
compare them with the adjusted Rand index (Hubert & Arabie 1985). The mean over :data:`RESAMPLES`
pairs is the stability of K (Ben-Hur, Elisseeff & Guyon 2002; Lange et al. 2004 extend subset
clusterings to all points the same way). A K that splits a real cluster arbitrarily, or merges two,
is not reproducible; K = 2 is not favoured by construction.

Among the K whose stability is within :data:`TOLERANCE` of the highest, the mean silhouette decides
(:func:`choose_k_by_stability`). Every K shares the same subsets, so the curve compares like with like.

scikit-learn (``adjusted_rand_score``) is imported where it is called: importing
:mod:`evalprism.stats` must bring in numpy and scipy only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from evalprism.stats.kmedoids import kmedoids

RESAMPLES = 8  # pairs of subsets: the stability's standard error on real data is about 0.06 / sqrt(8)
FRACTION = 0.8
TOLERANCE = 0.005


def stability_curve(
    dist: np.ndarray,
    groups: np.ndarray,
    k_values: Sequence[int],
    resamples: int = RESAMPLES,
    fraction: float = FRACTION,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> list[tuple[int, float, float]]:
    """``[(k, mean adjusted Rand index, its standard deviation), ...]`` over ``resamples`` pairs of
    question subsets; ``groups[i]`` is the question of item i. ``on_step(1)`` after each K."""
    from sklearn.metrics import adjusted_rand_score

    dist = np.asarray(dist)
    groups = np.asarray(groups)
    questions = np.unique(groups)
    take = max(1, round(fraction * questions.size))
    rng = np.random.default_rng(seed)
    subsets = [
        [np.flatnonzero(np.isin(groups, rng.choice(questions, take, replace=False))) for _ in range(2)]
        for _ in range(resamples)
    ]
    seeds = rng.integers(2**31, size=(resamples, 2))
    curve = []
    for k in k_values:
        scores = []
        for pair, pair_seeds in zip(subsets, seeds, strict=True):
            labels = []
            for sub, run_seed in zip(pair, pair_seeds, strict=True):
                kk = min(k, sub.size)
                medoids = sub[kmedoids(dist[np.ix_(sub, sub)], kk, seed=int(run_seed)).medoids]
                labels.append(np.argmin(dist[:, medoids], axis=1))
            scores.append(adjusted_rand_score(*labels))
        curve.append((int(k), float(np.mean(scores)), float(np.std(scores))))
        if on_step is not None:
            on_step(1)
    return curve


def stable_ks(curve: Sequence[tuple[int, float, float]], tolerance: float = TOLERANCE) -> list[int]:
    """The K whose mean adjusted Rand index is within ``tolerance`` of the highest."""
    best = max(row[1] for row in curve)
    return [row[0] for row in curve if row[1] >= best - tolerance]


def choose_k_by_stability(
    dist: np.ndarray,
    groups: np.ndarray,
    k_values: Sequence[int],
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
    resamples: int = RESAMPLES,
) -> tuple[int, list[tuple[int, float, float, float]]]:
    """K by stability (:func:`stability_curve`); among the K within :data:`TOLERANCE` of the most
    stable, the highest mean silhouette decides (smallest K on ties). Well-separated families are
    reproducible both at K* and at coarser merges of whole families (K = 2 merging pairs of 4 is as
    stable as K = 4); the silhouette tells those apart, stability keeps it from splitting a continuum
    coarsely. Returns K and ``[(k, stability, stability sd, silhouette or NaN), ...]``; the silhouette
    is computed for the stable K only."""
    from evalprism.stats.kmedoids import _kmedoids_package

    curve = stability_curve(dist, groups, k_values, resamples=resamples, seed=seed, on_step=on_step)
    candidates = stable_ks(curve)
    silhouettes = {}
    for k in candidates:
        labels = kmedoids(dist, k, seed=seed).labels
        silhouettes[k] = float(_kmedoids_package().silhouette(np.ascontiguousarray(dist), labels)[0]) if k > 1 else 0.0
    best = max(candidates, key=lambda k: (silhouettes[k], -k))
    return best, [(k, m, sd, silhouettes.get(k, float("nan"))) for k, m, sd in curve]
