"""Paired comparison of two configurations answered on the same questions (issue 18, section 2).

Each question contributes one sample of response scores per configuration. Three kernels:

- :func:`paired_w1_test`: the mean over questions of the exact L1 distance between the two ECDFs
  (seed 001, eq. 4-5), and its permutation p-value under the null that, within each question, the
  responses of the two configurations are exchangeable: the configuration labels are permuted
  within every question independently, the design (which question, how many responses each)
  stays fixed. p = (1 + #{T_perm >= T}) / (1 + permutations), so 999 permutations resolve 0.001;
  sequential (Besag-Clifford): a clearly non-significant pair stops after 20 exceedances.
- :func:`mcnemar_exact`: the exact two-sided sign (McNemar) test on per-question correctness.
- :func:`sign_test_floor`, :func:`sign_flip_floor`: the smallest p-value those tests can reach on a
  given number of differing questions; at or above the level the test cannot tell, and a report says
  so instead of "not significant".
- :func:`bootstrap_mean_ci`: percentile intervals of per-question means, resampling questions.

Why the permutation statistic needs no sorting per permutation: with the pooled values of one
question sorted once, x_(1) <= ... <= x_(N), both ECDFs are constant between neighbours, so

    W1 = sum_i (x_(i+1) - x_(i)) * | A_i / n_a - (i - A_i) / n_b |,   A_i = #A labels among the first i,

a cumulative sum over a relabelling. Questions of different sizes are padded with zero gaps.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from evalprism.stats.binomial import sign_test_pvalues

_BLOCK_ELEMENTS = 4_000_000  # permutations x questions x responses per vectorised block


def _pooled(a: Sequence[np.ndarray], b: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per question the gaps between the sorted pooled values (zero-padded), the observed labels in
    that order (True = first configuration), and the two sample sizes."""
    n_a = np.array([len(s) for s in a])
    n_b = np.array([len(s) for s in b])
    width = int((n_a + n_b).max())
    gaps = np.zeros((len(a), width - 1))
    labels = np.zeros((len(a), width), dtype=bool)
    for q, (x, y) in enumerate(zip(a, b, strict=True)):
        values = np.concatenate([np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)])
        order = np.argsort(values, kind="stable")
        n = values.size
        gaps[q, : n - 1] = np.diff(values[order])
        labels[q, :n] = order < len(x)
    return gaps, labels, n_a, n_b


