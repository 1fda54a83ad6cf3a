"""The ECDF analysis end to end in Python: planted structure, eq. (6), eq. (7), score mode, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import small_responses

from evalprism.ecdf import analyze
from evalprism.ecdf.analysis import final_answers, renumber_by_wins
from evalprism.ecdf.options import EcdfOptions
from evalprism.errors import EvalprismError


@pytest.fixture(scope="module")
def result(cache_dir: Path):
    return analyze(small_responses(), EcdfOptions(by=["model", "temperature"], clusters=2, seed=0), progress=False)


def test_planted_model_split_is_recovered(result) -> None:
    s = result.settings
    assert len(s) == 12
    # the "good" model's settings form the better cluster 0, the "bad" model's cluster 1
    assert set(s.loc[s["model"] == "good", "cluster"]) == {0}
    assert set(s.loc[s["model"] == "bad", "cluster"]) == {1}
    factors = result.factors.set_index("factor")["ami"]
    assert factors["model"] == pytest.approx(1.0)
    assert factors["temperature"] == pytest.approx(0.0, abs=0.1)
    assert result.clusters["wins"].tolist() == [1, 0]
    assert result.clusters["size"].tolist() == [6, 6]


def test_scores_are_eq3_with_suffixes_stripped(result) -> None:
    s = result.settings.set_index(["question_id", "model", "temperature"])
    # "Paris." is stripped to "Paris": 4 of 5 responses match the reference exactly (similarity 1)
    samples = result.samples[int(s.loc[("q1", "good", "0.0"), "setting"])]
    assert np.sum(np.isclose(samples, 1.0, atol=1e-6)) == 4
    assert s.loc[("q3", "bad", "1.0"), "n_responses"] == 3
    assert s.loc[("q3", "good", "0.0"), "n_responses"] == 5
    assert s.loc[("q1", "good", "0.0"), "mean_score"] == pytest.approx(samples.mean())


def test_final_answers_and_accuracy(result) -> None:
    s = result.settings.set_index(["question_id", "model", "temperature"])
    assert s.loc[("q1", "good", "1.0"), "final_answer"] == "Paris"
    assert s.loc[("q2", "bad", "0.0"), "final_answer"] == "computer"
    assert s.loc[("q3", "good", "0.0"), "final_answer"] == "2003"
    assert s.loc[(slice(None), "good"), "correct"].all()
    assert not s.loc[(slice(None), "bad"), "correct"].any()
    acc = result.accuracy.set_index(["group", "model", "temperature"])["accuracy"]
    assert acc[("geo", "good", "0.0")] == 1.0 and acc[("time", "bad", "1.0")] == 0.0
    assert "note" in result.settings.columns  # constant per setting: carried through


def test_final_answer_rule_by_hand() -> None:
    # setting 0: three vectors, the mean is nearest to row 1; setting 1: row 3 only eligible
    vecs = np.array([[1.0, 0.0], [0.6, 0.5], [0.0, 1.0], [5.0, 5.0], [0.0, 0.0]])
    codes = np.array([0, 0, 0, 1, 1])
    eligible = np.array([True, True, True, True, False])
    assert final_answers(codes, vecs, eligible, 3, ["x", "y", "z", "w", ""]).tolist() == [1, 3, -1]
    # a tie goes to the lexicographically smallest answer, wherever its row is
    tie = np.array([[1.0, 0.0], [-1.0, 0.0]])
    assert final_answers(np.array([0, 0]), tie, np.array([True, True]), 1, ["A", "B"]).tolist() == [0]
    assert final_answers(np.array([0, 0]), tie, np.array([True, True]), 1, ["B", "A"]).tolist() == [1]
    # two answers given equally often tie exactly (up to rounding in the mean): the smaller answer wins
    vecs4 = np.array([[0.6, 0.8], [1.0, 0.0], [0.6, 0.8], [1.0, 0.0]], dtype=np.float32)
    for order in ([0, 1, 2, 3], [1, 3, 0, 2], [3, 2, 1, 0]):
        texts = np.array(["B", "A", "B", "A"])[order].tolist()
        got = final_answers(np.zeros(4, dtype=np.int64), vecs4[order], np.ones(4, dtype=bool), 1, texts)
        assert texts[int(got[0])] == "A"


def test_renumbering_by_wins_by_hand() -> None:
    samples = [np.array([0.2]), np.array([0.9]), np.array([0.5]), np.array([0.95])]
    medoids = np.array([0, 1, 2])  # clusters: 0 worst, 1 best, 2 middle
    labels = np.array([0, 1, 2, 1])
    new_medoids, new_labels, wins = renumber_by_wins(samples, medoids, labels)
    assert new_medoids.tolist() == [1, 2, 0]
    assert new_labels.tolist() == [2, 0, 1, 0]
    assert wins.tolist() == [2, 1, 0]


def test_score_mode_needs_no_embedder() -> None:
    rng = np.random.default_rng(0)
    rows = []
    for q in range(6):
        for cfg, centre in (("low", 0.2), ("high", 0.8)):
            for v in np.clip(rng.normal(centre, 0.05, 4 + q % 3), 0, 1):
                rows.append({"question_id": q, "cfg": cfg, "score": v})
    table = pd.DataFrame(rows)
    res = analyze(table, EcdfOptions(by=["cfg"], clusters=2), embedder="st:/definitely/not/a/model", progress=False)
    s = res.settings
    assert set(s.loc[s["cfg"] == "high", "cluster"]) == {0}
    assert "final_answer" not in s.columns
    assert res.summary.quality == "score column"
    assert s["n_responses"].tolist() == [4 + q % 3 for q in range(6) for _ in range(2)]


def test_auto_k_reports_the_stability_curve() -> None:
    rng = np.random.default_rng(0)
    rows = [
        {"question_id": q, "cfg": c, "score": v}
        for q in range(10)
        for c, base in (("a", 0.1), ("b", 0.5), ("c", 0.9))
        for v in base + rng.normal(0, 0.02, 4)
    ]
    res = analyze(pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters="auto"), progress=False)
    assert res.summary.k == 3
    assert res.k_curve["k"].tolist()[0] == 2
    assert res.k_curve.set_index("k")["stability"].idxmax() == 3


def test_same_seed_gives_identical_tables(tmp_path: Path, cache_dir: Path) -> None:
    a = analyze(small_responses(), EcdfOptions(by=["model", "temperature"], clusters=3, seed=4), progress=False)
    b = analyze(small_responses(), EcdfOptions(by=["model", "temperature"], clusters=3, seed=4), progress=False)
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    for name in ("settings.csv", "clusters.csv", "factors.csv", "accuracy.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_input_errors(cache_dir: Path) -> None:
    table = small_responses()
    with pytest.raises(EvalprismError, match="K must be between 1 and the number of settings \\(12\\)"):
        analyze(table, EcdfOptions(by=["model", "temperature"], clusters=40), progress=False)
    with pytest.raises(EvalprismError, match="by column 'persona' not found"):
        analyze(table, EcdfOptions(by=["persona"]), progress=False)
    blank = table.copy()
    blank.loc[(blank["question_id"] == "q2") & (blank["model"] == "bad"), "response"] = None
    with pytest.raises(
        EvalprismError, match=r"setting \(question_id=q2, model=bad, temperature=0.0\) has no responses"
    ):
        analyze(blank, EcdfOptions(by=["model", "temperature"]), progress=False)
    with pytest.raises(EvalprismError, match="expected a whole number or 'auto'"):
        analyze(table, EcdfOptions(clusters="many"), progress=False)  # type: ignore[arg-type]
