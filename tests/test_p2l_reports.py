"""What the P2L reports say: the evaluation's verdict against the marginal leaderboard (planted data
where the marginal is the truth), its paired standard error, the ties the loss leaves out, and the
prompt-set headline's wording."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit

from evalprism.p2l import P2LModel, evaluate_model
from evalprism.p2l.backbones import Backbone
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.evaluate import paired_difference
from evalprism.p2l.model import CoefficientHead
from evalprism.p2l.options import EvaluateOptions
from evalprism.p2l.reports import evaluation_report, prompt_set_report

MODELS = ["alpha-7b", "beta-13b", "gamma-34b", "delta-70b"]
TRUTH = np.array([0.8, 0.3, -0.2, -0.9])  # one leaderboard for every prompt: the marginal is the truth
DIM = 8


class HashFeatures(Backbone):
    """Each prompt's features: a fixed standard-normal vector seeded by the prompt's text."""

    spec = "test:hash"
    dim = DIM
    trainable = False

    def __init__(self) -> None:
        super().__init__()

    def features(self, prompts: Sequence[str]) -> torch.Tensor:
        rows = [
            np.random.default_rng(int(hashlib.sha256(p.encode()).hexdigest()[:8], 16)).standard_normal(DIM)
            for p in prompts
        ]
        return torch.tensor(np.array(rows), dtype=torch.float32)


def planted_model(noise: float) -> P2LModel:
    """A P2L model whose head is the true leaderboard plus ``noise`` times random prompt-dependent weights."""
    head = CoefficientHead(DIM, len(MODELS), "bt")
    with torch.no_grad():
        head.linear.bias.copy_(torch.tensor(TRUTH, dtype=torch.float32))
        head.linear.weight.copy_(
            noise * torch.tensor(np.random.default_rng(0).standard_normal((len(MODELS), DIM)), dtype=torch.float32)
        )
    marginal = MarginalBaseline("bt", pd.DataFrame({"model": MODELS, "coef": TRUTH}))
    return P2LModel(HashFeatures(), head, MODELS, {"outcome_model": "bt"}, marginal)


def truth_battles(n: int = 1500, prompts: int = 400, seed: int = 3) -> pd.DataFrame:
    """Battles drawn from ``TRUTH`` (the prompt plays no part), every tenth a tie."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    a_wins = rng.random(n) < expit(TRUTH[a] - TRUTH[b])
    winner = np.where(a_wins, "model_a", "model_b")
    winner[::10] = "tie"
    return pd.DataFrame(
        {
            "prompt": [f"prompt {i}" for i in rng.integers(0, prompts, n)],
            "model_a": np.array(MODELS)[a],
            "model_b": np.array(MODELS)[b],
            "winner": winner,
        }
    )


def summary_text(report) -> str:
    return " ".join(" ".join(report.summary_items).split())


def test_paired_difference_is_the_cluster_robust_standard_error() -> None:
    mean, se = paired_difference(np.array([1.0, 2.0, 3.0, 6.0]), np.array(["a", "a", "b", "b"]))
    # deviations from the mean 3 sum to -3 and 3 per prompt: sqrt(2/1 * 18) / 4
    assert mean == 3.0 and se == pytest.approx(1.5)
    assert np.isnan(paired_difference(np.array([1.0, 2.0]), np.array(["a", "a"]))[1])


def test_evaluation_report_says_when_p2l_loses_to_the_true_marginal() -> None:
    battles = truth_battles()
    result = evaluate_model(planted_model(noise=0.5), battles, EvaluateOptions(repeats=2), progress=False)
    p2l = result.metrics.set_index("predictor").loc["p2l"]
    assert p2l["nll_vs_marginal"] > 2 * p2l["se_vs_marginal"] > 0  # noise around the truth predicts worse
    report = evaluation_report(result)
    text = summary_text(report)
    assert "**P2L loses to the marginal leaderboard**" in text
    assert f"{p2l['nll_vs_marginal']:.4f} nats per battle" in text and "paired standard error by prompt" in text
    ties = int((battles["winner"] == "tie").sum())
    # the planted model records no training prompts: the subtitle does not claim "held-out"
    assert report.subtitle == (
        f"{len(battles)} battles on {battles['prompt'].nunique()} prompts; the bt "
        f"outcome model leaves out the {ties} ties (not outcomes of that model), so the metrics use "
        f"{len(battles) - ties} battles"
    )
    assert int(p2l["battles"]) == len(battles) - ties


