"""Benchmark discriminability, weights and the capability reference score (seed 003, Key Design 2).

``D_j = sigma(S_j) x rho(S_j, log P)``: ``S_j`` are the family members' scores on benchmark j in
percent (accuracy over all of its items, a -1 counted as wrong), ``sigma`` the population standard
deviation (ddof = 0), ``rho`` the Pearson correlation with the natural log of the parameter counts.
``w_j = D_j / sum_k D_k``.

Rules where the seed is silent: a benchmark whose scores do not vary has ``rho`` undefined and
``D = 0``; a negative ``D`` (scores falling with size) would give a negative weight, so weights use
``max(D, 0)``; when no benchmark has a positive ``D`` the weights are equal. The reference score of
a model is ``sum_j w_j S_j`` (percent); a model is ranked against the family by it.
"""

from __future__ import annotations

import numpy as np


def discriminability(scores: np.ndarray, params: np.ndarray) -> np.ndarray:
    """D per benchmark from a benchmarks x members matrix of percent scores."""
    scores = np.atleast_2d(np.asarray(scores, dtype=float))
    log_p = np.log(np.asarray(params, dtype=float))
    sd = scores.std(axis=1)
    centred = scores - scores.mean(axis=1, keepdims=True)
    lp = log_p - log_p.mean()
    denom = np.sqrt((centred**2).sum(axis=1) * (lp**2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(denom > 0, centred @ lp / np.where(denom > 0, denom, 1.0), 0.0)
    return sd * rho


def weights(d: np.ndarray) -> np.ndarray:
    """``w_j = max(D_j, 0) / sum max(D, 0)``; equal weights when no D is positive."""
    pos = np.clip(np.asarray(d, dtype=float), 0.0, None)
    total = pos.sum()
    return pos / total if total > 0 else np.full(pos.shape, 1.0 / max(len(pos), 1))


def reference_scores(scores: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted capability reference score per model (columns of a benchmarks x models matrix);
    benchmarks a model lacks (NaN) are left out and the remaining weights renormalised."""
    scores = np.atleast_2d(np.asarray(scores, dtype=float))
    w = np.asarray(w, dtype=float)[:, None] * ~np.isnan(scores)
    total = w.sum(axis=0)
    return np.where(total > 0, (np.nan_to_num(scores) * w).sum(axis=0) / np.where(total > 0, total, 1), np.nan)
