"""The lexical rules that score an answer against its references (seed 001's two alternatives to
eq. 3's cosine), one rule for every reader of responses: `ecdf`'s quality values and a responses file
read as items (`compare`, `p2l`; :mod:`evalprism.io.responses`).

- ``exact``: 1 when the normalised response equals a normalised reference, else 0.
- ``contains``: 1 when a normalised reference occurs in the normalised response as a whole phrase
  (not inside a longer word or number: ``"4"`` is not found in ``"42"``), else 0.

Normalisation (:func:`normalise_answer`, one rule for scores and for the report's ✓ marks): case
folded, runs of whitespace collapsed, surrounding space and final punctuation removed. ``exact``
also compares numbers as numbers (:func:`answer_key`): ``3.0`` = ``3``, ``$70`` = ``70``,
``1,000`` = ``1000``, ``-0.50`` = ``-.5``; the vote of ``final="majority"`` counts answers by the same key.
A response without an answer (no ``--extract`` match) scores 0 under every rule. Cosine similarity
needs embeddings and stays with `ecdf` (:mod:`evalprism.ecdf.scoring`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import numpy as np

from evalprism.io.answers import Answers
from evalprism.vocabularies import ScoreRule

#: what a report says the quality value is, per lexical rule
DESCRIPTIONS = {
    "exact": "exact match to a reference (normalised text, numbers compared as numbers, 0/1)",
    "contains": "contains a reference (normalised text, 0/1)",
}

_SPACE = re.compile(r"\s+")


def normalise_answer(text: object) -> str:
    """Text compared with a reference: case, runs of whitespace, surrounding space and final
    punctuation ignored."""
    return _SPACE.sub(" ", str(text)).strip().rstrip(".!?;:,").strip().casefold()


_CURRENCY = "$€£¥"
_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?", re.ASCII)
_NUMBER_IN_TEXT = re.compile(r"[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|[+-]?\.\d+", re.ASCII)


def numeric_key(text: str) -> str | None:
    """The canonical form of a number written as text (``$1,000.50`` -> ``1000.5``, ``3.0`` -> ``3``),
    or None when ``text`` (already normalised) is not one number. A currency sign before the number and
    thousands separators in groups of three are ignored; ``1,5`` is not a number here."""
    body = text.strip()
    sign = ""
    if body and body[0] in "+-":
        sign, body = body[0], body[1:].lstrip()
    body = body.lstrip(_CURRENCY).strip()
    if not body or not _NUMBER.fullmatch(body) or not any(ch.isdigit() for ch in body):
        return None
    try:
        value = Decimal(sign + body.replace(",", ""))
    except InvalidOperation:  # the pattern admits only plain decimals; this is a guard, not a path
        return None
    out = format(value.normalize(), "f")
    return "0" if out in ("-0", "+0") else out


def answer_key(text: object) -> str:
    """What ``exact`` compares (and the majority vote counts): a number's canonical form, else the
    normalised text."""
    norm = normalise_answer(text)
    return numeric_key(norm) or norm


def lexical_scores(
    answers: Sequence[str], answered: np.ndarray, ref_lists: Sequence[tuple[str, ...]], rule: ScoreRule
) -> np.ndarray:
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
                norm = frozenset(answer_key(g) for g in gold)
            else:  # a whole phrase: no word character directly before or after it
                norm = re.compile("|".join(rf"(?<!\w){re.escape(g)}(?!\w)" for g in gold) or r"(?!x)x")
            patterns[refs] = norm
        text = answer_key(answer) if isinstance(norm, frozenset) else normalise_answer(answer)
        hit = text in norm if isinstance(norm, frozenset) else norm.search(text) is not None
        out[i] = float(hit)
    return out


def numeric_mismatches(
    answers: Sequence[str], answered: np.ndarray, ref_lists: Sequence[tuple[str, ...]], scores: np.ndarray
) -> tuple[int, int, str]:
    """Of the answered responses scored 0, how many contain the reference number as their last
    number (``"so she pays $70 in total"`` for ``70``): the answer span was not isolated, not wrong.
    Returns (such mismatches, all mismatches, the first such answer)."""
    hits, total, example = 0, 0, ""
    for answer, ok, refs, score in zip(answers, answered, ref_lists, scores, strict=True):
        if not ok or score > 0:
            continue
        total += 1
        gold = {k for k in (numeric_key(normalise_answer(r)) for r in refs) if k is not None}
        numbers = _NUMBER_IN_TEXT.findall(normalise_answer(answer))
        if gold and numbers and numeric_key(numbers[-1]) in gold:
            hits += 1
            example = example or answer
    return hits, total, example


def numeric_mismatch_notes(
    answers: Sequence[str], answered: np.ndarray, ref_lists: Sequence[tuple[str, ...]], scores: np.ndarray
) -> list[str]:
    """A warning when most exact-match mismatches end on the reference number: the answers hold more
    than the answer, and exact match counts them wrong (no warning: an empty list)."""
    hits, total, example = numeric_mismatches(answers, answered, ref_lists, scores)
    if not total or hits <= total / 2:
        return []
    cut = example if len(example) <= 60 else "…" + example[-59:]
    return [
        f"{hits} of {total} exact-match mismatches end on the reference number (e.g. '{cut}'): the "
        "answer is not isolated; take it out with extract=... / --extract REGEX (e.g. "
        "'(-?[\\d,.]+)\\D*$'), or score with 'contains'"
    ]


@dataclass(frozen=True)
class LexicalScores:
    """Quality 0/1 per response under a lexical rule, and what scoring noted (exact-match answers
    that are not isolated)."""

    values: np.ndarray
    notes: tuple[str, ...] = ()


def score_answers(answers: Answers, rule: ScoreRule, where: str) -> LexicalScores:
    """Quality 0/1 per response of ``answers`` under the lexical ``rule`` (``exact`` or ``contains``:
    :func:`lexical_scores`), with the exact-match note on answers that are not isolated: the one
    lexical scoring `ecdf` and `compare` share."""
    scores = lexical_scores(answers.texts, answers.answered, answers.references, rule)
    notes: tuple[str, ...] = ()
    if rule == "exact":
        mismatches = numeric_mismatch_notes(answers.texts, answers.answered, answers.references, scores)
        notes = tuple(f"{where}: {n}" for n in mismatches)
    return LexicalScores(scores, notes)
