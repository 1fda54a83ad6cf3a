"""Which runs are tied for best: the model confidence set (Hansen, Lunde and Nason 2011).

With many checkpoints the question is not 190 pairwise sentences but which runs cannot be told from
the best. The MCS at level α holds the best run(s) with probability at least 1 - α: starting from all
runs, it tests "all remaining runs have equal expected loss" and, while rejected, eliminates the
worst; the runs left form the set, and each eliminated run's MCS p-value says how clearly it was
eliminated (its elimination order).

Losses are 1 - score per item (per cluster mean where items come in clusters, the cluster being the
resampled unit). The procedure is ``arch.bootstrap.MCS`` (Sheppard's arch, the reference
implementation), with an independent bootstrap of items (block size 1: items, unlike days of a
time series, are exchangeable) and the range statistic ``T_R`` of the paper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConfidenceSet:
    """The set at level ``1 - alpha``: ``included`` runs (tied for best), and every run with its MCS
    p-value in elimination order (``order``: the first eliminated first; the set's runs last, p = 1
    for the last one standing)."""

    alpha: float
    included: tuple[str, ...]
    order: tuple[tuple[str, float], ...]
    units: int

    def sentence(self) -> str:
        """The set in words."""
        names = ", ".join(self.included)
        tied = "is the best" if len(self.included) == 1 else "are tied for best"
        return f"{names} {tied} (model confidence set at {1 - self.alpha:.0%}, {self.units} items resampled)"


def model_confidence_set(
    losses: np.ndarray, runs: Sequence[str], alpha: float = 0.1, reps: int = 2000, seed: int = 0
) -> ConfidenceSet:
    """The MCS of ``runs`` from ``losses`` (units x runs; lower is better) at level ``1 - alpha``."""
    from arch.bootstrap import MCS  # heavy (statsmodels): only when a set is asked for

    losses = np.asarray(losses, dtype=np.float64)
    assert losses.ndim == 2 and losses.shape[1] == len(runs) >= 2
    import pandas as pd

    frame = pd.DataFrame(losses, columns=list(range(len(runs))))
    mcs = MCS(frame, size=alpha, reps=reps, block_size=1, bootstrap="circular", seed=seed, method="R")
    mcs.compute()
    position: dict[object, str] = {i: str(name) for i, name in enumerate(runs)}
    order = tuple((position[i], float(p)) for i, p in zip(mcs.pvalues.index, mcs.pvalues["Pvalue"], strict=True))
    included = tuple(name for i, name in position.items() if i in set(mcs.included))
    return ConfidenceSet(alpha, included, order, losses.shape[0])
