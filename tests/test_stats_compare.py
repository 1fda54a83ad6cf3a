"""Known answers for the comparison kernels (evalprism.stats.compare_tests)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalprism.stats.compare_tests import (
    adjust_pvalues,
    items_needed,
    mcnemar_exact,
    minimum_detectable_effect,
    ols_cluster_robust,
    paired_difference,
    sign_flip_test,
    sign_flip_tests,
    variance_components,
)


def _textbook_cr1(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The CR1 sandwich written out cluster by cluster (independent of the kernel's vectorisation)."""
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    u = y - X @ beta
    n, k = X.shape
    labels = sorted(set(groups.tolist()))
    meat = np.zeros((k, k))
    for g in labels:
        sel = groups == g
        s = X[sel].T @ u[sel]
        meat += np.outer(s, s)
    bread = np.linalg.pinv(X.T @ X)
    G = len(labels)
    return beta, G / (G - 1) * (n - 1) / (n - k) * bread @ meat @ bread


def _clustered_design(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A random regression design with a cluster effect (the designs the statsmodels numbers were taken on)."""
    rng = np.random.default_rng(seed)
    n, k, G = 300 + 50 * seed, 2 + seed, 20 + 7 * seed
    X = np.column_stack([np.ones(n), rng.normal(size=(n, k - 1))])
    groups = rng.integers(0, G, n)
    y = X @ rng.normal(size=k) + rng.normal(size=G)[groups] + rng.normal(size=n)
    return X, y, groups


@pytest.mark.parametrize("seed", range(5))
def test_cr1_equals_textbook_sandwich(seed: int) -> None:
    X, y, groups = _clustered_design(seed)
    beta, cov = ols_cluster_robust(X, y, groups)
    beta_ref, cov_ref = _textbook_cr1(X, y, groups)
    np.testing.assert_allclose(beta, beta_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-10, atol=1e-12)


#: statsmodels 0.15.0 in a side venv (/work/side-sm; not a dependency), on the designs of
#: test_cr1_equals_textbook_sandwich and one more:
#: sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": groups}).bse
STATSMODELS_BSE = {
    0: [0.21484832426163034, 0.07745327349707275],
    1: [0.21989829134497949, 0.078254278726247, 0.06802542679311928],
    2: [0.22902003307634214, 0.05973969738774982, 0.07551454494889147, 0.08806330728946521],
    3: [0.1403702982356087, 0.06238629480342581, 0.07601195972711743, 0.06901543021887385, 0.06474032071481026],
    4: [
        0.13916367735267324,
        0.0684336355764928,
        0.06953117534391566,
        0.0559513886850789,
        0.05819564942796066,
        0.06813254797189569,
    ],
}


@pytest.mark.parametrize("seed", range(5))
def test_cr1_matches_statsmodels_recorded(seed: int) -> None:
    X, y, groups = _clustered_design(seed)
    _, cov = ols_cluster_robust(X, y, groups)
    np.testing.assert_allclose(np.sqrt(np.diag(cov)), STATSMODELS_BSE[seed], rtol=1e-10)


def test_paired_difference_closed_form_equals_intercept_regression() -> None:
    rng = np.random.default_rng(3)
    d = rng.normal(0.1, 1, 400)
    g = rng.integers(0, 30, 400)
    res = paired_difference(d, g)
    beta, cov = ols_cluster_robust(np.ones((400, 1)), d, g)
    assert res.mean == pytest.approx(beta[0], abs=1e-12)
    assert res.se == pytest.approx(np.sqrt(cov[0, 0]), rel=1e-10)
    assert res.clusters == 30 and res.df == 29
    naive = paired_difference(d)
    assert naive.se == pytest.approx(d.std(ddof=1) / 20, rel=1e-12)
    half = stats.t.ppf(0.975, 399) * naive.se
    assert naive.low == pytest.approx(d.mean() - half) and naive.high == pytest.approx(d.mean() + half)


def test_clustered_intervals_cover_where_naive_do_not() -> None:
    """60 clusters of 10 items with a shared cluster effect (intra-cluster correlation 0.5): CR1
    intervals cover the true difference ~95%, naive ones far less."""
    rng = np.random.default_rng(11)
    reps, G, m, true = 1000, 60, 10, 0.03
    groups = np.repeat(np.arange(G), m)
    cover_cr, cover_naive = 0, 0
    for _ in range(reps):
        d = true + rng.normal(0, 0.1, G)[groups] + rng.normal(0, 0.1, G * m)
        c = paired_difference(d, groups)
        nv = paired_difference(d)
        cover_cr += c.low <= true <= c.high
        cover_naive += nv.low <= true <= nv.high
    assert 0.93 <= cover_cr / reps <= 0.97
    assert cover_naive / reps < 0.85


def test_mcnemar_equals_scipy_binomtest() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(5, 300))
        a = rng.random(n) < rng.random()
        b = rng.random(n) < rng.random()
        only_a, only_b, p = mcnemar_exact(a, b)
        assert only_a == int((a & ~b).sum()) and only_b == int((~a & b).sum())
        expected = stats.binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
        assert p == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_sign_flip_pvalues_uniform_under_null() -> None:
    rng = np.random.default_rng(0)
    ps = []
    for k in range(200):
        d = rng.normal(0, 1, 150) * rng.choice([1, -1], 150) * rng.exponential(1, 150)  # symmetric, heavy-ish tails
        ps.append(sign_flip_test(d, permutations=999, seed=k))
    assert stats.kstest(ps, "uniform").pvalue > 0.01


def test_sign_flip_detects_two_points_on_1000_items() -> None:
    """A true 2-point (0.02) mean difference, per-item difference SD 0.15: power >= 0.9 at 5%,
    as the MDE predicts (0.02 > MDE = 2.80 * 0.15 / sqrt(1000) = 0.0133)."""
    rng = np.random.default_rng(1)
    hits = 0
    reps = 100
    for k in range(reps):
        d = 0.02 + rng.normal(0, 0.15, 1000)
        hits += sign_flip_test(d, permutations=999, seed=k) < 0.05
    assert hits / reps >= 0.9
    assert minimum_detectable_effect(0.15 / np.sqrt(1000)) < 0.02


def test_sign_flip_exact_small_case_and_clusters() -> None:
    # 3 positive differences of 1: the two-sided exact p is 2/8; with many permutations close to it
    assert sign_flip_test(np.array([1.0, 1.0, 1.0]), permutations=100_000, seed=0) == pytest.approx(0.25, abs=0.006)
    assert sign_flip_test(np.zeros(10)) == 1.0
    # clustered: the 4 items of one cluster flip together -> the two clusters (sums 4 and 4): p = 1/2
    d = np.ones(8)
    p = sign_flip_test(d, permutations=100_000, seed=1, clusters=np.repeat([0, 1], 4))
    assert p == pytest.approx(0.5, abs=0.008)


def test_adjust_bh_and_holm() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.2, np.nan])
    bh = adjust_pvalues(p, "bh")
    # sorted 0.01, 0.03, 0.04, 0.2 -> 4p/rank = 0.04, 0.06, 0.0533, 0.2 -> running minimum from the top
    np.testing.assert_allclose(bh[:4], [0.04, 0.16 / 3, 0.16 / 3, 0.2])
    assert np.isnan(bh[4])
    holm = adjust_pvalues(p, "holm")
    # (m - rank + 1) p = 0.04, 0.09, 0.08, 0.2 -> running maximum
    np.testing.assert_allclose(holm[:4], [0.04, 0.09, 0.09, 0.2])


def test_mde_and_items_needed() -> None:
    assert minimum_detectable_effect(1.0) == pytest.approx(1.959964 + 0.841621, rel=1e-6)
    # n items for effect e: ((z_a + z_b) sd / e)^2, and the MDE for that n is <= e
    n = items_needed(0.05, 0.3)
    assert n == int(np.ceil((2.801585 * 0.3 / 0.05) ** 2))
    assert minimum_detectable_effect(0.3 / np.sqrt(n)) <= 0.05 + 1e-12
    assert items_needed(0.05, 0.3, design_effect=2.0) == pytest.approx(2 * n, abs=1)


def test_variance_components_separate_within_from_between() -> None:
    """Items differ by N(0, 0.2^2) (between); 20 samples per item per side with noise SD 0.5: the
    within part of the item-mean variance is 2 * 0.25 / 20 = 0.025, the between part 0.04."""
    rng = np.random.default_rng(4)
    items, k = 2000, 20
    effect = rng.normal(0, 0.2, items)
    a = [e + rng.normal(0, 0.5, k) for e in effect]
    b = [rng.normal(0, 0.5, k) for _ in effect]
    d = np.array([x.mean() - y.mean() for x, y in zip(a, b, strict=True)])
    var_a, var_b = np.array([x.var(ddof=1) for x in a]), np.array([y.var(ddof=1) for y in b])
    total, within, between = variance_components(d, var_a, np.full(items, k), var_b, np.full(items, k))
    assert within == pytest.approx(0.025, rel=0.05)
    assert between == pytest.approx(0.04, rel=0.12)
    assert total == pytest.approx(within + between)


def test_batched_sign_flips_share_signs_and_stay_uniform() -> None:
    """Sets of equal length get the very p-value of their own test with the same seed; sets of
    different lengths (zero-padded) are each uniform under the null."""
    rng = np.random.default_rng(8)
    d1, d2 = rng.normal(0, 1, 300), rng.normal(0.1, 1, 300)
    batch = sign_flip_tests([d1, d2], permutations=999, seed=4)
    assert batch[0] == sign_flip_test(d1, 999, 4) and batch[1] == sign_flip_test(d2, 999, 4)
    nulls = [rng.normal(0, 1, int(n)) for n in rng.integers(20, 400, 200)]
    ps = sign_flip_tests(nulls, permutations=999, seed=5)
    assert stats.kstest(ps, "uniform").pvalue > 0.01
    assert sign_flip_tests([np.zeros(5), np.array([1.0, 1.0])], 999, 0)[0] == 1.0
