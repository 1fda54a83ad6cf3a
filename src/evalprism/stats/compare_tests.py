"""Kernels for comparing two runs on the same items: is B better than A, by how much, can we tell?

Pure numpy/scipy, shapes asserted only (the checks users see live in :mod:`evalprism.compare`).

- :func:`ols_cluster_robust`: OLS coefficients with the CR1 cluster-robust covariance (the sandwich
  with the small-sample factor ``G/(G-1) * (N-1)/(N-K)``, statsmodels' ``cov_type="cluster"``);
  Miller (2024, "Adding error bars to evals", arXiv 2411.00640) recommends it whenever items come in
  groups (passages, templates, several questions per source), where naive errors can be 3x too small.
- :func:`paired_difference`: the mean of per-item differences with its standard error and interval,
  naive (t with n-1 degrees of freedom) or clustered (CR1 of the intercept-only regression, t with
  G-1 degrees of freedom, as statsmodels does).
- :func:`variance_components`: with several samples per item, the variance of the per-item mean
  difference split into its within-item part (sampling noise that more samples would shrink) and
  its between-item part (what more items would shrink).
- :func:`sign_flip_test`: the paired permutation test: under the null each item's (or each
  cluster's) difference is as likely to have either sign; p = (1 + #{|T*| >= |T|}) / (1 + B).
- :func:`mcnemar_exact` (from :mod:`evalprism.stats.paired`): the exact test for 0/1 scores;
  :func:`sign_test_floor` / :func:`sign_flip_floor`: the smallest p either test can reach on so many
  differing items (at or above the level, the test cannot tell).
- :func:`adjust_pvalues`: Benjamini-Hochberg (scipy's ``false_discovery_control``) or Holm.
- :func:`minimum_detectable_effect` / :func:`items_needed`: the smallest true difference a
  two-sided 5% test finds with 80% power, for a standard error or for n items and a paired SD.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import stats

from evalprism.stats.paired import mcnemar_exact, sign_flip_floor, sign_test_floor

__all__ = [
    "PairedDifference",
    "adjust_pvalues",
    "items_needed",
    "mcnemar_exact",
    "minimum_detectable_effect",
    "ols_cluster_robust",
    "paired_difference",
    "sign_flip_floor",
    "sign_flip_test",
    "sign_flip_tests",
    "sign_test_floor",
    "variance_components",
]

_BLOCK_ELEMENTS = 8_000_000  # permutations x units per block: >= 64 draws per matrix product keeps BLAS efficient


def _group_codes(groups: np.ndarray) -> np.ndarray:
    return np.unique(np.asarray(groups), return_inverse=True)[1].ravel()


def ols_cluster_robust(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """OLS coefficients of ``y`` on ``X`` (n x k) and their CR1 cluster-robust covariance (k x k):
    ``c (X'X)^-1 [sum_g X_g' u_g u_g' X_g] (X'X)^-1`` with ``c = G/(G-1) * (N-1)/(N-K)``."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    assert X.ndim == 2 and y.shape == (X.shape[0],) and len(groups) == X.shape[0]
    n, k = X.shape
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = y - X @ beta
    codes = _group_codes(groups)
    g = int(codes.max()) + 1
    scores = np.zeros((g, k))
    np.add.at(scores, codes, X * resid[:, None])
    bread = np.linalg.inv(X.T @ X)
    meat = scores.T @ scores
    factor = g / (g - 1) * (n - 1) / (n - k)
    return beta, factor * bread @ meat @ bread


@dataclass(frozen=True)
class PairedDifference:
    """Mean difference, its standard error and interval; ``clusters`` = number of clusters (n when
    unclustered) and ``df`` the t degrees of freedom the interval uses."""

    mean: float
    se: float
    low: float
    high: float
    n: int
    clusters: int
    df: int
    sd: float


