"""The one item-level reader (evalprism.io.items): each input format is one registry entry, both views
read the same thing, and the provenance says what was read, by which reader, with which choices.

Checked on the real harness fixtures (their samples files are the files read; the strict view's codes
are the scores view's scores with -1 as 0) and on planted tables (a -1 counted as 0 and said)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import INSPECT, LM_EVAL, HarnessOptions
from evalprism.io.item_formats import FORMATS, Source, detect_format
from evalprism.io.items import read_correctness, read_items
from evalprism.io.response_options import ResponseOptions

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
LM_EVAL_DIR = FIXTURES / "lm_eval"


def _write(path: Path, rows: list[dict]) -> Path:
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_each_input_is_read_by_the_entry_for_its_format(tmp_path: Path) -> None:
    scores = _write(tmp_path / "scores.csv", [{"model": "a", "item_id": 1, "score": 1}])
    matrix = _write(tmp_path / "matrix.csv", [{"model": "a", "q1": 1, "q2": 0}])
    responses = _write(tmp_path / "responses.csv", [{"question_id": 1, "response": "x", "references": '["x"]'}])
    found = {
        name: detect_format(Source(path)).name
        for name, path in {
            "directory": LM_EVAL_DIR,
            "log": FIXTURES / "inspect_json" / "arith_two_scorers.json",
            "responses": responses,
            "scores": scores,
            "matrix": matrix,
        }.items()
    }
    assert found == {
        "directory": "harness output directory",
        "log": "inspect_ai log",
        "responses": "ECDF responses file",
        "scores": "score table",
        "matrix": "wide model x item matrix",
    }
    assert [f.name for f in FORMATS] == [found[k] for k in ("directory", "log", "responses", "scores", "matrix")]
    assert detect_format(Source(pd.read_csv(matrix))).name == "score table"  # a table in memory is a score table
    jsonl = tmp_path / "other.jsonl"
    jsonl.write_text('{"model": "a", "q1": 1}\n', encoding="utf-8")
    with pytest.raises(EvalprismError, match="other.jsonl: expected a long correctness table"):
        detect_format(Source(jsonl))


def test_both_views_of_harness_output_are_one_read() -> None:
    """The scores view of an lm-eval directory is its codes with -1 as 0, row for row; both name the
    same files, readers and choices; the files read are the samples and results files of each run."""
    items = read_items([LM_EVAL_DIR])
    codes = read_correctness(LM_EVAL_DIR)
    assert items.table["run"].tolist() == codes.table["model"].tolist()
    assert items.table["item_id"].tolist() == codes.table["item_id"].tolist()
    assert items.table["score"].tolist() == codes.table["score"].clip(lower=0).astype(float).tolist()
    assert items.provenance.choices == codes.provenance.choices
    assert items.provenance.readers == codes.provenance.readers == (LM_EVAL,)
    read = {Path(f) for f in codes.provenance.files}
    samples = set(LM_EVAL_DIR.rglob("samples_*.jsonl"))
    results = set(LM_EVAL_DIR.rglob("results_*.json"))
    assert read == samples | results  # every run has one samples file per task and one results file


def test_a_score_table_beside_logs_names_its_reader_and_its_file(tmp_path: Path) -> None:
    log = FIXTURES / "inspect_json" / "arith_two_scorers.json"
    table = _write(
        tmp_path / "t.csv",
        [{"model": "m", "benchmark": "arith", "item_id": f"q{i}", "score": s} for i, s in enumerate([1, -1, 0.5, 0])],
    )
    items = read_items([log, table], harness=HarnessOptions(scorer="match"))
    assert items.provenance.readers == (INSPECT, "score table")
    assert items.provenance.files == (str(log), str(table))
    assert items.runs() == ["mockllm/small", "m"]
    m = items.table[items.table["run"] == "m"]
    assert m["score"].tolist() == [1.0, 0.0, 0.5, 0.0]  # partial credit kept, no answer counted as 0
    assert items.provenance.notes == (f"{table}: 1 answer(s) scored -1 (no answer) counted as 0 (wrong)",)
    # the strict view refuses partial credit, naming the row
    with pytest.raises(EvalprismError, match=r"row 3, column 'score': expected 1 \(right\), 0 \(wrong\) or -1"):
        read_correctness(table)


def test_a_responses_file_is_scored_and_said_but_is_no_correctness_input(tmp_path: Path) -> None:
    rows = [
        {
            "question_id": q,
            "model": m,
            "response": f"it is {q if m == 'good' else q + 1}",
            "references": json.dumps([str(q)]),
        }
        for q in range(4)
        for m in ("good", "bad")
    ]
    path = _write(tmp_path / "r.csv", rows)
    items = read_items([path], responses=ResponseOptions(score="contains"))
    by_run = items.table.groupby("run", observed=True)["score"].mean()
    assert by_run.to_dict() == {"bad": 0.0, "good": 1.0}
    assert items.provenance.readers == ("ECDF responses file",)
    assert any("an ECDF responses file: runs by model (2)" in n for n in items.provenance.notes)
    # a responses file holds no correctness codes: the strict view reads a CSV without item_id or score as a
    # wide matrix (as `stem` always has), whose cells are not codes
    with pytest.raises(EvalprismError, match=r"r\.csv: row \d+, column 'score': expected 1 \(right\)"):
        read_correctness(path)
    assert np.isfinite(items.table["score"]).all()
