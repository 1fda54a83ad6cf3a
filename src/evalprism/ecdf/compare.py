"""Do two configurations really differ? Paired comparisons over shared questions (issue 18, section 2).

For each pair of configurations (every pair, or each against a baseline), over the questions both
answered: the mean per-question W1 distance between their ECDFs (eq. 4-5) with its within-question
label-permutation p-value, the mean score difference, and, when final answers were judged (eq. 6),
the accuracy difference with the exact McNemar (sign) test. Question-level bootstrap intervals for
the three differences; Benjamini-Hochberg adjusted p-values across the pairs, each test family
apart (``scipy.stats.false_discovery_control``).

What each test can tell: the within-question permutation test compares the two samples of
responses of every question, so it needs several responses on each side. With one response per
question on a side (greedy decoding, the usual case) exchanging the labels of the two responses of
a question leaves W1 unchanged, every relabelling ties and p = 1 by construction; such a pair's
distribution test is "not applicable" (p empty, the reason in ``distribution_test``), never "not
significantly different". Every pair also gets the paired score test (the mean per-question score
difference, its standard error and a sign-flip permutation p-value) and, when final answers were
judged, the exact McNemar test (``scipy.stats.binomtest`` on the discordant questions): those are
the tests to read for such pairs.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import binomtest, false_discovery_control

from evalprism.errors import EvalprismError
from evalprism.io.responses import same_configuration
from evalprism.progress import progress_bar
from evalprism.stats.paired import (
    bootstrap_mean_ci,
    paired_mean_se,
    paired_w1_test,
    permutation_design,
    sign_flip_floor,
    sign_flip_test,
    sign_test_floor,
)

#: more pairs than this and no baseline: each configuration against the first one
MAX_ALL_PAIRS = 300
#: more pairs than this even against one baseline and the comparisons are skipped, said in the notes:
#: each pair runs a permutation test and a bootstrap (about 10 ms), so 100,000 configurations would
#: spend hours on a side table while the clustering itself scales (CLARA-style above CLARA_ABOVE)
MAX_COMPARED_PAIRS = 2000
#: the level at which a difference is called significant in the report (BH-adjusted)
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000
#: the distribution test needs several responses on each side: with one response per question on a side
#: (greedy decoding) on at least this share of the shared questions it is not applicable
SINGLE_RESPONSE_SHARE = 0.5


def resolve_baseline(baseline: str | None, configurations: list[str], by: list[str]) -> str | None:
    """The configuration named by ``baseline``: its label (``temperature=0.0``, parts in any order,
    separated by ``,`` or ``·``) or, with one ``by`` column, its value (``0.0``)."""
    if baseline is None:
        return None
    for conf in configurations:
        if same_configuration(conf, baseline) or (len(by) == 1 and conf == f"{by[0]}={baseline.strip()}"):
            return conf
    shown = ", ".join(configurations[:8]) + (", ..." if len(configurations) > 8 else "")
    raise EvalprismError(
        f"baseline '{baseline}': no such configuration (configurations: {shown})", parameter="baseline"
    )


def check_comparison_options(baseline: str | None, configurations: list[str], by: list[str]) -> None:
    """Refuse a baseline that names no configuration before any work (the permutations are checked with
    the options, :class:`~evalprism.ecdf.options.EcdfOptions`)."""
    resolve_baseline(baseline, configurations, by)


def _pairs(configurations: list[str], baseline: str | None, notes: list[str]) -> list[tuple[str, str]]:
    if baseline is not None:
        return [(baseline, c) for c in configurations if c != baseline]
    n = len(configurations)
    n_pairs = n * (n - 1) // 2  # counted, never listed: 100,000 configurations make 5e9 pairs
    if n_pairs > MAX_ALL_PAIRS:
        notes.append(
            f"{n} configurations make {n_pairs} pairs: each was compared with the "
            f"first, '{configurations[0]}' (choose another with baseline=... / --baseline)"
        )
        return [(configurations[0], c) for c in configurations[1:]]
    return list(combinations(configurations, 2))


def compare_configurations(
    settings: pd.DataFrame,
    samples: list[np.ndarray],
    baseline: str | None,
    by: list[str],
    permutations: int,
    seed: int,
    notes: list[str],
    progress: bool = False,
    pooled: Sequence[str] = (),
) -> pd.DataFrame | None:
    """One row per pair of configurations (see the module docstring); None with one configuration.

    ``settings`` needs ``question_id``, ``configuration``, ``setting`` (index into ``samples``) and
    ``mean_score``, and ``correct`` for the accuracy columns. Pairs with no shared question are
    left out. ``progress`` shows one step per pair (a permutation test and a bootstrap each).
    ``pooled``: columns whose values (models, sources) are pooled within each setting; the permutation
    test then treats responses of different sources as exchangeable, which makes it conservative, and
    each such pair says so in ``distribution_test`` (and the notes once).
    """
    configurations = list(dict.fromkeys(settings["configuration"]))
    if len(configurations) < 2:
        return None
    base = resolve_baseline(baseline, configurations, by)
    pairs = _pairs(configurations, base, notes)
    if len(pairs) > MAX_COMPARED_PAIRS:
        notes.append(
            f"paired comparisons skipped: {len(configurations)} configurations make {len(pairs)} pairs even "
            f"against one baseline, more than {MAX_COMPARED_PAIRS} (each a permutation test and a "
            "bootstrap); compare fewer configurations (fewer by / --by columns, or a subset of the table)"
        )
        return None
    settings = _scores_as_correctness(settings, samples, notes)
    judged = "correct" in settings.columns
    table = settings.set_index(["configuration", "question_id"])
    per_conf = {c: table.loc[c] for c in dict.fromkeys(c for pair in pairs for c in pair)}
    rows = []
    with progress_bar(
        f"paired comparisons of the configurations ({permutations} permutations each)", len(pairs), progress
    ) as bar:
        for i, (a, b) in enumerate(pairs):
            row = _compare_pair(per_conf[a], per_conf[b], a, b, samples, judged, permutations, seed + i, seed)
            if row is not None:
                rows.append(row)
            bar.update(1)
    if not rows:
        return None
    out = pd.DataFrame(rows)
    if pooled:
        caveat = pooled_caveat(pooled)
        ran = out["p_distribution"].notna()
        out.loc[ran, "distribution_test"] = f"within-question permutation, {caveat}"
        if ran.any():
            notes.append(f"distribution tests: {caveat}")
    for name in ["p_distribution", "p_score", "p_accuracy"]:
        if name in out.columns:
            out.insert(out.columns.get_loc(name) + 1, f"{name}_adjusted", bh_adjust(out[name].to_numpy(float)))
    return out


def pooled_caveat(pooled: Sequence[str]) -> str:
    """What pooling sources under one configuration does to the within-question permutation test."""
    cols = ", ".join(pooled)
    return (
        f"conservative: the responses of several {cols} values are pooled under each configuration and "
        "permuted one by one as if exchangeable, so the differences between those sources widen the null "
        "distribution and p is too large; read the paired score and McNemar tests, or add "
        f"--by {' --by '.join(pooled)} to compare the sources themselves"
    )


def _scores_as_correctness(settings: pd.DataFrame, samples: list[np.ndarray], notes: list[str]) -> pd.DataFrame:
    """With no judged final answers but one 0/1 score per setting (a correctness table: greedy runs
    scored right or wrong), the score is the correctness, so McNemar applies to it."""
    if "correct" in settings.columns or any(samples[j].size != 1 for j in settings["setting"]):
        return settings
    if not settings["mean_score"].isin([0.0, 1.0]).all():
        return settings
    notes.append(
        "one 0/1 score per question and configuration: accuracy is that score, compared by the exact McNemar test"
    )
    return settings.assign(correct=settings["mean_score"] == 1.0)


def bh_adjust(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values over the tests that were run; NaN (not applicable) stays NaN
    and does not count as a test."""
    out = np.full(p.shape, np.nan)
    ran = ~np.isnan(p)
    if ran.any():
        out[ran] = false_discovery_control(p[ran])
    return out


