"""The ridge fit of P2L's head (evalprism.p2l.ridge): the optimum of its objective (scipy as the
oracle), planted prompt dependence recovered, the marginal leaderboard as the λ → ∞ limit and as
the cross-validated choice when prompts carry no signal, and the CLI around it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.optimize import minimize
from scipy.special import expit

from evalprism.errors import EvalprismError
from evalprism.p2l import TrainOptions, train_model
from evalprism.p2l.marginal import Leaderboard
from evalprism.p2l.model import CoefficientHead
from evalprism.p2l.ridge import RidgeBattles, choose_penalty, fit_penalised, penalised_nll, prompt_folds
from evalprism.p2l.train import warm_start
from evalprism.p2l.train_summary import PenaltyChoice
from evalprism.stats.pairwise import PairCounts, outcome_rows, outcome_weights


def planted(n_prompts: int, n_battles: int, dim: int, n_models: int, signal: float, seed: int):
    """Prompt features (P, d), battles whose outcomes follow BT with coefficients bias + W x + noise-free,
    W = ``signal`` × a random matrix (0: no prompt dependence)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_prompts, dim)) / math.sqrt(dim)
    w = signal * rng.normal(size=(n_models, dim))
    bias = np.linspace(-0.5, 0.5, n_models)
    coefs = x @ w.T + bias
    prompt = rng.integers(0, n_prompts, n_battles)
    a = rng.integers(0, n_models, n_battles)
    b = (a + rng.integers(1, n_models, n_battles)) % n_models
    p_a = expit(coefs[prompt, a] - coefs[prompt, b])
    outcome = np.where(rng.random(n_battles) < p_a, 0, 1)  # 0: a wins, 1: b wins
    rows = outcome_rows(outcome, None)
    battles = RidgeBattles(prompt, a, b, outcome_weights("bt", rows))
    return x, battles, coefs, outcome


def marginal_of(battles: RidgeBattles, outcome: np.ndarray, n_models: int):
    def fit(mask: np.ndarray) -> Leaderboard:
        pairs = PairCounts.from_battles(battles.a[mask], battles.b[mask], outcome[mask], n_models)
        return Leaderboard.from_counts(pairs, "bt", ci=None, names=[f"m{i}" for i in range(n_models)])

    return fit


def warm_head(dim: int, board: Leaderboard) -> CoefficientHead:
    head = CoefficientHead(dim, len(board.names), "bt")
    warm_start(head, board)
    return head


def test_fit_reaches_the_penalised_optimum_that_scipy_finds() -> None:
    """mean NLL + λ‖W‖² minimised by scipy's L-BFGS-B on the same closed-form BT objective: the same
    coefficients (the bias unpenalised, the centring folded back exactly)."""
    x, battles, _, outcome = planted(40, 600, 4, 3, 1.5, seed=0)
    x = x + 0.7  # uncentred features: the fit centres them and folds the mean into the bias
    penalty = 3e-3
    board = marginal_of(battles, outcome, 3)(np.ones(outcome.size, bool))
    head = warm_head(4, board)
    fit_penalised(head, x, battles, penalty)
    got = head(torch.as_tensor(x, dtype=torch.float32))[0].detach().numpy()

    won_a = battles.weights[:, 0] > 0  # bt: row 0 is "a wins", row 1 "b wins"

    def objective(theta: np.ndarray) -> float:
        w, bias = theta[:12].reshape(3, 4), theta[12:]
        c = x @ w.T + bias
        d = c[battles.prompt, battles.a] - c[battles.prompt, battles.b]
        nll = -np.where(won_a, np.log(expit(d)), np.log(expit(-d))).mean()
        return nll + penalty * (w**2).sum()

    best = minimize(
        objective,
        np.r_[np.zeros(12), board.coefs],
        method="L-BFGS-B",
        options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 10_000},
    )
    want = x @ best.x[:12].reshape(3, 4).T + best.x[12:]
    np.testing.assert_allclose(got, want, atol=2e-4)


