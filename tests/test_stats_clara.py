"""Section 1 of issue 18: k-medoids of ECDFs without the n x n matrix (evalprism.stats.clara)."""

from __future__ import annotations

import tracemalloc

import kmedoids as kmedoids_pkg
import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import adjusted_rand_score

from evalprism.ecdf.options import EcdfOptions
from evalprism.stats import kmedoids, mds_order, w1_matrix
from evalprism.stats.clara import SortedEcdfs, clara_ecdfs, kmedoids_ecdfs


def planted(n: int, k: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """``k`` beta families (means 0.1..0.9, two concentrations), sample sizes 1..10."""
    rng = np.random.default_rng(seed)
    mu = np.repeat(np.linspace(0.1, 0.9, (k + 1) // 2), 2)[:k]
    kappa = np.tile([8.0, 80.0], k)[:k]
    labels = rng.integers(0, k, n)
    return [rng.beta(mu[c] * kappa[c], (1 - mu[c]) * kappa[c], rng.integers(1, 11)) for c in labels], labels


def test_distances_to_a_few_ecdfs_are_exact() -> None:
    samples, _ = planted(400, 4, seed=1)
    targets = np.array([3, 17, 250, 399])
    got = SortedEcdfs(samples).to(targets)
    assert got == pytest.approx(w1_matrix(samples)[:, targets], abs=1e-12)
    assert got[5, 1] == pytest.approx(stats.wasserstein_distance(samples[5], samples[17]), abs=1e-12)


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_clara_matches_full_fasterpam_without_the_matrix() -> None:
    n, k = 6_000, 6
    samples, truth = planted(n, k, seed=2)
    ecdfs = SortedEcdfs(samples)
    tracemalloc.start()
    result, to_medoids = clara_ecdfs(ecdfs, k, seed=0)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < n * n * 8 / 4  # the n x n matrix would be 288 MB; the samples' matrices are 32 MB
    full = w1_matrix(samples)
    oracle = kmedoids_pkg.fasterpam(full, k, init="random", random_state=0, n_cpu=1)
    assert result.loss <= oracle.loss * 1.01
    assert result.loss == pytest.approx(full[np.arange(n), result.medoids[result.labels]].sum())
    assert to_medoids == pytest.approx(full[:, result.medoids], abs=1e-12)
    # single-value ECDFs make the planted families overlap: as close to them as the full-matrix clustering
    assert adjusted_rand_score(truth, result.labels) >= adjusted_rand_score(truth, oracle.labels) - 0.02
    assert (result.labels[result.medoids] == np.arange(k)).all()


def test_below_the_threshold_the_full_matrix_path_runs() -> None:
    samples, _ = planted(300, 3, seed=3)
    result, to_medoids = kmedoids_ecdfs(samples, 3, seed=5)
    expected = kmedoids(w1_matrix(samples), 3, seed=5)
    assert result.medoids.tolist() == expected.medoids.tolist() and result.loss == pytest.approx(expected.loss)
    assert to_medoids.shape == (300, 3)


def test_many_rows_are_ordered_without_the_row_distance_matrix() -> None:
    rng = np.random.default_rng(4)
    t = rng.permutation(3_000) / 3_000  # 3,000 rows > MDS_EXACT_MAX: the classical path
    matrix = np.outer(t, [1.0, 2.0, -1.0, 0.5]) + rng.normal(0, 0.01, (3_000, 4))
    matrix[rng.random(matrix.shape) < 0.1] = np.nan
    order = mds_order(matrix)
    assert stats.spearmanr(np.arange(3_000), t[order]).statistic > 0.99  # smaller means first


@pytest.mark.slow
def test_the_analysis_above_the_threshold_clusters_without_the_matrix() -> None:
    import pandas as pd

    from evalprism.ecdf import analyze
    from evalprism.stats.clara import CLARA_ABOVE

    rng = np.random.default_rng(0)
    questions, configurations = 700, 30  # 21,000 settings > CLARA_ABOVE
    q = np.repeat(np.arange(questions), configurations * 3)
    c = np.tile(np.repeat(np.arange(configurations), 3), questions)
    score = np.clip(
        0.5
        + rng.uniform(-0.2, 0.2, questions)[q]
        + np.linspace(-0.3, 0.3, configurations)[c]
        + rng.normal(0, 0.05, q.size),
        0,
        1,
    )
    res = analyze(
        pd.DataFrame({"question_id": q, "cfg": c, "score": score}),
        EcdfOptions(by=["cfg"], clusters=4, permutations=19, baseline="0"),
        progress=False,
    )
    assert len(res.settings) > CLARA_ABOVE and "no n x n matrix" in res.summary.clustering
    assert res.clusters["medoid_mean_score"].is_monotonic_decreasing  # numbered by wins (eq. 7)
    s = res.settings
    assert s.groupby("cluster")["cfg"].mean().is_monotonic_decreasing  # higher configurations score higher
    assert res.summary.loss == pytest.approx(sum(res.clusters["size"] * res.clusters["mean_distance_to_medoid"]))
