"""The MLP router: a small multilayer perceptron regresses every model's quality on the prompt features.

scikit-learn's ``MLPRegressor``, one hidden layer of :data:`HIDDEN` units, Adam with early stopping on
10% of the training items (its own validation split: no held-out item is seen). The L2 penalty is
chosen from :data:`ALPHAS` by the best early-stopping validation score, so the one hyper-parameter
that matters on a few thousand items is set inside the training split.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

HIDDEN = 64
ALPHAS = (1e-4, 1e-2)
#: fewer training items than this: no early-stopping split (too few to validate on), the first penalty
MIN_EARLY_STOPPING = 50


class MLPQuality:
    """An MLP of every model's quality; ``alpha_`` the chosen penalty, ``model_`` the fitted network."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def _network(self, alpha: float, early: bool) -> MLPRegressor:
        return MLPRegressor(
            hidden_layer_sizes=(HIDDEN,),
            alpha=alpha,
            early_stopping=early,
            validation_fraction=0.1,
            n_iter_no_change=10,
            max_iter=200,
            random_state=self.seed,
        )

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> MLPQuality:
        best: tuple[float, MLPRegressor, float] | None = None
        early = features.shape[0] >= MIN_EARLY_STOPPING
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            for alpha in ALPHAS if early else ALPHAS[:1]:
                net = self._network(alpha, early).fit(features, quality)
                score = float(net.best_validation_score_) if early else 0.0
                if best is None or score > best[0]:
                    best = (score, net, alpha)
        assert best is not None
        self.model_, self.alpha_ = best[1], best[2]
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        out = np.asarray(self.model_.predict(features), dtype=np.float64)
        return out.reshape(features.shape[0], -1)
