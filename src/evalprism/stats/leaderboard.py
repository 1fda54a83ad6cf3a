"""A marginal leaderboard: one pairwise-model fit to battles, with 95% confidence intervals.

This is the public face of :mod:`evalprism.stats.pairwise`: ``fit_pairwise(battles, model, ci)``
takes a battles table (any supported format, canonicalised at the boundary) or already aggregated
:class:`PairCounts`, and returns a :class:`Leaderboard` whose ``.frame()`` is the table users read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.battles import battle_arrays, to_canonical_battles
from evalprism.stats.outcome_models import PairModel
from evalprism.stats.pairwise import (
    PairCounts,
    PairwiseFit,
    bootstrap_coefs,
    elo_ratings,
    fit_counts,
    sandwich_cov,
)

CiMethod = Literal["sandwich", "bootstrap"]
Z95 = 1.959963984540054  # standard normal 97.5% quantile


@dataclass(frozen=True)
class Leaderboard:
    """Fitted coefficients per model with 95% intervals (NaN when ``ci`` was None)."""

    names: list[str]
    coefs: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    battles: np.ndarray
    fit: PairwiseFit
    ci: str | None

    @property
    def model(self) -> str:
        return self.fit.model

    @property
    def extra(self) -> float | None:
        """η for ``rk``, λ for ``grk``, None otherwise."""
        return self.fit.extra

    def frame(self) -> pd.DataFrame:
        """Columns rank, model, coef, lower, upper, rating, battles; best model first."""
        board = pd.DataFrame({
            "model": self.names, "coef": self.coefs, "lower": self.lower, "upper": self.upper,
            "rating": elo_ratings(self.coefs), "battles": self.battles,
        }).sort_values(["coef", "model"], ascending=[False, True], kind="stable").reset_index(drop=True)
        board.insert(0, "rank", np.arange(1, len(board) + 1))
        return board


def fit_pairwise(
    battles: pd.DataFrame | PairCounts,
    model: PairModel = "bt",
    ci: CiMethod | None = "sandwich",
    *,
    names: list[str] | None = None,
    rounds: int = 100,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> Leaderboard:
    """Fit ``model`` (``bt``, ``bt-tie``, ``rk`` or ``grk``) to ``battles`` by maximum likelihood.

    ``ci``: ``sandwich`` (robust closed form), ``bootstrap`` (``rounds`` multinomial resamples of
    the aggregated counts, percentile intervals; ``on_step`` is called once per round) or None.
    ``names`` labels the models of a :class:`PairCounts` (default: their indices).
    """
    if isinstance(battles, PairCounts):
        pairs = battles
        names = names or [str(i) for i in range(pairs.n_models)]
    else:
        arrays = battle_arrays(to_canonical_battles(battles), names)
        names = arrays.names
        pairs = PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(names), p_b=arrays.p_b)
    fit = fit_counts(pairs, model, names=names)
    n = len(names)
    if ci == "sandwich":
        se = np.sqrt(np.clip(np.diag(sandwich_cov(fit, pairs))[:n], 0, None))
        lower, upper = fit.coefs - Z95 * se, fit.coefs + Z95 * se
    elif ci == "bootstrap":
        boot = bootstrap_coefs(pairs, model, rounds=rounds, seed=seed, on_step=on_step, x0=fit.params)
        lower, upper = np.percentile(boot, [2.5, 97.5], axis=0)
    elif ci is None:
        lower = upper = np.full(n, np.nan)
    else:
        raise EvalprismError(f"unknown confidence-interval method '{ci}': expected sandwich or bootstrap")
    played = np.bincount(np.concatenate([pairs.a, pairs.b]),
                         weights=np.concatenate([pairs.counts.sum(axis=1)] * 2), minlength=n)
    return Leaderboard(list(names), fit.coefs, lower, upper, np.rint(played).astype(np.int64), fit, ci)
