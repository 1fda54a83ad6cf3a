"""The two baselines STEM is compared with (seed 003, Table 2), on the same number of items.

Random sampling: ``items`` items drawn uniformly without replacement from every pool-benchmark
item the model has a row for (all kinds, anomalous included: a plain random subset of the
benchmarks); its score is the weighted mean of its per-benchmark accuracies on the draw (a -1 is
wrong; benchmarks absent from the draw are left out and the weights renormalised). The model is
placed above every member whose full-benchmark reference score is lower.

Bayesian interval posterior (after Xiao et al. 2025, as specified in the issue): the n+1 intervals
``I_0`` (below ``M_1``), ``I_i`` (between ``M_i`` and ``M_{i+1}``), ``I_n`` (above ``M_n``) have a
uniform prior. The anchors are the family members; the success probability of a model in ``I_i``
on item t is the mean of the bounding anchors' 0/1 results on t (one anchor at an open end),
shrunk as ``eps + (1 - 2 eps) x mean`` so that no single item is decisive (``eps = 0.05``). The
draw is the random-sampling draw; the items are independent given the interval; the model is
placed in the interval of highest posterior (its mass is reported).
"""

from __future__ import annotations

import numpy as np

from evalprism.stem.estimate import positions_of


def random_scores(bench_code: np.ndarray, right: np.ndarray, draws: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weighted score (a fraction) of each draw. ``draws``: trials x items indices into the
    candidate items, whose benchmark codes and 0/1 results are ``bench_code`` and ``right``;
    benchmarks absent from a draw are left out and the weights renormalised."""
    nb = len(weights)
    trials = draws.shape[0]
    bench = bench_code[draws] + nb * np.arange(trials)[:, None]
    counts = np.bincount(bench.ravel(), minlength=trials * nb).reshape(trials, nb)
    hits = np.bincount(
        bench.ravel(), weights=np.asarray(right, dtype=float)[draws].ravel(), minlength=trials * nb
    ).reshape(trials, nb)
    w = np.asarray(weights)[None, :] * (counts > 0)
    total = w.sum(axis=1)
    return (hits / np.maximum(counts, 1) * w).sum(axis=1) / np.where(total > 0, total, 1.0)


def random_positions(
    bench_code: np.ndarray, right: np.ndarray, draws: np.ndarray, weights: np.ndarray, member_scores: np.ndarray
) -> np.ndarray:
    """Position of each draw by its weighted score (:func:`random_scores`, in percent) against the
    members' reference scores (percent)."""
    return positions_of(100.0 * random_scores(bench_code, right, draws, weights), member_scores)


def interval_success(irv: np.ndarray, epsilon: float = 0.05) -> np.ndarray:
    """Items x (n+1) success probability of a model in each interval (mean of bounding anchors)."""
    right = (np.asarray(irv) == 1).astype(float)
    padded = np.concatenate([right[:, :1], right, right[:, -1:]], axis=1)  # open ends: one anchor
    return epsilon + (1 - 2 * epsilon) * (padded[:, :-1] + padded[:, 1:]) / 2


def bayesian_positions(success: np.ndarray, right: np.ndarray, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MAP interval of each draw under the uniform prior, and its posterior mass. ``success``:
    candidate items x (n+1) from :func:`interval_success`; ``right``: the model's 0/1 results."""
    loglik = np.where(np.asarray(right, dtype=bool)[:, None], np.log(success), np.log1p(-success))
    total = loglik[draws].sum(axis=1)  # trials x (n+1)
    total -= total.max(axis=1, keepdims=True)
    post = np.exp(total)
    post /= post.sum(axis=1, keepdims=True)
    best = post.argmax(axis=1)
    return best, post[np.arange(len(best)), best]
