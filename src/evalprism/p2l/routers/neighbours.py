"""The kNN router: an item's predicted quality is the mean quality of its k nearest training prompts.

RouterArena (arXiv:2510.00202) and LLMRouterBench (arXiv:2601.07206) find this the strongest simple
baseline. The prediction is scikit-learn's ``KNeighborsRegressor`` (Euclidean distance on the unit-norm
embeddings, i.e. cosine order; uniform weights). k is chosen by 5-fold cross-validation inside the
training split from :data:`K_GRID`: one neighbour search per fold at the largest k serves every
candidate (the mean of the first k neighbours is a prefix sum), so the search costs one fit, not five.
"""

from __future__ import annotations

import numpy as np
from sklearn.model_selection import KFold
from sklearn.neighbors import KNeighborsRegressor, NearestNeighbors

#: candidate numbers of neighbours
K_GRID = (5, 10, 20, 50, 100, 200)
FOLDS = 5


def cv_errors(features: np.ndarray, quality: np.ndarray, grid: tuple[int, ...], seed: int) -> dict[int, float]:
    """Mean squared error of the kNN prediction for each k of ``grid`` (at most the fold's training
    size), pooled over :data:`FOLDS` folds of the training items."""
    n = features.shape[0]
    folds = KFold(n_splits=min(FOLDS, n), shuffle=True, random_state=seed)
    errors: dict[int, float] = {}
    for train, test in folds.split(features):
        ks = [k for k in grid if k <= train.size] or [train.size]
        search = NearestNeighbors(n_neighbors=max(ks), algorithm="brute").fit(features[train])
        neighbours = search.kneighbors(features[test], return_distance=False)
        running = np.cumsum(quality[train][neighbours], axis=1)  # (test, kmax, M)
        for k in ks:
            err = float(((running[:, k - 1] / k - quality[test]) ** 2).sum())
            errors[k] = errors.get(k, 0.0) + err
    return errors


class NearestPrompts:
    """kNN over prompt embeddings; ``k_`` the chosen number of neighbours, ``cv_errors_`` per k."""

    def __init__(self, grid: tuple[int, ...] = K_GRID, seed: int = 0) -> None:
        self.grid = grid
        self.seed = seed

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> NearestPrompts:
        self.cv_errors_ = cv_errors(features, quality, self.grid, self.seed)
        self.k_ = min(self.cv_errors_, key=lambda k: (self.cv_errors_[k], k))
        self.model_ = KNeighborsRegressor(n_neighbors=min(self.k_, features.shape[0]), algorithm="brute")
        self.model_.fit(features, quality)
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        return np.asarray(self.model_.predict(features), dtype=np.float64)
