"""Scores of k samples per item from the n an item has: pass@k, avg@k, maj@k and G-Pass@k.

Each item was sampled n times and c of its samples are right (0/1 scores). A k-sample metric asks
what drawing k of them (without replacement, all subsets alike) gives; its unbiased estimate from
the n samples is the expectation over every k-subset, so the number of right samples in a k-subset
is hypergeometric, X ~ Hypergeom(population n, successes c, draws k):

- ``pass@k`` = P(X >= 1) = 1 - C(n-c, k) / C(n, k): Chen et al. (2021, "Evaluating large language
  models trained on code", eq. 1), the unbiased estimator that replaced 1 - (1 - c/n)^k.
- ``avg@k`` = E[X] / k = c / n: the mean of k samples (the same for every k <= n; its noise, not its
  value, depends on k).
- ``maj@k`` = P(X > k / 2): the majority of the k samples is right. With 0/1 scores only, a
  majority of right samples is the one vote outcome that is known; a plurality of one wrong answer
  among several is not. k must be odd: with an even k, a tie of k/2 right and k/2 wrong would be
  decided by whatever order breaks ties, and a verdict must not rest on that.
- ``G-Pass@k_τ`` = P(X >= ⌈τ k⌉): Liu et al. (2025, "Are your LLMs capable of stable reasoning?",
  ACL, eq. 3): at least a share τ of the k samples right; τ -> 0 gives pass@k, τ = 1 all k right.

Every metric is a per-item value; a run's metric is its mean over items, with the standard error of
that mean over items (:func:`metric_summary`), which is what :mod:`evalprism.compare` pairs across runs.
The tails come from ``scipy.stats.hypergeom`` (exact, and stable where the closed forms' binomial
coefficients overflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import hypergeom

from evalprism.errors import EvalprismError
from evalprism.stats.k_rules import SampleMetric


def item_values(metric: SampleMetric, samples: np.ndarray, right: np.ndarray) -> np.ndarray:
    """The metric's unbiased value per item from ``samples`` (n per item) of which ``right`` are right
    (module docstring). Every item needs at least k samples: the caller says which do not."""
    n = np.asarray(samples, dtype=np.int64)
    c = np.asarray(right, dtype=np.int64)
    assert n.shape == c.shape and (c >= 0).all() and (c <= n).all() and (n >= metric.k).all()
    if metric.kind == "avg":
        return c / n
    # P(X >= a) = sf(a - 1) of Hypergeom(M=n, n=c, N=k)
    return np.asarray(hypergeom.sf(metric.at_least() - 1, n, c, metric.k), dtype=np.float64)


@dataclass(frozen=True)
class MetricSummary:
    """A run's k-sample metric: its mean over ``items`` items, the standard error of that mean
    (items as the sampled units), and the fewest samples an item had."""

    metric: str
    value: float
    standard_error: float
    items: int
    fewest_samples: int


def metric_summary(metric: SampleMetric, samples: np.ndarray, right: np.ndarray) -> MetricSummary:
    """The mean of :func:`item_values` over items and its standard error (SD / sqrt(items), ddof 1)."""
    values = item_values(metric, samples, right)
    se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else math.nan
    return MetricSummary(metric.name, float(values.mean()), se, len(values), int(np.min(samples)))


def check_enough_samples(metric: SampleMetric, samples: np.ndarray, where: str) -> None:
    """Refuse a metric whose k is above the samples some item has (its unbiased value needs k of them)."""
    short = np.asarray(samples) < metric.k
    if short.any():
        raise EvalprismError(
            f"{where}: {metric.name} needs at least {metric.k} samples per item; {int(short.sum())} item(s) have "
            f"fewer (the fewest: {int(np.min(samples))}): choose k <= {int(np.min(samples))}"
        )
