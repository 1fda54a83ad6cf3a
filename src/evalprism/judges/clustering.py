"""Dense neighbourhoods of query-document pairs: optional reduction, HDBSCAN, purity, 2-D map.

The seed clusters the pair embeddings with HDBSCAN (section 3.3) and keeps its noise label apart
(cluster -1, "C-1"); it leaves the parameters unspecified, so all of them are options and recorded.
Reduction first (PCA, or UMAP from the optional ``umap`` extra) makes density estimation in 384-1024
dimensions tractable and less noisy; ``reduce="none"`` clusters the unit vectors directly (Euclidean
distance between unit vectors is a monotone function of the cosine).

Row order: the analysis gives the pairs sorted by (query_id, doc_id)
(:meth:`evalprism.io.judgments.Judgments.in_pair_order`), so PCA, UMAP and HDBSCAN see the same
matrix, and number the clusters the same, whatever the order of the input rows.

Defaults that scale with the number of pairs: ``min_cluster_size=None`` is
:func:`scaled_min_cluster_size` of the pairs clustered (15, the value that suits a TREC DL year of
about 10,000 pairs, up to 10,850 pairs; then one per 700 pairs), and ``cluster_selection_method="auto"``
is excess of mass, the usual HDBSCAN selection, unless that collapses into a degenerate clustering
(:mod:`evalprism.judges.degeneracy`), in which case the leaf clusters are taken. On TREC DL 2019 + 2020
pooled (20,646 pairs), excess of mass put 97% of the pairs into one cluster.

Instruction choice (section 3.2): the 80th percentile of cluster purity with respect to the human
label, over the dense clusters; purity = share of the cluster's pairs carrying its majority human label.
"""

from __future__ import annotations

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.judges.options import (
    MIN_CLUSTER_SIZE_FLOOR,
    PAIRS_PER_MIN_SIZE,
    ClusterOptions,
    scaled_min_cluster_size,
)
from evalprism.vocabularies import ClusterSelection, Reduction, choices

__all__ = ["MIN_CLUSTER_SIZE_FLOOR", "PAIRS_PER_MIN_SIZE", "ClusterOptions", "scaled_min_cluster_size"]

REDUCERS = choices(Reduction)
SELECTIONS = choices(ClusterSelection)


def check_reduction_available(options: ClusterOptions) -> None:
    """Refuse ``reduce="umap"`` without UMAP installed, before any expensive work."""
    if options.reduce == "umap":
        _import_umap()


def _import_umap():
    try:
        import umap
    except ImportError:
        raise EvalprismError(
            "reduce='umap' needs umap-learn, evalprism's optional extra 'umap': pip install umap-learn "
            "(or use reduce='pca')"
        ) from None
    return umap


def _umap(x: np.ndarray, n_components: int, neighbors: int, seed: int) -> np.ndarray:
    umap = _import_umap()
    reducer = umap.UMAP(
        n_components=n_components, n_neighbors=neighbors, min_dist=0.0, metric="cosine", random_state=seed, n_jobs=1
    )
    return np.asarray(reducer.fit_transform(x), dtype=np.float64)


def reduce_dimensions(x: np.ndarray, options: ClusterOptions, seed: int = 0) -> np.ndarray:
    """The vectors HDBSCAN sees: ``x`` itself, its first PCA components, or a UMAP embedding."""
    check_reduction_available(options)
    x = np.asarray(x, dtype=np.float64)
    k = min(options.n_components, x.shape[1], max(1, x.shape[0] - 1))
    if options.reduce == "none" or k >= x.shape[1]:
        return x
    if options.reduce == "pca":
        from sklearn.decomposition import PCA

        return PCA(n_components=k, svd_solver="full", random_state=seed).fit_transform(x)
    return _umap(x, k, options.umap_neighbors, seed)


def map_2d(x: np.ndarray, options: ClusterOptions, seed: int = 0) -> np.ndarray:
    """Two coordinates per pair for the report's map: PCA, or UMAP when the clustering used UMAP."""
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] < 3 or x.shape[1] < 2:
        return np.zeros((x.shape[0], 2))
    if options.reduce == "umap":
        return _umap(x, 2, options.umap_neighbors, seed)
    from sklearn.decomposition import PCA

    return PCA(n_components=2, svd_solver="full", random_state=seed).fit_transform(x)


def cluster_pairs(z: np.ndarray, options: ClusterOptions, selection: str | None = None) -> np.ndarray:
    """HDBSCAN labels with one selection method (``selection``, default the options' own; "auto" is
    excess of mass here, the fallback to leaf is :func:`evalprism.judges.degeneracy.cluster_checked`),
    renumbered by :func:`renumber`; -1 = noise."""
    from sklearn.cluster import HDBSCAN

    options.check_shape(z.shape[0])
    method = selection or options.cluster_selection_method
    labels = HDBSCAN(
        min_cluster_size=options.size_for(z.shape[0]),
        min_samples=options.min_samples,
        cluster_selection_method="eom" if method == "auto" else method,
        cluster_selection_epsilon=options.cluster_selection_epsilon,
        copy=True,
    ).fit_predict(z)
    return renumber(labels)


def renumber(labels: np.ndarray) -> np.ndarray:
    """Cluster labels renumbered 0, 1, ... by decreasing size (ties: the cluster whose first row comes
    first: with the pairs in (query_id, doc_id) order, the one holding the smallest pair); -1 = noise."""
    labels = np.asarray(labels, dtype=np.int64)
    dense = labels >= 0
    if not dense.any():
        return labels
    ids, first, sizes = np.unique(labels[dense], return_index=True, return_counts=True)
    order = np.lexsort((first, -sizes))
    new = np.empty(ids.max() + 1, dtype=np.int64)
    new[ids[order]] = np.arange(ids.size)
    out = np.full(labels.shape, -1, dtype=np.int64)
    out[dense] = new[labels[dense]]
    return out


def cluster_purity(labels: np.ndarray, human_relevant: np.ndarray) -> np.ndarray:
    """Purity of each dense cluster 0..K-1 w.r.t. the binary human label (pairs without one left out)."""
    k = int(labels.max()) + 1 if (labels >= 0).any() else 0
    ok = (labels >= 0) & ~np.isnan(human_relevant)
    ones = np.bincount(labels[ok], weights=human_relevant[ok], minlength=k)
    total = np.bincount(labels[ok], minlength=k).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(ones, total - ones) / total


def purity_score(purity: np.ndarray, percentile: float = 80.0) -> float:
    """The seed's instruction criterion: the ``percentile``-th percentile of the cluster purities."""
    values = purity[~np.isnan(purity)]
    return float(np.percentile(values, percentile)) if values.size else float("nan")
