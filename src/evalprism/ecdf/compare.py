"""Do two configurations really differ? Paired comparisons over shared questions (issue 18, section 2).

For each pair of configurations (every pair, or each against a baseline), over the questions both
answered: the mean per-question W1 distance between their ECDFs (eq. 4-5) with its within-question
label-permutation p-value, the mean score difference, and, when final answers were judged (eq. 6),
the accuracy difference with the exact McNemar (sign) test. Question-level bootstrap intervals for
the three differences; Benjamini-Hochberg adjusted p-values across the pairs, each test family
apart (``scipy.stats.false_discovery_control``).
"""

from __future__ import annotations

import re
from itertools import combinations

import numpy as np
import pandas as pd
from scipy.stats import false_discovery_control

from evalprism.errors import EvalprismError
from evalprism.progress import progress_bar
from evalprism.stats.paired import bootstrap_mean_ci, mcnemar_exact, paired_w1_test

#: more pairs than this and no baseline: each configuration against the first one
MAX_ALL_PAIRS = 300
#: more pairs than this even against one baseline and the comparisons are skipped, said in the notes:
#: each pair runs a permutation test and a bootstrap (about 10 ms), so 100,000 configurations would
#: spend hours on a side table while the clustering itself scales (CLARA-style above CLARA_ABOVE)
MAX_COMPARED_PAIRS = 2000
#: the level at which a difference is called significant in the report (BH-adjusted)
ALPHA = 0.05
BOOTSTRAP_RESAMPLES = 2000


def _label_parts(label: str) -> frozenset[str]:
    return frozenset(p.strip() for p in re.split(r"[·,]", label) if p.strip())


def resolve_baseline(baseline: str | None, configurations: list[str], by: list[str]) -> str | None:
    """The configuration named by ``baseline``: its label (``temperature=0.0``, parts in any order,
    separated by ``,`` or ``·``) or, with one ``by`` column, its value (``0.0``)."""
    if baseline is None:
        return None
    wanted = _label_parts(baseline)
    for conf in configurations:
        if _label_parts(conf) == wanted or (len(by) == 1 and conf == f"{by[0]}={baseline.strip()}"):
            return conf
    shown = ", ".join(configurations[:8]) + (", ..." if len(configurations) > 8 else "")
    raise EvalprismError(f"baseline '{baseline}': no such configuration (configurations: {shown})",
                         parameter="baseline")


def check_comparison_options(baseline: str | None, permutations: int, configurations: list[str],
                             by: list[str]) -> None:
    """Refuse a baseline that names no configuration, or fewer than one permutation, before any work."""
    if isinstance(permutations, bool) or not isinstance(permutations, int | np.integer) or permutations < 1:
        raise EvalprismError(f"permutations {permutations}: expected a whole number of at least 1 (999 resolves "
                             "p = 0.001)", parameter="permutations")
    resolve_baseline(baseline, configurations, by)


def _pairs(configurations: list[str], baseline: str | None, notes: list[str]) -> list[tuple[str, str]]:
    if baseline is not None:
        return [(baseline, c) for c in configurations if c != baseline]
    n = len(configurations)
    n_pairs = n * (n - 1) // 2  # counted, never listed: 100,000 configurations make 5e9 pairs
    if n_pairs > MAX_ALL_PAIRS:
        notes.append(f"{n} configurations make {n_pairs} pairs: each was compared with the "
                     f"first, '{configurations[0]}' (choose another with baseline=... / --baseline)")
        return [(configurations[0], c) for c in configurations[1:]]
    return list(combinations(configurations, 2))


