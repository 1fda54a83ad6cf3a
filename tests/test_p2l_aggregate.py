"""Aggregation (eq. 3, appendix B.1), prompt clustering, evaluation and Fig. 6 scaling: closed forms
and planted structure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli
from scipy.special import expit, logit

from evalprism.embed import Embedder
from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, TrainOptions, aggregate_leaderboards, train_model
from evalprism.p2l.evaluate import aggregation_scaling, evaluate_model, function_distance, outcome_metrics
from evalprism.p2l.options import EvaluateOptions
from evalprism.p2l.simulate import TOPICS, simulate_topic_battles, topic_prompts
from evalprism.p2l.strengths import category_leaderboards, cluster_prompts, strengths


def test_identical_leaderboards_aggregate_to_themselves() -> None:
    theta = np.array([0.7, -0.2, 0.4, -0.9, 0.0])
    coefs = np.tile(theta, (50, 1))
    for method in ("bt", "mean"):
        np.testing.assert_allclose(aggregate_leaderboards(coefs, method=method), theta - theta.mean(), atol=1e-8)


def test_eq3_two_models_is_the_logit_of_the_mean_win_rate() -> None:
    """With two models eq. 3 has a closed form: θ̃_1 − θ̃_2 = logit(Σ_z w_z σ(Δ_z)), not the mean Δ."""
    rng = np.random.default_rng(0)
    coefs = rng.normal(size=(40, 2)) * 2.0
    w = rng.random(40)
    agg = aggregate_leaderboards(coefs, weights=w)
    target = logit(np.sum(w * expit(coefs[:, 0] - coefs[:, 1])) / w.sum())
    assert agg[0] - agg[1] == pytest.approx(target, abs=1e-8)
    mean = aggregate_leaderboards(coefs, weights=w, method="mean")
    assert mean[0] - mean[1] == pytest.approx(np.sum(w * (coefs[:, 0] - coefs[:, 1])) / w.sum(), abs=1e-12)


def test_eq3_and_the_average_can_disagree_on_the_leader() -> None:
    """A specialist (huge on a third of prompts, poor elsewhere) tops the average of coefficients
    but wins less often on average than a steady model: eq. 3 ranks by win rate."""
    specialist = np.r_[[6.0] * 10, [-1.0] * 20]
    steady = np.full(30, 0.8)
    base = np.zeros(30)
    coefs = np.c_[specialist, steady, base]
    assert aggregate_leaderboards(coefs, method="mean").argmax() == 0
    assert aggregate_leaderboards(coefs, method="bt").argmax() == 1


def test_aggregate_refuses_bad_input() -> None:
    with pytest.raises(EvalprismError, match="empty"):
        aggregate_leaderboards(np.zeros((0, 3)))
    with pytest.raises(EvalprismError, match="unknown aggregation"):
        aggregate_leaderboards(np.zeros((2, 3)), method="median")  # type: ignore[arg-type]


def test_function_distance_and_scaling_reach_zero_at_the_truth() -> None:
    assert function_distance(np.array([1.0, 0.0]), np.array([0.0, 0.0])) == pytest.approx(expit(1.0) - 0.5)
    rng = np.random.default_rng(1)
    coefs = rng.normal(size=(60, 4))
    truth = aggregate_leaderboards(coefs)
    scaling = aggregation_scaling(coefs, truth, [1, 5, 60], repeats=5)
    means = scaling.groupby("prompts")["l1"].mean()
    assert means.loc[60] == pytest.approx(0.0, abs=1e-8) and means.loc[1] > means.loc[5] > means.loc[60]


def test_outcome_metrics_closed_form() -> None:
    rows = np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0.3, 0.7, 0, 0]])
    p = np.array([0.8, 0.4, 0.5])  # P(A wins)
    logp = np.full((3, 4), -np.inf)
    logp[:, 0], logp[:, 1] = np.log(p), np.log1p(-p)
    m = outcome_metrics("bt", logp, rows)
    nll = -(np.log(0.8) + np.log(0.6) + 0.3 * np.log(0.5) + 0.7 * np.log(0.5)) / 3
    assert m["nll"] == pytest.approx(nll) and m["accuracy"] == pytest.approx(
        (1 + 1 + 0.3) / 3
    )  # 0.4 predicts B (right); 0.5 picks A
    assert m["brier"] == pytest.approx((2 * 0.2**2 + 2 * 0.4**2 + 0.2**2 + 0.2**2) / 3)


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_hdbscan_categories_recover_planted_topics() -> None:
    prompts = [p for t in TOPICS for p in topic_prompts(t)]
    topics = np.array([t for t in TOPICS for _ in topic_prompts(t)])
    cats = cluster_prompts(prompts, Embedder("minilm", progress=False).embed(prompts))
    table = pd.crosstab(cats, topics)
    assert len(table) >= len(TOPICS)
    purity = table.max(axis=1).sum() / table.to_numpy().sum()  # share of prompts in their cluster's majority topic
    assert purity >= 0.97


def test_strengths_against_a_reference() -> None:
    coefs = np.array([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    table = category_leaderboards(coefs, np.array(["x", "x", "y"]), ["m1", "m2"])
    s = strengths(table, "m2").set_index(["category", "model"])["win_rate"]
    assert s["x", "m1"] == pytest.approx(expit(1.0)) and s["y", "m1"] == pytest.approx(expit(-1.0))
    assert s["x", "m2"] == pytest.approx(0.5)
    with pytest.raises(EvalprismError, match="reference model 'm9'"):
        strengths(table, "m9")


@pytest.mark.slow
def test_evaluate_on_held_out_battles(tmp_path: Path, capsys) -> None:
    model_dir = tmp_path / "model"
    train_model(simulate_topic_battles(3000, seed=20), TrainOptions(), progress=False).save(model_dir)
    result = evaluate_model(
        P2LModel.load(model_dir), simulate_topic_battles(2000, seed=21), EvaluateOptions(repeats=3), progress=False
    )
    m = result.metrics.set_index("predictor")
    assert m.loc["p2l", "nll"] < m.loc["marginal", "nll"] < m.loc["constant", "nll"] + 0.01
    curve = result.scaling.groupby("prompts")["l1"].mean()
    assert curve.iloc[-1] < curve.iloc[0] / 3
    simulate_topic_battles(500, seed=22).to_csv(tmp_path / "held.csv", index=False)
    code, _, err = run_cli(
        ["p2l", "evaluate", model_dir, tmp_path / "held.csv", "--out", tmp_path / "ev", "-q"], capsys
    )
    assert code == 0, err
    assert pd.read_csv(tmp_path / "ev" / "metrics.csv")["predictor"].tolist() == ["constant", "marginal", "p2l"]
    other = simulate_topic_battles(50, seed=23).replace({"poet-7b": "unknown-model"})
    other.to_csv(tmp_path / "other.csv", index=False)
    code, _, err = run_cli(
        ["p2l", "evaluate", model_dir, tmp_path / "other.csv", "--out", tmp_path / "ev2", "-q"], capsys
    )
    assert code == 2 and "unknown-model" in err