def _w1_of_labels(gaps: np.ndarray, labels: np.ndarray, n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Eq. (5) per question from labels in pooled order; ``labels`` may carry leading batch axes."""
    cum_a = np.cumsum(labels[..., :-1], axis=-1)
    seen = np.arange(1, labels.shape[-1])
    diff = np.abs(cum_a / n_a[:, None] - (seen - cum_a) / n_b[:, None])
    return (gaps * diff).sum(axis=-1)


def _mean_w1_of_labels(gaps: np.ndarray, labels: np.ndarray, n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """The mean over questions of eq. (5) for a block of relabellings (permutations x questions x
    width): |A_i (1/n_a + 1/n_b) - i/n_b| in place, then one matrix-vector product with the gaps."""
    size, q, width = labels.shape
    cum = np.cumsum(labels[..., :-1], axis=-1, dtype=np.int16 if width < 32_000 else np.int32)
    diff = cum.astype(np.float64)
    diff *= (1 / n_a + 1 / n_b)[:, None]
    diff -= np.arange(1, width)[None, :] / n_b[:, None]
    np.abs(diff, out=diff)
    return diff.reshape(size, -1) @ gaps.ravel() / q


def _relabel(rng: np.random.Generator, size: int, n_a: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``size`` uniformly random relabellings per question, independent across questions: the n_a
    smallest of random keys are A's; with the same design on every question, a shuffle of one label row."""
    q, width = valid.shape
    if valid.all() and (n_a == n_a[0]).all():
        template = np.zeros(width, dtype=np.int8)
        template[: n_a[0]] = 1
        labels = np.broadcast_to(template, (size, q, width)).copy()
        rng.permuted(labels, axis=-1, out=labels)
        return labels
    keys = rng.random((size, q, width))
    keys[:, ~valid] = np.inf
    kth = np.take_along_axis(np.sort(keys, axis=-1), np.broadcast_to((n_a - 1)[None, :, None], (size, q, 1)), axis=-1)
    return (keys <= kth).astype(np.int8)


#: Besag-Clifford: stop permuting once this many permutation statistics reached the observed one
SEQUENTIAL_EXCEEDANCES = 20
FIRST_BLOCK = 40  # permutations in the first block; blocks then double
#: clearly significant: after this many permutations with none reaching the observed mean W1, on at
#: least this many questions, stop when the observed lies more than NORMAL_STOP_Z null standard
#: deviations above the null mean (the mean over many independent questions is close to normal, so
#: the chance that any of the remaining permutations would reach it is below B * 1e-15)
NORMAL_STOP_AFTER = 100
NORMAL_STOP_QUESTIONS = 50
NORMAL_STOP_Z = 8.0


def paired_w1_test(
    a: Sequence[np.ndarray], b: Sequence[np.ndarray], permutations: int = 999, seed: int = 0
) -> tuple[np.ndarray, float]:
    """Per-question W1 between the ECDFs of ``a[q]`` and ``b[q]``, and the permutation p-value of
    their mean (labels exchanged within questions; see the module docstring).

    Sequential (Besag & Clifford 1991): permutations are drawn in blocks and the test stops as soon as
    h = min(20, permutations) permutation statistics reached the observed one; then p = h / m with
    m the permutations drawn, else (after all B = ``permutations``) p = (1 + exceedances) / (1 + B).
    Accuracy: when the test runs to the end p is the usual Monte-Carlo p-value (valid, resolves
    1 / (B + 1)); when it stops early p >= h / B and p is a valid p-value too (P(p <= alpha) <= alpha
    under the null), with relative standard error about 1 / sqrt(h) = 22% (0.05 is reported as
    0.05 +- 0.011). Only pairs that are clearly not significant stop early (h exceedances in m draws
    means p near h / m > h / B), so every p below 20 / B is exactly the full test's p, and the
    decision at any alpha <= h / B (0.02 at B = 999) is the full test's.

    Clearly significant pairs stop early too: when none of the first 100 or more permutations reached
    the observed statistic, on 50 or more questions, and the observed lies more than 8 standard
    deviations (estimated from those permutations) above their mean, p = 1 / (B + 1), what the full
    test would report unless a later permutation reached a value 8 SDs out (probability below
    B * 1e-15 under the normal approximation of a mean over >= 50 independent questions; with the SD
    estimated from 100 draws, 8 estimated SDs are at least 6.5 true ones with probability > 0.999)."""
    assert len(a) == len(b) and len(a) > 0
    gaps, labels, n_a, n_b = _pooled(a, b)
    observed = _w1_of_labels(gaps, labels, n_a, n_b)
    stat = float(_mean_w1_of_labels(gaps, labels[None].astype(np.int8), n_a, n_b)[0])
    if permutations <= 0:
        return observed, 1.0
    q, width = labels.shape
    valid = np.arange(width)[None, :] < (n_a + n_b)[:, None]
    rng = np.random.default_rng(seed)
    h = min(SEQUENTIAL_EXCEEDANCES, permutations)
    exceed = drawn = 0
    null_sum = null_sq = 0.0
    cap = max(1, _BLOCK_ELEMENTS // (q * width))
    tol = 1e-12 * max(abs(stat), 1e-300)
    size = min(cap, FIRST_BLOCK)  # the block schedule (hence the draws) does not depend on h
    while drawn < permutations:
        size = min(size, permutations - drawn)
        stats = _mean_w1_of_labels(gaps, _relabel(rng, size, n_a, valid), n_a, n_b)
        hits = np.flatnonzero(stats >= stat - tol)
        if exceed + hits.size >= h:  # stop at the permutation that gave the h-th exceedance
            return observed, h / (drawn + int(hits[h - exceed - 1]) + 1)
        exceed += hits.size
        drawn += size
        null_sum += float(stats.sum())
        null_sq += float((stats**2).sum())
        if exceed == 0 and drawn >= NORMAL_STOP_AFTER and q >= NORMAL_STOP_QUESTIONS:
            mean = null_sum / drawn
            sd = np.sqrt(max(null_sq / drawn - mean**2, 0.0))
            if sd > 0 and (stat - mean) / sd > NORMAL_STOP_Z:
                return observed, 1 / (1 + permutations)
        size = min(cap, 2 * size)
    return observed, (1 + exceed) / (1 + permutations)


def mcnemar_exact(correct_a: np.ndarray, correct_b: np.ndarray) -> tuple[int, int, float]:
    """Questions right only under A, right only under B, and the exact two-sided sign-test p-value
    on those discordant questions (1 when there are none)."""
    a = np.asarray(correct_a, dtype=bool)
    b = np.asarray(correct_b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    upper, lower = sign_test_pvalues(np.array(only_a), np.array(only_b))
    return only_a, only_b, float(min(1.0, 2 * min(float(upper), float(lower))))


def sign_test_floor(differing: int) -> float:
    """The smallest two-sided p-value the exact sign (McNemar) test can give on ``differing``
    discordant questions: every one of them on the same side, ``2 * 0.5**k`` (1 with none). At or
    above the test level the test cannot tell, whatever the data: 4 discordant questions never give
    p < 0.05 (the floor is 0.125)."""
    return 1.0 if differing <= 0 else float(min(1.0, 2.0 * 0.5**differing))


def sign_flip_floor(nonzero: int, permutations: int) -> float:
    """The smallest p-value a sign-flip test on ``nonzero`` non-zero unit differences can give: of
    the ``2**k`` sign patterns, the observed one and its mirror are always as extreme, so the exact
    p is at least ``2 / 2**k``; a Monte Carlo test with ``permutations`` draws also cannot go below
    ``1 / (1 + permutations)``."""
    if nonzero <= 0:
        return 1.0
    return float(max(min(1.0, 2.0 * 0.5**nonzero), 1.0 / (1.0 + permutations)))


@lru_cache(maxsize=1)
def _bootstrap_counts(q: int, resamples: int, seed: int) -> np.ndarray:
    """How often each of ``q`` questions is drawn in each resample (resamples x q, float64 for the
    matrix product); drawn once and shared by every call with the same design and seed (the pairs of
    one comparison resample the same questions, and drawing them is most of the cost)."""
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(q, np.full(q, 1.0 / q), size=resamples).astype(np.float64)
    counts.flags.writeable = False
    return counts


def bootstrap_mean_ci(values: np.ndarray, resamples: int = 2000, level: float = 0.95, seed: int = 0) -> np.ndarray:
    """Percentile intervals of the column means of ``values`` (questions x statistics), resampling
    questions with replacement; returns (statistics, 2). All statistics share the resamples, so
    their intervals come from the same bootstrap questions."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    q = values.shape[0]
    means = _bootstrap_counts(q, resamples, seed) @ values / q
    alpha = (1 - level) / 2
    return np.quantile(means, [alpha, 1 - alpha], axis=0).T


def sign_flip_test(differences: np.ndarray, permutations: int = 999, seed: int = 0) -> float:
    """Two-sided paired permutation p-value of the mean of per-question ``differences`` (B - A):
    under the null each difference is as likely negative as positive, so random sign flips give the
    null distribution of the mean. p = (1 + #{|mean_perm| >= |mean|}) / (1 + permutations); 1 when
    every difference is 0."""
    d = np.asarray(differences, dtype=np.float64)
    stat = abs(d.mean())
    if stat == 0:
        return 1.0
    rng = np.random.default_rng(seed)
    tol = 1e-12 * stat
    exceed = 0
    block = max(1, _BLOCK_ELEMENTS // max(d.size, 1))
    for start in range(0, permutations, block):
        size = min(block, permutations - start)
        signs = rng.integers(0, 2, size=(size, d.size), dtype=np.int8) * 2 - 1
        exceed += int((np.abs(signs @ d) / d.size >= stat - tol).sum())
    return (1 + exceed) / (1 + permutations)


def paired_mean_se(differences: np.ndarray) -> tuple[float, float, float, float]:
    """The mean of per-question ``differences``, its standard error (sample SD / sqrt(n)) and the 95%
    t interval; SE and interval NaN with one question."""
    from scipy.stats import t as t_dist

    d = np.asarray(differences, dtype=np.float64)
    mean = float(d.mean())
    if d.size < 2:
        return mean, float("nan"), float("nan"), float("nan")
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    half = float(t_dist.ppf(0.975, d.size - 1)) * se
    return mean, se, mean - half, mean + half


def permutation_design(n_a: np.ndarray, n_b: np.ndarray) -> float:
    """log10 of the number of distinct within-question relabellings (product over questions of
    C(n_a + n_b, n_a)): the permutation test's p-value cannot go below 1 / that number."""
    from scipy.special import gammaln

    n_a, n_b = np.asarray(n_a, dtype=np.float64), np.asarray(n_b, dtype=np.float64)
    log_c = gammaln(n_a + n_b + 1) - gammaln(n_a + 1) - gammaln(n_b + 1)
    return float(log_c.sum() / np.log(10))
