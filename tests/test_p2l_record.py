"""Every p2l command's run record (``run.json``, format 2): the command, the options as every field
of the command's options class, the results as every field of the run's summary, and a finding
whose numbers are the tables' own (the leader it names is row 1 of the leaderboard it wrote, the
NLL it quotes is the one in the metrics table, the counts are the files' rows)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import read_run, run_cli

from evalprism.io import read_table
from evalprism.io.record import RUN_FORMAT, RunRecord
from evalprism.p2l import P2LModel, TrainOptions, evaluate_model, split_battles, train_model
from evalprism.p2l.evaluate import EvaluationSummary
from evalprism.p2l.marginal import FitSummary
from evalprism.p2l.options import (
    EvaluateOptions,
    FitOptions,
    PromptSetOptions,
    ResolvedTrainOptions,
    RouteOptions,
    SplitOptions,
)
from evalprism.p2l.prompt_set import PromptSetSummary
from evalprism.p2l.router import RoutingSummary
from evalprism.p2l.simulate import simulate_topic_battles
from evalprism.p2l.split import SplitSummary
from evalprism.p2l.train_summary import TrainSummary

COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}


def _fields(kind: type) -> list[str]:
    return [f.name for f in dataclasses.fields(kind)]


def _record(out: Path, command: str, options: type, summary: type) -> RunRecord:
    """The run record of ``out``, checked for the layout every command shares."""
    raw = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert raw["format"] == RUN_FORMAT and raw["output"]["kind"] == command
    assert [k for k in raw if k != "output"] == [
        "format",
        "command",
        "evalprism",
        "versions",
        "inputs",
        "read",
        "options",
        "notes",
        "findings",
        "results",
    ]
    run = read_run(out)
    assert run.command == command
    assert list(run.options) == _fields(options)
    assert set(_fields(summary)) <= set(run.results)
    assert run.findings
    return run


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600 simulated battles over three topics, as JSON Lines, and their split by prompt."""
    root = tmp_path_factory.mktemp("p2l-record")
    battles = simulate_topic_battles(600, seed=1)
    battles.to_json(root / "battles.jsonl", orient="records", lines=True)
    pd.DataFrame({"model": list(COSTS), "cost": list(COSTS.values())}).to_csv(root / "costs.csv", index=False)
    return root


def _cli(args: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["p2l", *map(str, args)], capsys)
    assert code == 0, err


