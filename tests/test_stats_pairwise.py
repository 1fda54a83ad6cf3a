"""Marginal pairwise models: closed forms, exact gradients, planted parameters recovered."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.optimize import approx_fprime

from evalprism.errors import EvalprismError
from evalprism.p2l.likelihood import log_outcome_probs, pairwise_nll
from evalprism.stats.outcome_models import OUTCOME_MODEL_NAMES
from evalprism.stats.pairwise import (
    PairCounts,
    bootstrap_coefs,
    elo_ratings,
    fit_counts,
    outcome_weights,
    sandwich_cov,
)


def simulate(model: str, coefs: np.ndarray, extra: float | None, n: int, seed: int) -> PairCounts:
    """Battles between random pairs with outcomes drawn from the model's own probabilities."""
    rng = np.random.default_rng(seed)
    m = coefs.size
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    extra_t = None if extra is None else torch.tensor(extra, dtype=torch.float64)
    probs = torch.exp(log_outcome_probs(model, torch.tensor(coefs[a]), torch.tensor(coefs[b]), extra_t)).numpy()
    probs = probs / probs.sum(axis=1, keepdims=True)
    assert np.all(probs >= 0)
    outcome = (rng.random(n)[:, None] > np.cumsum(probs, axis=1)).sum(axis=1)
    return PairCounts.from_battles(a, b, outcome, m)


def test_two_models_closed_form() -> None:
    # A beats B 30 times, B beats A 10 times: the MLE gap is log(30/10)
    a = np.zeros(40, int)
    b = np.ones(40, int)
    outcome = np.array([0] * 30 + [1] * 10)
    fit = fit_counts(PairCounts.from_battles(a, b, outcome, 2), "bt")
    assert fit.coefs[0] - fit.coefs[1] == pytest.approx(np.log(3.0), abs=1e-7)
    assert fit.coefs.sum() == pytest.approx(0.0, abs=1e-12)
    # with 20 ties counted as half wins: (30 + 10) / (10 + 10)
    tied = PairCounts.from_battles(np.zeros(60, int), np.ones(60, int), np.array([0] * 30 + [1] * 10 + [2] * 20), 2)
    assert np.diff(fit_counts(tied, "bt-tie").coefs)[0] == pytest.approx(-np.log(2.0), abs=1e-7)
    assert np.diff(fit_counts(tied, "bt").coefs)[0] == pytest.approx(-np.log(3.0), abs=1e-7)


def test_soft_labels_give_the_logit() -> None:
    a, b = np.zeros(50, int), np.ones(50, int)
    fit = fit_counts(PairCounts.from_battles(a, b, np.zeros(50, int), 2, p_b=np.full(50, 0.7)), "bt")
    assert fit.coefs[1] - fit.coefs[0] == pytest.approx(np.log(0.7 / 0.3), abs=1e-7)


