"""Correctness and model-metadata tables: validation, and the lm-eval, inspect_ai and matrix adapters."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalprism.errors import EvalprismError
from evalprism.io.correctness import (
    encode_correctness,
    read_models,
    read_wide_matrix,
    to_canonical_correctness,
)
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import read_correctness


def test_long_table_normalises_scores_and_keeps_other_columns() -> None:
    df = pd.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "item_id": [1, 2, 1, 2],
            "score": [True, "false", "-1", 1.0],
            "note": list("wxyz"),
        }
    )
    out = to_canonical_correctness(df)
    assert out["score"].tolist() == [1, 0, -1, 1]
    assert out["item_id"].tolist() == ["1", "2", "1", "2"]
    assert out["benchmark"].unique().tolist() == ["all"]
    assert out["note"].tolist() == list("wxyz")


def test_encoded_matrix_marks_missing_rows() -> None:
    df = pd.DataFrame(
        {"model": ["a", "a", "b"], "benchmark": ["x", "y", "x"], "item_id": ["1", "1", "1"], "score": [1, 0, -1]}
    )
    enc = encode_correctness(df)
    matrix, complete = enc.matrix(["b", "a"])
    assert enc.items.to_dict("list") == {"benchmark": ["x", "y"], "item_id": ["1", "1"]}
    assert matrix.tolist() == [[-1, 1], [-2, 0]]  # item ("y", "1") has no row for b
    assert complete.tolist() == [True, False]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"score": [1, 0, 2, 1]}, r"row 3, column 'score': expected 1 \(right\), 0 \(wrong\) or -1"),
        ({"score": [1, 0, 0.5, 1]}, r"row 3, column 'score'"),
        ({"score": [1, None, 0, 1]}, r"row 2, column 'score': missing value"),
        ({"item_id": ["1", "2", "1", "1"]}, r"rows 3 and 4 both score model 'b' on item '1'"),
        ({"model": ["a", " ", "b", "b"]}, r"row 2, column 'model': expected a non-empty identifier"),
    ],
)
def test_bad_correctness_rows_are_named(change: dict, message: str) -> None:
    df = pd.DataFrame({"model": ["a", "a", "b", "b"], "item_id": ["1", "2", "1", "2"], "score": [1, 0, 0, 1]})
    for col, values in change.items():
        df[col] = values
    with pytest.raises(EvalprismError, match=message):
        encode_correctness(df, "c.csv")


def test_missing_column_is_named() -> None:
    with pytest.raises(EvalprismError, match="missing required column 'score'"):
        encode_correctness(pd.DataFrame({"model": ["a"], "item_id": ["1"]}), "c.csv")


@pytest.mark.parametrize("header,missing", [("model,item_id", "score"), ("model,score", "item_id")])
def test_long_file_missing_a_column_is_not_read_as_a_matrix(tmp_path: Path, header: str, missing: str) -> None:
    """A file with item_id or score is a long table missing a column, not a matrix with an item called 'item_id'."""
    path = tmp_path / "c.csv"
    path.write_text(f"{header}\nm1,1\nm2,1\n", encoding="utf-8")
    with pytest.raises(EvalprismError, match=f"missing required column '{missing}'"):
        read_correctness(path)


def test_wide_matrix_csv(tmp_path: Path) -> None:
    path = tmp_path / "matrix_crux.csv"
    path.write_text("model,q1,q2,q3\nsmall,0,1,\nlarge,1,1,-1\n", encoding="utf-8")
    out = read_correctness(path).table
    assert out["benchmark"].unique().tolist() == ["matrix_crux"]
    got = out.set_index(["model", "item_id"])["score"].to_dict()
    assert got == {("small", "q1"): 0, ("small", "q2"): 1, ("large", "q1"): 1, ("large", "q2"): 1, ("large", "q3"): -1}
    assert read_wide_matrix(pd.read_csv(path, dtype=str), "m.csv", benchmark="crux")["benchmark"].iloc[0] == "crux"


def test_model_metadata_aliases_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "meta.csv"
    path.write_text("model,family,params_b_nominal\nx,f,7\ny,f,\n", encoding="utf-8")
    meta = read_models(path)
    assert meta["params"].tolist()[0] == 7.0 and np.isnan(meta["params"].tolist()[1])
    path.write_text("model,family,params\nx,f,7\nx,f,8\n", encoding="utf-8")
    with pytest.raises(EvalprismError, match="row 2: model 'x' is listed twice"):
        read_models(path)
    path.write_text("model,family,params\nx,f,-7\n", encoding="utf-8")
    with pytest.raises(EvalprismError, match="row 1, column 'params': expected a positive number"):
        read_models(path)


def _lm_eval_dir(root: Path, name: str, results: dict, samples: dict[str, list[dict]]) -> None:
    """One model's lm-eval --output_path directory as written with --log_samples."""
    directory = root / name
    directory.mkdir(parents=True)
    (directory / "results_2024-06-01T10-00-00.000000.json").write_text(json.dumps(results), encoding="utf-8")
    for task, lines in samples.items():
        path = directory / f"samples_{task}_2024-06-01T10-00-00.000000.jsonl"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def _sample(doc_id: int, metric: str, value: float, filt: str = "none") -> dict:
    return {
        "doc_id": doc_id,
        "doc": {"question": f"q{doc_id}"},
        "target": "A",
        "arguments": [["ctx", " A"]],
        "resps": [[["-1.2", "False"]]],
        "filtered_resps": [["-1.2", "False"]],
        "filter": filt,
        "metrics": [metric],
        "doc_hash": "h",
        "prompt_hash": "p",
        "target_hash": "t",
        metric: value,
    }


