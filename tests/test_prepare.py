"""Suffix stripping, answer extraction and choice mapping (seed 001, section 4)."""

from __future__ import annotations

import pytest

from evalprism.errors import EvalprismError
from evalprism.io.answers import compile_extractor, extract_answer, prepare_responses, strip_suffixes


@pytest.mark.parametrize(
    "text,want",
    [
        ("Paris.", "Paris"),
        ("2003;", "2003"),
        ("x:", "x"),
        ("a\\", "a"),
        ("Fuji, ", "Fuji"),
        ("end.,;:", "end"),
        ("3.14", "3.14"),
        ("  ok  ", "ok"),
    ],
)
def test_strip_suffixes(text: str, want: str) -> None:
    assert strip_suffixes(text) == want


def test_extract_takes_last_match_and_first_group() -> None:
    rx = compile_extractor(r'Answer\("([A-E])"\)')
    assert extract_answer('think Answer("A") then Answer("C")\n', rx) == "C"
    assert extract_answer("no answer here", rx) is None
    assert extract_answer("42 is it", compile_extractor(r"\d+")) == "42"
    with pytest.raises(EvalprismError, match="not a valid regular expression"):
        compile_extractor("([")


def test_prepare_maps_choices_and_flags_missing_answers() -> None:
    rx = compile_extractor(r'Answer\("([A-E])"\)')
    choices = {"A": "2.6m", "C": "4m."}
    texts, answered = prepare_responses(['Answer("C")', "I cannot tell", 'Answer("B")'], rx, [choices] * 3)
    assert texts == ["4m", "", "B"]
    assert answered == [True, False, True]