def test_planted_prompt_dependence_is_recovered_and_infinite_penalty_is_the_marginal() -> None:
    x, battles, truth, outcome = planted(300, 20_000, 8, 4, 2.0, seed=1)
    board = marginal_of(battles, outcome, 4)(np.ones(outcome.size, bool))
    head = warm_head(8, board)
    fit_penalised(head, x, battles, 1e-5)
    got = head(torch.as_tensor(x, dtype=torch.float32))[0].detach().numpy()
    # BT coefficients are identified up to a per-prompt shift: compare centred per prompt
    got_c, truth_c = got - got.mean(1, keepdims=True), truth - truth.mean(1, keepdims=True)
    assert np.corrcoef(got_c.ravel(), truth_c.ravel())[0, 1] > 0.95

    marginal_head = warm_head(8, board)
    fit_penalised(marginal_head, x, battles, math.inf)
    np.testing.assert_array_equal(
        marginal_head(torch.as_tensor(x, dtype=torch.float32))[0].detach().numpy(),
        np.broadcast_to(board.coefs.astype(np.float32), got.shape),
    )
    heavy = warm_head(8, board)
    fit_penalised(heavy, x, battles, 1e4)  # λ → ∞: the marginal leaderboard in the limit
    assert np.abs(heavy(torch.as_tensor(x, dtype=torch.float32))[0].detach().numpy() - board.coefs).max() < 1e-3


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_cross_validation_falls_back_to_the_marginal_when_prompts_carry_no_signal(seed: int) -> None:
    """Outcomes from one leaderboard for every prompt, 400 training battles over 100 prompts with
    16-dim features: the chosen penalty is large (or ∞), and on 4,000 fresh battles of the same
    prompts the fitted model is no worse than the marginal leaderboard; with strong planted signal
    a small penalty is chosen."""
    x, everything, _, outcome = planted(100, 4400, 16, 4, 0.0, seed=seed)
    train, test = np.arange(4400) < 400, np.arange(4400) >= 400
    battles, held_out = everything.subset(train), everything.subset(test)
    prompts = [f"prompt {i}" for i in range(100)]
    marginal = marginal_of(battles, outcome[train], 4)
    table = choose_penalty(x, prompts, battles, "bt", marginal, warm_start, seed=0)
    chosen = float(table.loc[table["chosen"], "penalty"].iloc[0])
    assert chosen >= 1e-2
    board = marginal(np.ones(400, bool))
    model, baseline = warm_head(16, board), warm_head(16, board)
    fit_penalised(model, x, battles, chosen)
    features = torch.as_tensor(x, dtype=torch.float32)
    with torch.no_grad():
        nll = float(penalised_nll(model, features, held_out)) / 4000
        nll_marginal = float(penalised_nll(baseline, features, held_out)) / 4000
    assert nll < nll_marginal + 0.005

    x, battles, _, outcome = planted(100, 4000, 16, 4, 3.0, seed=seed)
    table = choose_penalty(x, prompts, battles, "bt", marginal_of(battles, outcome, 4), warm_start, seed=0)
    assert float(table.loc[table["chosen"], "penalty"].iloc[0]) <= 1e-2


def test_folds_depend_on_the_prompt_text_only() -> None:
    prompts = [f"question number {i}" for i in range(200)]
    folds = prompt_folds(prompts, 5, seed=0)
    assert set(folds) == set(range(5)) and np.bincount(folds).min() > 20
    order = np.random.default_rng(0).permutation(200)
    np.testing.assert_array_equal(prompt_folds([prompts[i] for i in order], 5, seed=0), folds[order])
    assert (prompt_folds(prompts, 5, seed=1) != folds).any()


def test_train_model_fixed_penalty_and_refusals() -> None:
    from evalprism.p2l.simulate import simulate_topic_battles

    battles = simulate_topic_battles(800, seed=7)
    result = train_model(battles, TrainOptions(penalty=1e-3), progress=False)
    assert result.history.to_dict("records") == [
        {
            "penalty": 1e-3,
            "cv_nll": pytest.approx(np.nan, nan_ok=True),
            "cv_se": pytest.approx(np.nan, nan_ok=True),
            "chosen": True,
        }
    ]
    assert result.options.fit == "ridge" and result.summary.chosen == PenaltyChoice(1e-3, "option")
    with pytest.raises(EvalprismError, match="max_epochs applies to the epoch loop") as caught:
        train_model(battles, TrainOptions(max_epochs=3), progress=False)
    assert caught.value.parameter == "max_epochs"
    with pytest.raises(EvalprismError, match="fit 'ridge' needs frozen features"):
        train_model(battles, TrainOptions(fit="ridge", finetune=True), progress=False)
    with pytest.raises(EvalprismError, match="penalty applies to fit 'ridge'"):
        train_model(battles, TrainOptions(fit="adamw", penalty=1.0), progress=False)
    with pytest.raises(EvalprismError, match="resume: a ridge fit keeps no checkpoints"):
        train_model(battles, TrainOptions(), resume=True, progress=False)


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_cli_ridge_report_shows_the_penalty_curve(tmp_path: Path, capsys) -> None:
    from helpers import run_cli

    from evalprism.p2l.simulate import simulate_topic_battles

    path = tmp_path / "battles.jsonl"
    simulate_topic_battles(1500, seed=8).to_json(path, orient="records", lines=True)
    code, _, err = run_cli(
        ["p2l", "train", path, "--out", tmp_path / "model", "--cache-dir", tmp_path / "cache"], capsys
    )
    assert code == 0, err
    assert "5-fold cross-validation" in err
    history = pd.read_csv(tmp_path / "model" / "history.csv")
    assert list(history.columns) == ["penalty", "cv_nll", "cv_se", "chosen"] and history["chosen"].sum() == 1
    html = (tmp_path / "model" / "report.html").read_text()
    assert "Choosing the penalty" in html and "Cross-validation over the training prompts chose" in html
