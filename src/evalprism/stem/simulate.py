"""A simulated model family with a planted item-response model (for tests, the demo and the benchmark).

Two-parameter logistic model: model m with ability ``theta_m`` answers item t right with
probability ``sigmoid(a_t (theta_m - b_t))``; difficulties ``b_t ~ N(0, 1.5^2)``, discriminations
``a_t ~ LogNormal(log 2, 0.3)``. Abilities rise with parameter count inside the family, so the
true order of any other model against the family is known from its ability (and its realised
full-benchmark score gives the ground truth STEM is judged by). A share ``no_answer`` of the
answers is replaced by -1.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

#: the demo family: name -> (params in billions, ability)
FAMILY = {"toy-1b": (1.0, -1.6), "toy-4b": (4.0, -0.6), "toy-14b": (14.0, 0.4), "toy-70b": (70.0, 1.4)}
#: models of other families to locate: name -> ability
OTHERS = {"other-a": -2.3, "other-b": -1.1, "other-c": -0.1, "other-d": 0.9, "other-e": 2.1}


def simulate_family(
    n_items: int = 3000,
    family: Mapping[str, tuple[float, float]] | None = None,
    others: Mapping[str, float] | None = None,
    benchmarks: int = 2,
    no_answer: float = 0.01,
    seed: int = 0,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Correctness (model, benchmark, item_id, score) of the family and the other models, and the
    metadata (model, params, family; other models have no params)."""
    family = FAMILY if family is None else family
    others = OTHERS if others is None else others
    rng = np.random.default_rng(seed)
    b = rng.normal(0.0, 1.5, n_items)
    a = rng.lognormal(np.log(2.0), 0.3, n_items)
    names = list(family) + list(others)
    theta = np.array([family[m][1] for m in family] + [others[m] for m in others])
    p = 1.0 / (1.0 + np.exp(-a[None, :] * (theta[:, None] - b[None, :])))
    score = (rng.random(p.shape) < p).astype(np.int64)
    score[rng.random(p.shape) < no_answer] = -1
    bench = np.array([f"bench-{i % benchmarks + 1}" for i in range(n_items)])
    correctness = pd.DataFrame(
        {
            "model": np.repeat(names, n_items),
            "benchmark": np.tile(bench, len(names)),
            "item_id": np.tile([f"q{i}" for i in range(n_items)], len(names)),
            "score": score.ravel(),
        }
    )
    meta = pd.DataFrame(
        {
            "model": names,
            "params": [family[m][0] for m in family] + [np.nan] * len(others),
            "family": ["toy"] * len(family) + ["other"] * len(others),
        }
    )
    return correctness, meta
