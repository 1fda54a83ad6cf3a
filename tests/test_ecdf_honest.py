"""Issue 28, section 2: the ECDF comparisons say what their tests can and cannot tell (known answers)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evalprism.ecdf import analyze
from evalprism.ecdf.compare import mcnemar_binomtest, pair_sentence
from evalprism.ecdf.report import headline
from evalprism.stats.paired import paired_mean_se, sign_flip_test


def _greedy(questions: int = 30) -> pd.DataFrame:
    """Two configurations, one response each per question: 'right' always right, 'wrong' always wrong."""
    rows = []
    for q in range(questions):
        rows.append({"question_id": q, "cfg": "right", "response": f"{q + 100}", "references": f'["{q + 100}"]'})
        rows.append({"question_id": q, "cfg": "wrong", "response": f"{q + 500}", "references": f'["{q + 100}"]'})
    return pd.DataFrame(rows)


def test_one_response_per_question_is_not_applicable_and_falls_back() -> None:
    res = analyze(_greedy(), by=["cfg"], clusters=2, score="exact", permutations=199, progress=False)
    row = res.comparisons.iloc[0]
    assert np.isnan(row["p_distribution"]) and np.isnan(row["p_distribution_adjusted"])
    assert row["distribution_test"].startswith("not applicable: 'cfg=right' has one response on 30 of 30 questions")
    assert (row["accuracy_a"], row["accuracy_b"]) == (1.0, 0.0)
    assert (row["n_right_only_a"], row["n_right_only_b"]) == (30, 0)
    assert row["p_accuracy"] == pytest.approx(2 * 0.5 ** 30)  # exact McNemar: 30 of 30 discordant one way
    assert row["score_difference"] == -1.0 and row["score_difference_se"] == 0.0
    assert row["p_score"] == pytest.approx(1 / 200)  # no sign flip reaches |mean| = 1 but the identity
    text = pair_sentence(row, 199)
    assert "not significantly different" not in text and "p = 1.000" not in text
    assert "distribution test not applicable" in text and "differs, McNemar p < 0.001" in text
    lines = " ".join(headline(res))
    assert "not applicable to any of the 1 configuration pairs" in lines and "1 differ in accuracy" in lines


def test_several_responses_still_get_the_distribution_test() -> None:
    rng = np.random.default_rng(0)
    rows = [{"question_id": q, "cfg": c, "score": float(rng.normal(0.5 + 0.3 * (c == "b"), 0.1))}
            for q in range(15) for c in "ab" for _ in range(5)]
    row = analyze(pd.DataFrame(rows), by=["cfg"], clusters=2, permutations=199, progress=False).comparisons.iloc[0]
    assert row["distribution_test"] == "within-question permutation" and row["p_distribution"] == pytest.approx(1 / 200)


def test_too_few_relabellings_is_not_applicable() -> None:
    # one question, 2 + 2 responses: 6 relabellings, p cannot go below 1/6
    rows = [{"question_id": 0, "cfg": c, "score": s} for c, ss in (("a", [0.1, 0.2]), ("b", [0.8, 0.9])) for s in ss]
    rows += [{"question_id": 1, "cfg": "a", "score": 0.5}, {"question_id": 1, "cfg": "a", "score": 0.5}]
    row = analyze(pd.DataFrame(rows), by=["cfg"], clusters=2, permutations=99, progress=False).comparisons.iloc[0]
    assert row["distribution_test"].startswith("not applicable: 1 questions with 2 + 2 responses allow too few")


def test_kernels_against_scipy() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.random(80) < 0.6, rng.random(80) < 0.4
    only_a, only_b, p = mcnemar_binomtest(a, b)
    assert p == stats.binomtest(only_b, only_a + only_b, 0.5).pvalue
    d = rng.normal(0.2, 1, 40)
    mean, se, lo, hi = paired_mean_se(d)
    ci = stats.ttest_1samp(d, 0).confidence_interval()
    assert (mean, se, lo, hi) == pytest.approx((d.mean(), stats.sem(d), ci.low, ci.high), abs=1e-12)
    # sign flips of 12 differences: the exact p is the share of the 4096 sign vectors reaching |mean|
    d = rng.normal(0.5, 1, 12)
    signs = np.array(np.meshgrid(*[[-1, 1]] * 12)).reshape(12, -1).T
    exact = np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12)
    assert sign_flip_test(d, 20000, seed=1) == pytest.approx(exact, abs=0.01)
    assert sign_flip_test(np.zeros(5)) == 1.0


def test_pooled_sources_make_the_distribution_test_say_it_is_conservative() -> None:
    # per configuration three models of very different quality, pooled (model is not a --by column); the
    # configurations differ by 0.1 in every model: the score test sees it, the pooled permutation test may not
    rng = np.random.default_rng(2)
    rows = [{"question_id": q, "cfg": c, "model": m, "score": float(0.3 * m + 0.1 * (c == "b") + rng.normal(0, 0.02))}
            for q in range(20) for c in "ab" for m in range(3) for _ in range(3)]
    res = analyze(pd.DataFrame(rows), by=["cfg"], clusters=2, permutations=199, progress=False)
    row = res.comparisons.iloc[0]
    assert row["distribution_test"].startswith("within-question permutation, conservative: the responses of "
                                               "several model values are pooled")
    assert row["p_score"] == pytest.approx(1 / 200) and row["score_difference"] == pytest.approx(0.1, abs=0.01)
    assert any(n.startswith("distribution tests: conservative") for n in res.notes)
    text = pair_sentence(row, 199)
    assert "not significantly different" not in text


@pytest.mark.parametrize(("answer", "reference", "hit"), [
    ("3.0", "3", 1.0), ("$70", "70", 1.0), ("1,000", "1000", 1.0), ("$1,000.50", "1000.5", 1.0),
    ("-0.50", "-.5", 1.0), ("70.", "70", 1.0), ("1,5", "15", 0.0), ("3.01", "3", 0.0), ("70 dollars", "70", 0.0),
    ("Paris", "paris", 1.0),
])
def test_exact_compares_numbers_as_numbers(answer: str, reference: str, hit: float) -> None:
    from evalprism.ecdf.scoring import lexical_scores

    assert lexical_scores([answer], np.array([True]), [(reference,)], "exact")[0] == hit


def test_exact_warns_when_most_mismatches_hold_the_reference_number() -> None:
    rows = [{"question_id": q, "cfg": c, "response": r, "references": f'["{q + 10}"]'}
            for q in range(6) for c, r in (("a", f"so the answer is ${q + 10}."), ("b", f"{q + 10}.0"), ("b", "7"))]
    res = analyze(pd.DataFrame(rows), by=["cfg"], clusters=2, score="exact", permutations=9, progress=False)
    by_cfg = res.settings.groupby("configuration")["mean_score"].mean()
    assert by_cfg["cfg=a"] == 0.0 and by_cfg["cfg=b"] == 0.5  # "10.0" matches "10"; "7" does not
    # 6 of the 12 mismatches ("so the answer is $10.") hold the reference number: half, not most: no warning
    assert not any("mismatches end on the reference number" in n for n in res.notes)
    rows = [r for r in rows if r["response"] != "7"]
    res = analyze(pd.DataFrame(rows), by=["cfg"], clusters=2, score="exact", permutations=9, progress=False)
    assert any(n.startswith("6 of 6 exact-match mismatches end on the reference number (e.g. 'so the answer is $")
               for n in res.notes)
