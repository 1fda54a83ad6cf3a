"""Text preparation for seed 001: suffix stripping, answer extraction, choice mapping.

- Suffixes: the seed removes the trailing ``.``, ``,``, ``;``, ``:`` and ``\\`` from references
  and responses before scoring and final-answer selection (section 4); surrounding whitespace
  goes too, repeatedly, so ``"4m. "`` becomes ``"4m"``.
- Extraction (optional): a regular expression takes the answer span out of a long response;
  the LAST match counts (chain-of-thought answers end with the answer), and its first capture
  group if it has one. A response with no match has no answer: it becomes the empty string.
- Choices (optional): for multiple-choice data, a per-row mapping label -> choice text turns an
  extracted label such as ``"C"`` into its text, so similarity compares meanings, not letters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from evalprism.errors import EvalprismError

SUFFIX_CHARS = ".,;:\\"


def strip_suffixes(text: str) -> str:
    """Remove trailing ``. , ; : \\`` and whitespace (seed 001, section 4)."""
    return text.strip().rstrip(SUFFIX_CHARS + " \t\r\n").strip()


def compile_extractor(pattern: str | None) -> re.Pattern[str] | None:
    """Compile the ``extract`` pattern, or explain why it is not a valid regular expression."""
    if not pattern:
        return None
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as exc:
        raise EvalprismError(f"extract: '{pattern}' is not a valid regular expression ({exc})",
                             parameter="extract") from None


def extract_answer(text: str, extractor: re.Pattern[str] | None) -> str | None:
    """The answer span of ``text`` (last match, first group if any); ``None`` when nothing matches."""
    if extractor is None:
        return text
    last = None
    for last in extractor.finditer(text):
        pass
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
    responses: Iterable[str], extractor: re.Pattern[str] | None, choices: Iterable[dict[str, str] | None]
) -> tuple[list[str], list[bool]]:
    """Apply extraction, choice mapping and suffix stripping; also return which rows had an answer."""
    texts, answered = [], []
    for text, mapping in zip(responses, choices, strict=True):
        span = extract_answer(text, extractor)
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