def test_lm_eval_log_samples_directories(tmp_path: Path) -> None:
    _lm_eval_dir(
        tmp_path,
        "org__small",
        {"model_name": "org/small", "results": {}},
        {"arc_easy": [_sample(0, "acc", 1.0), _sample(1, "acc", 0.0)]},
    )
    _lm_eval_dir(
        tmp_path,
        "org__large",
        {"config": {"model": "hf", "model_args": "pretrained=org/large,dtype=bf16"}},
        {"arc_easy": [_sample(0, "acc", 1.0), _sample(1, "acc", 1.0)]},
    )
    out = read_correctness(tmp_path).table
    got = out.set_index(["model", "benchmark", "item_id"])["score"].to_dict()
    # names from the directory layout (lm-eval's directory per model), not the results file's model_name
    assert got == {
        ("org__large", "arc_easy", "0"): 1,
        ("org__large", "arc_easy", "1"): 1,
        ("org__small", "arc_easy", "0"): 1,
        ("org__small", "arc_easy", "1"): 0,
    }
    with pytest.raises(EvalprismError, match="no 'exact_match' value for task 'arc_easy' .*acc"):
        read_correctness(tmp_path, harness=HarnessOptions(metric="arc_easy=exact_match"))
    with pytest.raises(EvalprismError, match="metric exact_match: no task under .* has a value 'exact_match'"):
        read_correctness(tmp_path, harness=HarnessOptions(metric="exact_match"))  # for every task that has it


def test_lm_eval_several_filters_default_to_strict_match(tmp_path: Path) -> None:
    lines = [
        _sample(0, "exact_match", 1.0, "strict-match"),
        _sample(0, "exact_match", 0.0, "flexible-extract"),
        _sample(1, "exact_match", 0.0, "strict-match"),
        _sample(1, "exact_match", 1.0, "flexible-extract"),
    ]
    _lm_eval_dir(tmp_path, "m", {}, {"gsm8k": lines})
    out = read_correctness(tmp_path / "m").table  # no results file: the sample's metrics list names exact_match
    assert out["model"].unique().tolist() == ["m"]
    assert out.sort_values("item_id")["score"].tolist() == [1, 0]
    assert out["filter"].unique().tolist() == ["strict-match"]
    flexible = read_correctness(tmp_path, harness=HarnessOptions(lm_eval_filter="flexible-extract")).table
    assert flexible.sort_values("item_id")["score"].tolist() == [0, 1]


def test_lm_eval_partial_credit_is_named_by_file_and_line(tmp_path: Path) -> None:
    _lm_eval_dir(tmp_path, "m", {}, {"squad": [_sample(0, "f1", 1.0), _sample(1, "f1", 0.5)]})
    with pytest.raises(
        EvalprismError,
        match=r"samples_squad_\S+\.jsonl: line 2: 'f1' is 0\.5 for task 'squad': "
        r"expected 1 \(right\), 0 \(wrong\)",
    ):
        read_correctness(tmp_path)


def _inspect_json_log(path: Path, model: str, values: list) -> None:
    """A minimal log in inspect_ai's JSON format: eval (task, model) and samples with scores."""
    samples = [
        {
            "id": i,
            "epoch": 1,
            "scores": {"choice": {"value": v}} if v is not None else {},
            "error": {"message": "timeout"} if v is None else None,
        }
        for i, v in enumerate(values)
    ]
    path.write_text(
        json.dumps(
            {
                "version": 2,
                "status": "success",
                "eval": {"task": "mmlu", "model": model, "config": {}},
                "samples": samples,
            }
        ),
        encoding="utf-8",
    )


def test_inspect_values_map_correct_incorrect_and_no_answer(tmp_path: Path) -> None:
    _inspect_json_log(tmp_path / "x.json", "openai/x", ["C", "I", "N", None, 1.0, True])
    out = read_correctness(tmp_path / "x.json").table
    assert out.sort_values("item_id")["score"].tolist() == [1, 0, -1, -1, 1, 1]
    _inspect_json_log(tmp_path / "p.json", "openai/x", ["C", "P"])
    with pytest.raises(EvalprismError, match=r"p\.json: sample '1' scored 'P' by 'choice', expected C/I/N"):
        read_correctness(tmp_path / "p.json")  # named by log and sample, not by a row of an internal table


def test_inspect_logs_through_inspect_api(tmp_path: Path) -> None:
    pytest.importorskip("inspect_ai.log", reason="inspect_ai is the optional extra evalprism[inspect]")
    from inspect_ai.log import EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.scorer import Score

    from evalprism.io.inspect_logs import read_inspect_logs

    for model, values in (("openai/small", ["C", "I", "I"]), ("openai/large", ["C", "C", "N"])):
        spec = EvalSpec(created="2024-06-01T10:00:00", task="mmlu", dataset={"name": "mmlu"}, model=model, config={})
        samples = [
            EvalSample(id=i, epoch=1, input="q", target="A", scores={"choice": Score(value=v)})
            for i, v in enumerate(values)
        ]
        write_eval_log(EvalLog(eval=spec, samples=samples), str(tmp_path / f"{model.split('/')[1]}.eval"))
    out = read_correctness(tmp_path).table  # a directory of .eval logs
    got = out.set_index(["model", "item_id"])["score"].to_dict()
    assert got == {
        ("openai/large", "0"): 1,
        ("openai/large", "1"): 1,
        ("openai/large", "2"): -1,
        ("openai/small", "0"): 1,
        ("openai/small", "1"): 0,
        ("openai/small", "2"): 0,
    }
    assert out["benchmark"].unique().tolist() == ["mmlu"]
    assert read_inspect_logs([tmp_path / "small.eval"])["score"].tolist() == [1, 0, 0]
