"""`evalprism p2l route`: the router on a trained model end to end, and its bad-input messages."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers import run_cli

from evalprism.p2l import TrainOptions, train_model
from evalprism.p2l.simulate import TOPICS, simulate_topic_battles, topic_prompts

pytestmark = pytest.mark.slow  # trains a P2L model for the router

COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}


@pytest.fixture(scope="module")
def model_and_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("route")
    train_model(simulate_topic_battles(3000, seed=30), TrainOptions(), progress=False).save(root / "model")
    pd.DataFrame({"prompt": [p for t in TOPICS for p in topic_prompts(t)[::2]]}).to_csv(
        root / "prompts.csv", index=False
    )
    pd.DataFrame({"model": list(COSTS), "cost": list(COSTS.values())}).to_csv(root / "costs.csv", index=False)
    return root


def _route(root: Path, costs: str, out: str, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    """`p2l route` of the model on the prompts under ``root`` with the costs file ``costs`` into ``out``
    (both under ``root``), then ``options``, in-process: its exit code and stderr."""
    args = ["p2l", "route", root / "model", root / "prompts.csv", "--costs", root / costs, *options]
    code, _, err = run_cli([*args, "--out", root / out, "-q"], capsys)
    return code, err


def test_cli_route_beats_the_best_single_model_within_budget(model_and_inputs: Path, capsys) -> None:
    root = model_and_inputs
    code, err = _route(root, "costs.csv", "r", capsys, "--budget", "0.8")
    assert code == 0, err
    routes = pd.read_csv(root / "r" / "routes.csv")
    assert len(routes) == len(pd.read_csv(root / "prompts.csv"))
    cost_of = routes["model"].map(COSTS) * routes["prob"] + routes["model_2"].map(COSTS).fillna(0) * routes["prob_2"]
    assert cost_of.mean() <= 0.8 + 1e-9  # the budget holds on average over the prompt set
    # specialists get their own topic's prompts
    poem = routes[routes["prompt"].str.contains("poem")]
    assert (poem["model"] == "poet-7b").mean() > 0.8
    curve = pd.read_csv(root / "r" / "curve.csv")
    assert (curve["predicted_router_winrate"] >= curve["predicted_best_single_winrate"] - 1e-9).all()
    assert (curve["predicted_router_winrate"] > curve["predicted_best_single_winrate"] + 0.05).any()


def test_cli_route_refuses_missing_costs_and_low_budgets(model_and_inputs: Path, capsys) -> None:
    root = model_and_inputs
    partial = pd.DataFrame({"model": ["poet-7b", "calc-13b"], "cost": [0.2, 0.4]})
    partial.to_csv(root / "partial.csv", index=False)
    code, err = _route(root, "partial.csv", "x", capsys, "--budget", "1")
    assert code == 2 and "no cost for 2" in err and "coder-34b" in err
    code, err = _route(root, "costs.csv", "x", capsys, "--budget", "0.1")
    assert code == 2 and "cheapest" in err
    bad = pd.DataFrame({"model": ["poet-7b"], "cost": [-1.0]})
    bad.to_csv(root / "bad.csv", index=False)
    code, err = _route(root, "bad.csv", "x", capsys)
    assert code == 2 and "row 1 (line 2), column 'cost'" in err
    assert not (root / "x").exists()
