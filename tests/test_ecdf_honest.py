"""Issue 28, section 2: the ECDF comparisons say what their tests can and cannot tell (known answers)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evalprism.ecdf import analyze
from evalprism.ecdf.compare import mcnemar_binomtest, pair_sentence
from evalprism.ecdf.options import EcdfOptions
from evalprism.ecdf.report import headline
from evalprism.embed import Embedder
from evalprism.stats.paired import paired_mean_se, sign_flip_test


def _greedy(questions: int = 30) -> pd.DataFrame:
    """Two configurations, one response each per question: 'right' always right, 'wrong' always wrong."""
    rows = []
    for q in range(questions):
        rows.append({"question_id": q, "cfg": "right", "response": f"{q + 100}", "references": f'["{q + 100}"]'})
        rows.append({"question_id": q, "cfg": "wrong", "response": f"{q + 500}", "references": f'["{q + 100}"]'})
    return pd.DataFrame(rows)


def test_one_response_per_question_is_not_applicable_and_falls_back() -> None:
    res = analyze(_greedy(), EcdfOptions(by=["cfg"], clusters=2, score="exact", permutations=199), progress=False)
    row = res.comparisons.iloc[0]
    assert np.isnan(row["p_distribution"]) and np.isnan(row["p_distribution_adjusted"])
    assert row["distribution_test"].startswith("not applicable: 'cfg=right' has one response on 30 of 30 questions")
    assert (row["accuracy_a"], row["accuracy_b"]) == (1.0, 0.0)
    assert (row["n_right_only_a"], row["n_right_only_b"]) == (30, 0)
    assert row["p_accuracy"] == pytest.approx(2 * 0.5**30)  # exact McNemar: 30 of 30 discordant one way
    assert row["score_difference"] == -1.0 and row["score_difference_se"] == 0.0
    assert row["p_score"] == pytest.approx(1 / 200)  # no sign flip reaches |mean| = 1 but the identity
    text = pair_sentence(row, 199)
    assert "not significantly different" not in text and "p = 1.000" not in text
    assert "distribution test not applicable" in text and "differs, McNemar p < 0.001" in text
    lines = " ".join(headline(res))
    assert "not applicable to any of the 1 configuration pairs" in lines and "1 differ in accuracy" in lines


def test_several_responses_still_get_the_distribution_test() -> None:
    rng = np.random.default_rng(0)
    rows = [
        {"question_id": q, "cfg": c, "score": float(rng.normal(0.5 + 0.3 * (c == "b"), 0.1))}
        for q in range(15)
        for c in "ab"
        for _ in range(5)
    ]
    row = analyze(
        pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, permutations=199), progress=False
    ).comparisons.iloc[0]
    assert row["distribution_test"] == "within-question permutation" and row["p_distribution"] == pytest.approx(1 / 200)


def test_too_few_relabellings_is_not_applicable() -> None:
    # one question, 2 + 2 responses: 6 relabellings, p cannot go below 1/6
    rows = [{"question_id": 0, "cfg": c, "score": s} for c, ss in (("a", [0.1, 0.2]), ("b", [0.8, 0.9])) for s in ss]
    rows += [{"question_id": 1, "cfg": "a", "score": 0.5}, {"question_id": 1, "cfg": "a", "score": 0.5}]
    row = analyze(
        pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, permutations=99), progress=False
    ).comparisons.iloc[0]
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
    rows = [
        {"question_id": q, "cfg": c, "model": m, "score": float(0.3 * m + 0.1 * (c == "b") + rng.normal(0, 0.02))}
        for q in range(20)
        for c in "ab"
        for m in range(3)
        for _ in range(3)
    ]
    res = analyze(pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, permutations=199), progress=False)
    row = res.comparisons.iloc[0]
    assert row["distribution_test"].startswith(
        "within-question permutation, conservative: the responses of several model values are pooled"
    )
    assert row["p_score"] == pytest.approx(1 / 200) and row["score_difference"] == pytest.approx(0.1, abs=0.01)
    assert any(n.startswith("distribution tests: conservative") for n in res.notes)
    text = pair_sentence(row, 199)
    assert "not significantly different" not in text


@pytest.mark.parametrize(
    ("answer", "reference", "hit"),
    [
        ("3.0", "3", 1.0),
        ("$70", "70", 1.0),
        ("1,000", "1000", 1.0),
        ("$1,000.50", "1000.5", 1.0),
        ("-0.50", "-.5", 1.0),
        ("70.", "70", 1.0),
        ("1,5", "15", 0.0),
        ("3.01", "3", 0.0),
        ("70 dollars", "70", 0.0),
        ("Paris", "paris", 1.0),
    ],
)
def test_exact_compares_numbers_as_numbers(answer: str, reference: str, hit: float) -> None:
    from evalprism.io.lexical import lexical_scores

    assert lexical_scores([answer], np.array([True]), [(reference,)], "exact")[0] == hit


def test_exact_warns_when_most_mismatches_hold_the_reference_number() -> None:
    rows = [
        {"question_id": q, "cfg": c, "response": r, "references": f'["{q + 10}"]'}
        for q in range(6)
        for c, r in (("a", f"so the answer is ${q + 10}."), ("b", f"{q + 10}.0"), ("b", "7"))
    ]
    res = analyze(
        pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, score="exact", permutations=9), progress=False
    )
    by_cfg = res.settings.groupby("configuration")["mean_score"].mean()
    assert by_cfg["cfg=a"] == 0.0 and by_cfg["cfg=b"] == 0.5  # "10.0" matches "10"; "7" does not
    # 6 of the 12 mismatches ("so the answer is $10.") hold the reference number: half, not most: no warning
    assert not any("mismatches end on the reference number" in n for n in res.notes)
    rows = [r for r in rows if r["response"] != "7"]
    res = analyze(
        pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, score="exact", permutations=9), progress=False
    )
    assert any(  # named by its table, as every note of the shared answer preparation is
        n.startswith(
            "responses table: 6 of 6 exact-match mismatches end on the reference number (e.g. 'so the answer is $"
        )
        for n in res.notes
    ), res.notes


def _vote_vs_medoid() -> pd.DataFrame:
    """One question, 40 samples: the gold answer '12' 18 times, '11' 5 times, and 17 answers of one vote each
    ('10.1' .. '10.17'); a planted embedding puts '11' at the mean, so the medoid and the vote differ."""
    answers = ["12"] * 18 + ["11"] * 5 + [f"10.{i}" for i in range(1, 18)]
    rows = [{"question_id": 0, "cfg": "x", "response": a, "references": '["12"]'} for a in answers]
    rows += [{"question_id": 1, "cfg": "x", "response": "12", "references": '["12"]'}]
    return pd.DataFrame(rows)


class _PlantedEmbedder(Embedder):
    """'11' and '12' on two axes, the one-vote answers on a circle placed so that the mean embedding lies
    nearest '11' (a planted geometry, not a model)."""

    def __init__(self) -> None:  # no model to load
        self.spec = "planted"
        self.stats: dict = {}

    @property
    def model_id(self) -> str:
        return "planted"

    def embed(self, texts: Sequence[str], *, what: str | None = None) -> np.ndarray:
        out = []
        for t in texts:
            if t == "12":
                v = [1.0, 0.0, 0.0]
            elif t == "11":
                v = [0.0, 0.0, 1.0]
            else:
                angle = float(t.split(".")[1]) * 2 * np.pi / 17
                v = [-0.95, 0.2 * np.cos(angle), 0.31 + 0.2 * np.sin(angle)]
            out.append(np.asarray(v) / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@pytest.mark.parametrize("final", ["medoid", "majority"])
def test_majority_vote_beside_the_medoid(final: str) -> None:
    res = analyze(
        _vote_vs_medoid(),
        EcdfOptions(by=["cfg"], clusters=1, score="exact", final=final, permutations=9),
        embedder=_PlantedEmbedder(),
        progress=False,
    )
    q0 = res.settings.set_index("question_id").loc["0"]
    vote, medoid = ("final", "medoid") if final == "majority" else ("majority", "final")
    right = {"final": "correct", "medoid": "medoid_correct", "majority": "majority_correct"}
    assert q0[f"{vote}_answer"] == "12" and q0["majority_votes"] == 18 and q0[right[vote]]
    assert q0[f"{medoid}_answer"] == "11" and not q0[right[medoid]]
    line = next(x for x in headline(res) if x.startswith("Final answers:"))
    if final == "medoid":
        assert line.startswith("Final answers: the answer nearest the mean embedding (eq. 6 medoid), accuracy 0.5000")
        assert "the majority vote picks another answer in 1 settings (accuracy 1.0000" in line
    else:
        assert line.startswith(
            "Final answers: the majority vote over normalised answers (self-consistency), accuracy 1.0000"
        )
    assert "majority answer" not in " ".join(headline(res))


def test_majority_vote_counts_numbers_as_numbers_and_keeps_ties_as_ties() -> None:
    from evalprism.ecdf.analysis import majority_answers

    answers = ["3.0", "3", "4", "b", "a", "$5", "5"]
    codes = np.array([0, 0, 0, 1, 1, 2, 2])
    vote = majority_answers(codes, np.ones(7, bool), 4, answers)
    assert vote.chosen.tolist() == [0, 4, 5, -1] and vote.votes.tolist() == [2, 1, 2, 0]
    assert list(vote.tied) == [1] and sorted(vote.tied[1].tolist()) == [3, 4]  # "a" and "b": one vote each


def test_a_tied_majority_vote_is_right_by_its_share_and_never_decides_mcnemar() -> None:
    """F10: three answers tied 1-1-1 on every question: the vote is right by 1/3, not by whichever
    answer sorts first; the accuracy test reads no tied question."""
    from evalprism.ecdf import EcdfOptions, analyze

    rows = []
    for q in range(12):
        for conf, answers in (("x", ["A", "B", "C"]), ("y", ["C", "C", "B"])):
            rows += [(f"q{q}", conf, f"The answer is {a}", ["A"]) for a in answers]
    table = pd.DataFrame(rows, columns=["question_id", "config", "response", "references"])
    options = EcdfOptions(by=["config"], clusters=2, score="exact", extract=r"answer is (\w)", final="majority")
    res = analyze(table, options, progress=False)
    x = res.settings[res.settings["config"] == "x"]
    assert x["correct"].tolist() == pytest.approx([1 / 3] * 12) and (x["majority_tied"] == 3).all()
    row = res.comparisons.iloc[0]
    assert row["n_tied_votes"] == 12 and row["n_right_only_a"] + row["n_right_only_b"] == 0
    assert row["accuracy_a"] == pytest.approx(1 / 3) and row["accuracy_b"] == 0.0
    assert any("majority votes are ties" in n for n in res.notes)


def test_wording_nits() -> None:
    from evalprism.ecdf.report import build_report, rows_caption, share_text

    assert [share_text(1, 300), share_text(0, 5), share_text(299, 300), share_text(3, 3), share_text(1, 4)] == [
        "<1%",
        "0%",
        ">99%",
        "100%",
        "25%",
    ]
    assert rows_caption(pd.DataFrame({"a": range(10)}), "C.") == "C."
    assert rows_caption(pd.DataFrame({"a": range(40)}), "C.") == "C. 40 rows (scroll inside the box to see them all)."
    assert rows_caption(pd.DataFrame({"a": range(70)}), "C.") == (
        "C. 70 rows, the first 60 here (scroll inside the box to see them all)."
    )
    res = analyze(_greedy(), EcdfOptions(by=["cfg"], clusters=2, score="exact", permutations=9), progress=False)
    fig = next(sec for sec in build_report(res).sections if sec.title == "ECDFs grouped by accuracy")
    assert "accuracy 0.00: cfg=wrong (n=30)" in fig.body and "accuracy 1.00: cfg=right (n=30)" in fig.body


def test_a_correctness_table_gets_mcnemar() -> None:
    # one 0/1 score per question: 'b' right on 12 questions 'a' missed, 'a' right on 2 'b' missed, 26 alike
    right_a = [1] * 2 + [0] * 12 + [1] * 13 + [0] * 13
    right_b = [0] * 2 + [1] * 12 + [1] * 13 + [0] * 13
    rows = [
        {"question_id": q, "cfg": c, "score": float(v)}
        for c, vals in (("a", right_a), ("b", right_b))
        for q, v in enumerate(vals)
    ]
    res = analyze(pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, permutations=199), progress=False)
    row = res.comparisons.iloc[0]
    assert row["distribution_test"].startswith("not applicable")
    assert (row["n_right_only_a"], row["n_right_only_b"]) == (2, 12)
    assert row["p_accuracy"] == pytest.approx(stats.binomtest(12, 14, 0.5).pvalue)


def test_few_discordant_questions_say_the_test_cannot_tell() -> None:
    """Greedy outputs on 30 questions that differ on 3 only (all won by 'b'): McNemar's smallest
    possible p on 3 discordant questions is 2/2^3 = 0.25, so the accuracy sentence says the test cannot
    tell, never 'difference not significant'; the same for the sign-flip score test."""
    rows = []
    for q in range(30):
        b_right = q < 20
        a_right = q < 17
        for cfg, right in (("a", a_right), ("b", b_right)):
            rows.append(
                {
                    "question_id": q,
                    "cfg": cfg,
                    "response": f"{q + (100 if right else 500)}",
                    "references": f'["{q + 100}"]',
                }
            )
    res = analyze(
        pd.DataFrame(rows), EcdfOptions(by=["cfg"], clusters=2, score="exact", permutations=199), progress=False
    )
    row = res.comparisons.iloc[0]
    assert (row["n_right_only_a"], row["n_right_only_b"]) == (0, 3) and row["n_questions_differ"] == 3
    assert row["p_accuracy"] == pytest.approx(0.25)
    text = pair_sentence(row, 199)
    assert "the test cannot tell: only 3 questions differ, McNemar" in text
    assert "the test cannot tell: only 3 questions differ, paired sign-flip" in text
    assert "not significant" not in text


def test_k_sample_scores_per_configuration_equal_the_hand_computation() -> None:
    """pass@k / maj@k / avg@k per configuration from each question's n responses, right = exact match."""
    import math

    from evalprism.ecdf import EcdfOptions, analyze

    rng = np.random.default_rng(0)
    rows, right = [], {}
    for q in range(10):
        c = int(rng.integers(0, 6))
        right[q] = c
        rows += [(f"q{q}", "t0", f"Answer: {'A' if k < c else 'B'}", ["A"]) for k in range(5)]
    table = pd.DataFrame(rows, columns=["question_id", "temp", "response", "references"])
    res = analyze(table, EcdfOptions(by=["temp"], clusters=2, score="exact", extract=r"Answer: (\w)"), progress=False)
    k = res.k_samples.set_index("metric")
    assert list(k.index) == ["pass@1", "pass@5", "maj@5", "avg@5"]
    pass1 = np.mean([c / 5 for c in right.values()])
    maj5 = np.mean([float(c >= 3) for c in right.values()])
    pass5 = np.mean([1 - math.comb(5 - c, 5) / math.comb(5, 5) for c in right.values()])
    assert k.loc["pass@1", "value"] == pytest.approx(pass1) and k.loc["maj@5", "value"] == pytest.approx(maj5)
    assert k.loc["pass@5", "value"] == pytest.approx(pass5) and k.loc["avg@5", "value"] == pytest.approx(pass1)
