"""Seriation by 1-D multidimensional scaling (seed 001, section 4.2: reordering the assignment matrix).

Rows are compared by Euclidean distance over the entries both rows have (missing cells are NaN,
scaled up as in scikit-learn's ``nan_euclidean_distances``), embedded on a line with metric MDS
(SMACOF from a classical-MDS start, so the result is deterministic) and sorted by that coordinate.

scikit-learn is imported where it is called: it imports pandas, and importing :mod:`evalprism.stats`
must bring in numpy and scipy only.
"""

from __future__ import annotations

import numpy as np

#: above this many rows the n x n distances and SMACOF give way to classical MDS through the columns
MDS_EXACT_MAX = 2_000


IMPUTE_ROUNDS = 20


def _classical_coordinate(matrix: np.ndarray) -> np.ndarray:
    """Classical MDS of the rows' Euclidean distances on one axis without the n x n matrix: it equals
    the first principal component of the column-centred matrix (Torgerson), from an SVD of
    n x columns. Missing cells start at their column mean and are then refilled from the rank-1
    reconstruction a few times (iterative SVD imputation), so that they follow their row's position
    instead of pulling it to the middle."""
    missing = np.isnan(matrix)
    filled = np.where(missing, np.nanmean(matrix, axis=0, keepdims=True), matrix)
    filled = np.nan_to_num(filled)
    for _ in range(IMPUTE_ROUNDS if missing.any() else 1):
        centre = filled.mean(axis=0, keepdims=True)
        u, sing, vt = np.linalg.svd(filled - centre, full_matrices=False)
        if not sing.size:
            return np.zeros(matrix.shape[0])
        rank1 = centre + np.outer(u[:, 0] * sing[0], vt[0])
        filled = np.where(missing, rank1, filled)
    return u[:, 0] * sing[0]


def mds_order(matrix: np.ndarray, seed: int = 0) -> np.ndarray:
    """Order of the rows of ``matrix`` (NaN = missing) along a 1-D MDS embedding.

    Up to :data:`MDS_EXACT_MAX` rows metric MDS (SMACOF) on the NaN-aware distances; above, classical
    MDS through the columns (:func:`_classical_coordinate`), O(rows x columns^2): a question x
    configuration matrix of 100,000 questions never becomes 100,000 x 100,000.
    The direction is fixed so that rows with smaller mean values come first.
    """
    matrix = np.asarray(matrix, dtype=np.float64)
    n = matrix.shape[0]
    if n <= 2:
        return np.argsort(np.nanmean(matrix, axis=1) if n else np.zeros(0), kind="stable")
    if n > MDS_EXACT_MAX:
        return _oriented_order(_classical_coordinate(matrix), matrix)
    from sklearn.manifold import MDS
    from sklearn.metrics.pairwise import nan_euclidean_distances

    dist = nan_euclidean_distances(matrix)
    if np.isnan(dist).any():  # rows with no entry in common: as far apart as anything observed
        dist = np.where(np.isnan(dist), np.nanmax(dist) if np.isfinite(np.nanmax(dist)) else 1.0, dist)
    dist = (dist + dist.T) / 2
    np.fill_diagonal(dist, 0.0)
    if not np.any(dist > 0):
        return np.arange(n)
    coord = MDS(
        n_components=1, metric="precomputed", init="classical_mds", random_state=seed, normalized_stress="auto"
    ).fit_transform(dist)[:, 0]
    return _oriented_order(coord, matrix)


def _oriented_order(coord: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Rows sorted by ``coord``, its sign chosen so that rows with smaller means come first."""
    n = matrix.shape[0]
    with np.errstate(all="ignore"):
        row_means = np.nanmean(matrix, axis=1)
    valid = np.isfinite(row_means)
    if valid.sum() > 1 and np.corrcoef(coord[valid], row_means[valid])[0, 1] < 0:
        coord = -coord
    return np.lexsort((np.arange(n), coord))
