"""Seriation by 1-D multidimensional scaling (seed 001, section 4.2: reordering the assignment matrix).

Rows are compared by Euclidean distance over the entries both rows have (missing cells are NaN,
scaled up as in scikit-learn's ``nan_euclidean_distances``), embedded on a line with metric MDS
(SMACOF from a classical-MDS start, so the result is deterministic) and sorted by that coordinate.

scikit-learn is imported where it is called: it imports pandas, and importing :mod:`evalprism.stats`
must bring in numpy and scipy only.
"""

from __future__ import annotations

import numpy as np


def mds_order(matrix: np.ndarray, seed: int = 0) -> np.ndarray:
    """Order of the rows of ``matrix`` (NaN = missing) along a 1-D MDS embedding.

    The direction is fixed so that rows with smaller mean values come first.
    """
    from sklearn.manifold import MDS
    from sklearn.metrics.pairwise import nan_euclidean_distances

    matrix = np.asarray(matrix, dtype=np.float64)
    n = matrix.shape[0]
    if n <= 2:
        return np.argsort(np.nanmean(matrix, axis=1) if n else np.zeros(0), kind="stable")
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
    row_means = np.nanmean(matrix, axis=1)
    valid = np.isfinite(row_means)
    if valid.sum() > 1 and np.corrcoef(coord[valid], row_means[valid])[0, 1] < 0:
        coord = -coord
    return np.lexsort((np.arange(n), coord))
