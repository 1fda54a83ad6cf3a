"""The paper's rule (seed 003, Key Design 3, step 3): the capability boundary from a balanced subset.

The rule chosen here (the seed only says "the lowest TI at which accuracy begins to drop
significantly"): member ``M_j`` answers exactly the subset items with ``TI <= j``. Against ``M_j``
the discordant items are ``b_j`` = items of levels above j the model answers right and ``c_j`` =
items of levels up to j it answers wrong. The model is placed above ``M_j`` when ``b_j > c_j`` (it
beats ``M_j`` on the subset; ties count as not above). Because ``b_j - c_j`` falls as j grows, the
members it is placed above are ``M_1..M_p``: the position is ``p`` (0 = below the smallest, n =
above the largest), the capability boundary lies between TI levels ``p`` and ``p+1``, the interval
is (``M_p``, ``M_{p+1}``). Each side is tested with the exact one-sided McNemar (sign) test on the
discordant items, ``b ~ Binomial(b + c, 1/2)`` under "as capable as the member": ``p_lower = P(X >=
b_p)`` (evidence of being above ``M_p``) and ``p_upper = P(X <= b_{p+1})`` (evidence of being below
``M_{p+1}``). The paper calls ``1 - p_lower - p_upper`` (Bonferroni, floored at 0; an open end, p =
0 or n, contributes 0) the interval's confidence; it is shown as the *rule strength*
(:data:`~evalprism.stem.methods.RULE_STRENGTH_NOTE`), since it is a test statistic and not a probability of being right
(out of sample, values near 0.97 were right 39% of the time).

``weighting="stratified"`` (an option, not in the paper): the balanced subset gives every TI level
the same weight, while the full-benchmark ground truth weighs each level by its size (on MMLU-Pro
half the items are hard for all of Llama-2). With this option each drawn item of level k counts
``N_k / m_k`` (pool items of the level over items drawn from it) in the decision ``b_j > c_j``, an
estimate of the comparison on the whole pool; the p-values stay the exact test on the drawn items.

:func:`apply_rule` is the rule, once, for one subset or for every trial at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.stats.binomial import sign_test_pvalues
from evalprism.stats.irv import boundary_counts
from evalprism.vocabularies import Weighting


def level_weights(levels: list[np.ndarray], size: np.ndarray, weighting: Weighting) -> np.ndarray | None:
    """Weight of a drawn item per level: None (balanced) or pool items / drawn items (stratified)."""
    if weighting == "balanced":
        return None
    if weighting != "stratified":
        raise EvalprismError(f"weighting: expected 'balanced' or 'stratified', got {weighting!r}")
    pool_size = np.array([len(lv) for lv in levels], dtype=float)
    return np.where(size > 0, pool_size / np.maximum(size, 1), 0.0)


def positions_from_counts(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Members the model beats on the subset (``b_j > c_j``)."""
    return (b > c).sum(axis=-1)


def interval_confidence(
    position: np.ndarray, p_above: np.ndarray, p_below: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p_lower`` (above M_p), ``p_upper`` (below M_{p+1}) and the Bonferroni confidence."""
    position = np.asarray(position)
    n = p_above.shape[-1]
    lower_idx = np.clip(position - 1, 0, n - 1)[..., None]
    upper_idx = np.clip(position, 0, n - 1)[..., None]
    p_lower = np.where(position >= 1, np.take_along_axis(p_above, lower_idx, -1)[..., 0], 0.0)
    p_upper = np.where(position <= n - 1, np.take_along_axis(p_below, upper_idx, -1)[..., 0], 0.0)
    return p_lower, p_upper, np.clip(1.0 - p_lower - p_upper, 0.0, 1.0)


@dataclass(frozen=True)
class Placement:
    """The rule's answer for one subset (scalars and per-member vectors) or per trial (one more
    leading axis): ``position``; the discordant counts ``b``, ``c`` and the sign-test p-values
    ``p_above`` (better than the member), ``p_below`` (worse) against every member; ``p_lower``,
    ``p_upper`` of the bounding members and the ``strength`` (:data:`~evalprism.stem.methods.RULE_STRENGTH_NOTE`)."""

    position: np.ndarray
    b: np.ndarray
    c: np.ndarray
    p_above: np.ndarray
    p_below: np.ndarray
    p_lower: np.ndarray
    p_upper: np.ndarray
    strength: np.ndarray


def apply_rule(right: np.ndarray, size: np.ndarray, levels: list[np.ndarray], weighting: Weighting) -> Placement:
    """The rule (module docstring) on items right per TI level ``right`` (last axis: levels 1..n+1,
    leading axes: trials) out of ``size`` drawn per level; ``levels``: the pool's items of each
    level the draw came from (their sizes weigh the levels under ``weighting="stratified"``)."""
    b, c = boundary_counts(right, size)
    position = positions_from_counts(*boundary_counts(right, size, level_weights(levels, size, weighting)))
    p_above, p_below = sign_test_pvalues(b, c)
    p_lower, p_upper, strength = interval_confidence(position, p_above, p_below)
    return Placement(
        position=position,
        b=b,
        c=c,
        p_above=p_above,
        p_below=p_below,
        p_lower=p_lower,
        p_upper=p_upper,
        strength=strength,
    )