def test_fit_record_names_the_leader_of_its_leaderboard(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cli(["fit", work / "battles.jsonl", "--ci", "bootstrap", "--rounds", "10", "--out", work / "fit"], capsys)
    run = _record(work / "fit", "p2l fit", FitOptions, FitSummary)
    board = pd.read_csv(work / "fit" / "leaderboard.csv")
    assert run.findings[0].startswith(f"{board['model'][0]} leads (rating {board['rating'][0]:.0f});")
    assert run.options["rounds"] == 10 and run.results["rounds"] == 10  # given, and run
    assert run.results["n_battles"] == 600 and run.results["not_identified"] is None
    assert "600 rows read as 600 battles of 4 models" in run.provenance.choices[0]  # the battles reader's line


def test_split_record_counts_the_files_rows(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cli(["split", work / "battles.jsonl", "--test-fraction", "0.25", "--out", work / "split"], capsys)
    run = _record(work / "split", "p2l split", SplitOptions, SplitSummary)
    train, test = (pd.read_json(work / "split" / f"{side}.jsonl", lines=True) for side in ("train", "test"))
    assert run.findings[0] == (
        f"train {len(train)} battles on {train['prompt'].nunique()} prompts, "
        f"test {len(test)} battles on {test['prompt'].nunique()} prompts"
    )
    assert run.options["test_fraction"] == 0.25 and run.results["files"] == {
        "train": "train.jsonl",
        "test": "test.jsonl",
    }


@pytest.fixture(scope="module")
def model(work: Path) -> Path:
    """A P2L model trained on the train side of a split (a fixed ridge penalty: no cross-validation)."""
    split_battles(read_table(work / "battles.jsonl"), SplitOptions(test_fraction=0.25)).save(work / "held")
    trained = train_model(read_table(work / "held" / "train.jsonl"), TrainOptions(penalty=1.0), progress=False)
    return trained.save(work / "model")


def test_train_record_quotes_its_validation_nll_and_matches_the_model_config(model: Path) -> None:
    run = _record(model, "p2l train", ResolvedTrainOptions, TrainSummary)
    evaluation = pd.read_csv(model / "evaluation.csv").set_index("predictor")["nll"]
    assert run.findings[0].startswith(
        f"P2L held-out NLL {evaluation['p2l']:.3f} vs marginal {evaluation['marginal']:.3f}"
    )
    assert run.results["chosen"] == {"penalty_chosen": 1.0, "penalty_by": "option"}
    assert run.options["fit"] == "ridge" and run.notes == ()  # a ridge fit has no epochs to stop
    training = json.loads((model / "config.json").read_text(encoding="utf-8"))["training"]
    assert "harness" not in training and training["penalty_chosen"] == 1.0
    assert training["read"] == list(run.provenance.choices) and training["n_battles"] == run.results["n_battles"]
    assert run.results["train_battles"] + run.results["val_battles"] <= run.results["n_battles"]


def test_leaderboard_record_names_the_aggregated_leader(
    work: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cli(["leaderboard", model, work / "held" / "test.jsonl", "--out", work / "board"], capsys)
    run = _record(work / "board", "p2l leaderboard", PromptSetOptions, PromptSetSummary)
    board = pd.read_csv(work / "board" / "leaderboard.csv")
    assert run.findings[0].startswith(f"{board['model'][0]} leads overall")
    assert run.options["reference"] is None and run.results["reference"] == board["model"][0]  # the leader
    assert run.results["n_prompts"] == len(pd.read_csv(work / "board" / "prompts.csv"))


def test_evaluate_record_quotes_the_metrics_table(work: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    held_out = work / "held" / "test.jsonl"
    _cli(["evaluate", model, held_out, "--costs", work / "costs.csv", "--out", work / "ev"], capsys)
    run = _record(work / "ev", "p2l evaluate", EvaluateOptions, EvaluationSummary)
    nll = pd.read_csv(work / "ev" / "metrics.csv").set_index("predictor")["nll"]
    assert f"NLL per battle: P2L {nll['p2l']:.4f}, marginal {nll['marginal']:.4f}" in " ".join(run.findings)
    assert run.results["n_battles"] == len(pd.read_json(held_out, lines=True))
    assert run.results["overlap"]["fit"] == 0  # the split held these prompts out
    assert run.notes == ()  # no tie for bt to leave out: no note (an empty note once broke the record)
    assert run.results["routing"]["value"] == "score" and run.results["routing"]["costs"] == COSTS


def test_route_record_quotes_the_routes_mean_cost(work: Path, model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prompts = work / "held" / "test.jsonl"
    _cli(["route", model, prompts, "--costs", work / "costs.csv", "--budget", "0.8", "--out", work / "route"], capsys)
    run = _record(work / "route", "p2l route", RouteOptions, RoutingSummary)
    routes = pd.read_csv(work / "route" / "routes.csv")
    assert run.results["mean_expected_cost"] == pytest.approx(routes["expected_cost"].mean())
    assert run.results["mean_expected_cost"] <= 0.8 + 1e-9  # the average budget holds
    assert f"at mean cost {routes['expected_cost'].mean():.3g} vs" in run.findings[0]
    assert run.findings[0].startswith(f"router {routes['expected_winrate'].mean():.1%} predicted win rate")
    assert run.options["budget"] == 0.8 and run.results["cost_column"] == "cost"


def test_evaluate_records_the_left_out_ties_as_one_note(work: Path, model: Path) -> None:
    """Ties a ``bt`` model cannot score are one note, said once (the dict bridge once spread its
    letters into one note each)."""
    battles = pd.read_json(work / "held" / "test.jsonl", lines=True)
    battles.loc[battles.index[:10], "winner"] = "tie"
    result = evaluate_model(P2LModel.load(model, progress=False), battles, progress=False)
    assert result.record.notes == (
        "outcome model 'bt' leaves out 10 of "
        f"{len(battles)} battles: 'tie' and 'tie (bothbad)' are not outcomes of that model (bt-tie counts a tie as "
        "half a win for each side; rk and grk model ties)",
    )
    assert [kind for kind, _ in result.record.said()].count("note") == 1
    assert result.summary.battles_used == len(battles) - 10
