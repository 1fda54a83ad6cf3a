"""Inference result vectors, significant transition samples and transition indices (seed 003,
Key Design 1), as numpy kernels on an items x models matrix ordered by parameter count.

An item's IRV is ``(v_1, ..., v_n)`` with ``v_i`` in {1 right, 0 wrong, -1 no answer} for family
member ``M_i`` (``M_1`` smallest). With ``missing="wrong"`` a -1 counts as 0; with
``missing="exclude"`` an item on which any member gave no answer is left out (kind ``excluded``).

- monotone: the 0/1 vector never goes from 1 back to 0 (at most one 0 -> 1 transition);
- anomalous: not monotone (a smaller model right where a larger one is wrong: the contamination
  signal of Table 3);
- transition index TI (1-based, as the seed's ``k in {1, ..., n+1}``): the position of the first
  member that answers right, ``TI = n - (number right) + 1``. ``TI = 1``: every member is right
  (kind ``easy``); ``2 <= TI <= n``: exactly one 0 -> 1 transition, a significant transition
  sample in the strict sense (kind ``sts``); ``TI = n + 1``: every member is wrong (kind ``hard``,
  kept in the pool as in the seed). Member ``M_j`` answers exactly the pool items with ``TI <= j``.

:func:`boundary_counts` turns a model's answers per TI level into its discordant counts against
every member (the sign test of the localization, :mod:`evalprism.stem.rule`).
"""

from __future__ import annotations

import numpy as np

from evalprism.vocabularies import Missing

KINDS = ("easy", "sts", "hard", "anomalous", "excluded")
#: kind codes as stored per item (index into :data:`KINDS`)
EASY, STS, HARD, ANOMALOUS, EXCLUDED = range(5)


def correct_matrix(irv: np.ndarray) -> np.ndarray:
    """1 where right, 0 where wrong or no answer (boolean)."""
    return np.asarray(irv) == 1


def monotone(irv: np.ndarray) -> np.ndarray:
    """Per item: True when the 0/1 vector (-1 as wrong) has no 1 -> 0 step along the family."""
    right = correct_matrix(irv)
    if right.shape[1] < 2:
        return np.ones(right.shape[0], dtype=bool)
    return ~(right[:, :-1] & ~right[:, 1:]).any(axis=1)


def transition_index(irv: np.ndarray) -> np.ndarray:
    """1-based TI of each item, valid for monotone items: ``n - right + 1`` (n + 1 when all wrong)."""
    right = correct_matrix(irv)
    return (right.shape[1] - right.sum(axis=1) + 1).astype(np.int64)


def classify(irv: np.ndarray, missing: Missing = "wrong") -> tuple[np.ndarray, np.ndarray]:
    """Kind code (see :data:`KINDS`) and TI (0 where the item has no TI) of each item."""
    irv = np.asarray(irv)
    n = irv.shape[1]
    ti = transition_index(irv)
    kind = np.full(irv.shape[0], STS, dtype=np.int8)
    kind[ti == 1] = EASY
    kind[ti == n + 1] = HARD
    kind[~monotone(irv)] = ANOMALOUS
    if missing == "exclude":
        kind[(irv == -1).any(axis=1)] = EXCLUDED
    ti = np.where(kind <= HARD, ti, 0)
    return kind, ti


def inversions(irv: np.ndarray) -> np.ndarray:
    """Per item: pairs (i < j) with the smaller member right and the larger wrong (0 when monotone);
    how strongly an anomalous IRV contradicts scaling."""
    right = correct_matrix(irv).astype(np.int64)
    wrong_after = np.cumsum(1 - right[:, ::-1], axis=1)[:, ::-1]  # wrong members at positions >= i
    later_wrong = np.concatenate([wrong_after[:, 1:], np.zeros((right.shape[0], 1), np.int64)], axis=1)
    return (right * later_wrong).sum(axis=1)


def irv_text(irv: np.ndarray) -> np.ndarray:
    """IRVs as text, values separated by spaces (``"0 0 1 1"``, ``"-1 0 1 1"``)."""
    irv = np.asarray(irv)
    if irv.shape[0] == 0:
        return np.array([], dtype=object)
    parts = np.where(irv == -1, "-1", np.where(irv == 1, "1", "0"))
    out = parts[:, 0].astype(object)
    for j in range(1, irv.shape[1]):
        out = out + " " + parts[:, j]
    return out


def parse_irv(texts: np.ndarray | list[str], n: int, where: str = "pool.csv") -> np.ndarray:
    """Inverse of :func:`irv_text`; every IRV must have ``n`` values in {1, 0, -1}."""
    from evalprism.errors import EvalprismError

    flat = " ".join(map(str, texts)).split()
    values = np.array(flat, dtype=object)
    if values.size != n * len(texts) or not np.isin(values, ["1", "0", "-1"]).all():
        row = next(
            i for i, t in enumerate(texts) if len(parts := str(t).split()) != n or not set(parts) <= {"1", "0", "-1"}
        )
        raise EvalprismError(
            f"{where}: row {row + 1}, column 'irv': expected {n} values in {{1, 0, -1}} (one per "
            f"family member), got {str(texts[row])!r}"
        )
    return values.astype(np.int8).reshape(len(texts), n)


def boundary_counts(
    correct_by_level: np.ndarray, size_by_level: np.ndarray, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Discordant counts against every member: ``b[..., j-1]`` = right at levels > j, ``c[..., j-1]``
    = wrong at levels <= j, for j = 1..n (levels are the last axis, n + 1 of them); each level's
    counts multiplied by ``weight`` when given. Member ``M_j`` answers exactly the items of levels
    <= j, so these are the items where the model and ``M_j`` disagree."""
    correct = np.asarray(correct_by_level, dtype=np.int64)
    wrong = np.asarray(size_by_level, dtype=np.int64) - correct
    if weight is not None:
        correct, wrong = correct * weight, wrong * weight
    c = np.cumsum(wrong, axis=-1)[..., :-1]
    b = correct.sum(axis=-1, keepdims=True) - np.cumsum(correct, axis=-1)[..., :-1]
    return b, c
