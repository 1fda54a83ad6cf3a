"""The MLP router: a small multilayer perceptron regresses every model's quality on the prompt features.

scikit-learn's ``MLPRegressor``, one hidden layer of :data:`HIDDEN` units, Adam with early stopping on
10% of the training items (its own validation split: no held-out item is seen). The L2 penalty is
chosen from :data:`ALPHAS` by the best early-stopping validation score, so the one hyper-parameter
that matters on a few thousand items is set inside the training split.

Quality learned from pairwise battles is sparse (NaN where a model did not fight on a prompt), which
``MLPRegressor`` cannot fit. There the same network (one hidden layer of :data:`HIDDEN` ReLU units,
Adam, batches of 200, at most 200 epochs, early stopping after 10 epochs without improvement on 10% of
the training prompts, the best epoch's weights kept, the L2 penalty α ‖W‖²/2n chosen from
:data:`ALPHAS` by the validation error) is fitted in torch with a *masked* squared loss: only the
observed entries count (:class:`MaskedNetwork`).
"""

from __future__ import annotations

import warnings
from typing import Any

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
        if np.isnan(quality).any():
            return self._fit_masked(features, quality)
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

    def _fit_masked(self, features: np.ndarray, quality: np.ndarray) -> MLPQuality:
        """Sparse quality (module docstring): the penalty with the lowest masked validation error."""
        n = features.shape[0]
        early = n >= MIN_EARLY_STOPPING
        held = np.random.default_rng(self.seed).permutation(n)[: max(1, n // 10)] if early else np.zeros(0, int)
        fitted = [
            MaskedNetwork(alpha, self.seed).fit(features, quality, held) for alpha in (ALPHAS if early else ALPHAS[:1])
        ]
        self.model_ = min(fitted, key=lambda net: net.validation_error_)
        self.alpha_ = self.model_.alpha
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        out = np.asarray(self.model_.predict(features), dtype=np.float64)
        return out.reshape(features.shape[0], -1)


class MaskedNetwork:
    """One hidden layer fitted with a squared loss over the observed entries of sparse quality (the
    module docstring's settings); ``validation_error_`` the best epoch's masked mean squared error on the
    validation rows (0 without any)."""

    def __init__(self, alpha: float, seed: int) -> None:
        self.alpha, self.seed = alpha, seed

    def fit(self, features: np.ndarray, quality: np.ndarray, validation: np.ndarray) -> MaskedNetwork:
        import torch

        gen = torch.Generator().manual_seed(self.seed)
        torch.manual_seed(self.seed)
        x = torch.as_tensor(features, dtype=torch.float32)
        seen = torch.as_tensor(np.isfinite(quality))
        y = torch.as_tensor(np.nan_to_num(quality), dtype=torch.float32)
        fit_rows = torch.as_tensor(np.setdiff1d(np.arange(features.shape[0]), validation))
        val_rows = torch.as_tensor(validation, dtype=torch.long)
        hidden, output = torch.nn.Linear(x.shape[1], HIDDEN), torch.nn.Linear(HIDDEN, quality.shape[1])
        net = torch.nn.Sequential(hidden, torch.nn.ReLU(), output)
        optimiser = torch.optim.Adam(net.parameters(), lr=1e-3)
        weights = [hidden.weight, output.weight]
        best, best_state, stale = float("inf"), None, 0
        for _ in range(200):
            for take in fit_rows[torch.randperm(fit_rows.numel(), generator=gen)].split(200):
                loss = _masked_mse(net(x[take]), y[take], seen[take]) / 2
                loss = loss + self.alpha * (weights[0].square().sum() + weights[1].square().sum()) / (
                    2 * fit_rows.numel()
                )
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
            if not val_rows.numel():
                continue
            with torch.no_grad():
                error = float(_masked_mse(net(x[val_rows]), y[val_rows], seen[val_rows]))
            if error < best - 1e-4:
                best, best_state, stale = error, {k: v.clone() for k, v in net.state_dict().items()}, 0
            elif (stale := stale + 1) >= 10:
                break
        if best_state is not None:
            net.load_state_dict(best_state)
        self.net_, self.validation_error_ = net, best if val_rows.numel() else 0.0
        return self

    def predict(self, features: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.net_(torch.as_tensor(features, dtype=torch.float32)).numpy().astype(np.float64)


def _masked_mse(predicted: Any, target: Any, seen: Any) -> Any:
    """Mean squared error over the observed entries (torch tensors)."""
    return ((predicted - target) ** 2 * seen).sum() / seen.sum().clamp(min=1)
