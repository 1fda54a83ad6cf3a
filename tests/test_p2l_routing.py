"""route(): the user-facing optimal router (seed 002, Theorem 1, Algorithm 1), with known answers."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit, logit

from evalprism.errors import EvalprismError
from evalprism.p2l.routing import Route, route

NAMES = ["small", "medium", "large"]
THETA = np.array([-1.0, 0.0, 1.0])
COSTS = np.array([1.0, 2.0, 4.0])


def test_unconstrained_route_picks_the_best_model() -> None:
    for budget in (None, np.inf, 4.0):
        r = route(THETA, COSTS, budget, names=NAMES)
        np.testing.assert_array_equal(r.probs, [0, 0, 1])
        assert isinstance(r.expected_winrate, float) and isinstance(r.router_coef, float)
        q = np.full(3, 1 / 3)
        assert r.expected_winrate == pytest.approx(q @ expit(1.0 - THETA), abs=1e-15)
        assert r.expected_cost == 4.0
        # the router that always plays "large" has the coefficient of "large"
        assert r.router_coef == pytest.approx(1.0, abs=1e-10)
    assert route(THETA, COSTS, None).budget == np.inf


def test_budget_between_costs_mixes_the_hull_neighbours() -> None:
    r = route(THETA, COSTS, 3.0, names=NAMES)
    # v = W q is concave in cost here, so the optimum mixes medium and large at cost exactly 3
    np.testing.assert_allclose(r.probs, [0.0, 0.5, 0.5], atol=1e-15)
    assert r.expected_cost == pytest.approx(3.0, abs=1e-15)
    q = np.full(3, 1 / 3)
    assert q @ expit(r.router_coef - THETA) == pytest.approx(r.expected_winrate, abs=1e-12)  # eq. (9)
    # each model's value is its win rate against q, and the router's is the π-mix of them
    np.testing.assert_allclose(r.values, [q @ expit(t - THETA) for t in THETA], atol=1e-15)
    assert r.probs @ r.values == pytest.approx(r.expected_winrate, abs=1e-15)
    frame = r.frame()
    assert list(frame.columns) == [
        "prompt",
        "model",
        "prob",
        "model_2",
        "prob_2",
        "expected_winrate",
        "expected_cost",
        "router_coef",
    ]
    assert frame.loc[0, ["model", "model_2"]].tolist() == ["medium", "large"]  # equal probs: lower index first
    assert frame.loc[0, "prob"] == pytest.approx(0.5)


def test_opponent_forms_agree() -> None:
    rng = np.random.default_rng(0)
    theta = rng.normal(size=(25, 3))
    uniform = route(theta, COSTS, 2.5, "uniform", names=NAMES)
    explicit = route(theta, COSTS, 2.5, np.full(3, 1 / 3), names=NAMES)
    np.testing.assert_allclose(uniform.probs, explicit.probs, atol=1e-15)
    np.testing.assert_allclose(uniform.router_coef, explicit.router_coef, atol=1e-12)
    # a q within 1e-9 of summing to 1 is renormalised, not refused
    nearly = route(theta, COSTS, 2.5, np.array([0.2, 0.3, 0.5 + 5e-10]), names=NAMES)
    assert np.all(np.isfinite(nearly.router_coef))


def test_point_mass_opponent() -> None:
    r = route(THETA, COSTS, None, "medium", names=NAMES)
    assert r.expected_winrate == pytest.approx(expit(1.0), abs=1e-15)  # large vs medium
    assert r.router_coef == pytest.approx(1.0, abs=1e-12)  # closed form: θ_medium + logit(σ(1))
    same = route(THETA, COSTS, None, np.array([0.0, 1.0, 0.0]), names=NAMES)
    assert same.router_coef == pytest.approx(r.router_coef, abs=1e-12)


def test_grk_values_are_probabilities_of_not_being_bad() -> None:
    beta = np.array([0.5, 1.5, 3.0])
    r = route(beta, COSTS, 3.0, "medium", names=NAMES, value="grk")  # opponent ignored
    np.testing.assert_allclose(r.probs, [0.0, 0.5, 0.5], atol=1e-15)
    expected = 0.5 * expit(1.5) + 0.5 * expit(3.0)
    assert r.expected_winrate == pytest.approx(expected, abs=1e-15)
    assert r.router_coef == pytest.approx(logit(expected), abs=1e-12)
    # a cheap model with a higher β than the expensive ones is chosen outright
    r2 = route(np.array([2.0, 1.0, 0.0]), COSTS, 3.0, value="grk")
    np.testing.assert_array_equal(r2.probs, [1, 0, 0])
    assert r2.router_coef == pytest.approx(2.0, abs=1e-12)


def test_two_dimensional_inputs() -> None:
    rng = np.random.default_rng(1)
    n = 40
    theta = rng.normal(size=(n, 3))
    costs = rng.uniform(1.0, 4.0, (n, 3))
    costs[:, 0] = rng.uniform(1.0, 2.5, n)  # every prompt can afford its cheapest model
    r = route(theta, costs, 2.5, names=NAMES)
    assert r.probs.shape == (n, 3)
    assert r.expected_winrate.shape == r.router_coef.shape == r.expected_cost.shape == (n,)
    assert np.all(r.expected_cost <= 2.5 + 1e-12)
    assert np.all(np.count_nonzero(r.probs, axis=1) <= 2)
    # each row is the same as routing that prompt alone
    for i in (0, 17, 39):
        one = route(theta[i], costs[i], 2.5, names=NAMES)
        np.testing.assert_allclose(r.probs[i], one.probs, atol=1e-15)
        assert r.router_coef[i] == pytest.approx(one.router_coef, abs=1e-11)
    # one leaderboard with per-prompt costs broadcasts to n prompts
    assert route(THETA, costs, 2.5).probs.shape == (n, 3)
    frame = r.frame()
    assert len(frame) == n and frame["prompt"].tolist() == list(range(n))


def test_average_budget_scope() -> None:
    rng = np.random.default_rng(2)
    n = 30
    theta = rng.normal(size=(n, 3))
    costs = COSTS * rng.uniform(0.5, 2.0, (n, 1))  # long prompts cost more on every model
    budget = 2.0
    avg = route(theta, costs, budget, budget_scope="average")
    per = route(theta, costs, budget, budget_scope="prompt")
    assert avg.expected_cost.mean() == pytest.approx(budget, rel=1e-12)
    assert avg.expected_winrate.sum() >= per.expected_winrate.sum() - 1e-12
    assert ((avg.probs > 0) & (avg.probs < 1)).any(axis=1).sum() <= 1
    floor = f"{costs.min(axis=1).mean():g}"  # the lowest achievable average cost
    with pytest.raises(
        EvalprismError,
        match=rf"^budget 0.1 is below the cheapest model's cost {floor} "
        r"\(each prompt's cheapest, averaged over the prompts\)$",
    ):
        route(theta, costs, 0.1, budget_scope="average")


def test_mapping_costs() -> None:
    costs = {"large": 4.0, "small": 1.0, "medium": 2.0, "unused": 9.0}  # order and extras do not matter
    r = route(THETA, costs, 3.0, names=NAMES)
    np.testing.assert_allclose(r.probs, route(THETA, COSTS, 3.0).probs, atol=1e-15)
    with pytest.raises(EvalprismError, match=r"^costs: no cost for 2 of the 3 models routed among: medium, large$"):
        route(THETA, {"small": 1.0}, 3.0, names=NAMES)
    with pytest.raises(EvalprismError, match="names is required"):
        route(THETA, costs, 3.0)


def test_errors() -> None:
    with pytest.raises(EvalprismError, match=r"^budget 0.5 is below the cheapest model's cost 1 \(small\)$"):
        route(THETA, COSTS, 0.5, names=NAMES)
    with pytest.raises(
        EvalprismError, match=r"^budget 0.5 is below the cheapest model's cost 1 \(small, on prompt 1\)$"
    ):
        route(np.zeros((2, 3)), np.array([[0.1, 1.0, 2.0], [1.0, 2.0, 3.0]]), 0.5, names=NAMES)
    with pytest.raises(EvalprismError, match="unknown opponent 'huge'"):
        route(THETA, COSTS, 3.0, "huge", names=NAMES)
    with pytest.raises(EvalprismError, match="probability distribution"):
        route(THETA, COSTS, 3.0, np.array([0.5, 0.6, -0.1]))
    with pytest.raises(EvalprismError, match="probability distribution"):
        route(THETA, COSTS, 3.0, np.array([0.2, 0.2, 0.2]))
    with pytest.raises(EvalprismError, match="costs must have shape"):
        route(THETA, np.ones(4), 3.0)
    with pytest.raises(EvalprismError, match="names has 2 entries"):
        route(THETA, COSTS, 3.0, names=["a", "b"])
    with pytest.raises(EvalprismError, match="value: expected one of bt, grk, got .rk."):
        route(THETA, COSTS, 3.0, value="rk")  # type: ignore[arg-type]
    with pytest.raises(EvalprismError, match="coefs has 4, costs has 5"):
        route(np.zeros((4, 3)), np.ones((5, 3)), 3.0)
    with pytest.raises(EvalprismError, match="costs must be finite"):
        route(THETA, np.array([1.0, np.nan, 2.0]), 3.0)


def test_route_is_a_frozen_dataclass() -> None:
    r = route(THETA, COSTS, 3.0)
    assert isinstance(r, Route)
    with pytest.raises(AttributeError):
        r.budget = 1.0  # type: ignore[misc]