def paired_difference(d: np.ndarray, clusters: np.ndarray | None = None, level: float = 0.95) -> PairedDifference:
    """The mean of the per-item differences ``d`` with a paired standard error (naive, or CR1 by
    ``clusters``) and a t interval at ``level``. Closed form of :func:`ols_cluster_robust` with an
    intercept only: ``se^2 = G/(G-1) * sum_g (sum_{i in g} (d_i - mean))^2 / n^2``."""
    d = np.asarray(d, dtype=np.float64)
    assert d.ndim == 1
    n = d.size
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else float("nan")
    if clusters is None:
        g = n
        se = sd / np.sqrt(n) if n > 1 else float("nan")
    else:
        codes = _group_codes(clusters)
        assert codes.size == n
        g = int(codes.max()) + 1 if n else 0
        sums = np.bincount(codes, weights=d - mean, minlength=g)
        se = float(np.sqrt(g / (g - 1) * (sums**2).sum()) / n) if g > 1 else float("nan")
    df = g - 1
    if df >= 1 and np.isfinite(se):
        half = t_quantile(0.5 + level / 2, df) * se
    else:
        half = float("nan")
    return PairedDifference(mean, float(se), mean - half, mean + half, n, g, df, sd)


def variance_components(
    d: np.ndarray, var_a: np.ndarray, k_a: np.ndarray, var_b: np.ndarray, k_b: np.ndarray
) -> tuple[float, float, float]:
    """Several scores per item under A and B: ``d`` the per-item mean differences, ``var_*`` the
    per-item sample variances (ddof 1; ignored where ``k_* == 1``) over ``k_*`` samples. Returns the
    variance of ``d`` over items (total), its within-item part ``mean_i(s2_Ai/k_Ai + s2_Bi/k_Bi)``
    (the sampling noise more samples per item would shrink) and the between-item part
    ``max(total - within, 0)`` (what only more items shrink)."""
    d = np.asarray(d, dtype=np.float64)
    assert d.ndim == 1 and d.size > 1

    def part(v: np.ndarray, k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        return np.where(k > 1, np.nan_to_num(np.asarray(v, dtype=np.float64)) / np.maximum(k, 1), 0.0)

    total = float(d.var(ddof=1))
    within = float(np.mean(part(var_a, k_a) + part(var_b, k_b)))
    return total, within, max(total - within, 0.0)


def sign_flip_test(d: np.ndarray, permutations: int = 9999, seed: int = 0, clusters: np.ndarray | None = None) -> float:
    """Two-sided paired permutation p-value of ``sum(d)``: each item's difference (or each
    cluster's sum, with ``clusters``) keeps its size and gets a random sign. Exact-size valid:
    ``p = (1 + #{|T*| >= |T|}) / (1 + permutations)``; 1 when every difference is 0."""
    d = np.asarray(d, dtype=np.float64)
    assert d.ndim == 1 and permutations >= 1
    if clusters is not None:
        d = np.bincount(_group_codes(clusters), weights=d)
    return float(sign_flip_tests([d], permutations, seed)[0])


#: the most differing units whose sign patterns are all enumerated (2**16 patterns)
EXACT_SIGN_FLIP_UNITS = 16


def sign_flip_exact(d: np.ndarray) -> float:
    """The exact two-sided sign-flip p-value of ``sum(d)``: the share of all 2**k sign patterns of the
    k non-zero units whose |sum| reaches the observed one (the observed pattern and its mirror among
    them, so p >= 2 / 2**k, the floor of :func:`sign_flip_floor`). A Monte Carlo p from fewer draws than
    there are patterns can fall below that floor (1 / (1 + B) < 2 / 2**k); this cannot."""
    d = np.asarray(d, dtype=np.float64)
    d = d[d != 0]
    k = d.size
    assert k <= EXACT_SIGN_FLIP_UNITS
    if k == 0:
        return 1.0
    patterns = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(np.float64)
    sums = 2.0 * (patterns @ d) - d.sum()
    tol = 1e-9 * np.abs(d).sum()
    return float((np.abs(sums) >= abs(d.sum()) - tol).mean())


def sign_flip_tests(columns: list[np.ndarray], permutations: int = 9999, seed: int = 0) -> np.ndarray:
    """:func:`sign_flip_test` for several sets of unit differences at once (one per pair, units =
    items or cluster sums), sharing one matrix of random signs: unit j of every set gets sign j of
    each draw. The signs are i.i.d. fair, so each set's p-value has exactly the distribution of its
    own test; zero differences change no sum, so shorter sets are padded with zeros. One matrix
    product per block serves every pair, which is what makes 50 pairs x 100,000 items x 10,000
    permutations affordable (random bits come 8 to a byte)."""
    assert permutations >= 1
    kept = [np.asarray(c, dtype=np.float64) for c in columns]
    kept = [c[c != 0] for c in kept]
    width = max((c.size for c in kept), default=0)
    out = np.ones(len(kept))
    live = [k for k, c in enumerate(kept) if c.size]
    if not live:
        return out
    D = np.zeros((width, len(live)))
    for j, k in enumerate(live):
        D[: kept[k].size, j] = kept[k]
    total = D.sum(axis=0)
    observed = np.abs(total)
    tol = 1e-9 * np.maximum(np.abs(D).sum(axis=0), 1e-300)
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_ELEMENTS // width)
    exceed = np.zeros(len(live), dtype=np.int64)
    nbytes = (width + 7) // 8
    for start in range(0, permutations, block):
        size = min(block, permutations - start)
        bits = np.unpackbits(rng.integers(0, 256, size=(size, nbytes), dtype=np.uint8), axis=1, count=width)
        stats_ = 2.0 * (bits.astype(np.float64) @ D) - total  # sum of +-d: 2 * (sum where +) - sum
        exceed += (np.abs(stats_) >= observed - tol).sum(axis=0)
    out[live] = (1 + exceed) / (1 + permutations)
    return out


def adjust_pvalues(p: np.ndarray, method: str = "bh") -> np.ndarray:
    """Multiplicity-adjusted p-values: ``bh`` (Benjamini-Hochberg, false discovery rate) or
    ``holm`` (family-wise error). NaN entries stay NaN and do not count as tests."""
    p = np.asarray(p, dtype=np.float64)
    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if not ok.any():
        return out
    q = p[ok]
    if method == "bh":
        out[ok] = stats.false_discovery_control(q, method="bh")
    elif method == "holm":
        m = q.size
        order = np.argsort(q, kind="stable")
        stepped = np.maximum.accumulate((m - np.arange(m)) * q[order])
        adj = np.empty(m)
        adj[order] = np.minimum(stepped, 1.0)
        out[ok] = adj
    else:
        raise AssertionError(method)
    return out


@functools.lru_cache(maxsize=1024)
def _z_sum(alpha: float, power: float) -> float:
    return float(stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power))


@functools.lru_cache(maxsize=4096)
def t_quantile(q: float, df: int) -> float:
    """Student's t quantile, cached: every pair of runs on the same items asks for the same one, and
    scipy's ``ppf`` costs about a millisecond a call (hundreds of pairs, several scopes each)."""
    return float(stats.t.ppf(q, df))


def minimum_detectable_effect(se: float | np.ndarray, alpha: float = 0.05, power: float = 0.8) -> np.ndarray | float:
    """The true difference a two-sided level-``alpha`` test detects with probability ``power``
    given the standard error of the difference: ``(z_{1-alpha/2} + z_power) * se`` (2.80 se at
    5% / 80%). For n items and a paired SD pass ``sd / sqrt(n)``."""
    return _z_sum(alpha, power) * np.asarray(se, dtype=np.float64)


def items_needed(effect: float, sd: float, alpha: float = 0.05, power: float = 0.8, design_effect: float = 1.0) -> int:
    """Items needed to detect ``effect`` with ``power`` when the per-item difference has standard
    deviation ``sd``; ``design_effect`` (clustered variance / naive variance) inflates it."""
    assert effect != 0 and sd >= 0
    return int(np.ceil(design_effect * (_z_sum(alpha, power) * sd / abs(effect)) ** 2))
