"""Several samples per item: the score an item gets under a k-sample rule, and each run's k-sample
scores with their standard errors (runs.csv).

A run answered each item ``samples`` times; with 0/1 scores its per-item mean times ``samples`` is the
number of right samples, from which :mod:`evalprism.stats.pass_at_k` gives each rule's unbiased
per-item value. ``compare --aggregate pass@4`` compares runs on those values instead of the per-item
mean; ``--at-k`` lists each run's mean over items of each rule (avg@k, the per-item mean, also for
scores between 0 and 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.stats.k_rules import SampleMetric, default_metrics, parse_metric
from evalprism.stats.pass_at_k import check_enough_samples, metric_summary


def right_samples(score: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """The right samples of each item from its mean 0/1 score over its samples."""
    return np.rint(np.asarray(score) * np.asarray(samples)).astype(np.int64)


def check_binary(rule: SampleMetric, binary: bool, runs: Sequence[str]) -> None:
    """pass@k, maj@k and G-Pass@k count right samples: they need every score 0 or 1."""
    if rule.kind != "avg" and not binary:
        raise EvalprismError(
            f"{rule.name} counts right samples, so it needs every score 0 or 1; the scores of "
            f"{', '.join(runs)} include values between (use mean, or avg@k)",
            parameter="aggregate",
        )


def k_sample_scores(
    rule_text: str, scores: list[np.ndarray], samples: list[np.ndarray], runs: Sequence[str], binary: bool
) -> list[np.ndarray]:
    """Each run's per-item value under the k-sample rule ``rule_text`` (refused above the samples an item
    has, and for a counting rule on scores that are not 0/1)."""
    rule = parse_metric(rule_text)
    check_binary(rule, binary, runs)
    out = []
    for name, score, n in zip(runs, scores, samples, strict=True):
        check_enough_samples(rule, n, f"run '{name}'")
        out.append(rule_values(rule, score, n))
    return out


def rule_values(rule: SampleMetric, score: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """One run's per-item values under ``rule`` (avg@k: the per-item mean, whatever the scores)."""
    from evalprism.stats.pass_at_k import item_values

    if rule.kind == "avg":
        return np.asarray(score, dtype=np.float64)
    return item_values(rule, samples, right_samples(score, samples))


def default_rules(samples: list[np.ndarray], binary: bool) -> tuple[str, ...]:
    """The rules reported when none are asked for (:func:`~evalprism.stats.pass_at_k.default_metrics`
    for the fewest samples any item of any run has)."""
    return default_metrics(min((int(n.min()) for n in samples if len(n)), default=1), binary)


def runs_table(
    rules: Sequence[str], scores: list[np.ndarray], samples: list[np.ndarray], runs: Sequence[str], binary: bool
) -> pd.DataFrame | None:
    """runs.csv: per run and rule, the mean over items of the rule's per-item values, its standard error
    over items, the items and the fewest samples an item had (None without a rule)."""
    if not rules:
        return None
    rows = []
    for text in rules:
        rule = parse_metric(text)
        check_binary(rule, binary, runs)
        for name, score, n in zip(runs, scores, samples, strict=True):
            check_enough_samples(rule, n, f"run '{name}'")
            if rule.kind == "avg":
                values = np.asarray(score, dtype=np.float64)
                se = float(values.std(ddof=1) / np.sqrt(len(values))) if len(values) > 1 else np.nan
                rows.append((name, rule.name, float(values.mean()), se, len(values), int(n.min())))
                continue
            s = metric_summary(rule, n, right_samples(score, n))
            rows.append((name, rule.name, s.value, s.standard_error, s.items, s.fewest_samples))
    return pd.DataFrame(rows, columns=["run", "rule", "value", "se", "items", "fewest_samples"])
