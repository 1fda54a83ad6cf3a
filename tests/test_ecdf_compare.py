"""Section 2 of issue 18: paired comparisons of configurations (kernels with oracles, planted data)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli
from scipy import stats

from evalprism.ecdf import analyze
from evalprism.ecdf.compare import resolve_baseline
from evalprism.ecdf.options import EcdfOptions
from evalprism.errors import EvalprismError
from evalprism.stats.paired import bootstrap_mean_ci, mcnemar_exact, paired_w1_test


def _planted(rng: np.random.Generator, questions: int, shift: float, responses: int = 10) -> tuple[list, list]:
    """Per question a difficulty; configuration B's scores are A's distribution moved by ``shift``."""
    a, b = [], []
    for _ in range(questions):
        centre = rng.uniform(0.3, 0.7)
        a.append(np.clip(rng.normal(centre, 0.1, responses), 0, 1))
        b.append(np.clip(rng.normal(centre + shift, 0.1, rng.integers(responses // 2, responses + 1)), 0, 1))
    return a, b


def test_per_question_w1_is_scipy_wasserstein() -> None:
    rng = np.random.default_rng(1)
    a = [rng.random(rng.integers(1, 12)) for _ in range(25)]
    b = [rng.random(rng.integers(1, 12)) for _ in range(25)]
    w1, _ = paired_w1_test(a, b, permutations=9)
    assert w1 == pytest.approx([stats.wasserstein_distance(x, y) for x, y in zip(a, b, strict=True)], abs=1e-12)


def test_equal_distributions_give_uniform_p_values() -> None:
    ps = []
    for seed in range(200):
        a, b = _planted(np.random.default_rng(seed), questions=12, shift=0.0)
        ps.append(paired_w1_test(a, b, permutations=199, seed=seed)[1])
    assert stats.kstest(ps, "uniform").pvalue > 0.01


def test_a_planted_shift_is_detected() -> None:
    # a shift of 0.1 (one standard deviation of the responses) on 20 questions: power >= 0.9 at 5%
    found = [
        paired_w1_test(*_planted(np.random.default_rng(500 + s), questions=20, shift=0.1), permutations=199, seed=s)[1]
        < 0.05
        for s in range(40)
    ]
    assert np.mean(found) >= 0.9


def test_mcnemar_is_the_exact_binomial_test() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.random(60) < 0.7, rng.random(60) < 0.5
    only_a, only_b, p = mcnemar_exact(a, b)
    assert (only_a, only_b) == (int((a & ~b).sum()), int((~a & b).sum()))
    assert p == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue)
    assert mcnemar_exact(a, a)[2] == 1.0


def test_bootstrap_interval_of_a_mean() -> None:
    values = np.random.default_rng(4).normal(2.0, 1.0, 400)
    ((lo, hi),) = bootstrap_mean_ci(values, resamples=2000, seed=0)
    half = 1.96 * values.std() / np.sqrt(values.size)  # the normal interval; the percentile one is close
    assert lo == pytest.approx(values.mean() - half, abs=0.02) and hi == pytest.approx(values.mean() + half, abs=0.02)


def _three_configurations() -> pd.DataFrame:
    """30 questions x T in {0.0, 0.5, 1.0}: 0.0 and 0.5 share one distribution, 1.0 is shifted up."""
    rng = np.random.default_rng(7)
    rows = []
    for q in range(30):
        centre = rng.uniform(0.3, 0.6)
        for t, shift in (("0.0", 0.0), ("0.5", 0.0), ("1.0", 0.15)):
            rows += [
                {"question_id": q, "temperature": t, "score": v}
                for v in np.clip(rng.normal(centre + shift, 0.08, 8), 0, 1)
            ]
    return pd.DataFrame(rows)


def test_comparisons_find_the_planted_pairs() -> None:
    res = analyze(
        _three_configurations(), EcdfOptions(by=["temperature"], clusters=2, permutations=199), progress=False
    )
    c = res.comparisons.set_index(["configuration_a", "configuration_b"])
    assert len(c) == 3 and (c["n_questions"] == 30).all()
    assert c.loc[("temperature=0.0", "temperature=0.5"), "p_distribution_adjusted"] > 0.05
    for pair in [("temperature=0.0", "temperature=1.0"), ("temperature=0.5", "temperature=1.0")]:
        assert c.loc[pair, "p_distribution_adjusted"] < 0.01
        assert c.loc[pair, "score_difference_low"] < 0.15 < c.loc[pair, "score_difference_high"]
    assert "p_accuracy" not in c.columns  # no final answers without references
    against = analyze(
        _three_configurations(),
        EcdfOptions(by=["temperature"], clusters=2, permutations=99, baseline="1.0"),
        progress=False,
    ).comparisons
    assert against["configuration_a"].eq("temperature=1.0").all() and len(against) == 2


def test_baseline_names_a_configuration() -> None:
    confs = ["model=a · temperature=0.0", "model=a · temperature=1.0"]
    assert resolve_baseline("temperature=1.0, model=a", confs, ["model", "temperature"]) == confs[1]
    assert resolve_baseline("0.0", ["temperature=0.0", "temperature=1.0"], ["temperature"]) == "temperature=0.0"
    with pytest.raises(EvalprismError, match="baseline 'temperature=2.0': no such configuration"):
        resolve_baseline("temperature=2.0", confs, ["model", "temperature"])


def test_cli_writes_comparisons_and_refuses_a_bad_baseline(tmp_path: Path, capsys) -> None:
    path = tmp_path / "r.csv"
    _three_configurations().to_csv(path, index=False)
    code, _, err = run_cli(
        ["ecdf", path, "--out", tmp_path / "o", "--by", "temperature", "-k", "2", "--permutations", "99", "-q"], capsys
    )
    assert code == 0, err
    assert len(pd.read_csv(tmp_path / "o" / "comparisons.csv")) == 3
    assert "Do the configurations differ?" in (tmp_path / "o" / "report.html").read_text()
    code, _, err = run_cli(
        ["ecdf", path, "--out", tmp_path / "o2", "--by", "temperature", "--baseline", "9", "-q"], capsys
    )
    assert code == 2 and "--baseline '9': no such configuration" in err and "Traceback" not in err


def _same_answers_table(spread_b: bool) -> pd.DataFrame:
    """12 questions, configurations A and B both end on the right final answer; B's responses score
    low (a wrong answer) a third of the time when ``spread_b``."""
    rows = []
    for q in range(12):
        for cfg in ("A", "B"):
            for i in range(6):
                low = spread_b and cfg == "B" and i % 3 == 1
                rows.append(
                    {
                        "question_id": q,
                        "cfg": cfg,
                        "response": "Lyon" if low else "Paris",
                        "references": '["Paris"]',
                        "score": 0.2 + 0.01 * q if low else 0.9 - 0.01 * i,
                    }
                )
    return pd.DataFrame(rows)


def test_same_accuracy_different_quality_only_when_the_tests_say_so(cache_dir: Path) -> None:
    from evalprism.ecdf.report import headline

    res = analyze(
        _same_answers_table(spread_b=True), EcdfOptions(by=["cfg"], clusters=2, permutations=199), progress=False
    )
    row = res.comparisons.iloc[0]
    assert row["accuracy_a"] == row["accuracy_b"] == 1.0 and row["p_accuracy"] == 1.0
    assert row["p_distribution_adjusted"] < 0.01
    assert any(line.startswith("Same accuracy, different quality: 'cfg=A' vs 'cfg=B'") for line in headline(res))
    same = analyze(
        _same_answers_table(spread_b=False), EcdfOptions(by=["cfg"], clusters=2, permutations=199), progress=False
    )
    assert same.comparisons.iloc[0]["p_distribution"] == 1.0  # identical samples: every relabelling ties
    assert not any("Same accuracy" in line for line in headline(same))


def test_sequential_p_values_are_valid_under_a_planted_null() -> None:
    # Besag-Clifford stops these after about 20 exceedances; the p-values must stay (super)uniform
    from evalprism.stats import paired

    ps = np.array(
        [
            paired.paired_w1_test(
                *_planted(np.random.default_rng(900 + s), questions=60, shift=0.0), permutations=999, seed=s
            )[1]
            for s in range(200)
        ]
    )
    assert np.mean(ps <= 0.05) <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 200)
    assert stats.kstest(ps, "uniform").pvalue > 0.01


def test_sequential_decisions_equal_the_full_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    # planted differences of several sizes (some pairs clearly significant: the 8-SD stop; some not:
    # the Besag-Clifford stop); the full test runs all 999 permutations with both stops switched off
    from evalprism.stats import paired

    designs = [
        _planted(np.random.default_rng(1300 + s), questions=60, shift=[0.0, 0.02, 0.04, 0.1][s % 4]) for s in range(100)
    ]
    seq = np.array([paired.paired_w1_test(a, b, permutations=999, seed=s)[1] for s, (a, b) in enumerate(designs)])
    monkeypatch.setattr(paired, "SEQUENTIAL_EXCEEDANCES", 10**9)
    monkeypatch.setattr(paired, "NORMAL_STOP_Z", np.inf)
    full = np.array([paired.paired_w1_test(a, b, permutations=999, seed=s)[1] for s, (a, b) in enumerate(designs)])
    differ = (seq < 0.05) != (full < 0.05)
    # with h = 20 the sequential p has a relative error of about 22%, so the two decisions can differ
    # only where the full p is itself within Monte-Carlo error of 0.05; everywhere else they agree
    assert np.mean(differ) <= 0.03
    assert np.all((full[differ] > 0.025) & (full[differ] < 0.1))
    assert np.mean(~differ[(full < 0.025) | (full > 0.1)]) == 1.0
    assert 0.1 < np.mean(full < 0.05) < 0.9  # the decisions are not all the same
    assert np.all(seq[full <= 0.001] == pytest.approx(0.001))  # the clearly significant are reported at the floor
