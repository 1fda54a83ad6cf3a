"""Readers pick the format from the extension; the schema explains every bad input in one message."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import small_responses

from evalprism.errors import EvalprismError
from evalprism.io import RESPONSES_SCHEMA, atomic_output_dir, read_table
from evalprism.io.outputs import OutputKind


@pytest.mark.parametrize("ext", ["csv", "tsv", "jsonl", "parquet", "csv.gz", "json"])
def test_all_formats_read_the_same_table(tmp_path: Path, ext: str) -> None:
    df = small_responses()
    path = tmp_path / f"r.{ext}"
    if ext.startswith("csv"):
        df.to_csv(path, index=False)
    elif ext == "tsv":
        df.to_csv(path, sep="\t", index=False)
    elif ext == "jsonl":
        df.to_json(path, orient="records", lines=True)
    elif ext == "json":
        path.write_text(json.dumps(df.to_dict(orient="records")))
    else:
        df.to_parquet(path)
    got = RESPONSES_SCHEMA.validate(read_table(path))
    assert len(got) == len(df)
    assert got["references"].iloc[0] == ["Paris"]
    assert got["question_id"].tolist() == df["question_id"].tolist()
    assert "note" in got.columns  # unknown columns are carried through


def test_references_as_list_or_single_string(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(
        '{"question_id": 1, "response": "a", "references": ["x", "y"]}\n'
        '{"question_id": 2, "response": "b", "references": "z"}\n'
    )
    got = RESPONSES_SCHEMA.validate(read_table(path))
    assert got["references"].tolist() == [["x", "y"], ["z"]]
    assert got["question_id"].tolist() == ["1", "2"]


def test_missing_column_names_file_and_column(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    small_responses().drop(columns=["question_id"]).to_csv(path, index=False)
    with pytest.raises(EvalprismError, match=r"r\.csv: missing required column 'question_id'"):
        RESPONSES_SCHEMA.validate(read_table(path))


def test_needs_references_or_score(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    small_responses().drop(columns=["references"]).to_csv(path, index=False)
    with pytest.raises(EvalprismError, match="needs one of the columns 'references', 'score'"):
        RESPONSES_SCHEMA.validate(read_table(path))


def test_non_numeric_score_names_row_and_column(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    pd.DataFrame({"question_id": ["a", "b", "c"], "score": ["0.5", "high", "0.1"]}).to_csv(path, index=False)
    with pytest.raises(EvalprismError, match=r"r\.csv: row 2, column 'score': expected a number, got 'high'"):
        RESPONSES_SCHEMA.validate(read_table(path))


def test_bad_reference_list(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    pd.DataFrame({"question_id": ["a"], "response": ["x"], "references": ["[1, 2"]}).to_csv(path, index=False)
    with pytest.raises(EvalprismError, match=r"row 1, column 'references': expected a list of strings"):
        RESPONSES_SCHEMA.validate(read_table(path))


def test_empty_and_unreadable_files(tmp_path: Path) -> None:
    empty = tmp_path / "e.csv"
    empty.write_text("")
    with pytest.raises(EvalprismError, match="e.csv: the file is empty"):
        read_table(empty)
    header_only = tmp_path / "h.csv"
    header_only.write_text("question_id,score\n")
    with pytest.raises(EvalprismError, match="h.csv: the responses table is empty"):
        RESPONSES_SCHEMA.validate(read_table(header_only))
    garbage = tmp_path / "g.parquet"
    garbage.write_bytes(b"not a parquet file at all")
    with pytest.raises(EvalprismError, match="g.parquet: cannot be read as parquet"):
        read_table(garbage)
    with pytest.raises(EvalprismError, match="unknown table format '.xlsx'"):
        read_table(tmp_path / "x.xlsx")
    with pytest.raises(EvalprismError, match="file not found"):
        read_table(tmp_path / "missing.csv")


def test_atomic_output_dir_leaves_nothing_on_failure(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(RuntimeError), atomic_output_dir(out, OutputKind.ECDF) as tmp:
        (tmp / "settings.csv").write_text("half")
        raise RuntimeError("boom")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []
    with atomic_output_dir(out, OutputKind.ECDF) as tmp:
        (tmp / "a.txt").write_text("1")
    with atomic_output_dir(out, OutputKind.ECDF) as tmp:  # a rerun replaces the old directory whole
        (tmp / "b.txt").write_text("2")
    # the run.json marker (kind and manifest) is what lets the rerun know it may replace the directory
    assert sorted(p.name for p in out.iterdir()) == ["b.txt", "run.json"]


@pytest.mark.parametrize("dtype", ["str", object])
def test_string_and_object_columns_validate_alike(dtype: object) -> None:
    """pandas' string dtype takes a vectorised path; it must give what the value-by-value path gives."""
    from evalprism.io.battles import to_canonical_battles

    frame = pd.DataFrame(
        {
            "prompt": ["p1", "", "p3"],
            "model_a": [" x ", "y", "x"],
            "model_b": ["y", "x ", "z"],
            "winner": ["model_a", "B", "tie"],
        }
    ).astype(dtype)
    out = to_canonical_battles(frame)
    assert out["model_a"].tolist() == ["x", "y", "x"] and out["model_b"].tolist() == ["y", "x", "z"]
    assert out["prompt"].tolist() == ["p1", "", "p3"]  # a str column may be empty; a key may not
    assert out["winner"].tolist() == ["model_a", "model_b", "tie"]
    blank = frame.assign(model_b=pd.Series(["y", "  ", None], dtype=dtype))
    with pytest.raises(EvalprismError, match=r"row 2, column 'model_b': expected a non-empty identifier, got '  '"):
        to_canonical_battles(blank)
    missing = frame.assign(model_b=pd.Series(["y", None, "  "], dtype=dtype))
    with pytest.raises(EvalprismError, match=r"row 2, column 'model_b': missing value"):
        to_canonical_battles(missing)
