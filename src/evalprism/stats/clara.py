"""k-medoids of ECDFs without the n x n matrix (issue 18, section 1; DESIGN "Beyond one machine").

The L1 distance between two ECDFs is the L1 distance between their quantile functions (seed 001,
eq. 4-5), so every ECDF is a point of L1 space and the distance from all n ECDFs to k medoids is
n x k exact W1 values, computed in blocks from the sorted samples (:class:`SortedEcdfs`). Above
:data:`CLARA_ABOVE` settings :func:`kmedoids_ecdfs` runs a CLARA-style search (Kaufman & Rousseeuw
1990, ch. 3) on those exact distances:

1. :data:`CLARA_SAMPLES` seeded samples of ``s = min(n, max(CLARA_MIN_SAMPLE, CLARA_PER_CLUSTER * k))``
   ECDFs (the best medoids so far join every later sample, as in CLARA); exact FasterPAM on each
   sample's own W1 matrix (s x s);
2. every sample's medoids scored by their exact total loss over all n ECDFs (n x k distances); the
   best kept;
3. at most :data:`SWAP_PASSES` passes of exact swap improvement over candidates taken from the
   samples (every sample's medoids, and per cluster the :data:`CANDIDATES_PER_CLUSTER` sample
   members nearest its medoid): the loss change of swapping medoid i for candidate c is
   ``sum_j min(d(j, c), d_i'(j)) - loss``, with ``d_i'`` the distance to the nearest medoid other
   than i, evaluated for all i at once from the nearest and second-nearest distances (as in
   FasterPAM), every swap that lowers the loss applied at once.

Memory is O(n k + n * chunk) floats; no array grows with n^2. Below the threshold the exact full-
matrix FasterPAM runs (:func:`evalprism.stats.kmedoids`), which the CLARA result is benchmarked
against (benchmarks/bench_ecdf.py).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.spatial.distance import cdist

from evalprism.errors import EvalprismError
from evalprism.stats.ecdf import _common_grid, w1_matrix
from evalprism.stats.kmedoids import KMedoidsResult, Method, kmedoids
from evalprism.stats.steps import Steps

#: above this many ECDFs :func:`kmedoids_ecdfs` never builds the n x n matrix
CLARA_ABOVE = 20_000
CLARA_SAMPLES = 5
CLARA_MIN_SAMPLE = 2_000
CLARA_PER_CLUSTER = 300
CANDIDATES_PER_CLUSTER = 8
SWAP_PASSES = 2
_BLOCK_ROWS = 65_536
_CANDIDATE_CHUNK = 64


class SortedEcdfs:
    """ECDF samples sorted once and stacked by sample size, for exact W1 from all of them to a few.

    ``to(targets)`` is the (n, m) matrix of W1 distances from every ECDF to the ECDFs ``targets``:
    per pair of sample sizes one common quantile grid (``_common_grid``, as in ``w1_matrix``) and
    one cityblock ``cdist`` per block of rows (C loops, GIL released: blocks run on all cores).
    """

    def __init__(self, samples: Sequence[np.ndarray]) -> None:
        sizes = np.fromiter((len(s) for s in samples), dtype=np.int64, count=len(samples))
        if sizes.size and sizes.min() == 0:
            raise EvalprismError(f"ECDF {int(np.argmin(sizes))} has no samples; every ECDF needs at least one value")
        self.n = sizes.size
        self.sizes = sizes
        self.groups = {int(a): np.flatnonzero(sizes == a) for a in np.unique(sizes)}
        self.stacked = {}
        for a, idx in self.groups.items():
            block = np.sort(np.array([samples[i] for i in idx], dtype=np.float64).reshape(idx.size, a), axis=1)
            if not np.isfinite(block).all():
                bad = idx[np.flatnonzero(~np.isfinite(block).all(axis=1))[0]]
                raise EvalprismError(f"ECDF {bad} has a non-finite value; expected finite numbers")
            self.stacked[a] = block
        self.position = np.empty(self.n, dtype=np.int64)  # row of each ECDF within its size group
        for idx in self.groups.values():
            self.position[idx] = np.arange(idx.size)

    def sample(self, i: int) -> np.ndarray:
        return self.stacked[int(self.sizes[i])][self.position[i]]

    def subset(self, idx: np.ndarray) -> list[np.ndarray]:
        return [self.sample(int(i)) for i in idx]

    def to(self, targets: np.ndarray, n_jobs: int | None = None) -> np.ndarray:
        """Exact W1 from every ECDF to each of ``targets`` (indices): shape (n, len(targets))."""
        targets = np.asarray(targets, dtype=np.int64)
        out = np.empty((self.n, targets.size))
        by_size: dict[int, list[int]] = {}
        for j, t in enumerate(targets):
            by_size.setdefault(int(self.sizes[t]), []).append(j)
        tasks = []
        for a, rows in self.groups.items():
            for b, cols in by_size.items():
                width, ia, ib = _common_grid(a, b)
                right = np.stack([self.sample(int(targets[j])) for j in cols])[:, ib] * width
                for start in range(0, rows.size, _BLOCK_ROWS):
                    tasks.append((a, rows[start : start + _BLOCK_ROWS], start, np.asarray(cols), ia, width, right))

        def run(task: tuple) -> None:
            a, rows, start, cols, ia, width, right = task
            left = self.stacked[a][start : start + rows.size][:, ia] * width
            out[np.ix_(rows, cols)] = cdist(left, right, "cityblock")

        workers = n_jobs or os.cpu_count() or 1
        if workers == 1 or len(tasks) == 1:
            for task in tasks:
                run(task)
        else:  # tasks write disjoint blocks of ``out``
            with ThreadPoolExecutor(max_workers=workers) as pool:
                list(pool.map(run, tasks))
        return out


def _nearest_two(to_medoids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per ECDF: the nearest medoid (first on ties), its distance, and the second-nearest distance."""
    rows = np.arange(to_medoids.shape[0])
    label = np.argmin(to_medoids, axis=1)
    near = to_medoids[rows, label]
    if to_medoids.shape[1] == 1:
        return label, near, np.full_like(near, np.inf)
    masked = to_medoids.copy()
    masked[rows, label] = np.inf
    return label, near, masked.min(axis=1)


