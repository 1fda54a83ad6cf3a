"""Section 3 of issue 18: K by clustering stability recovers planted structure."""

from __future__ import annotations

import numpy as np
import pytest

from evalprism.stats import w1_matrix
from evalprism.stats.stability import choose_k_by_stability, stable_ks


def planted(k_star: int, n: int, seed: int) -> list[np.ndarray]:
    """``k_star`` families of ECDFs (normal locations 0.05..0.95, sd 0.025) with noise: each setting's
    location jitters (sd 0.01) and its sample has 5..20 values."""
    rng = np.random.default_rng(seed)
    means = np.linspace(0.05, 0.95, k_star)
    return [
        np.clip(rng.normal(means[c] + rng.normal(0, 0.01), 0.025, rng.integers(5, 21)), 0, 1)
        for c in rng.integers(0, k_star, n)
    ]


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_planted_k_is_recovered_in_nine_of_ten_seeds() -> None:
    for k_star in (4, 8, 12):
        found = []
        for seed in range(10):
            dist = w1_matrix(planted(k_star, 180, seed))
            found.append(choose_k_by_stability(dist, np.arange(180) // 3, range(2, 15), seed=seed, resamples=4)[0])
        assert sum(k == k_star for k in found) >= 9, (k_star, found)


def test_the_stable_ks_are_those_within_the_tolerance() -> None:
    curve = [(2, 0.99, 0.0), (3, 0.7, 0.1), (4, 0.998, 0.0), (5, 1.0, 0.0)]
    assert stable_ks(curve, tolerance=0.005) == [4, 5]
    assert stable_ks(curve, tolerance=0.02) == [2, 4, 5]
