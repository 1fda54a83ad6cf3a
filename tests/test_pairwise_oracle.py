"""Marginal pairwise fits held to independent implementations of the same estimators.

- arena-rank (LMArena's own Bradley-Terry, a dev extra): ratings and sandwich intervals;
- FastChat's scikit-learn recipe (one +/- row per battle, every battle duplicated so that a tie is one
  win for each side): Bradley-Terry with ties counted as half wins;
- torch autograd on :func:`log_outcome_probs`: the hand-written numpy derivatives, the sandwich
  covariance built from them, and the exactness of the fits and of the bootstrap refits.

Ratings are compared on arena-rank's scale, 1000 + 400/ln(10) * coefficient, after centring:
arena-rank and scikit-learn leave the common shift of the coefficients to where their optimiser
started. Their default tolerances stop early (arena-rank's by ~0.1 rating points at this size), so
the oracles are run to convergence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.optimize import approx_fprime

from evalprism.p2l import fit_leaderboard
from evalprism.p2l.likelihood import log_outcome_probs
from evalprism.p2l.options import FitOptions
from evalprism.stats.outcome_models import OUTCOME_MODEL_NAMES
from evalprism.stats.pairwise import (
    ELO_SCALE,
    PairCounts,
    bootstrap_coefs,
    fit_counts,
    outcome_terms,
    sandwich_cov,
)

WINNERS = np.array(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)


def battles_table(n: int, m: int, tie_rate: float, seed: int) -> pd.DataFrame:
    """Bradley-Terry battles with uneven model popularity; P(tie) = tie_rate * 4σ(Δ)σ(−Δ) and
    P(A) = σ(Δ) − P(tie)/2 (a tie as half a win keeps the coefficients); a third of ties "bothbad"."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.7, m)
    popularity = rng.gamma(1.0, size=m) + 0.1
    popularity /= popularity.sum()
    a = rng.choice(m, size=n, p=popularity)
    b = (a + rng.integers(1, m, size=n)) % m
    p_raw = 1.0 / (1.0 + np.exp(-(theta[a] - theta[b])))
    p_tie = tie_rate * 4.0 * p_raw * (1.0 - p_raw)
    u = rng.random(n)
    outcome = np.where(u < p_raw - p_tie / 2, 0, np.where(u < p_raw + p_tie / 2, 2, 1))
    outcome[(outcome == 2) & (rng.random(n) < 1 / 3)] = 3
    names = np.array([f"m{i:02d}" for i in range(m)], dtype=object)
    return pd.DataFrame(
        {"prompt": [f"p{i}" for i in range(n)], "model_a": names[a], "model_b": names[b], "winner": WINNERS[outcome]}
    )


def centred(ratings: np.ndarray) -> np.ndarray:
    return np.asarray(ratings, dtype=float) - np.mean(ratings)


def arena_rank_fit(df: pd.DataFrame) -> dict:
    """arena-rank's BradleyTerry with sandwich 95% intervals, optimised to convergence."""
    pytest.importorskip("arena_rank", reason="arena-rank (the dev extra: pip install -e '.[dev]') is not installed")
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.utils.data_utils import PairDataset

    dataset = PairDataset.from_pandas(df)
    model = BradleyTerry(n_competitors=len(dataset.competitors), ftol=0.0, gtol=1e-13, max_iter=20_000)
    result = model.compute_ratings_and_cis(dataset, significance_level=0.05)
    return {k: (list(v) if k == "competitors" else np.asarray(v)) for k, v in result.items()}


@pytest.fixture(scope="module")
def tied_battles() -> pd.DataFrame:
    return battles_table(30_000, 25, tie_rate=0.3, seed=11)


@pytest.mark.slow
def test_bt_with_ties_and_its_sandwich_intervals_equal_arena_rank(tied_battles: pd.DataFrame) -> None:
    """arena-rank maps a tie (and 'tie (bothbad)') to outcome 0.5: evalprism's 'bt-tie'. Its
    sandwich scores a tie as one battle with outcome ½; so must ours (two half battles, one won by
    each side, would make the intervals ~20% wider at these 25% ties)."""
    ours = fit_leaderboard(tied_battles, FitOptions(outcome_model="bt-tie", ci="sandwich"), progress=False).fit
    peer = arena_rank_fit(tied_battles)
    assert peer["competitors"] == ours.names
    ours_rating = 1000.0 + ELO_SCALE * ours.coefs
    np.testing.assert_allclose(centred(ours_rating), centred(peer["ratings"]), rtol=0, atol=1e-4)
    half_ours = ELO_SCALE * (ours.upper - ours.lower) / 2
    half_peer = (peer["rating_upper"] - peer["rating_lower"]) / 2
    np.testing.assert_allclose(half_ours, half_peer, rtol=2e-3)


