"""k-medoids: the seed's Algorithm 1 transcribed literally as the reference, FasterPAM on planted clusters."""

from __future__ import annotations

import itertools

import kmedoids as kmedoids_pkg
import numpy as np
import pytest
from scipy.spatial.distance import cdist
from sklearn.metrics import adjusted_rand_score

from evalprism.errors import EvalprismError
from evalprism.stats import kmedoids, pam, w1_matrix


def algorithm1(D: np.ndarray, m: int) -> tuple[list[int], float]:
    """Seed 001, Algorithm 1, line by line with plain loops (medoids in choice order, lowest index on ties)."""
    n = len(D)
    r = [min(range(n), key=lambda i: (sum(D[i][j] for j in range(n)), i))]
    J = [r[0]]
    for _ in range(2, m + 1):
        cand = [j for j in range(n) if j not in J]
        best = min(cand, key=lambda j: (sum(min(D[k][x] for x in [*J, j]) for k in range(n)), j))
        r.append(best)
        J = [*J, best]
    J1 = list(r)
    Dstar = sum(min(D[k][x] for x in J1) for k in range(n))
    while True:
        J2 = [j for j in range(n) if j not in J1]
        best_cost, best_swap = float("inf"), None
        for pos, j in itertools.product(range(m), J2):
            Jt = [*J1[:pos], j, *J1[pos + 1 :]]
            cost = sum(min(D[k][x] for x in Jt) for k in range(n))
            if cost < best_cost:
                best_cost, best_swap = cost, (pos, j)
        if best_cost < Dstar - 1e-12 * abs(Dstar):
            pos, j = best_swap
            J1 = [*J1[:pos], j, *J1[pos + 1 :]]
            Dstar = best_cost
        else:
            break
    return J1, Dstar


def planted(n_per: int, k: int, seed: int, spread: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """ECDFs of 10 samples around k well-separated centres: the W1 matrix and the true labels."""
    rng = np.random.default_rng(seed)
    centres = np.linspace(0.05, 0.95, k)
    truth = np.repeat(np.arange(k), n_per)
    samples = [np.clip(rng.normal(centres[t], spread, 10), 0, 1) for t in truth]
    return w1_matrix(samples), truth


@pytest.mark.parametrize("seed,n,k", [(0, 18, 2), (1, 25, 3), (2, 30, 4), (3, 22, 5)])
def test_pam_reproduces_algorithm1(seed: int, n: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    D = cdist(X, X)
    want_medoids, want_loss = algorithm1(D.tolist(), k)
    result = pam(D, k)
    medoids, labels, loss = result.medoids, result.labels, result.loss
    assert medoids.tolist() == want_medoids
    assert loss == pytest.approx(want_loss, rel=1e-12)
    assert labels.tolist() == np.argmin(D[:, want_medoids], axis=1).tolist()


def test_pam_agrees_with_kmedoids_package() -> None:
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 3))
    D = cdist(X, X)
    loss = pam(D, 6).loss
    assert loss == pytest.approx(kmedoids_pkg.pam(D, 6).loss, rel=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fasterpam_matches_pam_and_recovers_planted_clusters(seed: int) -> None:
    D, truth = planted(n_per=40, k=6, seed=seed)
    exact = kmedoids(D, 6, method="pam")
    labels_pam, loss_pam = exact.labels, exact.loss
    result = kmedoids(D, 6, method="fasterpam", seed=seed)
    medoids, labels, loss = result.medoids, result.labels, result.loss
    assert loss <= loss_pam * 1.01
    assert adjusted_rand_score(truth, labels) >= 0.95
    assert adjusted_rand_score(truth, labels_pam) >= 0.95
    assert sorted(set(labels.tolist())) == list(range(6))
    assert all(labels[m] == i for i, m in enumerate(medoids))


def test_fasterpam_random_starts_on_larger_problem() -> None:
    D, truth = planted(n_per=450, k=5, seed=4, spread=0.03)  # n = 2,250 > the exact-BUILD limit: random starts only
    result = kmedoids(D, 5, seed=0)
    labels, loss = result.labels, result.loss
    assert adjusted_rand_score(truth, labels) >= 0.95
    assert loss <= kmedoids_pkg.pam(D, 5).loss * 1.01


@pytest.mark.parametrize("n_per", [30, 300])
def test_same_seed_same_clustering_whatever_numpys_global_state(n_per: int) -> None:
    # n = 1,200 runs FasterPAM multi-threaded, where an unseeded start would follow np.random's state
    D, _ = planted(n_per=n_per, k=4, seed=5, spread=0.3)
    runs = []
    for global_seed in (1, 2, 3):
        np.random.seed(global_seed)
        result = kmedoids(D, 4, seed=11)
        runs.append((result.medoids.tolist(), result.labels.tolist(), result.loss))
    assert runs[0] == runs[1] == runs[2]


def test_bad_k_and_method() -> None:
    D, _ = planted(n_per=3, k=2, seed=0)
    with pytest.raises(EvalprismError, match="K=7 must be between 1 and the number of items \\(6\\)"):
        kmedoids(D, 7)
    with pytest.raises(EvalprismError, match="unknown k-medoids method"):
        kmedoids(D, 2, method="kmeans")  # type: ignore[arg-type]


def test_result_is_named_like_the_kmedoids_package() -> None:
    """medoids, labels, loss, n_iter, n_swap by name, as kmedoids.KMedoidsResult has them."""
    D, _ = planted(n_per=20, k=3, seed=6, spread=0.2)
    exact = kmedoids_pkg.pam(D, 3).loss
    for method in ("pam", "fasterpam"):
        result = kmedoids(D, 3, method=method)  # type: ignore[arg-type]
        assert exact <= result.loss <= exact * 1.01
        assert result.labels.shape == (len(D),) and result.medoids.shape == (3,)
        assert result.n_iter is not None and result.n_iter >= 1
        assert result.n_swap is not None and result.n_swap >= 0
