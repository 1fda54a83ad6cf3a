"""Exact binomial kernels: the one-sided sign (McNemar) test and the Clopper-Pearson interval.

STEM's localization (seed 003) tests each side of a capability interval with the exact sign test on
the discordant items and reports per-level accuracy with exact intervals.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

__all__ = ["clopper_pearson", "sign_test_pvalues"]


def sign_test_pvalues(b: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact one-sided McNemar p-values: ``P(X >= b)`` (model better) and ``P(X <= b)`` (model
    worse), ``X ~ Binomial(b + c, 1/2)``; 1 when there is no discordant item."""
    total = b + c
    return stats.binom.sf(b - 1, total, 0.5), stats.binom.cdf(b, total, 0.5)


def clopper_pearson(k: np.ndarray, n: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Exact binomial interval of a proportion (NaN where n = 0)."""
    k, n = np.asarray(k, dtype=float), np.asarray(n, dtype=float)
    a = (1 - level) / 2
    with np.errstate(invalid="ignore", divide="ignore"):
        lo = np.where(k > 0, stats.beta.ppf(a, k, n - k + 1), 0.0)
        hi = np.where(k < n, stats.beta.ppf(1 - a, k + 1, n - k), 1.0)
    empty = n == 0
    return np.where(empty, np.nan, lo), np.where(empty, np.nan, hi)
