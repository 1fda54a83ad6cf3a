"""The exact W1 matrix against scipy's wasserstein_distance, the seed's eq. (5) and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from evalprism.errors import EvalprismError
from evalprism.stats import ecdf_wins, w1_distance, w1_matrix


def eq5(u: np.ndarray, v: np.ndarray) -> float:
    """Seed 001 eq. (5), transcribed: sum over the merged support of |F_u - F_v| times the gap."""
    grid = np.unique(np.concatenate([u, v]))
    fu = np.searchsorted(np.sort(u), grid, side="right") / u.size
    fv = np.searchsorted(np.sort(v), grid, side="right") / v.size
    return float(np.sum(np.abs(fu - fv)[:-1] * np.diff(grid)))


def random_samples(rng: np.random.Generator, n: int, max_size: int) -> list[np.ndarray]:
    return [rng.normal(rng.uniform(-1, 1), rng.uniform(0.1, 1), rng.integers(1, max_size + 1)) for _ in range(n)]


@pytest.mark.parametrize("max_size", [1, 10, 37, 150])
def test_matches_scipy_on_unequal_sizes(max_size: int) -> None:
    rng = np.random.default_rng(max_size)
    samples = random_samples(rng, 80, max_size)
    got = w1_matrix(samples)
    want = np.array([[wasserstein_distance(a, b) for b in samples] for a in samples])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_ties_and_discrete_values_match_scipy() -> None:
    rng = np.random.default_rng(1)
    samples = [rng.choice([0.0, 0.5, 1.0], size=rng.integers(1, 11)) for _ in range(60)]
    got = w1_matrix(samples)
    want = np.array([[wasserstein_distance(a, b) for b in samples] for a in samples])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_matches_seed_equation_5() -> None:
    rng = np.random.default_rng(2)
    samples = random_samples(rng, 30, 12)
    got = w1_matrix(samples)
    for i in range(30):
        for j in range(30):
            assert got[i, j] == pytest.approx(eq5(samples[i], samples[j]), abs=1e-12)


def test_closed_forms() -> None:
    # point masses: distance is the gap; a shift moves every quantile by the same amount
    assert w1_distance(np.array([0.2]), np.array([0.7])) == pytest.approx(0.5)
    x = np.array([0.1, 0.4, 0.9])
    assert w1_distance(x, x + 0.25) == pytest.approx(0.25)
    # {0, 1} vs {0.5}: each half of the mass moves 0.5
    assert w1_distance(np.array([0.0, 1.0]), np.array([0.5])) == pytest.approx(0.5)
    # duplicating a sample does not change its ECDF
    assert w1_distance(x, np.repeat(x, 4)) == pytest.approx(0.0, abs=1e-15)


def test_matrix_properties_and_float32() -> None:
    rng = np.random.default_rng(3)
    samples = random_samples(rng, 50, 10)
    d64 = w1_matrix(samples)
    assert np.array_equal(d64, d64.T)
    assert np.all(np.diag(d64) == 0)
    d32 = w1_matrix(samples, dtype=np.float32, n_jobs=1)
    assert d32.dtype == np.float32
    np.testing.assert_allclose(d32, d64, rtol=1e-6, atol=1e-6)


def test_bad_samples_are_refused() -> None:
    with pytest.raises(EvalprismError, match="ECDF 1 has no samples"):
        w1_matrix([np.array([1.0]), np.array([])])
    with pytest.raises(EvalprismError, match="non-finite"):
        w1_matrix([np.array([1.0]), np.array([np.nan])])


def test_wins_follow_eq7_on_hand_made_ecdfs() -> None:
    # a dominates b dominates c (a's ECDF lies below): a beats both, b beats c, c beats none
    a, b, c = np.array([0.9, 1.0]), np.array([0.5, 0.6, 0.7]), np.array([0.1])
    win, wins = ecdf_wins([c, a, b])
    assert wins.tolist() == [0, 2, 1]
    assert win.tolist() == [[0, 0, 0], [1, 0, 1], [1, 0, 0]]
    # crossing ECDFs: the sign of the integral of F_i - F_j decides, not pointwise order
    d, e = np.array([0.0, 1.0]), np.array([0.45, 0.45])
    _, wins = ecdf_wins([d, e])
    assert wins.tolist() == [1, 0]