def test_evaluation_report_calls_a_tiny_difference_noise() -> None:
    result = evaluate_model(planted_model(noise=1e-3), truth_battles(), EvaluateOptions(repeats=2), progress=False)
    p2l = result.metrics.set_index("predictor").loc["p2l"]
    assert abs(p2l["nll_vs_marginal"]) <= 2 * p2l["se_vs_marginal"]
    text = summary_text(evaluation_report(result))
    assert "within noise" in text and "loses" not in text and "beats" not in text
    same = evaluate_model(planted_model(noise=0.0), truth_battles(), EvaluateOptions(repeats=2), progress=False)
    assert "as the marginal leaderboard does (the same NLL to within 1e-06 per battle)" in summary_text(
        evaluation_report(same)
    )


@pytest.mark.parametrize(
    ("best", "expected"),
    [
        (
            [99, 1, 0],
            "alpha-7b leads the aggregated leaderboard and is the best model on all but 1 of the 100 prompts.",
        ),
        (
            [100, 0, 0],
            "alpha-7b leads the aggregated leaderboard and is the best model on every one of the 100 prompts.",
        ),
        (
            [40, 60, 0],
            "alpha-7b leads the aggregated leaderboard, yet it is the best model on only 40 of the 100 prompts "
            "(40%). beta-13b is best on the most prompts (60 of the 100 prompts (60%)).",
        ),
    ],
)
def test_prompt_set_headline_fits_the_share(best: list[int], expected: str) -> None:
    from evalprism.p2l.options import PromptSetOptions
    from evalprism.p2l.prompt_set import PromptSetResult, PromptSetSummary

    share = np.array(best) / 100
    board = pd.DataFrame(
        {
            "rank": [1, 2, 3],
            "model": MODELS[:3],
            "coef": [0.5, 0.2, -0.7],
            "rating": [1087, 1035, 878],
            "mean_coef": [0.5, 0.2, -0.7],
            "best_share": share,
        }
    )
    cats = pd.DataFrame(
        {"category": ["c1"] * 3, "prompts": [100] * 3, "rank": [1, 2, 3], "model": MODELS[:3], "coef": [0.5, 0.2, -0.7]}
    )
    strengths = pd.DataFrame({"category": ["c1"] * 3, "model": MODELS[:3], "win_rate": [0.5, 0.42, 0.23]})
    result = PromptSetResult(
        pd.DataFrame({"prompt": ["p"]}),
        board,
        cats,
        strengths,
        PromptSetOptions(category_column="c"),
        PromptSetSummary(n_prompts=100, categories="column 'c'", reference=MODELS[0], models=3, outcome_model="bt"),
    )
    report = prompt_set_report(result)
    assert report.summary_items[0] == expected
    assert "only" not in report.summary_items[0] or best[0] < 90


def test_report_tables_show_line_breaks_and_keep_model_names_whole() -> None:
    from evalprism.report import Report

    frame = pd.DataFrame(
        {"prompt": ["Line one.\n\nLine <two>\tend"], "model": ["stablelm-tuned-alpha-7b"], "note": ["a\nb"]}
    )
    body = Report("t").table(frame, "routes", nowrap=["model"], lines=["prompt"]).sections[0].body
    assert '<span class="lines">Line one.<br><br>Line &lt;two&gt; end</span>' in body
    assert '<span class="nowrap">stablelm-tuned-alpha-7b</span>' in body
    assert "<td>a b</td>" in body and "\\n" not in body  # never the characters backslash-n


def test_every_table_keeps_model_and_run_names_whole_unasked() -> None:
    """A column that names models or runs never wraps, in any table, without the caller asking (the
    STEM trials table broke 'other-b' into 'other-' and 'b'); other columns wrap as before."""
    from evalprism.report import Report

    frame = pd.DataFrame({"model": ["other-b"], "model_2": ["gpt-4-turbo"], "method": ["STEM paper rule"]})
    body = Report("t").table(frame, "trials").sections[0].body
    assert '<span class="nowrap">other-b</span>' in body and '<span class="nowrap">gpt-4-turbo</span>' in body
    assert "<td>STEM paper rule</td>" in body