def _swap_passes(
    ecdfs: SortedEcdfs,
    medoids: np.ndarray,
    to_medoids: np.ndarray,
    candidates: np.ndarray,
    steps: Steps | None = None,
) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Exact swap improvement restricted to ``candidates`` (see the module docstring, step 3);
    ``steps`` hears each pass, and the passes left unrun when one swaps nothing (converged)."""
    k = medoids.size
    medoids = medoids.copy()
    label, near, second = _nearest_two(to_medoids)
    loss = near.sum()
    n_swap = passes = 0
    for _ in range(SWAP_PASSES):
        passes += 1
        swapped = False
        pool = candidates[~np.isin(candidates, medoids)]
        for start in range(0, pool.size, _CANDIDATE_CHUNK):
            chunk = pool[start : start + _CANDIDATE_CHUNK]
            to_chunk = ecdfs.to(chunk)
            for j, c in enumerate(chunk):
                if c in medoids:
                    continue
                dc = to_chunk[:, j]
                kept = np.minimum(dc, near)
                # removing medoid i sends its members to min(d(j, c), second(j)) instead
                delta = kept.sum() - loss + np.bincount(label, weights=np.minimum(dc, second) - kept, minlength=k)
                i = int(np.argmin(delta))
                if delta[i] < -1e-12 * loss:
                    medoids[i] = c
                    to_medoids[:, i] = dc
                    label, near, second = _nearest_two(to_medoids)
                    loss = near.sum()
                    n_swap += 1
                    swapped = True
        if steps is not None:
            steps.update(1 if swapped else SWAP_PASSES - passes + 1)
        if not swapped:
            break
    return medoids, to_medoids, passes, n_swap


def clara_ecdfs(
    ecdfs: SortedEcdfs, k: int, seed: int = 0, steps: Steps | None = None
) -> tuple[KMedoidsResult, np.ndarray]:
    """CLARA-style k-medoids of ``ecdfs`` (module docstring); returns the result and the (n, k)
    distances of every ECDF to the medoids. ``steps`` hears :data:`CLARA_SAMPLES` samples (each an
    s x s matrix, FasterPAM and n x k losses) and :data:`SWAP_PASSES` swap passes as units."""
    n = ecdfs.n
    size = min(n, max(CLARA_MIN_SAMPLE, CLARA_PER_CLUSTER * k))
    rng = np.random.default_rng(seed)
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    found = []
    near_members = []
    if steps is not None:
        steps.start(CLARA_SAMPLES + SWAP_PASSES)
    for _r in range(CLARA_SAMPLES):
        if best is None:
            idx = np.sort(rng.choice(n, size=size, replace=False))
        else:  # the best medoids so far join the sample (CLARA)
            rest = rng.choice(np.setdiff1d(np.arange(n), best[1]), size=size - k, replace=False)
            idx = np.sort(np.concatenate([best[1], rest]))
        dist = w1_matrix(ecdfs.subset(idx))
        res = kmedoids(dist, k, seed=int(rng.integers(2**31)))
        medoids = idx[res.medoids]
        found.append(medoids)
        # per cluster, the sample members nearest its medoid: swap candidates for step 3
        for c, m in enumerate(res.medoids):
            members = np.flatnonzero(res.labels == c)
            near_members.append(
                idx[members[np.argsort(dist[members, m], kind="stable")[1 : CANDIDATES_PER_CLUSTER + 1]]]
            )
        to_medoids = ecdfs.to(medoids)
        loss = float(to_medoids.min(axis=1).sum())
        if best is None or loss < best[0]:
            best = (loss, medoids, to_medoids)
        if steps is not None:
            steps.update(1)
    assert best is not None
    candidates = np.unique(np.concatenate(found + near_members))
    medoids, to_medoids, passes, n_swap = _swap_passes(ecdfs, best[1], best[2], candidates, steps)
    labels, near, _ = _nearest_two(to_medoids)
    labels[medoids] = np.arange(k)
    return KMedoidsResult(medoids, labels, float(near.sum()), passes, n_swap), to_medoids


def check_method(n: int, method: str) -> None:
    """Exact PAM needs the n x n matrix: refuse it above :data:`CLARA_ABOVE` ECDFs (before any work)."""
    if n > CLARA_ABOVE and method != "fasterpam":
        raise EvalprismError(
            f"method '{method}' needs the {n} x {n} distance matrix; above {CLARA_ABOVE:,} settings "
            "only 'fasterpam' runs (on samples, with exact losses over all settings)",
            parameter="method",
        )


def kmedoids_ecdfs(
    samples: Sequence[np.ndarray] | SortedEcdfs,
    k: int,
    method: Method = "fasterpam",
    seed: int = 0,
    steps: Steps | None = None,
) -> tuple[KMedoidsResult, np.ndarray]:
    """k-medoids of ECDFs by exact W1: the full matrix and :func:`evalprism.stats.kmedoids` up to
    :data:`CLARA_ABOVE` ECDFs, the CLARA-style search above (no n x n array). Returns the result and
    the (n, k) W1 distances of every ECDF to the medoids. ``steps`` hears the CLARA-style search's
    samples and passes (:func:`clara_ecdfs`), or the full-matrix path's k-medoids runs."""
    ecdfs = samples if isinstance(samples, SortedEcdfs) else SortedEcdfs(samples)
    if not 1 <= k <= ecdfs.n:
        raise EvalprismError(f"number of clusters K={k} must be between 1 and the number of items ({ecdfs.n})")
    if ecdfs.n <= CLARA_ABOVE:
        dist = w1_matrix(ecdfs.subset(np.arange(ecdfs.n)))
        res = kmedoids(dist, k, method=method, seed=seed, steps=steps)
        return res, dist[:, res.medoids].astype(np.float64)
    check_method(ecdfs.n, method)
    return clara_ecdfs(ecdfs, k, seed, steps)
