"""One leaderboard for a set of prompts from their per-prompt leaderboards (seed 002 section 2.1.1).

- ``bt`` (eq. 3): the BT leaderboard that best predicts the expected win rate over the prompt set.
  Because the cross-entropy is linear in the label, eq. (2)'s simulated votes can be replaced by
  their expectation: every ordered pair (a, b) gets the soft label
  T_ab = Σ_z w_z σ(θ_a(z) − θ_b(z)), and one BT fit to those soft counts is exact. It costs
  O(n M²) to build T and one small fit, however many prompts there are.
- ``mean`` (appendix B.1): the weighted average of the coefficient vectors, i.e. the expected
  log-odds. Simpler, but a higher average coefficient does not mean a higher average win rate.

Both use the pairwise BT part of the leaderboards and return mean-zero coefficients. Pairs are
weighted uniformly (P_X uniform over model pairs) unless ``pair_weights`` says otherwise.

A numeric kernel (arrays in, arrays out), so it lives in ``stats``; :mod:`evalprism.p2l` exports
:func:`aggregate_leaderboards` as part of its public API.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from evalprism.errors import EvalprismError
from evalprism.stats.pairwise import PairCounts, fit_counts
from evalprism.vocabularies import Aggregation


def expected_win_matrix(coefs: np.ndarray, weights: np.ndarray | None = None, chunk: int = 2048) -> np.ndarray:
    """T (M, M) with T_ab = Σ_z w_z σ(θ_a(z) − θ_b(z)) (weights normalised to sum to one)."""
    coefs = np.atleast_2d(np.asarray(coefs, dtype=float))
    n, m = coefs.shape
    w = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, dtype=float) / np.sum(weights)
    total = np.zeros((m, m))
    for s in range(0, n, chunk):  # chunks bound the (chunk, M, M) temporary
        c = coefs[s : s + chunk]
        total += np.einsum("z,zab->ab", w[s : s + chunk], expit(c[:, :, None] - c[:, None, :]))
    return total


def aggregate_leaderboards(
    coefs: np.ndarray,
    weights: np.ndarray | None = None,
    method: Aggregation = "bt",
    pair_weights: np.ndarray | None = None,
) -> np.ndarray:
    """One mean-zero leaderboard (M,) for the prompt set behind ``coefs`` (n, M)."""
    coefs = np.atleast_2d(np.asarray(coefs, dtype=float))
    if coefs.shape[0] == 0:
        raise EvalprismError("cannot aggregate an empty set of prompts")
    if weights is not None and (np.any(np.asarray(weights) < 0) or np.sum(weights) <= 0):
        raise EvalprismError("prompt weights must be non-negative with a positive sum")
    if method == "mean":
        w = np.full(coefs.shape[0], 1.0) if weights is None else np.asarray(weights, dtype=float)
        avg = (w[:, None] * coefs).sum(axis=0) / w.sum()
        return avg - avg.mean()
    if method != "bt":
        raise EvalprismError(f"unknown aggregation '{method}': expected bt (eq. 3) or mean (appendix B.1)")
    m = coefs.shape[1]
    win = expected_win_matrix(coefs, weights)
    a, b = np.triu_indices(m, k=1)
    pw = np.ones(a.size) if pair_weights is None else np.asarray(pair_weights, dtype=float)[a, b]
    counts = np.zeros((a.size, 4))
    counts[:, 0] = pw * win[a, b]
    counts[:, 1] = pw * (1.0 - win[a, b])
    return fit_counts(PairCounts(a, b, counts, m), "bt").coefs


def aggregate_by_group(coefs: np.ndarray, groups: np.ndarray, method: Aggregation = "bt") -> dict[str, np.ndarray]:
    """Aggregated leaderboard per distinct value of ``groups`` (e.g. a category per prompt)."""
    groups = np.asarray(groups).astype(str)
    return {g: aggregate_leaderboards(coefs[groups == g], method=method) for g in sorted(set(groups))}
