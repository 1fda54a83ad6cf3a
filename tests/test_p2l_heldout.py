"""Routing valued on held-out verdicts (closed-form planted battle sets), the paired standard error
against direct computations, the NLL split into outcome type and winner, and the detection of
evaluation prompts the model was trained on."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit
from test_p2l_reports import DIM, MODELS, HashFeatures, planted_model, summary_text, truth_battles

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, evaluate_model
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.evaluate import battle_nll, nll_parts, routing_costs
from evalprism.p2l.heldout_routing import (
    cost_matched_mix,
    default_budgets,
    oracle_policy,
    routing_table,
    score_values,
)
from evalprism.p2l.model import CoefficientHead
from evalprism.p2l.options import EvaluateOptions
from evalprism.p2l.reports import evaluation_report, gain_words
from evalprism.p2l.training_prompts import (
    PromptOverlap,
    prompt_overlap,
    read_training_prompts,
    write_training_prompts,
)
from evalprism.stats.policy_value import paired_value_difference, policy_value, prompt_scores
from evalprism.stats.routing import win_values

# ---------------------------------------------------------------------------------------------
# planted battle sets: where the router provably beats the best single model, and where it cannot
# ---------------------------------------------------------------------------------------------


def two_topic_scores(n_prompts: int, share_x: float) -> tuple[np.ndarray, np.ndarray]:
    """One battle m0 vs m1 per prompt: m0 wins the first ``share_x`` of the prompts (topic X), m1 the
    rest (topic Y). Returns the held-out scores (G, 2) and the topic of each prompt."""
    topic_x = np.arange(n_prompts) < round(share_x * n_prompts)
    prompt = np.arange(n_prompts)
    result_a = topic_x.astype(float)  # a = m0 wins on X, loses on Y
    scores = prompt_scores(prompt, np.zeros(n_prompts, int), np.ones(n_prompts, int), result_a, n_prompts, 2)
    return scores, topic_x


def test_router_beats_the_best_single_model_when_the_best_model_depends_on_the_prompt() -> None:
    scores, topic_x = two_topic_scores(100, share_x=0.6)
    # P2L knows each prompt's winner; the marginal prefers m0 (it wins 60% of the prompts)
    p2l_values = np.where(topic_x[:, None], [0.9, 0.1], [0.1, 0.9])
    table = routing_table(p2l_values, np.array([0.6, 0.4]), scores, np.array([1.0, 1.0]), ["m0", "m1"], [1.0])
    t = table.set_index("policy")
    assert t.loc["p2l", "value"] == 1.0 and t.loc["oracle", "value"] == 1.0
    assert t.loc["best single", "value"] == pytest.approx(0.6) and t.loc["best single", "models"] == "m0"
    # the gain is 1 on the 40 Y prompts, 0 on the 60 X prompts: mean 0.4, SE sd/sqrt(G) by hand
    d = (~topic_x).astype(float)
    assert t.loc["best single", "p2l_gain"] == pytest.approx(0.4)
    assert t.loc["best single", "se_gain"] == pytest.approx(d.std(ddof=1) / np.sqrt(d.size))
    assert t.loc["oracle", "p2l_gain"] == 0.0
    assert (t["prompts_excluded"] == 0).all() and (t["prompts_scored"] == 100).all()
    assert gain_words(0.4, t.loc["best single", "se_gain"]).endswith("the router better")


def test_router_cannot_beat_the_best_single_model_when_one_model_wins_every_prompt() -> None:
    rng = np.random.default_rng(5)
    g, m = 300, 4
    a = rng.integers(0, m, g)
    b = (a + rng.integers(1, m, g)) % m
    strength = np.array([3.0, 2.0, 1.0, 0.0])  # m0 beats everyone on every prompt
    result_a = (strength[a] > strength[b]).astype(float)
    scores = prompt_scores(np.arange(g), a, b, result_a, g, m)
    noisy = rng.random((g, m))  # a router that knows nothing
    cost = np.array([1.0, 1.0, 1.0, 1.0])
    table = routing_table(noisy, strength / 3, scores, cost, [f"m{i}" for i in range(m)], [1.0]).set_index("policy")
    assert table.loc["best single", "value"] == 1.0 == table.loc["oracle", "value"]
    assert table.loc["best single", "p2l_gain"] < 0  # the router can only lose to m0
    assert table.loc["p2l", "value"] < 1.0
    # a router that predicts m0 everywhere ties the best single model exactly, with zero paired SE
    perfect = routing_table(np.tile(strength, (g, 1)), strength / 3, scores, cost, ["m0", "m1", "m2", "m3"], [1.0])
    row = perfect.set_index("policy").loc["best single"]
    assert row["p2l_gain"] == 0.0 and row["se_gain"] == 0.0
    assert gain_words(0.0, 0.0) == "none (the same routing)"
    assert gain_words(0.01, 0.02) == "within noise: +0.010 ± 0.020"
    assert gain_words(-0.1, 0.02) == "-0.100 ± 0.020, the router worse"


def test_a_prompt_whose_routed_model_has_no_verdict_is_excluded_and_counted() -> None:
    # three prompts; m2 fought only on prompt 0
    prompt, a, b = np.array([0, 1, 2]), np.array([0, 0, 1]), np.array([2, 1, 0])
    scores = prompt_scores(prompt, a, b, np.array([0.0, 1.0, 0.5]), 3, 3)
    assert np.isnan(scores[1, 2]) and scores[0, 2] == 1.0 and scores[2, 0] == 0.5
    only_m2 = policy_value(np.array([0.0, 0.0, 1.0]), scores)
    assert only_m2.value == 1.0 and only_m2.scored == 1.0 and only_m2.excluded == 2.0
    mix = policy_value(np.array([0.5, 0.0, 0.5]), scores)  # prompt 1, 2: only the m0 half can be scored
    assert mix.covered.tolist() == [1.0, 0.5, 0.5] and mix.excluded == 1.0
    # v = (1 * (0.5*0 + 0.5*1) + 0.5 * 1 + 0.5 * 0.5) / 2
    assert mix.value == pytest.approx((0.5 + 0.5 + 0.25) / 2.0)


def test_paired_standard_error_against_direct_computations() -> None:
    rng = np.random.default_rng(11)
    g, m = 400, 5
    scores = rng.random((g, m))
    pick_a, pick_b = rng.integers(0, m, g), rng.integers(0, m, g)
    a, b = np.eye(m)[pick_a], np.eye(m)[pick_b]
    # full coverage: the textbook paired SE of the per-prompt differences
    d = scores[np.arange(g), pick_a] - scores[np.arange(g), pick_b]
    diff, se = paired_value_difference(policy_value(a, scores), policy_value(b, scores))
    assert diff == pytest.approx(d.mean(), abs=1e-12)
    assert se == pytest.approx(d.std(ddof=1) / np.sqrt(g), rel=1e-10)
    assert policy_value(a, scores).se == pytest.approx(scores[np.arange(g), pick_a].std(ddof=1) / np.sqrt(g))
    # partial coverage (60% of the verdicts missing): the delta method agrees with the jackknife by prompt
    holes = scores.copy()
    holes[rng.random((g, m)) < 0.6] = np.nan
    diff, se = paired_value_difference(policy_value(a, holes), policy_value(b, holes))

    def difference(keep: np.ndarray) -> float:
        return policy_value(a[keep], holes[keep]).value - policy_value(b[keep], holes[keep]).value

    leave_out = np.array([difference(np.arange(g) != i) for i in range(g)])
    jackknife = np.sqrt((g - 1) / g * ((leave_out - leave_out.mean()) ** 2).sum())
    assert diff == pytest.approx(difference(np.ones(g, bool)))
    assert se == pytest.approx(jackknife, rel=0.03)


def test_cost_matched_random_mix_and_oracle_respect_the_budget() -> None:
    cost = np.array([1.0, 2.0, 5.0, 9.0])
    mix = cost_matched_mix(cost, target=2.5)
    assert (mix > 0).all() and mix.sum() == pytest.approx(1.0) and mix @ cost == pytest.approx(2.5, abs=1e-9)
    assert np.all(np.diff(mix) < 0)  # cheaper models are more likely
    assert cost_matched_mix(cost, 1.0).tolist() == [1.0, 0.0, 0.0, 0.0]
    scores = np.array([[0.2, np.nan, 0.9, 1.0], [np.nan, np.nan, np.nan, 1.0]])
    oracle = oracle_policy(scores, cost, budget=5.0)
    assert oracle[0].tolist() == [0.0, 0.0, 1.0, 0.0]
    # prompt 2: no affordable model has a verdict; the best mix within the budget puts half on the scored m3
    assert oracle[1] == pytest.approx([0.5, 0.0, 0.0, 0.5])
    valued = policy_value(oracle, scores)
    assert valued.covered == pytest.approx([1.0, 0.5]) and valued.value == pytest.approx((0.9 + 0.5 * 1.0) / 1.5)
    assert default_budgets(cost) == pytest.approx([1.0, 9**0.25, 3.0, 9**0.75, 9.0])


def test_score_value_is_the_bt_win_rate_and_separates_grk_models_where_sigma_beta_saturates() -> None:
    theta = np.array([[0.5, -0.2, 1.0]])
    assert score_values("bt", theta, None) == pytest.approx(win_values(theta, np.full(3, 1 / 3)))
    beta = np.array([[4.0, 4.5, 5.0]])  # σ(β) = 0.982, 0.989, 0.993: within 0.011
    score = score_values("grk", beta, np.array([1.5]))[0]
    assert np.ptp(expit(beta)) < 0.012 and np.ptp(score) > 0.1
    assert np.all(np.diff(score) > 0)


def test_routing_options_are_checked_before_any_work() -> None:
    with pytest.raises(EvalprismError, match=r"costs: no cost for 1 of the 4 models routed among: gamma-34b"):
        routing_costs(MODELS, {"alpha-7b": 1.0, "beta-13b": 1.0, "delta-70b": 2.0}, None, "score")
    costs = dict(zip(MODELS, [1.0, 2.0, 3.0, 4.0], strict=True))
    with pytest.raises(EvalprismError, match=r"budget 0\.5 is below the cheapest model's cost 1 \(alpha-7b\)"):
        routing_costs(MODELS, costs, [0.5, 2.0], "score")
    with pytest.raises(EvalprismError, match="unknown routing value 'best'"):
        routing_costs(MODELS, costs, None, "best")


# ---------------------------------------------------------------------------------------------
# the NLL split: outcome type + winner given decisive = the total
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["rk", "grk"])
def test_nll_split_sums_to_the_total(loss: str) -> None:
    from evalprism.p2l.evaluate import log_probs
    from evalprism.stats.outcome_models import get_outcome_model
    from evalprism.stats.pairwise import outcome_rows

    rng = np.random.default_rng(3)
    n = 500
    a, b = rng.integers(0, 4, n), rng.integers(0, 4, n)
    b = np.where(a == b, (b + 1) % 4, b)
    coefs = rng.normal(0.0, 1.0, 4) + (1.0 if loss == "grk" else 0.0)
    logp = log_probs(loss, coefs[a], coefs[b], get_outcome_model(loss).extra.unreport(1.7 if loss == "grk" else 0.4))
    outcome = rng.integers(0, 4, n)
    p_b = np.where(rng.random(n) < 0.2, rng.random(n), np.nan)  # some soft labels
    rows = outcome_rows(outcome, p_b)
    kind, winner = nll_parts(loss, logp, rows)
    assert np.max(np.abs(kind + winner - battle_nll(loss, logp, rows))) < 1e-10
    assert (kind >= 0).all() and (winner >= 0).all()


def test_nll_split_closed_form_and_none_without_ties() -> None:
    logp = np.log(np.array([[0.3, 0.1, 0.4, 0.2]] * 3))
    rows = np.array([[1.0, 0, 0, 0], [0, 0, 1.0, 0], [0, 0, 0, 1.0]])
    kind, winner = nll_parts("grk", logp, rows)
    assert kind == pytest.approx([-np.log(0.4), -np.log(0.4), -np.log(0.2)])
    assert winner == pytest.approx([-np.log(0.75), 0.0, 0.0])
    assert nll_parts("bt", logp, rows) is None


# ---------------------------------------------------------------------------------------------
# the whole evaluation, with a planted model: routing table, NLL split, overlap with training prompts
# ---------------------------------------------------------------------------------------------


def planted_grk_model() -> P2LModel:
    head = CoefficientHead(DIM, len(MODELS), "grk")
    with torch.no_grad():
        head.linear.bias.copy_(torch.tensor([2.0, 1.5, 1.0, 0.5, 0.0]))
        head.linear.weight.copy_(
            0.3 * torch.tensor(np.random.default_rng(1).standard_normal((len(MODELS) + 1, DIM)), dtype=torch.float32)
        )
    marginal = MarginalBaseline.from_reported("grk", pd.DataFrame({"model": MODELS, "coef": [2.0, 1.5, 1.0, 0.5]}), 1.7)
    return P2LModel(HashFeatures(), head, MODELS, {"outcome_model": "grk"}, marginal)


def grk_battles(n: int = 600) -> pd.DataFrame:
    battles = truth_battles(n, prompts=200)
    battles.loc[battles.index[::7], "winner"] = "tie (bothbad)"
    return battles


def test_evaluation_with_costs_leads_with_the_held_out_router_table(tmp_path) -> None:
    battles = truth_battles()
    costs = {"alpha-7b": 4.0, "beta-13b": 2.0, "gamma-34b": 1.0, "delta-70b": 0.5}
    result = evaluate_model(planted_model(noise=0.5), battles, EvaluateOptions(repeats=2), costs=costs, progress=False)
    routing = result.routing
    assert sorted(routing["budget"].unique()) == pytest.approx(default_budgets(np.array([4.0, 2.0, 1.0, 0.5])))
    assert routing.groupby("budget")["policy"].apply(list).iloc[0] == [
        "p2l",
        "best single",
        "marginal router",
        "random mix",
        "oracle",
    ]
    top = routing[routing["budget"] == 4.0].set_index("policy")
    assert top.loc["best single", "models"] == "alpha-7b"  # the marginal (the truth) prefers it
    assert top.loc["oracle", "value"] >= top.loc["p2l", "value"]
    assert (routing["cost"] <= routing["budget"] + 1e-9).all()
    report = evaluation_report(result)
    text = summary_text(report)
    assert text.startswith("This model records no training prompts")
    assert "Routing valued on the held-out verdicts" in text and "Budget 4:" in text
    assert "curve" not in text
    result.save(tmp_path / "ev")
    assert (tmp_path / "ev" / "routing.csv").is_file() and not (tmp_path / "ev" / "nll_split.csv").exists()


def test_grk_evaluation_splits_the_nll_and_documents_the_routing_value() -> None:
    costs = dict(zip(MODELS, [4.0, 2.0, 1.0, 0.5], strict=True))
    result = evaluate_model(planted_grk_model(), grk_battles(), EvaluateOptions(repeats=2), costs=costs, progress=False)
    split = result.nll_split.set_index(["predictor", "part"])
    for who in ("constant", "marginal", "p2l"):
        parts = split.loc[(who, "outcome type"), "nll"] + split.loc[(who, "winner given decisive"), "nll"]
        assert parts == pytest.approx(split.loc[(who, "total"), "nll"], abs=1e-10)
    assert split.loc[("p2l", "total"), "nll"] == pytest.approx(
        result.metrics.set_index("predictor").loc["p2l", "nll"], abs=1e-12
    )
    text = summary_text(evaluation_report(result))
    assert "come from predicting the outcome type" in text and "saturates" in text
    own = evaluate_model(
        planted_grk_model(), grk_battles(), EvaluateOptions(repeats=2, value="own"), costs=costs, progress=False
    )
    assert own.summary.routing is not None and own.summary.routing.value == "own"


def test_overlap_with_the_training_prompts_is_detected_and_said(tmp_path) -> None:
    battles = truth_battles(n=400, prompts=100)
    prompts = battles["prompt"].unique().tolist()
    write_training_prompts(tmp_path, prompts[:60], prompts[60:70])
    recorded = read_training_prompts(tmp_path)
    assert recorded["fit"].size == 60 and recorded["fit"].dtype == np.uint64
    assert (tmp_path / "training_prompts.npz").stat().st_size < 2000
    assert prompt_overlap(recorded, prompts) == PromptOverlap(True, len(prompts), 60, 10)
    assert prompt_overlap(recorded, ["a prompt never seen"]).fit == 0
    result = evaluate_model(
        planted_model(noise=0.5), battles, EvaluateOptions(repeats=2), training_prompts=recorded, progress=False
    )
    report = evaluation_report(result)
    assert "NOT held out: 60 of the prompts" in report.subtitle
    assert summary_text(report).startswith("**Not held out: 60 of these")
    unseen = battles[~battles["prompt"].isin(prompts[:70])]
    clean = evaluation_report(
        evaluate_model(
            planted_model(noise=0.5), unseen, EvaluateOptions(repeats=2), training_prompts=recorded, progress=False
        )
    )
    assert clean.subtitle.startswith(f"{len(unseen)} held-out battles") and "held out" not in summary_text(clean)[:40]
    (tmp_path / "training_prompts.npz").write_bytes(b"not a numpy file")
    with pytest.raises(EvalprismError, match=r"training_prompts\.npz: not a training-prompt record"):
        read_training_prompts(tmp_path)


@pytest.mark.slow
def test_train_records_its_prompts_and_evaluate_on_the_training_file_says_not_held_out(tmp_path, capsys) -> None:
    from helpers import run_cli

    from evalprism.p2l.simulate import simulate_topic_battles

    path = tmp_path / "battles.jsonl"
    simulate_topic_battles(600, seed=8).to_json(path, orient="records", lines=True)
    code, _, err = run_cli(["p2l", "train", path, "--out", tmp_path / "model", "--penalty", "0.01", "-q"], capsys)
    assert code == 0, err
    recorded = read_training_prompts(tmp_path / "model")
    assert recorded is not None and recorded["fit"].size + recorded["validation"].size > 0
    code, _, err = run_cli(["p2l", "evaluate", tmp_path / "model", path, "--out", tmp_path / "ev", "-q"], capsys)
    assert code == 0, err
    html = (tmp_path / "ev" / "report.html").read_text()
    assert "NOT held out" in html
