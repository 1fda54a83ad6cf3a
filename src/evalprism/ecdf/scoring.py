"""The quality value of one response by embeddings (seed 001, eq. 3), beside the lexical rules.

- ``cosine`` (the default, the paper's eq. 3): the maximum cosine similarity of the response's
  embedding to the embeddings of its references (:func:`cosine_scores`). It measures closeness of
  wording and meaning, so a fluent wrong option can score above a correct answer worded differently;
  :func:`short_reference_share` tells when the references are short canonical answers, where it does.
- ``exact`` and ``contains``: the lexical rules every reader of responses shares
  (:mod:`evalprism.io.lexical`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalprism.io.lexical import DESCRIPTIONS as LEXICAL_DESCRIPTIONS
from evalprism.keyed import content_order
from evalprism.vocabularies import ScoreRule, choices

SCORE_RULES = choices(ScoreRule)

#: what the report says the quality value is, per rule
DESCRIPTIONS = {"cosine": "max cosine similarity to references (eq. 3)", **LEXICAL_DESCRIPTIONS}
#: a reference this short (in words) is a canonical answer: a date, a number, yes/no, a name
SHORT_REFERENCE_WORDS = 3


def cosine_scores(
    resp_vecs: np.ndarray,
    ref_lists: list[tuple[str, ...]],
    ref_index: dict[str, int],
    ref_vecs: np.ndarray,
    answers: Sequence[str],
) -> np.ndarray:
    """Eq. (3): each response's maximum cosine similarity to its own references (unit vectors).

    The rows sharing references form one matrix product, its rows in answer order: a row's place in
    a float32 product changes its last bits, so the same responses in another row order must make
    the same matrices."""
    out = np.empty(len(ref_lists), dtype=np.float64)
    by_refs: dict[tuple[str, ...], list[int]] = {}
    for row in content_order(answers):
        by_refs.setdefault(ref_lists[row], []).append(int(row))
    for refs, rows in by_refs.items():
        refs_mat = ref_vecs[[ref_index[r] for r in refs]]
        sims = resp_vecs[rows] @ refs_mat.T
        out[rows] = sims.max(axis=1)
    return np.clip(out, -1.0, 1.0)


def short_reference_share(ref_lists: Sequence[tuple[str, ...]]) -> float:
    """The share of distinct references of at most :data:`SHORT_REFERENCE_WORDS` words."""
    distinct = {r for refs in ref_lists for r in refs}
    if not distinct:
        return 0.0
    return sum(len(r.split()) <= SHORT_REFERENCE_WORDS for r in distinct) / len(distinct)
