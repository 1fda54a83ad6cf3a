"""Judgments: validation, per-column binarization, bad inputs, and the TREC adapter round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalprism.errors import EvalprismError
from evalprism.io.judgments import judge_name, prepare_judgments, read_qrels, read_trec_judgments


def table(**overrides) -> pd.DataFrame:
    base = {
        "query_id": ["1", "1", "2", "2"],
        "query": ["what is a cat", "what is a cat", "tallest tree", "tallest tree"],
        "doc_id": ["a", "b", "a", "c"],
        "doc": ["A cat is a small feline.", "Dogs bark.", "A cat is a small feline.", "Redwoods are tall."],
        "human": [3, 0, 1, 2],
        "gpt": [2, 1, 0, 1],
        "flag": [1, 0, 0, 1],
    }
    base.update(overrides)
    return pd.DataFrame(base)


def test_binarization_graded_at_two_binary_as_is_and_options() -> None:
    j = prepare_judgments(table(), "human", ["gpt", "flag"])
    assert j.relevant["human"].tolist() == [1, 0, 0, 1]  # TREC DL: relevant at >= 2
    assert j.relevant["gpt"].tolist() == [1, 0, 0, 0]
    assert j.relevant["flag"].tolist() == [1, 0, 0, 1]  # a 0/1 column is used as is
    assert (j.scales["human"].low, j.scales["human"].high, j.scales["human"].threshold) == (0, 3, 2)
    assert j.scales["flag"].threshold == 1
    j = prepare_judgments(table(), "human", ["gpt"], thresholds={"gpt": 1, "human": "3"})
    assert j.relevant["gpt"].tolist() == [1, 1, 0, 1]
    assert j.relevant["human"].tolist() == [1, 0, 0, 0]
    j = prepare_judgments(table(gpt=[5, 0, 4, 2]), "human", ["gpt"], scales={"gpt": "0-5"})
    assert j.relevant["gpt"].tolist() == [1, 0, 1, 0]  # 0-5: relevant at >= ceil(2.5) = 3


def test_text_aliases_and_missing_labels_are_kept_as_missing() -> None:
    t = table(gpt=[2, None, 0, 1]).rename(columns={"query": "query_text", "doc": "doc_text"})
    j = prepare_judgments(t, "human", ["gpt"])
    assert j.table["query"].iat[0] == "what is a cat" and j.table["doc"].iat[3] == "Redwoods are tall."
    assert np.isnan(j.relevant["gpt"][1]) and j.relevant["gpt"][0] == 1
    assert any("1 of 4 pairs have no label" in n for n in j.notes)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gpt": [2, 4, 0, 1]}, r"row 2, column 'gpt': label 4 is outside the declared scale \(whole numbers 0-3\)"),
        ({"gpt": [2, 1.5, 0, 1]}, r"row 2, column 'gpt': label 1.5 is outside"),
        ({"gpt": [None, None, None, None]}, r"column 'gpt': every label is missing"),
        ({"doc": ["x", " ", "y", "z"]}, r"row 2, column 'doc': empty text"),
        ({"query": ["", "q", "q", "q"]}, r"row 1, column 'query': empty text"),
        ({"gpt": ["2", "high", "0", "1"]}, r"row 2, column 'gpt': expected a number, got 'high'"),
    ],
)
def test_bad_inputs_name_row_and_column(overrides, message) -> None:
    with pytest.raises(EvalprismError, match=message):
        prepare_judgments(table(**overrides), "human", ["gpt"])


def test_duplicates_conflicting_refused_identical_dropped() -> None:
    t = pd.concat([table(), table().iloc[[1]]], ignore_index=True)
    j = prepare_judgments(t, "human", ["gpt"])
    assert len(j.table) == 4 and any("1 exact duplicate" in n for n in j.notes)
    t.loc[4, "gpt"] = 3
    with pytest.raises(
        EvalprismError,
        match=r"rows 2 and 5 are the same pair \(query_id 1, doc_id b\) with "
        r"different labels in column 'gpt' \(1 vs 3\)",
    ):
        prepare_judgments(t, "human", ["gpt"])


def test_option_errors() -> None:
    with pytest.raises(EvalprismError, match="missing label column 'llama'"):
        prepare_judgments(table(), "human", ["llama"])
    with pytest.raises(EvalprismError, match="both the human and an LLM"):
        prepare_judgments(table(), "human", ["human"])
    with pytest.raises(EvalprismError, match="threshold 5 is outside its scale 0-3"):
        prepare_judgments(table(), "human", ["gpt"], thresholds={"gpt": 5})
    with pytest.raises(EvalprismError, match="not a label column"):
        prepare_judgments(table(), "human", ["gpt"], scales={"other": "0-3"})


def write_trec(tmp: Path, t: pd.DataFrame, judges: list[str]) -> tuple[list[Path], Path, Path]:
    paths = []
    for judge in judges:
        p = tmp / f"{judge}.dl19.txt"
        rows = t.dropna(subset=[judge])
        p.write_text("".join(f"{r.query_id} Q0 {r.doc_id} {int(getattr(r, judge))}\n" for r in rows.itertuples()))
        paths.append(p)
    topics = tmp / "topics.tsv"
    topics.write_text("".join(f"{q}\t{text}\n" for q, text in t.groupby("query_id")["query"].first().items()))
    passages = tmp / "passages.tsv"
    passages.write_text("".join(f"{d}\t{text}\n" for d, text in zip(t["doc_id"], t["doc"], strict=True)))
    return paths, topics, passages


def test_trec_round_trip(tmp_path: Path) -> None:
    t = table(gpt=[2.0, 1.0, None, 1.0])
    qrels, topics, passages = write_trec(tmp_path, t, ["human", "gpt"])
    back = read_trec_judgments(qrels, topics, passages)
    assert list(back.columns) == ["query_id", "query", "doc_id", "doc", "human", "gpt"]
    merged = t.drop(columns="flag").astype({"human": float}).sort_values(["query_id", "doc_id"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(back.reset_index(drop=True), merged, check_dtype=False)
    # the same through the judgments validation, with names given as NAME=PATH
    named = read_trec_judgments([f"nist={qrels[0]}", ("gpt4", qrels[1])], topics, passages)
    j = prepare_judgments(named, "nist", ["gpt4"])
    assert j.relevant["gpt4"].tolist()[:2] == [1.0, 0.0] and np.isnan(j.relevant["gpt4"][2])
    assert judge_name(qrels[0]) == "human"


def test_trec_bad_files(tmp_path: Path) -> None:
    qrels, topics, passages = write_trec(tmp_path, table(), ["human", "gpt"])
    bad = tmp_path / "bad.txt"
    bad.write_text("1 Q0 a 2\n1 Q0 a 3\n")
    with pytest.raises(EvalprismError, match=r"bad.txt: pair \(qid 1, docno a\) is judged more than once"):
        read_qrels(bad)
    bad.write_text("1 Q0 a\n")
    with pytest.raises(EvalprismError, match=r"bad.txt: line 1: expected 'qid Q0 docno rel'"):
        read_qrels(bad)
    short = tmp_path / "short_passages.tsv"
    short.write_text("a\tA cat is a small feline.\n")
    with pytest.raises(EvalprismError, match=r"short_passages.tsv: no text for doc_id b"):
        read_trec_judgments(qrels, topics, short)
    with pytest.raises(EvalprismError, match="every judge needs its own name"):
        read_trec_judgments([qrels[0], qrels[0]], topics, passages)
