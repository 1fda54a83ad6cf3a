"""Section 4 and 5 of issue 18: the exact/contains score rules and what the report may claim."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import small_responses

from evalprism.ecdf import analyze
from evalprism.ecdf.analysis import _accuracy_levels
from evalprism.ecdf.options import EcdfOptions
from evalprism.ecdf.report import headline
from evalprism.errors import EvalprismError
from evalprism.io.lexical import lexical_scores, normalise_answer
from evalprism.stats import distinct_ecdf_count


def test_exact_and_contains_by_hand() -> None:
    answers = ["Paris.", "paris", "The capital is  Paris", "May 1, 2021", "05/01/2021", "42", "", "4 apples"]
    refs = [("Paris",)] * 3 + [("05/01/2021",)] * 2 + [("4",)] * 3
    answered = np.array([True] * 6 + [False, True])
    exact = lexical_scores(answers, answered, refs, "exact")
    contains = lexical_scores(answers, answered, refs, "contains")
    assert exact.tolist() == [1, 1, 0, 0, 1, 0, 0, 0]
    # "4" is not inside "42" (a whole phrase only); an unanswered row scores 0 whatever it holds
    assert contains.tolist() == [1, 1, 1, 0, 1, 0, 0, 1]
    assert normalise_answer("  Mount   Fuji!  ") == "mount fuji"


def test_exact_score_through_the_analysis(cache_dir: Path) -> None:
    res = analyze(
        small_responses(), EcdfOptions(by=["model", "temperature"], clusters=2, score="exact"), progress=False
    )
    s = res.settings.set_index(["question_id", "model", "temperature"])
    # q1, good: "Paris", "Paris.", "Lyon", "Paris", "Paris" -> 4 of 5 exact matches
    assert res.samples[int(s.loc[("q1", "good", "0.0"), "setting"])].tolist() == [0, 1, 1, 1, 1]
    # q2, good: "Fuji" is not "Mount Fuji" (exact), the other four are
    assert s.loc[("q2", "good", "1.0"), "mean_score"] == pytest.approx(0.8)
    assert s.loc[(slice(None), "bad"), "mean_score"].eq(0).all()
    assert res.summary.score == "exact"
    assert any("exact match to a reference" in line for line in headline(res))
    with pytest.raises(EvalprismError, match="score: expected one of cosine, exact, contains"):
        analyze(small_responses(), EcdfOptions(score="fuzzy"), progress=False)  # type: ignore[arg-type]


def test_correct_follows_the_score_rule(cache_dir: Path) -> None:
    """Under exact/contains a final answer is correct by that same rule ('paris' against 'Paris'),
    so a score of 1 and a ✓ never disagree; under cosine by the seed's exact match."""
    rows = [
        {"question_id": "q", "cfg": c, "response": r, "references": json.dumps(["Paris"])}
        for c, answers in {"lower": ["paris"] * 3, "sentence": ["It is Paris"] * 3, "wrong": ["Lyon"] * 3}.items()
        for r in answers
    ]
    correct = {
        rule: analyze(pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, score=rule), progress=False)
        .settings.set_index("cfg")["correct"]
        .to_dict()
        for rule in ("exact", "contains", "cosine")
    }
    assert correct["exact"] == {"lower": True, "sentence": False, "wrong": False}
    assert correct["contains"] == {"lower": True, "sentence": True, "wrong": False}
    assert correct["cosine"] == {"lower": False, "sentence": False, "wrong": False}


def _score_table(per_cfg: dict[str, list[float]], questions: int = 6) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"question_id": q, "cfg": c, "score": v}
            for q in range(questions)
            for c, vals in per_cfg.items()
            for v in vals
        ]
    )


def test_distinct_ecdfs_are_counted_by_distribution() -> None:
    # [1, 2] and [1, 1, 2, 2] are one ECDF; [1, 2, 2] another; [3] a third
    samples = [np.array([1.0, 2.0]), np.array([2.0, 1.0, 2.0, 1.0]), np.array([1.0, 2.0, 2.0]), np.array([3.0])]
    assert distinct_ecdf_count(samples) == 3


def test_k_is_capped_at_the_distinct_ecdfs() -> None:
    table = _score_table({"a": [0.1, 0.2], "b": [0.5, 0.6], "c": [0.9, 1.0]})
    res = analyze(table, EcdfOptions(by=["cfg"], clusters=5), progress=False)
    assert res.summary.k == 3
    assert res.clusters["size"].tolist() == [6, 6, 6]
    assert any("only 3 distinct ECDFs" in n for n in res.notes)


def test_accuracy_levels_keep_close_values_apart() -> None:
    levels = _accuracy_levels(pd.Series([0.7688, 0.7670, 0.7688, 1.0]))
    assert levels.tolist() == ["0.769", "0.767", "0.769", "1.000"]
    binned = _accuracy_levels(pd.Series([0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0]))
    assert binned.iloc[0] == "0.0 ≤ a ≤ 0.2" and binned.iloc[-1] == "0.8 < a ≤ 1.0"


def test_repeated_question_ids_are_named(cache_dir: Path) -> None:
    # two datasets both number their questions 0..3; without --by dataset they merge into one setting
    rows = [
        {"question_id": q, "dataset": d, "response": f"answer {v}", "references": json.dumps([f"{d}-{q}"]), "score": v}
        for d in ("date", "saycan")
        for q in range(4)
        for v in (0.2, 0.4, 0.6)
    ]
    res = analyze(pd.DataFrame(rows), EcdfOptions(clusters=2), progress=False)
    assert any(
        "4 settings mix responses with different reference answers (first: question_id=0)" in n for n in res.notes
    )
    assert not any(
        "different reference" in n
        for n in analyze(pd.DataFrame(rows), EcdfOptions(by=["dataset"], clusters=2), progress=False).notes
    )


def test_settings_with_a_multiple_of_the_usual_count_are_named() -> None:
    merged = [{"question_id": q, "score": v} for q in range(4) for v in (0.2, 0.4, 0.6) * 2]
    single = [{"question_id": q, "score": v} for q in range(4, 12) for v in (0.1, 0.5, 0.9)]
    res = analyze(pd.DataFrame(merged + single), EcdfOptions(clusters=2), progress=False)
    assert any("4 settings have exactly 2, 3, ... times the usual 3 responses" in n for n in res.notes)
    res = analyze(pd.DataFrame(single), EcdfOptions(clusters=2), progress=False)
    assert not any("times the usual" in n for n in res.notes)


def test_headline_counts_the_settings_that_exist() -> None:
    # each question answered under one configuration: 12 settings, not 12 questions x 2 configurations
    table = pd.DataFrame(
        [
            {"question_id": q, "cfg": "a" if q < 6 else "b", "score": v}
            for q in range(12)
            for v in (0.1 * (q % 3), 0.5, 0.9)
        ]
    )
    first = headline(analyze(table, EcdfOptions(by=["cfg"], clusters=2), progress=False))[0]
    assert first.startswith("12 settings (12 questions, each under one of 2 configurations")


def test_no_sentence_about_correct_answers_outside_the_best_cluster_when_there_are_none(result_small) -> None:
    s = result_small.settings
    assert set(s.loc[s["correct"], "cluster"]) == {0}
    assert not any("outside the best cluster" in line for line in headline(result_small))


@pytest.fixture(scope="module")
def result_small(cache_dir: Path):
    return analyze(small_responses(), EcdfOptions(by=["model", "temperature"], clusters=2, seed=0), progress=False)
