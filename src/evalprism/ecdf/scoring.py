"""The quality value of one response (seed 001, eq. 3, and two lexical alternatives).

- ``cosine`` (the default, the paper's eq. 3): the maximum cosine similarity of the response's
  embedding to the embeddings of its references. It measures closeness of wording and meaning, so a
  fluent wrong option can score above a correct answer worded differently.
- ``exact``: 1 when the normalised response equals a normalised reference, else 0.
- ``contains``: 1 when a normalised reference occurs in the normalised response as a whole phrase
  (not inside a longer word or number: ``"4"`` is not found in ``"42"``), else 0.

Normalisation (:func:`normalise_answer`, one rule for scores and for the report's ✓ marks): case
folded, runs of whitespace collapsed, surrounding space and final punctuation removed.
A response without an answer (no ``--extract`` match) scores 0 under every rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np

from evalprism.errors import EvalprismError

ScoreRule = Literal["cosine", "exact", "contains"]
SCORE_RULES: tuple[str, ...] = ("cosine", "exact", "contains")

#: what the report says the quality value is, per rule
DESCRIPTIONS = {
    "cosine": "max cosine similarity to references (eq. 3)",
    "exact": "exact match to a reference (normalised text, 0/1)",
    "contains": "contains a reference (normalised text, 0/1)",
}
#: a reference this short (in words) is a canonical answer: a date, a number, yes/no, a name
SHORT_REFERENCE_WORDS = 3

_SPACE = re.compile(r"\s+")


def normalise_answer(text: object) -> str:
    """Text compared with a reference: case, runs of whitespace, surrounding space and final
    punctuation ignored."""
    return _SPACE.sub(" ", str(text)).strip().rstrip(".!?;:,").strip().casefold()


def score_rule(value: str) -> ScoreRule:
    """The ``score`` option, checked."""
    if value not in SCORE_RULES:
        raise EvalprismError(f"score: expected one of {', '.join(SCORE_RULES)}, got '{value}'", parameter="score")
    return value  # type: ignore[return-value]


def lexical_scores(answers: Sequence[str], answered: np.ndarray, ref_lists: Sequence[tuple[str, ...]],
                   rule: ScoreRule) -> np.ndarray:
    """0/1 per response under ``rule`` (``exact`` or ``contains``); 0 where there is no answer."""
    out = np.zeros(len(answers), dtype=np.float64)
    patterns: dict[tuple[str, ...], re.Pattern[str] | frozenset[str]] = {}
    for i, (answer, refs) in enumerate(zip(answers, ref_lists, strict=True)):
        if not answered[i]:
            continue
        norm = patterns.get(refs)
        if norm is None:
            gold = [g for g in (normalise_answer(r) for r in refs) if g]
            if rule == "exact":
                norm = frozenset(gold)
            else:  # a whole phrase: no word character directly before or after it
                norm = re.compile("|".join(rf"(?<!\w){re.escape(g)}(?!\w)" for g in gold) or r"(?!x)x")
            patterns[refs] = norm
        text = normalise_answer(answer)
        hit = text in norm if isinstance(norm, frozenset) else norm.search(text) is not None
        out[i] = float(hit)
    return out


def short_reference_share(ref_lists: Sequence[tuple[str, ...]]) -> float:
    """The share of distinct references of at most :data:`SHORT_REFERENCE_WORDS` words."""
    distinct = {r for refs in ref_lists for r in refs}
    if not distinct:
        return 0.0
    return sum(len(r.split()) <= SHORT_REFERENCE_WORDS for r in distinct) / len(distinct)
