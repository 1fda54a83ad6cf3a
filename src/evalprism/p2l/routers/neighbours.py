"""The kNN router: an item's predicted quality is the mean quality of its k nearest training prompts.

RouterArena (arXiv:2510.00202) and LLMRouterBench (arXiv:2601.07206) find this the strongest simple
baseline. The prediction is scikit-learn's ``KNeighborsRegressor`` (Euclidean distance on the unit-norm
embeddings, i.e. cosine order; uniform weights). k is chosen by 5-fold cross-validation inside the
training split from :data:`K_GRID`: one neighbour search per fold at the largest k serves every
candidate (the mean of the first k neighbours is a prefix sum), so the search costs one fit, not five.

Quality learned from pairwise battles is sparse (NaN where a model did not fight on a prompt): each
model's prediction is then its mean over the k neighbours that have it (its overall training mean when
none has), and the cross-validation error counts the held-out fold's observed entries only.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from sklearn.model_selection import KFold
from sklearn.neighbors import KNeighborsRegressor, NearestNeighbors

#: candidate numbers of neighbours
K_GRID = (5, 10, 20, 50, 100, 200)
FOLDS = 5


def fold_neighbours(
    features: np.ndarray, grid: tuple[int, ...], seed: int
) -> Iterator[tuple[np.ndarray, np.ndarray, list[int], np.ndarray]]:
    """Each of :data:`FOLDS` folds of the training items: its training and held-out rows, the ks of
    ``grid`` it can try (at most its training size) and each held-out row's nearest training rows."""
    folds = KFold(n_splits=min(FOLDS, features.shape[0]), shuffle=True, random_state=seed)
    for train, test in folds.split(features):
        ks = [k for k in grid if k <= train.size] or [train.size]
        search = NearestNeighbors(n_neighbors=max(ks), algorithm="brute").fit(features[train])
        yield train, test, ks, search.kneighbors(features[test], return_distance=False)


def cv_errors(features: np.ndarray, quality: np.ndarray, grid: tuple[int, ...], seed: int) -> dict[int, float]:
    """Mean squared error of the kNN prediction for each k of ``grid`` (at most the fold's training
    size), pooled over :data:`FOLDS` folds of the training items."""
    errors: dict[int, float] = {}
    for train, test, ks, neighbours in fold_neighbours(features, grid, seed):
        running = np.cumsum(quality[train][neighbours], axis=1)  # (test, kmax, M)
        for k in ks:
            err = float(((running[:, k - 1] / k - quality[test]) ** 2).sum())
            errors[k] = errors.get(k, 0.0) + err
    return errors


def sparse_means(neighbour_quality: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    """(n, K, M) neighbours' quality with NaN gaps -> (n, K, M) mean of the first k observed entries for
    each k = 1..K, ``fallback`` (M,) where none of the first k has the model."""
    observed = np.isfinite(neighbour_quality)
    total = np.cumsum(np.where(observed, neighbour_quality, 0.0), axis=1)
    count = np.cumsum(observed, axis=1)
    return np.where(count > 0, total / np.maximum(count, 1), fallback)


def sparse_cv_errors(features: np.ndarray, quality: np.ndarray, grid: tuple[int, ...], seed: int) -> dict[int, float]:
    """:func:`cv_errors` on sparse quality: squared error over the observed held-out entries, each
    model's prediction its mean over the neighbours that have it (the fold's overall mean if none)."""
    errors: dict[int, float] = {}
    for train, test, ks, neighbours in fold_neighbours(features, grid, seed):
        means = sparse_means(quality[train][neighbours], np.nanmean(quality[train], axis=0))
        truth = quality[test]
        seen = np.isfinite(truth)
        for k in ks:
            err = float(np.where(seen, (means[:, k - 1] - np.nan_to_num(truth)) ** 2, 0.0).sum())
            errors[k] = errors.get(k, 0.0) + err
    return errors


class NearestPrompts:
    """kNN over prompt embeddings; ``k_`` the chosen number of neighbours, ``cv_errors_`` per k."""

    def __init__(self, grid: tuple[int, ...] = K_GRID, seed: int = 0) -> None:
        self.grid = grid
        self.seed = seed

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> NearestPrompts:
        if np.isnan(quality).any():
            return self._fit_sparse(features, quality)
        self.cv_errors_ = cv_errors(features, quality, self.grid, self.seed)
        self.k_ = min(self.cv_errors_, key=lambda k: (self.cv_errors_[k], k))
        self.model_ = KNeighborsRegressor(n_neighbors=min(self.k_, features.shape[0]), algorithm="brute")
        self.model_.fit(features, quality)
        return self

    def _fit_sparse(self, features: np.ndarray, quality: np.ndarray) -> NearestPrompts:
        """Sparse quality (module docstring): the neighbour search and the training quality are kept."""
        self.cv_errors_ = sparse_cv_errors(features, quality, self.grid, self.seed)
        self.k_ = min(self.cv_errors_, key=lambda k: (self.cv_errors_[k], k))
        self.model_ = NearestNeighbors(n_neighbors=min(self.k_, features.shape[0]), algorithm="brute").fit(features)
        self.quality_, self.overall_ = quality, np.nanmean(quality, axis=0)
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        if isinstance(self.model_, NearestNeighbors):
            neighbours = self.model_.kneighbors(features, return_distance=False)
            return sparse_means(self.quality_[neighbours], self.overall_)[:, -1]
        return np.asarray(self.model_.predict(features), dtype=np.float64)