def mcnemar_binomtest(correct_a: np.ndarray, correct_b: np.ndarray) -> tuple[int, int, float]:
    """Questions right only under A, right only under B, and the exact two-sided McNemar p-value:
    ``scipy.stats.binomtest`` of the B-only count among the discordant questions at 1/2 (1 with none)."""
    a, b = np.asarray(correct_a, dtype=bool), np.asarray(correct_b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    if only_a + only_b == 0:
        return only_a, only_b, 1.0
    return only_a, only_b, float(binomtest(only_b, only_a + only_b, 0.5).pvalue)


def distribution_test_applicability(n_a: np.ndarray, n_b: np.ndarray, a: str, b: str, permutations: int) -> str | None:
    """Why the within-question permutation test of mean W1 cannot tell anything for this pair, or None
    when it can: one response per question on a side, or too few distinct relabellings to reach
    p < :data:`ALPHA`."""
    for name, n in ((a, n_a), (b, n_b)):
        single = int((n < 2).sum())
        if single >= SINGLE_RESPONSE_SHARE * n.size:
            return (
                f"not applicable: '{name}' has one response on {single} of {n.size} questions (greedy "
                "decoding?); exchanging the labels of single responses leaves W1 unchanged, so p = 1 by "
                "construction"
            )
    if permutation_design(n_a, n_b) < np.log10(1 / ALPHA):
        return (
            f"not applicable: {n_a.size} questions with {int(n_a.sum())} + {int(n_b.sum())} responses allow "
            f"too few distinct relabellings to reach p < {ALPHA}"
        )
    return None


def _compare_pair(
    table_a: pd.DataFrame,
    table_b: pd.DataFrame,
    a: str,
    b: str,
    samples: list[np.ndarray],
    judged: bool,
    permutations: int,
    seed: int,
    bootstrap_seed: int,
) -> dict[str, object] | None:
    """One row of :func:`compare_configurations`: configurations ``a`` and ``b`` on their shared
    questions (None when they share none); ``seed`` is the pair's own (its permutations);
    ``bootstrap_seed`` is shared by all pairs, so pairs on the same questions resample the same ones
    and the resampling counts are drawn once (:func:`~evalprism.stats.paired.bootstrap_mean_ci`)."""
    shared = table_a.index.intersection(table_b.index, sort=False)
    if not len(shared):
        return None
    sa, sb = table_a.loc[shared], table_b.loc[shared]
    a_samples, b_samples = [samples[j] for j in sa["setting"]], [samples[j] for j in sb["setting"]]
    n_a = np.array([x.size for x in a_samples])
    n_b = np.array([x.size for x in b_samples])
    why_not = distribution_test_applicability(n_a, n_b, a, b, permutations)
    if why_not is None:
        w1, p_dist = paired_w1_test(a_samples, b_samples, permutations=permutations, seed=seed)
    else:  # W1 itself is still a description of the two samples; only its test says nothing
        w1, _ = paired_w1_test(a_samples, b_samples, permutations=0, seed=seed)
        p_dist = float("nan")
    score_diff = sb["mean_score"].to_numpy(float) - sa["mean_score"].to_numpy(float)
    _, score_se, _, _ = paired_mean_se(score_diff)
    columns = [w1, score_diff]
    row = {
        "configuration_a": a,
        "configuration_b": b,
        "n_questions": len(shared),
        "mean_w1": float(w1.mean()),
        "distribution_test": why_not or "within-question permutation",
        "p_distribution": p_dist,
        "mean_score_a": float(sa["mean_score"].mean()),
        "mean_score_b": float(sb["mean_score"].mean()),
        "score_difference": float(score_diff.mean()),
        "score_difference_se": score_se,
        "p_score": sign_flip_test(score_diff, permutations, seed=seed),
        "n_questions_differ": int(np.count_nonzero(score_diff)),
    }
    if judged:
        ca, cb = sa["correct"].to_numpy(float), sb["correct"].to_numpy(float)
        # a tied majority vote is right by a share (its expected value): McNemar reads decided questions only
        decided = np.isin(ca, (0.0, 1.0)) & np.isin(cb, (0.0, 1.0))
        only_a, only_b, p_acc = mcnemar_binomtest(ca[decided] == 1, cb[decided] == 1)
        columns.append(cb - ca)
        row.update(
            {
                "accuracy_a": float(ca.mean()),
                "accuracy_b": float(cb.mean()),
                "accuracy_difference": float(cb.mean() - ca.mean()),
                "n_right_only_a": only_a,
                "n_right_only_b": only_b,
                "n_tied_votes": int((~decided).sum()),
                "p_accuracy": p_acc,
            }
        )
    ci = bootstrap_mean_ci(np.column_stack(columns), BOOTSTRAP_RESAMPLES, seed=bootstrap_seed)
    for name, (lo, hi) in zip(["mean_w1", "score_difference", "accuracy_difference"], ci, strict=False):
        row[f"{name}_low"], row[f"{name}_high"] = float(lo), float(hi)
    return row


def format_p(p: float, permutations: int | None = None) -> str:
    """A p-value as the report prints it; at the floor of a permutation test (no permutation reached
    the observed statistic) as a bound, "p ≤ 0.001" with 999 permutations."""
    floor = 1 / (1 + permutations) if permutations else 0.0
    if p <= floor * (1 + 1e-9):
        return f"p ≤ {floor:.2g}"
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def distribution_applicable(row: pd.Series) -> bool:
    """Whether the pair's distribution test was run (and its p-value means something)."""
    return bool(pd.notna(row.get("p_distribution")))


def pair_sentence(row: pd.Series, permutations: int) -> str:
    """One comparison in words: the distributions (or why their test cannot tell), the mean score
    (paired sign-flip test) and the accuracy (McNemar); each difference is called one only when its
    BH-adjusted p-value is below :data:`ALPHA`."""
    head = f"'{row['configuration_a']}' vs '{row['configuration_b']}' ({row['n_questions']} questions): "
    if distribution_applicable(row):
        differ = row["p_distribution_adjusted"] < ALPHA
        conservative = "conservative" in str(row.get("distribution_test", ""))
        verdict = (
            "differ"
            if differ
            else (
                "cannot be told apart by this test: with sources pooled it is conservative (pooling can push "
                "p up to 1 whatever the configurations do), so its p says nothing against a difference"
                if conservative
                else "not significantly different"
            )
        )
        text = (
            head + f"response-quality distributions {verdict}, "
            f"mean W1 {row['mean_w1']:.3f} [{row['mean_w1_low']:.3f}, {row['mean_w1_high']:.3f}], "
            f"{format_p(row['p_distribution_adjusted'], permutations)}"
        )
    else:
        text = head + f"distribution test {str(row['distribution_test']).split(';')[0]}"  # the why is in the CSV
    se = f", SE {row['score_difference_se']:.3f}" if pd.notna(row.get("score_difference_se")) else ""
    differ = row.get("n_questions_differ")
    score_floor = sign_flip_floor(int(differ), permutations) if pd.notna(differ) else 0.0
    text += (
        f"; mean score {row['mean_score_a']:.3f} vs {row['mean_score_b']:.3f}, difference (b − a) "
        f"{row['score_difference']:+.3f} [{row['score_difference_low']:.3f}, {row['score_difference_high']:.3f}]{se} "
        f"({_test_says(row['p_score_adjusted'], score_floor, differ)}, paired sign-flip "
        f"{format_p(row['p_score_adjusted'], permutations)})"
    )
    if "accuracy_a" in row and pd.notna(row.get("accuracy_a")):
        discordant = int(row["n_right_only_a"] + row["n_right_only_b"])
        text += (
            f"; accuracy {row['accuracy_a']:.2f} vs {row['accuracy_b']:.2f} "
            f"({_test_says(row['p_accuracy_adjusted'], sign_test_floor(discordant), discordant)}, McNemar "
            f"{format_p(row['p_accuracy_adjusted'])} on {row['n_right_only_a']} + {row['n_right_only_b']} "
            "questions only one got right)"
        )
    return text + "."


def _test_says(p_adjusted: float, floor: float, differing: object) -> str:
    """What a paired test's adjusted p-value tells: a difference, none detected, or (when even the most
    extreme outcome on so few differing questions could not reach the level) that it cannot tell."""
    if p_adjusted < ALPHA:
        return "differs"
    if floor >= ALPHA:
        k = int(differing)  # type: ignore[call-overload]
        return f"the test cannot tell: only {k} question{'s differ' if k != 1 else ' differs'}"
    return "difference not significant"
