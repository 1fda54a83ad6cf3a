"""Each configuration's k-sample scores: pass@k, maj@k and avg@k over its questions (seed 001's
settings hold many responses per question; a user asks how often k of them get it right).

A setting (question x configuration) has n responses of which c are right, where "right" is a
response's 0/1 quality (the exact or contains score, or a 0/1 score column). Per configuration, each
metric's unbiased per-question value (:mod:`evalprism.stats.pass_at_k`) is averaged over its questions,
with its standard error over questions. maj@k here is "most of k responses right"; the ``final="majority"``
answer is the vote over the answers themselves, a different thing the settings table reports.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalprism.stats.k_rules import default_metrics, parse_metric
from evalprism.stats.pass_at_k import metric_summary


def k_sample_table(settings: pd.DataFrame, samples: list[np.ndarray]) -> pd.DataFrame | None:
    """One row per configuration and metric (value, SE, questions, fewest responses), the metrics
    :func:`~evalprism.stats.pass_at_k.default_metrics` picks for the fewest responses a setting has;
    None when each setting has one response, or when the quality is not 0/1 (then avg@k is the mean
    score, which the settings table already has)."""
    n = np.array([samples[j].size for j in settings["setting"]])
    binary = all(np.isin(samples[j], (0.0, 1.0)).all() for j in settings["setting"])
    metrics = default_metrics(int(n.min()) if len(n) else 1, binary) if binary else ()
    if not metrics:
        return None
    right = np.array([int(samples[j].sum()) for j in settings["setting"]])
    rows = []
    for text in metrics:
        metric = parse_metric(text)
        for conf, at in settings.groupby("configuration", sort=False).indices.items():
            s = metric_summary(metric, n[at], right[at])
            rows.append((conf, s.metric, s.value, s.standard_error, s.items, s.fewest_samples))
    return pd.DataFrame(rows, columns=["configuration", "metric", "value", "se", "questions", "fewest_responses"])
