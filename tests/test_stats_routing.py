"""Exact routing kernels (seed 002, Theorem 1, Algorithm 1) against scipy's HiGHS LP solver and closed forms."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq, linprog
from scipy.special import expit, logit

from evalprism.errors import EvalprismError
from evalprism.stats.routing import best_mix, best_mix_average_budget, router_coefficient, win_values


def lp_optimum(v: np.ndarray, c: np.ndarray, budget: float) -> float:
    """max π·v s.t. π·c <= budget, π in the simplex, by HiGHS."""
    m = v.size
    res = linprog(-v, A_ub=c[None], b_ub=[budget], A_eq=np.ones((1, m)), b_eq=[1.0], bounds=(0, 1), method="highs")
    assert res.status == 0
    return -res.fun


def joint_lp_optimum(v: np.ndarray, c: np.ndarray, budget: float) -> float:
    """max (1/n) Σ π_i·v_i s.t. (1/n) Σ π_i·c_i <= budget, every π_i in the simplex, by HiGHS."""
    n, m = v.shape
    res = linprog(
        -v.ravel() / n,
        A_ub=c.ravel()[None] / n,
        b_ub=[budget],
        A_eq=np.kron(np.eye(n), np.ones(m)),
        b_eq=np.ones(n),
        bounds=(0, 1),
        method="highs",
    )
    assert res.status == 0
    return -res.fun


def random_instance(rng: np.random.Generator, shape: tuple[int, ...], discrete: bool) -> tuple[np.ndarray, np.ndarray]:
    """Values and costs; ``discrete`` draws small integers so that ties and collinear points abound."""
    if discrete:
        return rng.integers(0, 4, shape).astype(float), rng.integers(0, 4, shape).astype(float)
    return rng.random(shape), np.exp(rng.normal(0, 1.5, shape))


def assert_feasible(p: np.ndarray, c: np.ndarray, budget: float) -> None:
    assert np.all(p >= 0)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert p @ c <= budget + 1e-12 * max(1.0, budget)
    assert np.count_nonzero(p) <= 2


# --------------------------------------------------------------------------------------------
# best_mix: Theorem 1 per prompt
# --------------------------------------------------------------------------------------------


def test_best_mix_equals_linprog_on_random_instances() -> None:
    rng = np.random.default_rng(0)
    for it in range(240):
        m = int(rng.integers(2, 41))
        v, c = random_instance(rng, (m,), discrete=it % 3 == 0)
        budget = float(rng.choice(c)) if it % 4 == 0 else float(rng.uniform(c.min(), c.max()))
        p = best_mix(v, c, budget)
        assert p.shape == (m,)
        assert_feasible(p, c, budget)
        assert p @ v == pytest.approx(lp_optimum(v, c, budget), abs=1e-9)


def test_best_mix_per_prompt_costs_and_budgets_equal_linprog() -> None:
    rng = np.random.default_rng(1)
    n, m = 60, 12
    v, c = random_instance(rng, (n, m), discrete=False)
    budget = rng.uniform(c.min(axis=1), c.max(axis=1))
    p = best_mix(v, c, budget)
    assert p.shape == (n, m)
    for i in range(n):
        assert_feasible(p[i], c[i], budget[i])
        assert p[i] @ v[i] == pytest.approx(lp_optimum(v[i], c[i], budget[i]), abs=1e-9)
    # shared costs (M,) and one budget broadcast over the prompts: same as row by row
    shared = best_mix(v, c[0], 1.0 + c[0].min())
    for i in range(0, n, 7):
        assert np.array_equal(shared[i], best_mix(v[i], c[0], 1.0 + c[0].min()))


def test_best_mix_mixes_two_models_at_exactly_the_budget() -> None:
    # cheap model 0 (value 0.2, cost 1), expensive model 2 (value 0.8, cost 3), dominated model 1
    v, c = np.array([0.2, 0.3, 0.8]), np.array([1.0, 2.5, 3.0])
    p = best_mix(v, c, 2.0)
    np.testing.assert_allclose(p, [0.5, 0.0, 0.5], atol=1e-15)
    assert p @ c == pytest.approx(2.0, abs=1e-15)


def test_generous_budget_picks_argmax_and_ties_go_to_the_cheaper() -> None:
    v, c = np.array([0.1, 0.9, 0.5, 0.9]), np.array([1.0, 5.0, 2.0, 4.0])
    for budget in (5.0, 100.0, np.inf):
        np.testing.assert_array_equal(best_mix(v, c, budget), [0, 0, 0, 1])  # model 3: as good, cheaper
    v_tied, c_tied = np.array([0.9, 0.9]), np.array([1.0, 1.0])
    np.testing.assert_array_equal(best_mix(v_tied, c_tied, np.inf), [1, 0])  # then the lower index


def test_budget_exactly_the_cheapest_cost_picks_the_cheapest() -> None:
    v, c = np.array([0.9, 0.2, 0.4, 0.7]), np.array([3.0, 1.0, 1.0, 2.0])
    np.testing.assert_array_equal(best_mix(v, c, 1.0), [0, 0, 1, 0])  # best among the two cheapest


def test_best_mix_errors() -> None:
    v, c = np.array([0.5, 0.6]), np.array([2.0, 0.75])
    # an infeasible budget is a precondition (ValueError); users meet p2l.routing.check_budget first
    with pytest.raises(ValueError, match=r"^infeasible: budget 0.5 is below row 0's smallest cost 0.75 \(column 1\)$"):
        best_mix(v, c, 0.5)
    with pytest.raises(ValueError, match=r"^infeasible: budget 2 is below row 1's smallest cost 3 \(column 0\)$"):
        best_mix(np.tile(v, (3, 1)), np.array([[1.0, 2.0], [3.0, 4.0], [0.0, 1.0]]), 2.0)
    with pytest.raises(EvalprismError, match="NaN or infinite"):
        best_mix(v, np.array([np.nan, 1.0]), 1.0)
    with pytest.raises(EvalprismError, match="negative"):
        best_mix(v, np.array([-1.0, 1.0]), 1.0)
    with pytest.raises(EvalprismError, match="values has 2 models but costs has 3"):
        best_mix(v, np.ones(3), 1.0)
    with pytest.raises(EvalprismError, match="values has 2 prompts but costs has 3"):
        best_mix(np.ones((2, 3)), np.ones((3, 3)), 1.0)
    with pytest.raises(EvalprismError, match="budget is NaN"):
        best_mix(v, c, np.nan)


# --------------------------------------------------------------------------------------------
# best_mix_average_budget: the coupled LP
# --------------------------------------------------------------------------------------------


def test_average_budget_equals_joint_linprog() -> None:
    rng = np.random.default_rng(2)
    for it in range(60):
        n, m = int(rng.integers(5, 31)), int(rng.integers(2, 11))
        v, c = random_instance(rng, (n, m), discrete=it % 3 == 0)
        floor = c.min(axis=1).mean()
        top = c[np.arange(n), v.argmax(axis=1)].mean()
        budget = float(rng.uniform(floor, max(top, floor)))
        p = best_mix_average_budget(v, c, budget)
        assert np.all(p >= 0)
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        assert (p * c).sum() / n <= budget + 1e-12 * max(1.0, budget)
        assert ((p > 0) & (p < 1)).any(axis=1).sum() <= 1  # at most one prompt randomised
        assert (p * v).sum() / n == pytest.approx(joint_lp_optimum(v, c, budget), abs=1e-9)


def test_average_budget_is_binding_and_beats_per_prompt_budget() -> None:
    rng = np.random.default_rng(3)
    n, m = 20, 6
    v, c = rng.random((n, m)), np.exp(rng.normal(0, 1, (n, m)))
    budget = float(c.min(axis=1).max())  # every prompt can afford its cheapest model
    p = best_mix_average_budget(v, c, budget)
    assert (p * c).sum() / n == pytest.approx(budget, rel=1e-12)  # binding: equality
    per_prompt = best_mix(v, c, budget)
    assert (p * v).sum() >= (per_prompt * v).sum() - 1e-12  # per-prompt budgets are one feasible point


def test_average_budget_unconstrained_and_errors() -> None:
    v, c = np.array([[0.1, 0.9], [0.8, 0.3]]), np.array([[1.0, 3.0], [2.0, 1.0]])
    np.testing.assert_array_equal(best_mix_average_budget(v, c, np.inf), [[0, 1], [1, 0]])
    np.testing.assert_array_equal(best_mix_average_budget(v, c, 2.5), [[0, 1], [1, 0]])  # mean cost 2.5
    with pytest.raises(ValueError, match=r"^infeasible: budget 0.9 is below the mean of the rows' smallest costs 1$"):
        best_mix_average_budget(v, c, 0.9)
    with pytest.raises(ValueError, match=r"^infeasible: budget 0.9 is below the mean of the rows' smallest costs 1$"):
        best_mix_average_budget(v, c[0], 0.9)
    with pytest.raises(EvalprismError, match="one number"):
        best_mix_average_budget(v, c, np.array([1.0, 2.0]))


# --------------------------------------------------------------------------------------------
# win_values and router_coefficient (Algorithm 1 step 3, eq. 9)
# --------------------------------------------------------------------------------------------


def test_win_values_is_w_times_q() -> None:
    rng = np.random.default_rng(4)
    theta, q = rng.normal(size=(5, 7)), rng.dirichlet(np.ones(7), size=5)
    got = win_values(theta, q)
    for i in range(5):
        w = np.array([[expit(theta[i, b] - theta[i, a]) for a in range(7)] for b in range(7)])
        np.testing.assert_allclose(got[i], w @ q[i], rtol=1e-14)
    np.testing.assert_allclose(win_values(theta[0], q[0]), got[0], rtol=1e-15)
    np.testing.assert_allclose(win_values(theta, q[0])[2], win_values(theta[2], q[0]), rtol=1e-15)
    with pytest.raises(ValueError, match="probability vector"):  # a precondition: p2l.routing validates opponents
        win_values(theta[0], np.full(7, 0.2))


def test_router_coefficient_solves_eq9() -> None:
    rng = np.random.default_rng(5)
    for _ in range(50):
        m = int(rng.integers(2, 35))
        theta, q = rng.normal(0, 2, m), rng.dirichlet(np.ones(m))
        target = float(rng.uniform(0.01, 0.99))
        root = router_coefficient(theta, q, target)
        assert isinstance(root, float)
        assert abs(q @ expit(root - theta) - target) <= 1e-10


def test_router_coefficient_point_mass_and_monotone() -> None:
    theta = np.array([0.3, -1.2, 2.5])
    assert router_coefficient(theta, np.array([0.0, 1.0, 0.0]), 0.5) == pytest.approx(-1.2, abs=1e-12)
    assert router_coefficient(theta, np.array([0.0, 0.0, 1.0]), 0.8) == pytest.approx(2.5 + logit(0.8), abs=1e-12)
    q = np.array([0.2, 0.5, 0.3])
    roots = [router_coefficient(theta, q, t) for t in np.linspace(0.05, 0.95, 19)]
    assert np.all(np.diff(roots) > 0)
    assert router_coefficient(theta, q, 0.0) == -np.inf
    assert router_coefficient(theta, q, 1.0) == np.inf
    with pytest.raises(EvalprismError, match=r"\[0, 1\]"):
        router_coefficient(theta, q, 1.2)


def test_router_coefficient_vectorised_equals_brentq_loop() -> None:
    rng = np.random.default_rng(6)
    n, m = 200, 34
    theta, targets = rng.normal(0, 1.5, (n, m)), rng.uniform(0.02, 0.98, n)
    q = np.full(m, 1.0 / m)
    roots = router_coefficient(theta, q, targets)
    assert roots.shape == (n,)
    residual = np.array([q @ expit(roots[i] - theta[i]) - targets[i] for i in range(n)])
    assert np.max(np.abs(residual)) <= 1e-10
    for i in range(0, n, 20):
        ref = brentq(lambda x, i=i: q @ expit(x - theta[i]) - targets[i], -50, 50, xtol=1e-14)
        assert roots[i] == pytest.approx(ref, abs=1e-11)
    # per-prompt q, and a scalar target shared by all prompts
    qs = rng.dirichlet(np.ones(m), size=n)
    roots_q = router_coefficient(theta, qs, 0.5)
    assert np.max(np.abs(np.sum(qs * expit(roots_q[:, None] - theta), axis=1) - 0.5)) <= 1e-10
