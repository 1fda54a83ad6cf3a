"""The routers people deploy, as baselines for P2L (``evalprism p2l bench``): one registry.

Each entry learns, from training items only, a *predicted quality* (n_items, n_models) from the items'
prompt features (and their benchmark, where the data name one); the budget rule that turns predicted
quality into a routing policy is the same for every entry and for P2L
(:func:`evalprism.p2l.bench_policies.routed`: Theorem 1). The entries:

- ``knn``: k nearest training prompts by embedding (RouterArena's and LLMRouterBench's strongest simple
  baseline), k by cross-validation inside the training split (:mod:`.neighbours`);
- ``mlp``: a small MLP regressor of every model's quality (:mod:`.mlp`);
- ``mf``: RouteLLM's matrix factorisation (:mod:`.matrix_factorization`);
- ``benchmark leaderboard``: each model's mean quality per benchmark (overall where no benchmark is
  named), the leaderboard a user would read off per task (:mod:`.leaderboards`).

The best single model, the cost-matched random mix and the oracle are policies without a learned
predictor: :mod:`evalprism.p2l.bench_policies`.

Learned from pairwise battles (:mod:`evalprism.p2l.bench_battles`) the training quality is sparse (NaN
where a model did not fight on a prompt) and every entry fits with the missing entries left out; an entry
with ``fit_battles(features, pairs, models)`` (``mf``) learns from the decisive battles themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

__all__ = ["ROUTERS", "QualityRouter", "RouterEntry", "get_router"]


class QualityRouter(Protocol):
    """What every entry builds: ``fit`` on training features (n, d), quality (n, M) and benchmark
    names (n,), returning itself; ``predict`` the quality (n', M) of new items."""

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> QualityRouter: ...

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class RouterEntry:
    """One baseline: its ``name`` (the policy's name in the tables), a ``build(seed)`` factory and a
    one-line ``description`` for the report."""

    name: str
    build: Callable[[int], QualityRouter]
    description: str


def _entries() -> tuple[RouterEntry, ...]:
    from evalprism.p2l.routers.leaderboards import BenchmarkLeaderboard
    from evalprism.p2l.routers.matrix_factorization import MatrixFactorization
    from evalprism.p2l.routers.mlp import MLPQuality
    from evalprism.p2l.routers.neighbours import NearestPrompts

    return (
        RouterEntry("knn", lambda seed: NearestPrompts(seed=seed), "k nearest training prompts (k by 5-fold CV)"),
        RouterEntry("mlp", lambda seed: MLPQuality(seed=seed), "MLP regressor of every model's quality"),
        RouterEntry("mf", lambda seed: MatrixFactorization(seed=seed), "RouteLLM's matrix factorisation"),
        RouterEntry(
            "benchmark leaderboard",
            lambda seed: BenchmarkLeaderboard(),
            "each model's mean training quality on the item's benchmark",
        ),
    )


#: the learned baselines in table order (built on first use: scikit-learn and torch load with them)
ROUTERS: tuple[str, ...] = ("knn", "mlp", "mf", "benchmark leaderboard")


def get_router(name: str) -> RouterEntry:
    """The registry entry called ``name``."""
    found = {entry.name: entry for entry in _entries()}
    return found[name]
