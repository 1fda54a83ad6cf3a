"""The statistics of a release decision: the non-inferiority gate, the noise plan and the model
confidence set, against closed forms, planted worlds and arch's own MCS."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalprism.stats.compare_tests import paired_difference, variance_components
from evalprism.stats.confidence_set import model_confidence_set
from evalprism.stats.gate import non_inferiority
from evalprism.stats.noise_plan import NoisePlan


def _gate_on(d: np.ndarray, margin: float, alpha: float = 0.05) -> str:
    res = paired_difference(d)
    return non_inferiority("cand", "base", res.mean, res.se, res.df, margin, alpha).verdict


def test_gate_type_one_error_at_the_margin_is_at_most_alpha() -> None:
    # 200 planted nulls: the candidate is worse by exactly the margin (0.03) on 0/1 items
    rng = np.random.default_rng(7)
    margin, n = 0.03, 800
    passes = 0
    for _ in range(200):
        base = rng.random(n) < 0.70
        cand = rng.random(n) < 0.67
        passes += _gate_on(cand.astype(float) - base.astype(float), margin) == "pass"
    # at most alpha = 5% in expectation; 19 or more of 200 has probability < 1% under alpha = 5%
    assert passes <= 18
    assert stats.binom.sf(18, 200, 0.05) < 0.01


def test_gate_passes_a_clear_improvement_and_fails_a_clear_regression() -> None:
    rng = np.random.default_rng(1)
    base = (rng.random(2000) < 0.6).astype(float)
    better = np.where(rng.random(2000) < 0.1, 1.0, base)
    worse = np.where(rng.random(2000) < 0.3, 0.0, base)
    assert _gate_on(better - base, margin=0.01) == "pass"
    assert _gate_on(worse - base, margin=0.01) == "regression"
    assert _gate_on(worse[:20] - base[:20], margin=0.25) == "cannot tell"


def test_gate_bounds_are_the_one_sided_t_bounds() -> None:
    g = non_inferiority("c", "b", difference=-0.01, se=0.02, df=99, margin=0.05, alpha=0.05)
    t = stats.t.ppf(0.95, 99)
    assert g.lower == pytest.approx(-0.01 - t * 0.02) and g.upper == pytest.approx(-0.01 + t * 0.02)
    assert g.verdict == "pass" and g.exit_code == 0  # -0.0429 > -0.05
    assert "pass: c is no worse than b by more than 5 points" in g.sentence()


def test_noise_plan_matches_the_closed_form() -> None:
    plan = NoisePlan(items=400, samples=4, between=0.02, within=0.06)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert plan.mde() == pytest.approx(z * math.sqrt(0.08 / 400))
    assert plan.mde(samples=8) == pytest.approx(z * math.sqrt((0.02 + 0.03) / 400))  # within halves
    assert plan.mde(items=1600) == pytest.approx(z * math.sqrt(0.08 / 1600))  # SE halves
    assert "4 more samples per item: MDE" in plan.sentence(4, 2000)


def test_noise_plan_resolution_ratio_is_one_at_the_mde() -> None:
    plan = NoisePlan(items=1000, samples=1, between=0.2, within=0.0)
    needed = plan.items_needed(plan.mde())
    assert needed in (1000, 1001)  # the MDE needs the items compared (rounded up)
    assert plan.resolution_ratio(plan.mde() / 2) == pytest.approx(0.25, rel=0.01)  # half the effect: 4x items


def test_noise_plan_reads_the_variance_split_of_planted_samples() -> None:
    # items differ by a between-item effect (variance 0.01); each of 8 samples adds noise (variance 0.04)
    rng = np.random.default_rng(3)
    n, k = 4000, 8
    item = rng.normal(0, 0.1, n)
    a = rng.normal(0, 0.2, (n, k))
    b = item[:, None] + rng.normal(0, 0.2, (n, k))
    d = b.mean(1) - a.mean(1)
    total, within, between = variance_components(d, a.var(1, ddof=1), np.full(n, k), b.var(1, ddof=1), np.full(n, k))
    assert within == pytest.approx(2 * 0.04 / k, rel=0.05) and between == pytest.approx(0.01, rel=0.1)
    assert total == pytest.approx(within + between)


def test_confidence_set_keeps_the_tied_best_and_drops_the_clearly_worse() -> None:
    rng = np.random.default_rng(0)
    quality = np.array([0.80, 0.80, 0.60, 0.50])  # two tied for best
    losses = (rng.random((3000, 4)) > quality).astype(float)
    cs = model_confidence_set(losses, ["a", "b", "c", "d"], alpha=0.1, reps=500)
    assert set(cs.included) == {"a", "b"}
    eliminated = [name for name, p in cs.order[:2]]
    assert eliminated == ["d", "c"]  # the worst first
    assert "a, b are tied for best" in cs.sentence()


def test_confidence_set_equals_arch_on_the_same_losses() -> None:
    from arch.bootstrap import MCS

    rng = np.random.default_rng(5)
    losses = (rng.random((500, 5)) > np.array([0.7, 0.68, 0.6, 0.71, 0.5])).astype(float)
    cs = model_confidence_set(losses, list("vwxyz"), alpha=0.1, reps=400, seed=3)
    ref = MCS(losses, size=0.1, reps=400, block_size=1, bootstrap="circular", seed=3, method="R")
    ref.compute()
    assert [name for name, _ in cs.order] == ["vwxyz"[i] for i in ref.pvalues.index]
    assert [p for _, p in cs.order] == pytest.approx(list(ref.pvalues["Pvalue"]))
    assert set(cs.included) == {"vwxyz"[i] for i in ref.included}