def test_rk_two_models_closed_form() -> None:
    # counts (wA, wB, t): the RK MLE solves P(A) = wA/n, P(B) = wB/n exactly
    counts = PairCounts(np.array([0]), np.array([1]), np.array([[50.0, 20.0, 30.0, 0.0]]), 2)
    fit = fit_counts(counts, "rk")
    delta = fit.coefs[0] - fit.coefs[1]
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    assert sig(delta - fit.extra) == pytest.approx(0.5, abs=1e-6)
    assert sig(-delta - fit.extra) == pytest.approx(0.2, abs=1e-6)


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_autograd_gradient_matches_finite_differences(model: str) -> None:
    rng = np.random.default_rng(1)
    pairs = PairCounts(np.array([0, 1, 2, 0]), np.array([1, 2, 0, 2]), rng.integers(1, 9, size=(4, 4)).astype(float), 3)
    weights = torch.as_tensor(outcome_weights(model, pairs.counts))
    x = rng.normal(0, 0.5, 4 if model in ("rk", "grk") else 3)
    if model == "rk":
        x[-1] = 0.7

    def f(v: np.ndarray) -> float:
        return float(pairwise_nll(model, torch.tensor(v), pairs, weights))

    xt = torch.tensor(x, requires_grad=True)
    pairwise_nll(model, xt, pairs, weights).backward()
    np.testing.assert_allclose(xt.grad.numpy(), approx_fprime(x, f, 1e-7), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("model,extra", [("bt", None), ("rk", 0.6), ("grk", 0.4)])
def test_planted_parameters_are_recovered(model: str, extra: float | None) -> None:
    coefs = np.array([-1.0, -0.3, 0.2, 0.6, 1.4]) + (0.8 if model == "grk" else 0.0)
    pairs = simulate(model, coefs, extra, 80_000, seed=3)
    fit = fit_counts(pairs, model)  # type: ignore[arg-type]
    want = coefs - coefs.mean() if model != "grk" else coefs
    np.testing.assert_allclose(fit.coefs, want, atol=0.05)
    if model == "rk":
        assert fit.extra == pytest.approx(extra, abs=0.03)
    if model == "grk":
        assert fit.extra == pytest.approx(1 + np.exp(extra), abs=0.1)  # lambda = 1 + exp(s)
    assert fit.grad_norm < 1e-6


def test_errors_and_elo_scale() -> None:
    disconnected = PairCounts(np.array([0, 2]), np.array([1, 3]), np.array([[3.0, 1, 0, 0], [2, 2, 0, 0]]), 4)
    with pytest.raises(EvalprismError, match="disconnected \\(2 groups.*\\{a, b\\}; \\{c, d\\}"):
        fit_counts(disconnected, "bt", names=["a", "b", "c", "d"])
    no_ties = PairCounts(np.array([0]), np.array([1]), np.array([[3.0, 1, 0, 0]]), 2)
    with pytest.raises(EvalprismError, match="needs ties"):
        fit_counts(no_ties, "rk")
    ties_only = PairCounts(np.array([0]), np.array([1]), np.array([[3.0, 1, 2, 0]]), 2)
    with pytest.raises(EvalprismError, match="'grk' needs 'tie \\(bothbad\\)' outcomes"):
        fit_counts(ties_only, "grk")
    with pytest.raises(EvalprismError, match="unknown outcome model"):
        fit_counts(no_ties, "elo")  # type: ignore[arg-type]
    # one logit unit is 400/ln(10) ~ 173.7 Elo points
    assert elo_ratings(np.array([0.0, 1.0])).tolist() == pytest.approx([1000.0, 1000 + 400 / np.log(10)])


def test_bt_matches_unpenalised_logistic_regression() -> None:
    """BT is a logistic regression on a +1/−1 design without intercept: scikit-learn as the oracle."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(5)
    m, n = 5, 3000
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    truth = rng.normal(0, 1, m)
    y = (rng.random(n) < 1 / (1 + np.exp(-(truth[a] - truth[b])))).astype(int)
    X = np.zeros((n, m))
    X[np.arange(n), a] = 1.0
    X[np.arange(n), b] = -1.0
    oracle = LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10_000).fit(X, y).coef_[0]
    fit = fit_counts(PairCounts.from_battles(a, b, np.where(y == 1, 0, 1), m), "bt")
    np.testing.assert_allclose(fit.coefs - fit.coefs[0], oracle - oracle[0], atol=1e-5)


def test_sandwich_matches_the_log_odds_closed_form() -> None:
    # two models: Var(theta_A - theta_B) of the log odds MLE is 1/wins_A + 1/wins_B
    pairs = PairCounts.from_battles(np.zeros(40, int), np.ones(40, int), np.array([0] * 30 + [1] * 10), 2)
    fit = fit_counts(pairs, "bt")
    cov = sandwich_cov(fit, pairs)
    c = np.array([1.0, -1.0])
    assert c @ cov @ c == pytest.approx(1 / 30 + 1 / 10, rel=1e-6)
    assert cov.sum() == pytest.approx(0.0, abs=1e-9)  # mean-zero coefficients: the sum has no variance


@pytest.mark.parametrize("model,extra", [("bt", None), ("grk", 0.4)])
def test_sandwich_and_bootstrap_agree_on_planted_data(model: str, extra: float | None) -> None:
    coefs = np.array([-0.8, 0.0, 0.3, 0.9]) + (0.5 if model == "grk" else 0.0)
    pairs = simulate(model, coefs, extra, 6000, seed=9)
    fit = fit_counts(pairs, model)  # type: ignore[arg-type]
    se_sandwich = np.sqrt(np.diag(sandwich_cov(fit, pairs))[: coefs.size])
    se_boot = bootstrap_coefs(pairs, model, rounds=120, seed=1).std(axis=0, ddof=1)  # type: ignore[arg-type]
    np.testing.assert_allclose(se_boot, se_sandwich, rtol=0.25)
    assert np.all(np.abs(fit.coefs - (coefs - coefs.mean() if model == "bt" else coefs)) < 4 * se_sandwich)
