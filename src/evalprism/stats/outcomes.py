"""The four outcomes of a pairwise battle, in the order every count matrix and log-probability uses.

Outcome ``j`` is ``OUTCOMES[j]``: the battles table's ``winner`` value, and column ``j`` of the
count matrices (:class:`~evalprism.stats.pairwise.PairCounts`) and of the log-probabilities of
every outcome model (:mod:`evalprism.stats.outcome_models`). The codes live here, below the
readers, so that the numeric kernels need no reader: :mod:`evalprism.io.battles` imports them.
This module imports nothing, so reading it costs nothing (the CLI's ``--help`` path included).
"""

from __future__ import annotations

__all__ = ["A_WINS", "BOTH_BAD", "B_WINS", "OUTCOMES", "OUTCOME_INDEX", "TIE"]

OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
#: outcome indices: A wins, B wins, a tie, a tie where both answers are bad
A_WINS, B_WINS, TIE, BOTH_BAD = range(4)
#: outcome index of each winner value
OUTCOME_INDEX: dict[str, int] = {w: i for i, w in enumerate(OUTCOMES)}
