"""Each routing check lives once, in the library (issue 15, "validate once"): the same bad input gives
the same one message to a notebook user, a CLI user and the router service.

- budget below the cheapest model's cost: :func:`evalprism.p2l.routing.check_budget`;
- the opponent: :func:`evalprism.p2l.routing.opponent_vector`;
- missing costs: :func:`evalprism.io.costs.cost_vector`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from helpers import run_cli

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, TrainOptions, route, route_prompts, train_model
from evalprism.p2l.options import RouteOptions
from evalprism.p2l.routing import opponent_vector
from evalprism.p2l.simulate import simulate_topic_battles
from evalprism.serve.app import RequestError, Service
from evalprism.serve.config import load_config
from evalprism.serve.router import RoutingCore

COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
PROMPTS = ["Write a sonnet about the autumn sea", "Solve 3x + 7 = 22 for x"]
BELOW = "budget 0.1 is below the cheapest model's cost 0.2 (poet-7b)"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("validate-once")
    options = TrainOptions(seed=0)  # any model will do: every check runs before routing
    return train_model(simulate_topic_battles(300, seed=0), options, progress=False).save(root / "model")


def write_router_config(path: Path, costs: dict[str, float], **extra: object) -> Path:
    models = {name: {"base_url": "http://127.0.0.1:9/v1", "cost": cost} for name, cost in costs.items()}
    path.write_text(yaml.safe_dump({"models": models, **extra}, sort_keys=False), encoding="utf-8")
    return path


def library_message(call) -> str:
    with pytest.raises(EvalprismError) as info:
        call()
    return str(info.value)


@pytest.mark.slow  # trains a small P2L model
def test_a_budget_below_the_cheapest_model_gets_one_message_everywhere(
    model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = P2LModel.load(model_dir)
    names = model.models
    coefs = np.zeros((2, len(names)))
    # the library: route (one leaderboard, per-prompt leaderboards, both budget scopes) and route_prompts
    assert library_message(lambda: route(coefs[0], COSTS, 0.1, names=names)) == BELOW
    for scope in ("prompt", "average"):
        assert library_message(lambda scope=scope: route(coefs, COSTS, 0.1, names=names, budget_scope=scope)) == BELOW
        assert (
            library_message(
                lambda scope=scope: route_prompts(
                    model,
                    pd.DataFrame({"prompt": PROMPTS}),
                    COSTS,
                    RouteOptions(budget=0.1, budget_scope=scope),
                    progress=False,
                )
            )
            == BELOW
        )
    # the CLI shows the library's message as it is
    pd.DataFrame({"prompt": PROMPTS}).to_csv(tmp_path / "prompts.csv", index=False)
    pd.DataFrame({"model": list(COSTS), "cost": list(COSTS.values())}).to_csv(tmp_path / "costs.csv", index=False)
    code, _, err = run_cli(
        [
            "p2l",
            "route",
            model_dir,
            tmp_path / "prompts.csv",
            "--costs",
            tmp_path / "costs.csv",
            "--budget",
            "0.1",
            "--out",
            tmp_path / "out",
            "-q",
        ],
        capsys,
    )
    assert code == 2 and err.strip() == f"error: {BELOW}"
    assert not (tmp_path / "out").exists()
    # the service: its config file (after the file's name) and a request's budget
    config_path = write_router_config(tmp_path / "router.yaml", COSTS, budget=0.1)
    assert library_message(lambda: load_config(config_path, names)) == f"{config_path}: {BELOW}"
    config = load_config(write_router_config(tmp_path / "ok.yaml", COSTS, budget=1.0), names)
    # budgets need no I/O: no batcher, upstreams, decision log, metrics, conversations or extraction
    service = Service(config, RoutingCore(model, config), *[None] * 4, "float32", {}, *[None] * 4)  # type: ignore[arg-type]
    with pytest.raises(RequestError) as info:
        service.budget_of(0.1)
    assert info.value.status_code == 422 and info.value.detail == BELOW and info.value.param == "budget"
    assert service.budget_of(None) == 1.0 and service.budget_of(0.2) == 0.2


@pytest.mark.slow  # trains a small P2L model
def test_missing_costs_get_one_message_from_route_and_route_prompts(model_dir: Path) -> None:
    model = P2LModel.load(model_dir)
    partial = {"poet-7b": 0.2, "calc-13b": 0.4}
    want = "costs: no cost for 2 of the 4 models routed among: coder-34b, generalist-70b"
    assert library_message(lambda: route(np.zeros(4), partial, 1.0, names=model.models)) == want
    assert (
        library_message(
            lambda: route_prompts(
                model, pd.DataFrame({"prompt": PROMPTS}), partial, RouteOptions(budget=1.0), progress=False
            )
        )
        == want
    )


@pytest.mark.parametrize(
    "opponent,message",
    [
        (
            {"gpt-9": 1.0},
            "opponent: gpt-9 not among the candidate models; the opponent distribution is over the candidates",
        ),
        ({"a": 0.0, "b": 0.0}, "opponent: expected weights >= 0 with a positive sum"),
        ({"a": -1.0, "b": 2.0}, "opponent: expected weights >= 0 with a positive sum"),
        ({}, "opponent: expected 'uniform' or at least one {model: weight}"),
    ],
)
def test_opponent_weights_get_one_message_from_the_library_and_the_config(
    tmp_path: Path, opponent: dict[str, float], message: str
) -> None:
    costs = {"a": 1.0, "b": 2.0}
    assert library_message(lambda: route(np.zeros(2), costs, None, opponent, names=list(costs))) == message
    path = write_router_config(tmp_path / "router.yaml", costs, opponent=opponent)
    assert library_message(lambda: load_config(path)) == f"{path}: {message}"


def test_opponent_weights_are_normalised_and_route_like_the_vector() -> None:
    names, theta, costs = ["a", "b", "c"], np.array([-1.0, 0.0, 1.0]), np.array([1.0, 2.0, 4.0])
    np.testing.assert_array_equal(opponent_vector({"c": 3.0, "a": 1.0}, names), [0.25, 0.0, 0.75])
    by_name = route(theta, costs, 3.0, {"a": 1.0, "c": 3.0}, names=names)
    by_vector = route(theta, costs, 3.0, np.array([0.25, 0.0, 0.75]), names=names)
    np.testing.assert_array_equal(by_name.probs, by_vector.probs)
    assert by_name.router_coef == by_vector.router_coef
