"""What a command says on the terminal (issue 38, item 7): every line prints what the user supplied
literally (brackets included), every command states its finding from its run record, and the common
slips are said as what they are."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import read_run, run_cli, small_responses

from evalprism.stem.simulate import simulate_family


def _lines(err: str) -> list[str]:
    return [" ".join(line.split()) for line in err.splitlines() if line.strip()]


def test_brackets_in_names_and_messages_print_as_given(tmp_path: Path, capsys) -> None:
    """rich markup would eat '[v2]', '[step2000]' and '[inspect]'; every line prints them."""
    missing = tmp_path / "run[v2].csv"
    code, _, err = run_cli(["ecdf", missing, "--out", tmp_path / "o"], capsys)
    assert code == 2 and f"error: {missing}: file not found" in _lines(err)
    scores = pd.DataFrame(
        {
            "model": ["ckpt[step2000]"] * 4 + ["base[v1]"] * 4,
            "item_id": list(range(4)) * 2,
            "score": [1, 1, 1, 0, 0, 0, 1, 0],
        }
    )
    scores.to_csv(tmp_path / "scores.csv", index=False)
    code, _, err = run_cli(["compare", tmp_path / "scores.csv", "--out", tmp_path / "c"], capsys)
    assert code == 0, err
    finding = next(line for line in _lines(err) if line.startswith("base[v1] vs ckpt[step2000]:"))
    assert "the items cannot tell: only 2 of the 4 items differ" in finding
    assert read_run(tmp_path / "c").findings[0] == finding  # printed from the run record


def test_every_command_states_its_finding_from_its_record(tmp_path: Path, capsys) -> None:
    """ecdf and stem locate used to print only 'wrote ...'."""
    small_responses().to_csv(tmp_path / "responses.csv", index=False)
    code, _, err = run_cli(
        ["ecdf", tmp_path / "responses.csv", "--by", "model", "--clusters", "2", "--out", tmp_path / "e"], capsys
    )
    assert code == 0, err
    record = read_run(tmp_path / "e")
    assert record.findings and record.findings[0].startswith("K=2 clusters of ")
    assert record.findings[0] in _lines(err)
    correctness, meta = simulate_family(n_items=400, seed=5)
    correctness.to_csv(tmp_path / "c.csv", index=False)
    meta.to_csv(tmp_path / "m.csv", index=False)
    pool = ["stem", "pool", tmp_path / "c.csv", "--models", tmp_path / "m.csv", "--family", "toy"]
    assert run_cli([*pool, "--out", tmp_path / "pool", "-q"], capsys)[0] == 0
    locate = ["stem", "locate", tmp_path / "pool", tmp_path / "c.csv", "--model", "other-b", "--trials", "5"]
    code, _, err = run_cli([*locate, "--out", tmp_path / "loc"], capsys)
    assert code == 0, err
    finding = read_run(tmp_path / "loc").findings[0]
    # placed (rightly or not), or abstaining: its interval holds a member's score (issue 42)
    assert finding.startswith(
        ("1 of 1 models placed at their true position", "0 of 1 models placed", "0 model(s) placed; 1 more too close")
    )
    assert finding in _lines(err)


def test_a_directory_where_a_table_is_expected_is_said_with_what_it_holds(tmp_path: Path, capsys) -> None:
    small_responses().to_csv(tmp_path / "responses.csv", index=False)
    assert (
        run_cli(["ecdf", tmp_path / "responses.csv", "--clusters", "2", "--out", tmp_path / "e", "-q"], capsys)[0] == 0
    )
    code, _, err = run_cli(["ecdf", tmp_path / "e", "--out", tmp_path / "again"], capsys)
    assert code == 2
    assert f"{tmp_path / 'e'}: is a directory; expected a table file" in _lines(err)[0]
    assert "it is an output directory of `evalprism ecdf`, which this argument does not take" in _lines(err)[0]
    study = tmp_path / "renze-temperature"
    (study / "responses").mkdir(parents=True)
    (study / "exams").mkdir()
    code, _, err = run_cli(["ecdf", study, "--out", tmp_path / "r"], capsys)
    assert code == 2 and f"`python scripts/renze.py convert {study} out/renze.parquet`" in _lines(err)[0]


@pytest.mark.parametrize("command", ["evaluate", "leaderboard"])
def test_swapped_model_and_data_arguments_are_said_as_swapped(tmp_path: Path, capsys, command: str) -> None:
    """`p2l evaluate BATTLES P2L_MODEL` used to answer 'no lm-eval samples files ... no inspect_ai logs'."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    (model / "head.safetensors").write_bytes(b"")
    data = tmp_path / "data.jsonl"
    data.write_text('{"prompt": "hi"}\n', encoding="utf-8")
    code, _, err = run_cli(["p2l", command, data, model, "--out", tmp_path / "o"], capsys)
    assert code == 2
    assert f"{model} is a P2L model directory and {data} is not: the two look swapped" in _lines(err)[0]
    assert not (tmp_path / "o").exists()


def test_out_naming_the_input_file_itself_is_said_as_such(responses_csv: Path, capsys) -> None:
    code, _, err = run_cli(["ecdf", responses_csv, "--out", responses_csv], capsys)
    assert code == 2
    assert f"{responses_csv}: is the input file {responses_csv} itself" in _lines(err)[0]
    assert responses_csv.stat().st_size > 0
