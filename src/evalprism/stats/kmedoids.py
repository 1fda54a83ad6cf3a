"""k-medoids on a precomputed distance matrix.

``method="fasterpam"`` (default) runs FasterPAM from the ``kmedoids`` package (Rust, Schubert &
Rousseeuw 2021), which reaches the same kind of swap-optimal solution as PAM orders of magnitude
faster. ``method="pam"`` is the seed's Algorithm 1 literally: greedy BUILD, then SWAP that applies
the single best (medoid, non-medoid) exchange while it lowers the total distance. It is written
here rather than taken from ``kmedoids.pam`` because the seed fixes its tie-breaking and stopping
rule, and tests check it against a line-by-line transcription of Algorithm 1.

Both return a :class:`KMedoidsResult`, named like the ``kmedoids`` package's result.

The ``kmedoids`` package is imported where it is called (:func:`_kmedoids_package`): it imports
scikit-learn, and scikit-learn pandas, and importing :mod:`evalprism.stats` must bring in numpy and
scipy only.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.stats.steps import Steps
from evalprism.vocabularies import KMedoidsMethod

Method = KMedoidsMethod
_BUILD_SAMPLE = 2000
#: FasterPAM runs from seeded random starts up to RESTARTS_UP_TO points (besides BUILD up to _BUILD_SAMPLE)
RANDOM_STARTS = 4
RESTARTS_UP_TO = 5_000


@dataclass(frozen=True)
class KMedoidsResult:
    """A k-medoids clustering (the fields of ``kmedoids.KMedoidsResult``).

    ``medoids``: item indices of the medoids; ``labels[i]`` indexes ``medoids`` (a medoid carries its
    own label); ``loss``: the sum of each item's distance to its medoid; ``n_iter``: SWAP passes
    (FasterPAM: of the winning start); ``n_swap``: medoid exchanges applied.
    """

    medoids: np.ndarray
    labels: np.ndarray
    loss: float
    n_iter: int | None = None
    n_swap: int | None = None


def _check(dist: np.ndarray, k: int) -> np.ndarray:
    dist = np.asarray(dist)
    if dist.ndim != 2 or dist.shape[0] != dist.shape[1]:
        raise EvalprismError(f"distance matrix must be square, got shape {dist.shape}")
    n = dist.shape[0]
    if not 1 <= k <= n:
        raise EvalprismError(f"number of clusters K={k} must be between 1 and the number of items ({n})")
    return dist


def _assign(dist: np.ndarray, medoids: np.ndarray) -> tuple[np.ndarray, float]:
    """Labels (index into ``medoids``, first medoid wins ties) and total distance to nearest medoid."""
    to_medoids = dist[:, medoids]
    labels = np.argmin(to_medoids, axis=1)
    labels[medoids] = np.arange(medoids.size)
    return labels, float(to_medoids[np.arange(dist.shape[0]), labels].sum())


def pam_build(dist: np.ndarray, k: int) -> np.ndarray:
    """Algorithm 1, BUILD: the medoid with the least total distance, then greedily the point that
    most lowers the sum of distances to the nearest chosen medoid (lowest index on ties)."""
    dist = _check(dist, k)
    n = dist.shape[0]
    medoids = [int(np.argmin(dist.sum(axis=1)))]
    nearest = dist[:, medoids[0]].astype(np.float64)
    chosen = np.zeros(n, dtype=bool)
    chosen[medoids[0]] = True
    for _ in range(1, k):
        cost = np.minimum(dist, nearest[:, None]).sum(axis=0)
        cost[chosen] = np.inf
        j = int(np.argmin(cost))
        medoids.append(j)
        chosen[j] = True
        nearest = np.minimum(nearest, dist[:, j])
    return np.array(medoids, dtype=np.int64)


def pam(dist: np.ndarray, k: int, max_iter: int = 1000) -> KMedoidsResult:
    """The seed's Algorithm 1 (BUILD + best-improvement SWAP).

    Candidate swaps are ranked medoid by medoid (in the order they were chosen), non-medoids by
    index; a swap is taken only if it lowers the loss by more than 1e-12 relative, so floating-point
    ties cannot cycle. Cost per SWAP iteration is O(k n^2).
    """
    dist = np.asarray(_check(dist, k), dtype=np.float64)
    n = dist.shape[0]
    medoids = pam_build(dist, k)
    _, loss = _assign(dist, medoids)
    n_iter = n_swap = 0
    for _ in range(max_iter):
        n_iter += 1
        to_medoids = dist[:, medoids]
        order = np.argsort(to_medoids, axis=1, kind="stable")
        nearest_pos = order[:, 0]
        d_near = to_medoids[np.arange(n), nearest_pos]
        d_second = to_medoids[np.arange(n), order[:, 1]] if k > 1 else np.full(n, np.inf)
        is_medoid = np.zeros(n, dtype=bool)
        is_medoid[medoids] = True
        best = (np.inf, -1, -1)
        for p in range(k):
            without_p = np.where(nearest_pos == p, d_second, d_near)
            cost = np.minimum(dist, without_p[:, None]).sum(axis=0)
            cost[is_medoid] = np.inf
            j = int(np.argmin(cost))
            if cost[j] < best[0]:
                best = (float(cost[j]), p, j)
        new_loss, p, j = best
        if not new_loss < loss - 1e-12 * abs(loss):
            break
        medoids = medoids.copy()
        medoids[p] = j
        loss = new_loss
        n_swap += 1
    labels, loss = _assign(dist, medoids)
    return KMedoidsResult(medoids, labels, loss, n_iter, n_swap)


def _kmedoids_package() -> Any:
    """The ``kmedoids`` package (FasterPAM, silhouette), imported on first use (see the module docstring)."""
    import kmedoids

    return kmedoids


def _fasterpam(dist: np.ndarray, k: int, seed: int, steps: Steps | None = None) -> KMedoidsResult:
    """FasterPAM from several starts; the lowest loss wins.

    Up to :data:`RESTARTS_UP_TO` points: :data:`RANDOM_STARTS` seeded random medoid sets, plus exact
    BUILD up to :data:`_BUILD_SAMPLE` points (O(k n^2) in NumPy: cheap there, costlier than a
    FasterPAM run above). A FasterPAM run is a small fraction of exact PAM there, so restarts are the
    cheap way to a loss at or below PAM's (n = 3,000, k = 16: benchmarks/bench_ecdf.py). These starts
    go to the package's deterministic single-thread FasterPAM (``random_state=None`` with given
    medoids), about twice as fast as its randomised variant.

    Above, where one run costs tens of seconds, two starts: BUILD on a seeded subsample of
    :data:`_BUILD_SAMPLE` points (as in the LAB initialisation) and a seeded random start, in the
    package's multi-threaded variant. Every run gets an explicit seed even with given medoids:
    multi-threaded, the ``kmedoids`` package shuffles, and without a seed it would draw from NumPy's
    global state (same seed, different clusterings).

    ``steps`` hears the number of runs and each finished run (the runs cost about the same: one
    FasterPAM on the same matrix each)."""
    n = dist.shape[0]
    rng = np.random.default_rng(seed)
    runs: list[Callable[[], Any]] = []
    # a start's BUILD (and the package's import) run inside its run, so progress counts them there;
    # BUILD draws nothing from ``rng``, so the seeded draws are those of every earlier version
    if n <= RESTARTS_UP_TO:
        random_starts = [np.sort(rng.choice(n, size=k, replace=False)) for _ in range(RANDOM_STARTS)]
        starts: list[Callable[[], np.ndarray]] = [functools.partial(pam_build, dist, k)] if n <= _BUILD_SAMPLE else []
        starts += [functools.partial(np.asarray, m) for m in random_starts]

        def from_start(start: Callable[[], np.ndarray]) -> Callable[[], Any]:
            return lambda: _kmedoids_package().fasterpam(dist, start().astype(np.uint64), random_state=None, n_cpu=1)

        runs = [from_start(start) for start in starts]
    else:
        sub = np.sort(rng.choice(n, size=_BUILD_SAMPLE, replace=False))
        random_seed = int(rng.integers(2**31))

        def from_build() -> Any:
            init = sub[pam_build(dist[np.ix_(sub, sub)], k)]
            with warnings.catch_warnings():  # it warns that a seed is unused with given medoids
                warnings.simplefilter("ignore", UserWarning)
                return _kmedoids_package().fasterpam(dist, init.astype(np.uint64), random_state=random_seed, n_cpu=-1)

        def from_random() -> Any:
            return _kmedoids_package().fasterpam(dist, k, init="random", random_state=random_seed, n_cpu=-1)

        runs = [from_build, from_random]
    best = None
    if steps is not None:
        steps.start(len(runs))
    for run in runs:
        res = run()
        if steps is not None:
            steps.update(1)
        medoids = np.asarray(res.medoids, dtype=np.int64)
        if best is None or res.loss < best.loss - 1e-12 * abs(best.loss):
            labels, loss = _assign(dist, medoids)
            best = KMedoidsResult(medoids, labels, loss, res.n_iter, res.n_swap)
    assert best is not None
    return best


def kmedoids(
    dist: np.ndarray, k: int, method: Method = "fasterpam", seed: int = 0, steps: Steps | None = None
) -> KMedoidsResult:
    """Cluster items given their distance matrix (:class:`KMedoidsResult`: medoids, labels, loss).

    ``labels[i]`` indexes ``medoids``; ``loss`` is the sum of each item's distance to its medoid.
    ``steps`` hears FasterPAM's runs (:func:`_fasterpam`); PAM's SWAP iterations have no total known
    in advance, so ``steps`` is never started for it (a listener shows the phase and its time).
    """
    dist = _check(dist, k)
    if method == "pam":
        return pam(dist, k)
    if method == "fasterpam":
        return _fasterpam(dist, k, seed, steps)
    raise EvalprismError(f"unknown k-medoids method '{method}': expected 'fasterpam' or 'pam'")


def choose_k(
    dist: np.ndarray,
    k_values: list[int],
    method: Method = "fasterpam",
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> tuple[int, list[tuple[int, float, float]]]:
    """Pick K by the highest mean silhouette (Rousseeuw 1987) on the precomputed distances.

    Returns the chosen K and the curve ``[(k, silhouette, loss), ...]``; ties go to the smaller K.
    ``on_step(1)`` is called after each K (for a progress bar).
    """
    curve = []
    for k in k_values:
        result = kmedoids(dist, k, method=method, seed=seed)
        sil = float(_kmedoids_package().silhouette(np.ascontiguousarray(dist), result.labels)[0]) if k > 1 else 0.0
        curve.append((k, sil, result.loss))
        if on_step is not None:
            on_step(1)
    best_k = max(curve, key=lambda row: (row[1], -row[0]))[0]
    return best_k, curve