@pytest.mark.slow
def test_bt_and_its_sandwich_intervals_equal_arena_rank_without_ties() -> None:
    """Without ties both sandwiches use the same per-battle scores; arena-rank adds 1e-5 x battles to
    the Hessian diagonal where evalprism takes the pseudo-inverse, which widens nothing by more than
    about 0.1% here."""
    df = battles_table(30_000, 25, tie_rate=0.0, seed=12)
    assert not df["winner"].isin(["tie", "tie (bothbad)"]).any()
    ours = fit_leaderboard(df, FitOptions(outcome_model="bt", ci="sandwich"), progress=False).fit
    peer = arena_rank_fit(df)
    np.testing.assert_allclose(centred(1000.0 + ELO_SCALE * ours.coefs), centred(peer["ratings"]), rtol=0, atol=1e-4)
    half_ours = ELO_SCALE * (ours.upper - ours.lower) / 2
    half_peer = (peer["rating_upper"] - peer["rating_lower"]) / 2
    np.testing.assert_allclose(half_ours, half_peer, rtol=2e-3)


@pytest.mark.slow
def test_bt_with_ties_equals_fastchat_logistic_regression(tied_battles: pd.DataFrame) -> None:
    """FastChat's compute_mle_elo: duplicated battles, a tie = one win for each side, ±ln(10) design,
    unpenalised logistic regression without intercept (C=inf; scikit-learn 1.9 deprecates penalty=None).

    FastChat's lbfgs stops ~5e-5 rating points short of the optimum here (its line search cannot
    resolve the loss any further); the oracle uses Newton's method instead, on the same design with
    the first model's column dropped (its coefficient fixed at 0: the shift the design cannot see).
    BLAS runs single-threaded: on a busy 2-core machine its threads made this fit 70x slower."""
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    df = tied_battles
    models = pd.Series(np.arange(25), index=sorted(pd.concat([df["model_a"], df["model_b"]]).unique()))
    twice = pd.concat([df, df], ignore_index=True)
    n = len(twice)
    X = np.zeros((n, len(models)))
    X[np.arange(n), models[twice["model_a"]].to_numpy()] = math.log(10)
    X[np.arange(n), models[twice["model_b"]].to_numpy()] = -math.log(10)
    y = (twice["winner"] == "model_a").to_numpy().astype(float)
    tie = twice["winner"].isin(["tie", "tie (bothbad)"]).to_numpy().copy()
    tie[n // 2 :] = False
    y[tie] = 1.0
    with threadpool_limits(1, user_api="blas"):
        lr = LogisticRegression(fit_intercept=False, C=np.inf, solver="newton-cholesky", tol=1e-12).fit(X[:, 1:], y)
    peer_rating = 1000.0 + 400.0 * np.concatenate([[0.0], lr.coef_[0]])
    ours = fit_leaderboard(df, FitOptions(outcome_model="bt-tie", ci=None), progress=False).fit
    assert list(models.index) == ours.names
    np.testing.assert_allclose(centred(1000.0 + ELO_SCALE * ours.coefs), centred(peer_rating), rtol=0, atol=1e-4)


# ---------------------------------------------------------------------------------------------
# The numpy twin of the outcome models, held to torch autograd and finite differences
# ---------------------------------------------------------------------------------------------


def random_point(model: str, rng: np.random.Generator, size: int = 40) -> tuple[np.ndarray, np.ndarray, float | None]:
    extra = {"bt": None, "bt-tie": None, "rk": 0.6, "grk": -0.7}[model]
    return rng.normal(0, 1.5, size), rng.normal(0, 1.5, size), extra


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_numpy_outcome_terms_match_torch_autograd(model: str) -> None:
    ca, cb, extra = random_point(model, np.random.default_rng(2))
    logp, dlogp = outcome_terms(model, ca, cb, extra)
    ta, tb = torch.tensor(ca, requires_grad=True), torch.tensor(cb, requires_grad=True)
    te = torch.full((ca.size,), 0.0 if extra is None else extra, dtype=torch.float64, requires_grad=True)
    want = log_outcome_probs(model, ta, tb, None if extra is None else te)
    has = torch.isfinite(want).all(dim=0).numpy()
    np.testing.assert_array_equal(np.isfinite(logp).all(axis=0), has)
    np.testing.assert_allclose(logp[:, has], want.detach().numpy()[:, has], rtol=1e-13, atol=1e-13)
    for j in np.flatnonzero(has):
        grads = torch.autograd.grad(want[:, j].sum(), (ta, tb, te), retain_graph=True, allow_unused=True)
        autograd = np.stack([np.zeros(ca.size) if g is None else g.numpy() for g in grads], axis=-1)
        np.testing.assert_allclose(dlogp[:, j], autograd, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_numpy_derivatives_match_finite_differences(model: str) -> None:
    ca, cb, extra = random_point(model, np.random.default_rng(3), size=3)
    _, dlogp = outcome_terms(model, ca, cb, extra)
    for i in range(3):
        x = np.array([ca[i], cb[i], 0.0 if extra is None else extra])
        for j in range(4):

            def f(v: np.ndarray, j: int = j) -> float:
                return float(outcome_terms(model, v[:1], v[1:2], None if extra is None else float(v[2]))[0][0, j])

            if np.isfinite(f(x)):
                np.testing.assert_allclose(dlogp[i, j], approx_fprime(x, f, 1e-7), rtol=1e-5, atol=1e-6)


def battle_labels(model: str, outcome: int) -> np.ndarray | None:
    """A battle's outcome shares y under ``model`` (None: the model leaves the battle out)."""
    y = np.zeros(4)
    if outcome >= 2 and model == "bt":
        return None
    if outcome >= 2 and model == "bt-tie":
        y[:2] = 0.5  # arena-rank's outcome 0.5
    elif outcome >= 2 and model == "rk":
        y[2] = 1.0
    else:
        y[outcome] = 1.0
    return y


def torch_sandwich(
    model: str, params: np.ndarray, n_models: int, battles: list[tuple[int, int, np.ndarray, float]]
) -> np.ndarray:
    """The sandwich from torch autograd, battle by battle: ``battles`` holds (a, b, outcome shares
    y, multiplicity). The Hessian is of Σ multiplicity · y · log P, the meat sums each battle's
    score (Σ_j y_j ∇ log P_j) outer itself."""
    n = n_models
    has_extra = model in ("rk", "grk")
    size = n + (1 if has_extra else 0)

    def nll(v: torch.Tensor) -> torch.Tensor:
        total = torch.zeros((), dtype=v.dtype)
        for a, b, y, mult in battles:
            logp = log_outcome_probs(model, v[a : a + 1], v[b : b + 1], v[n] if has_extra else None)[0]
            used = torch.as_tensor(y) > 0
            total = total - mult * (torch.as_tensor(y)[used] * logp[used]).sum()
        return total

    hess = torch.autograd.functional.hessian(nll, torch.tensor(params)).numpy()
    meat = np.zeros((size, size))
    for a, b, y, mult in battles:
        local = torch.tensor([params[a], params[b], params[n] if has_extra else 0.0], requires_grad=True)
        logp = log_outcome_probs(model, local[:1], local[1:2], local[2] if has_extra else None)[0]
        used = torch.as_tensor(y) > 0
        score = torch.autograd.grad((torch.as_tensor(y)[used] * logp[used]).sum(), local)[0].numpy()
        idx = [a, b, n][: 3 if has_extra else 2]
        meat[np.ix_(idx, idx)] += mult * np.outer(score[: len(idx)], score[: len(idx)])
    bread = np.linalg.pinv(hess, hermitian=True)
    return bread @ meat @ bread


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_sandwich_matches_torch_autograd(model: str) -> None:
    """Every battle's own score in the meat: a tie under ``bt-tie`` is one battle with outcome ½,
    not half a win plus half a loss (which would overstate the variance)."""
    rng = np.random.default_rng(4)
    a = np.array([0, 0, 1, 1, 2, 3, 0, 2])
    b = np.array([1, 2, 2, 3, 3, 0, 3, 0])
    counts = rng.integers(1, 15, size=(a.size, 4)).astype(float)
    pairs = PairCounts(a, b, counts, 4)
    fit = fit_counts(pairs, model)  # type: ignore[arg-type]
    battles = [
        (int(a[p]), int(b[p]), y, counts[p, j])
        for p in range(a.size)
        for j in range(4)
        if (y := battle_labels(model, j)) is not None
    ]
    want = torch_sandwich(model, fit.params, 4, battles)
    np.testing.assert_allclose(sandwich_cov(fit, pairs), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model", ["bt", "rk"])
def test_sandwich_with_soft_labels_matches_torch_autograd(model: str) -> None:
    """A soft label p_b is one battle with outcome shares (1 − p_b, p_b)."""
    rng = np.random.default_rng(8)
    n_battles = 60
    a = rng.integers(0, 4, n_battles)
    b = (a + rng.integers(1, 4, n_battles)) % 4
    outcome = rng.integers(0, 3, n_battles)
    p_b = np.where(rng.random(n_battles) < 0.6, rng.random(n_battles), np.nan)
    pairs = PairCounts.from_battles(a, b, outcome, 4, p_b=p_b)
    fit = fit_counts(pairs, model)  # type: ignore[arg-type]
    battles = []
    for i in range(n_battles):
        y = np.array([1.0 - p_b[i], p_b[i], 0.0, 0.0]) if np.isfinite(p_b[i]) else battle_labels(model, int(outcome[i]))
        if y is not None:
            battles.append((int(a[i]), int(b[i]), y, 1.0))
    want = torch_sandwich(model, fit.params, 4, battles)
    np.testing.assert_allclose(sandwich_cov(fit, pairs), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_fits_and_bootstrap_refits_are_exact(model: str) -> None:
    """The fit is the maximum-likelihood point to rounding (the gradient of the per-battle loss is
    at rounding level), and each bootstrap refit (started from the full-data optimum) equals a fit
    from scratch on the same resample: the resamples are redrawn here as bootstrap_coefs draws them."""
    df = battles_table(8_000, 8, tie_rate=0.3, seed=5)
    names = sorted(pd.concat([df["model_a"], df["model_b"]]).unique())
    index = {name: i for i, name in enumerate(names)}
    outcome = df["winner"].map({w: i for i, w in enumerate(WINNERS)}).to_numpy()
    pairs = PairCounts.from_battles(
        df["model_a"].map(index).to_numpy(), df["model_b"].map(index).to_numpy(), outcome, len(names)
    )
    fit = fit_counts(pairs, model)  # type: ignore[arg-type]
    assert fit.grad_norm < 1e-12
    boot = bootstrap_coefs(pairs, model, rounds=5, seed=7, x0=fit.params)  # type: ignore[arg-type]
    rng = np.random.default_rng(7)
    flat = pairs.counts.ravel()
    for r in range(5):
        draw = rng.multinomial(round(flat.sum()), flat / flat.sum()).reshape(pairs.counts.shape).astype(float)
        keep = draw.sum(axis=1) > 0
        resampled = PairCounts(pairs.a[keep], pairs.b[keep], draw[keep], pairs.n_models)
        scratch = fit_counts(resampled, model)  # type: ignore[arg-type]
        np.testing.assert_allclose(boot[r], scratch.coefs, rtol=0, atol=1e-9)


@pytest.mark.parametrize("m", [9, 400])  # a dense (pair x outcome) table, and np.unique for many models
def test_aggregation_equals_adding_battles_one_by_one(m: int) -> None:
    """PairCounts.from_battles (bincount) against np.add.at of one row per battle, soft labels included:
    the same sums, bit for bit."""
    rng = np.random.default_rng(6)
    n = 5_000
    a = rng.integers(0, m, n)
    b = (a + rng.integers(1, m, n)) % m
    outcome = rng.integers(0, 4, n)
    p_b = np.where(rng.random(n) < 0.3, rng.random(n), np.nan)
    rows = np.zeros((n, 4))
    rows[np.arange(n), outcome] = 1.0
    soft = np.isfinite(p_b)
    rows[soft] = 0.0
    rows[soft, 0], rows[soft, 1] = 1.0 - p_b[soft], p_b[soft]
    uniq, inverse = np.unique(a * m + b, return_inverse=True)
    want = np.zeros((uniq.size, 4))
    np.add.at(want, inverse, rows)
    got = PairCounts.from_battles(a, b, outcome, m, p_b=p_b)
    np.testing.assert_array_equal(got.a * m + got.b, uniq)
    np.testing.assert_array_equal(got.counts, want)
