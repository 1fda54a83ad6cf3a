"""The answer in a response, as every reader of responses takes it out: suffix stripping, answer
extraction, choice mapping (seed 001, section 4). `ecdf` scores the answers by embeddings or by the
lexical rules (:mod:`evalprism.io.lexical`), `compare` and `p2l` (a responses file read as items,
:mod:`evalprism.io.responses`) by the lexical rules.

- Suffixes: the seed removes the trailing ``.``, ``,``, ``;``, ``:`` and ``\\`` from references
  and responses before scoring and final-answer selection (section 4); surrounding whitespace
  goes too, repeatedly, so ``"4m. "`` becomes ``"4m"``.
- Extraction (optional): a regular expression takes the answer span out of a long response;
  the LAST match counts (chain-of-thought answers end with the answer), and its first capture
  group if it has one. A response with no match has no answer: it becomes the empty string.
  Patterns run on the ``regex`` module (Python's ``re`` syntax) with a time bound per response: a
  pattern that backtracks catastrophically (``(a|aa)+$`` on 41 characters runs for minutes under
  ``re``, which cannot be interrupted) is refused with its name and the response it stalled on.
- Choices (optional): for multiple-choice data, a per-row mapping label -> choice text turns an
  extracted label such as ``"C"`` into its text, so similarity compares meanings, not letters.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import regex

from evalprism.errors import EvalprismError, shorten

#: seconds one response may take to match the ``extract`` pattern (a real pattern takes microseconds)
MATCH_TIMEOUT_S = 1.0

SUFFIX_CHARS = ".,;:\\"


def strip_suffixes(text: str) -> str:
    """Remove trailing ``. , ; : \\`` and whitespace (seed 001, section 4)."""
    return text.strip().rstrip(SUFFIX_CHARS + " \t\r\n").strip()


def compile_extractor(pattern: str | None) -> regex.Pattern[str] | None:
    """Compile the ``extract`` pattern (``re`` syntax), or explain why it is not a valid regular expression."""
    if not pattern:
        return None
    try:
        return regex.compile(pattern, regex.DOTALL | regex.VERSION0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise EvalprismError(
            f"extract: '{shorten(pattern)}' is not a valid regular expression ({exc})", parameter="extract"
        ) from None


def extract_answer(text: str, extractor: regex.Pattern[str] | None) -> str | None:
    """The answer span of ``text`` (last match, first group if any); ``None`` when nothing matches.
    Raises :class:`TimeoutError` when matching takes longer than :data:`MATCH_TIMEOUT_S`."""
    if extractor is None:
        return text
    tail = deque(extractor.finditer(text, timeout=MATCH_TIMEOUT_S), maxlen=1)  # the last match
    last = tail[0] if tail else None
    if last is None:
        return None
    return last.group(1) if extractor.groups else last.group(0)


def parse_choices(value: object, where: str) -> dict[str, str]:
    """A choices cell: a dict, or a JSON object in text form."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise EvalprismError(f"{where}: expected a JSON object mapping labels to choice texts") from None
    if not isinstance(value, dict):
        raise EvalprismError(f"{where}: expected a mapping of labels to choice texts, got {type(value).__name__}")
    return {str(k): "" if v is None else str(v) for k, v in value.items()}


def prepare_responses(
    responses: Iterable[str],
    extractor: regex.Pattern[str] | None,
    choices: Iterable[dict[str, str] | None],
    where: Iterable[str] | None = None,
) -> tuple[list[str], list[bool]]:
    """Apply extraction, choice mapping and suffix stripping; also return which rows had an answer.
    ``where``: each response's place in the input (``file: row 3``), named when its match stalls."""
    texts, answered = [], []
    places = iter(where) if where is not None else None
    for i, (text, mapping) in enumerate(zip(responses, choices, strict=True)):
        place = next(places) if places is not None else f"response {i + 1}"
        try:
            span = extract_answer(text, extractor)
        except TimeoutError:
            assert extractor is not None
            raise EvalprismError(
                f"{place}: the extract pattern '{shorten(extractor.pattern)}' did not finish matching the "
                f"{len(text):,}-character response within {MATCH_TIMEOUT_S:g} s: it backtracks catastrophically "
                "(nested or overlapping repeats such as (a+)+ or (a|aa)+); rewrite it so that each character "
                "can be matched one way only",
                parameter="extract",
            ) from None
        if span is None:
            texts.append("")
            answered.append(False)
            continue
        span = strip_suffixes(span)
        if mapping is not None and span in mapping:
            span = strip_suffixes(mapping[span])
        texts.append(span)
        answered.append(bool(span))
    return texts, answered


@dataclass(frozen=True)
class Answers:
    """The answers and references of a responses table as every scoring rule reads them: ``texts``
    (extracted, mapped through the row's choices, suffixes stripped; empty without an answer),
    ``answered`` (False where the extract pattern found nothing: such a response scores 0) and
    ``references`` (per response, suffixes stripped); ``notes``: what taking the answers out left
    without one (responses with no match for the extract pattern)."""

    texts: list[str]
    answered: np.ndarray
    references: list[tuple[str, ...]]
    notes: tuple[str, ...] = ()


def check_choices_column(df: pd.DataFrame, where: str, choices: str | None) -> None:
    """Refuse a ``choices`` option naming no column of the responses table."""
    if choices and choices not in df.columns:
        raise EvalprismError(f"{where}: choices column '{choices}' not found", parameter="choices")


def read_answers(df: pd.DataFrame, where: str, extract: str | None, choices: str | None) -> Answers:
    """The :class:`Answers` of a responses table (``response`` and ``references`` columns, ``_row`` the
    1-based source row that messages name), the one preparation `ecdf` and `compare` share: extraction
    by ``extract``, the labels of the ``choices`` column mapped to their texts. Its note says how many
    responses had no match for the pattern."""
    check_choices_column(df, where, choices)
    rows = df["_row"].tolist()
    extractor = compile_extractor(extract)
    maps = (
        [parse_choices(v, f"{where}: row {r}, column '{choices}'") for r, v in zip(rows, df[choices], strict=True)]
        if choices is not None
        else [None] * len(df)
    )
    texts, answered_list = prepare_responses(
        df["response"].astype(str), extractor, maps, (f"{where}: row {r}" for r in rows)
    )
    answered = np.asarray(answered_list, dtype=bool)
    notes = []
    if extractor is not None and (~answered).any():
        notes.append(
            f"{where}: {int((~answered).sum()):,} of {len(df):,} responses had no match for the extract pattern "
            "and score 0"
        )
    references = [tuple(strip_suffixes(r) for r in refs) for refs in df["references"]]
    return Answers(texts, answered, references, tuple(notes))
