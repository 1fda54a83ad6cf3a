"""Exact L1 distances between empirical CDFs of samples of unequal sizes (seed 001, eq. 4-5).

The L1 distance between two ECDFs equals the 1-Wasserstein distance between the empirical
measures, and also the L1 distance between their quantile functions:

    D_ij = ∫ |F_i(x) - F_j(x)| dx = ∫_0^1 |Q_i(u) - Q_j(u)| du.

For samples of sizes a and b, both quantile functions are constant on the intervals cut by
the union of the breakpoints {k/a} and {l/b} (at most a + b - 1 intervals). On that common
grid each ECDF becomes a short vector of quantile values scaled by the interval widths, and
D_ij is a plain cityblock distance between two such vectors. All pairs of one (a, b) size
pair are then one ``scipy.spatial.distance.cdist`` call (C loops, GIL released, so row blocks
run on all cores). The grid is built with integer arithmetic, so the result is exact up to
floating-point rounding of the final sum, whatever the sample sizes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.spatial.distance import cdist

from evalprism.errors import EvalprismError
from evalprism.stats.steps import Steps

_BLOCK_BYTES = 64 * 2**20


def _as_sorted_samples(samples: Sequence[np.ndarray]) -> list[np.ndarray]:
    out = []
    for i, s in enumerate(samples):
        arr = np.sort(np.asarray(s, dtype=np.float64).ravel())
        if arr.size == 0:
            raise EvalprismError(f"ECDF {i} has no samples; every ECDF needs at least one value")
        if not np.all(np.isfinite(arr)):
            raise EvalprismError(f"ECDF {i} has a non-finite value; expected finite numbers")
        out.append(arr)
    return out


def _common_grid(a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Widths of the intervals where quantile functions of an a- and a b-sample are constant,
    and, per interval, the order-statistic index of each sample."""
    lcm = math.lcm(a, b)
    cuts_a = np.arange(a + 1, dtype=np.int64) * (lcm // a)
    cuts_b = np.arange(b + 1, dtype=np.int64) * (lcm // b)
    cuts = np.union1d(cuts_a, cuts_b)
    start = cuts[:-1]
    width = np.diff(cuts).astype(np.float64) / lcm
    index_a = np.searchsorted(cuts_a, start, side="right") - 1
    index_b = np.searchsorted(cuts_b, start, side="right") - 1
    return width, index_a, index_b


def _as_index(idx: np.ndarray) -> slice | np.ndarray:
    """A slice when ``idx`` is a contiguous range (cheap writes), else the array itself."""
    if idx.size and idx[-1] - idx[0] + 1 == idx.size and np.all(np.diff(idx) == 1):
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def w1_matrix(
    samples: Sequence[np.ndarray],
    *,
    dtype: type[np.floating] = np.float64,
    n_jobs: int | None = None,
    steps: Steps | None = None,
) -> np.ndarray:
    """All-pairs exact L1 distance between the ECDFs of ``samples`` (seed 001, eq. 4-5).

    ``samples`` may have different lengths. Returns a symmetric (n, n) matrix of ``dtype``
    (use ``np.float32`` to halve memory for very large n). ``n_jobs`` threads (default: all cores).
    ``steps`` hears the number of blocks (one ``cdist`` call each, at most ~64 MiB of output) and
    each finished block.
    """
    sorted_samples = _as_sorted_samples(samples)
    n = len(sorted_samples)
    dist = np.zeros((n, n), dtype=dtype)
    if n == 0:
        return dist
    sizes = np.array([s.size for s in sorted_samples])
    groups = {int(size): np.flatnonzero(sizes == size) for size in np.unique(sizes)}
    stacked = {size: np.stack([sorted_samples[i] for i in idx]) for size, idx in groups.items()}

    tasks = []
    size_list = sorted(groups)
    for gi, a in enumerate(size_list):
        for b in size_list[gi:]:
            width, index_a, index_b = _common_grid(a, b)
            left = stacked[a][:, index_a] * width
            right = stacked[b][:, index_b] * width
            rows = max(1, _BLOCK_BYTES // (8 * max(1, right.shape[0])))
            for start in range(0, left.shape[0], rows):
                tasks.append((a, b, start, min(start + rows, left.shape[0]), left, right))

    def run(task: tuple) -> None:
        a, b, start, stop, left, right = task
        # within one size group only the columns from ``start`` on are new (the rest is the mirror)
        first_col = start if a == b else 0
        block = cdist(left[start:stop], right[first_col:], "cityblock")
        r, c = groups[a][start:stop], groups[b][first_col:]
        rows_idx, cols_idx = _as_index(r), _as_index(c)
        if isinstance(rows_idx, slice) and isinstance(cols_idx, slice):
            dist[rows_idx, cols_idx] = block
            dist[cols_idx, rows_idx] = block.T
        else:
            dist[np.ix_(r, c)] = block
            dist[np.ix_(c, r)] = block.T

    if steps is not None:
        steps.start(len(tasks))
    workers = n_jobs or os.cpu_count() or 1
    if workers == 1 or len(tasks) == 1:
        for task in tasks:
            run(task)
            if steps is not None:
                steps.update(1)
    else:
        # Tasks write disjoint blocks of ``dist``, so threads need no lock; progress is counted here,
        # in the calling thread, as the blocks come back in order.
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for _ in pool.map(run, tasks):
                if steps is not None:
                    steps.update(1)
    np.fill_diagonal(dist, 0.0)
    return dist


def w1_distance(u: np.ndarray, v: np.ndarray) -> float:
    """Exact L1 distance between the ECDFs of two samples (eq. 5)."""
    return float(w1_matrix([u, v], n_jobs=1)[0, 1])


def ecdf_wins(samples: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The seed's eq. (7): ``W[i, j] = 1`` when ∫ (F_i - F_j) dx < 0, i.e. ECDF i lies below j
    on balance (its values are larger); returns ``(W, wins)`` with ``wins = W.sum(1)``.

    For distributions with bounded support ∫ (F_i - F_j) dx = mean(v_j) - mean(v_i) exactly,
    so the integral is evaluated through the sample means.
    """
    means = np.array([np.mean(np.asarray(s, dtype=np.float64)) for s in samples])
    integral = means[None, :] - means[:, None]
    win = (integral < 0).astype(np.int64)
    return win, win.sum(axis=1)


def ecdf_steps(sample: np.ndarray, lo: float | None = None, hi: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Coordinates of the ECDF step function (eq. 1) for plotting with a horizontal-then-vertical line.

    The curve starts at (lo, 0) and ends at (hi, 1) so curves of different samples share a range.
    """
    values, counts = np.unique(np.asarray(sample, dtype=np.float64), return_counts=True)
    cum = np.cumsum(counts) / counts.sum()
    x = np.concatenate([[values[0] if lo is None else min(lo, values[0])], values])
    y = np.concatenate([[0.0], cum])
    if hi is not None and hi > values[-1]:
        x = np.append(x, hi)
        y = np.append(y, 1.0)
    return x, y


def distinct_ecdf_count(samples: Sequence[np.ndarray]) -> int:
    """How many different ECDFs the samples have (eq. 1): samples with the same values in the same
    proportions have one ECDF (W1 distance 0), whatever their sizes (``[1, 2]`` and ``[1, 1, 2, 2]``).

    k-medoids with more clusters than distinct ECDFs must split equal ECDFs. Within one sample size,
    equal sorted samples are found by one vectorised ``np.unique(axis=0)``; only those representatives
    are keyed by (values, counts / gcd of counts).
    """
    sorted_samples = [np.sort(np.asarray(s, dtype=np.float64).ravel()) for s in samples]
    sizes = np.array([s.size for s in sorted_samples])
    keys = set()
    for size in np.unique(sizes):
        rows = np.unique(np.stack([sorted_samples[i] for i in np.flatnonzero(sizes == size)]), axis=0)
        for row in rows:
            values, counts = np.unique(row, return_counts=True)
            keys.add((values.tobytes(), (counts // math.gcd(*counts.tolist())).tobytes()))
    return len(keys)
