"""The paper's balanced subset (seed 003, Key Design 3, step 2): the same number of items from every TI level.

The pool's TI levels ``k = 1..n+1`` (easy, the strict STS levels 2..n, hard) each give
``m = items // (n+1)`` items drawn without replacement (a level with fewer items gives all it has);
only items the model can be scored on are drawn (:func:`~evalprism.stem.target.usable_items`: an
answer row, and with ``missing="exclude"`` an answer, score != -1). Trial ``t`` of seed ``s`` draws
with ``numpy.random.default_rng([s, t])`` from the items sorted by (benchmark, item_id), so the draw
does not depend on the order of the input rows. The rule that places the model from the drawn items
is :mod:`~evalprism.stem.rule`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.stem.target import Target, usable_items

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool


def level_items(pool: Pool, target: Target) -> list[np.ndarray]:
    """Pool item indices of each TI level 1..n+1 that the model can be scored on, in :attr:`Pool.item_order`."""
    in_pool = (pool.ti > 0) & usable_items(pool, target)
    order = pool.item_order
    order = order[in_pool[order]]
    ti = pool.ti[order]
    return [order[ti == k] for k in range(1, pool.n + 2)]


def per_level(items: int, levels: list[np.ndarray]) -> int:
    """Items drawn from each TI level."""
    m = items // len(levels)
    if m < 1:
        raise EvalprismError(
            f"items: {items} is fewer than the {len(levels)} TI levels of the pool; use at least {len(levels)}"
        )
    return m


def draw_subset(levels: list[np.ndarray], m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One balanced subset: pool indices and their TI level (1-based)."""
    picks, labels = [], []
    for k, members in enumerate(levels, 1):
        take = members if len(members) <= m else members[rng.choice(len(members), m, replace=False)]
        picks.append(take)
        labels.append(np.full(len(take), k, dtype=np.int64))
    return np.concatenate(picks), np.concatenate(labels)