def compare_configurations(settings: pd.DataFrame, samples: list[np.ndarray], baseline: str | None,
                           by: list[str], permutations: int, seed: int, notes: list[str],
                           progress: bool = False) -> pd.DataFrame | None:
    """One row per pair of configurations (see the module docstring); None with one configuration.

    ``settings`` needs ``question_id``, ``configuration``, ``setting`` (index into ``samples``) and
    ``mean_score``, and ``correct`` for the accuracy columns. Pairs with no shared question are
    left out. ``progress`` shows one step per pair (a permutation test and a bootstrap each).
    """
    configurations = list(dict.fromkeys(settings["configuration"]))
    if len(configurations) < 2:
        return None
    base = resolve_baseline(baseline, configurations, by)
    pairs = _pairs(configurations, base, notes)
    if len(pairs) > MAX_COMPARED_PAIRS:
        notes.append(f"paired comparisons skipped: {len(configurations)} configurations make {len(pairs)} pairs even "
                     f"against one baseline, more than {MAX_COMPARED_PAIRS} (each a permutation test and a "
                     "bootstrap); compare fewer configurations (fewer by / --by columns, or a subset of the table)")
        return None
    judged = "correct" in settings.columns
    table = settings.set_index(["configuration", "question_id"])
    per_conf = {c: table.loc[c] for c in dict.fromkeys(c for pair in pairs for c in pair)}
    rows = []
    with progress_bar(f"paired comparisons of the configurations ({permutations} permutations each)", len(pairs), progress) as bar:
        for i, (a, b) in enumerate(pairs):
            row = _compare_pair(per_conf[a], per_conf[b], a, b, samples, judged, permutations, seed + i)
            if row is not None:
                rows.append(row)
            bar.update(1)
    if not rows:
        return None
    out = pd.DataFrame(rows)
    out.insert(out.columns.get_loc("p_distribution") + 1, "p_distribution_adjusted",
               false_discovery_control(out["p_distribution"].to_numpy()))
    if judged:
        out.insert(out.columns.get_loc("p_accuracy") + 1, "p_accuracy_adjusted",
                   false_discovery_control(out["p_accuracy"].to_numpy()))
    return out


def _compare_pair(table_a: pd.DataFrame, table_b: pd.DataFrame, a: str, b: str, samples: list[np.ndarray],
                  judged: bool, permutations: int, seed: int) -> dict[str, object] | None:
    """One row of :func:`compare_configurations`: configurations ``a`` and ``b`` on their shared
    questions (None when they share none); ``seed`` is the pair's own."""
    shared = table_a.index.intersection(table_b.index, sort=False)
    if not len(shared):
        return None
    sa, sb = table_a.loc[shared], table_b.loc[shared]
    w1, p_dist = paired_w1_test([samples[j] for j in sa["setting"]], [samples[j] for j in sb["setting"]],
                                permutations=permutations, seed=seed)
    score_diff = sb["mean_score"].to_numpy(float) - sa["mean_score"].to_numpy(float)
    columns = [w1, score_diff]
    row = {"configuration_a": a, "configuration_b": b, "n_questions": len(shared),
           "mean_w1": float(w1.mean()), "p_distribution": p_dist,
           "mean_score_a": float(sa["mean_score"].mean()), "mean_score_b": float(sb["mean_score"].mean()),
           "score_difference": float(score_diff.mean())}
    if judged:
        ca, cb = sa["correct"].to_numpy(bool), sb["correct"].to_numpy(bool)
        only_a, only_b, p_acc = mcnemar_exact(ca, cb)
        columns.append(cb.astype(float) - ca.astype(float))
        row.update({"accuracy_a": float(ca.mean()), "accuracy_b": float(cb.mean()),
                    "accuracy_difference": float(cb.mean() - ca.mean()), "n_right_only_a": only_a,
                    "n_right_only_b": only_b, "p_accuracy": p_acc})
    ci = bootstrap_mean_ci(np.column_stack(columns), BOOTSTRAP_RESAMPLES, seed=seed)
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


def pair_sentence(row: pd.Series, permutations: int) -> str:
    """One comparison in words, the distributions first: each difference is called one only when its
    BH-adjusted p-value is below :data:`ALPHA`."""
    differ = row["p_distribution_adjusted"] < ALPHA
    text = (f"'{row['configuration_a']}' vs '{row['configuration_b']}' ({row['n_questions']} questions): "
            f"response-quality distributions {'differ' if differ else 'not significantly different'}, mean W1 "
            f"{row['mean_w1']:.3f} [{row['mean_w1_low']:.3f}, {row['mean_w1_high']:.3f}], "
            f"{format_p(row['p_distribution_adjusted'], permutations)}; mean score {row['mean_score_a']:.3f} vs "
            f"{row['mean_score_b']:.3f}")
    if "accuracy_a" in row and pd.notna(row.get("accuracy_a")):
        same = row["p_accuracy_adjusted"] >= ALPHA
        text += (f"; accuracy {row['accuracy_a']:.2f} vs {row['accuracy_b']:.2f} "
                 f"({'difference not significant' if same else 'differs'}, McNemar "
                 f"{format_p(row['p_accuracy_adjusted'])})")
    return text + "."
