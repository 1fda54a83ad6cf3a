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
import re
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import hypergeom

from evalprism.errors import EvalprismError

MetricKind = Literal["pass", "avg", "maj", "gpass"]
#: how a metric is written: ``pass@4``, ``avg@8``, ``maj@5``, ``gpass@8:0.75`` (τ after the colon)
_SPELLING = re.compile(r"^(pass|avg|maj|gpass)@(\d+)(?::(0?\.\d+|1(?:\.0*)?))?$")


@dataclass(frozen=True)
class SampleMetric:
    """One k-sample metric: its ``kind``, its ``k`` and, for G-Pass@k, the share ``tau`` of the k
    samples that must be right."""

    kind: MetricKind
    k: int
    tau: float | None = None

    @property
    def name(self) -> str:
        """The metric as written on the command line and in tables: ``pass@4``, ``gpass@8:0.75``."""
        return f"{self.kind}@{self.k}" + (f":{self.tau:g}" if self.tau is not None else "")

    def at_least(self) -> int:
        """The fewest right samples among the k that count as a success (pass: 1, maj: a strict
        majority, gpass: ⌈τ k⌉); avg has none (it is a mean, not a tail)."""
        if self.kind == "pass":
            return 1
        if self.kind == "maj":
            return self.k // 2 + 1
        if self.kind == "gpass":
            assert self.tau is not None
            return max(1, math.ceil(self.tau * self.k - 1e-12))
        raise AssertionError(self.kind)


def parse_metric(text: str) -> SampleMetric:
    """``pass@4``, ``avg@8``, ``maj@5`` or ``gpass@8:0.75`` as a :class:`SampleMetric`; anything else,
    an even k for maj@k, or a G-Pass without its τ in (0, 1] is refused with the spelling expected."""
    match = _SPELLING.match(text.strip())
    if match is None:
        raise EvalprismError(
            f"score {text!r}: expected pass@K, avg@K, maj@K (K odd) or gpass@K:TAU (TAU in (0, 1]), e.g. pass@4"
        )
    kind, k, tau = match.group(1), int(match.group(2)), match.group(3)
    if k < 1:
        raise EvalprismError(f"score {text!r}: k must be at least 1")
    if kind == "maj" and k % 2 == 0:
        raise EvalprismError(
            f"score {text!r}: maj@k needs an odd k (an even k ties at k/2, and the tie-break would decide)"
        )
    if (kind == "gpass") != (tau is not None):
        raise EvalprismError(f"score {text!r}: only gpass takes a threshold, written gpass@K:TAU (e.g. gpass@8:0.75)")
    value = None if tau is None else float(tau)
    if value is not None and not 0 < value <= 1:
        raise EvalprismError(f"score {text!r}: the threshold TAU must be in (0, 1]")
    return SampleMetric(kind, k, value)  # type: ignore[arg-type]


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


def default_metrics(fewest: int, binary: bool) -> tuple[str, ...]:
    """The metrics reported when none are asked for: pass@1, pass@K, maj@K' and avg@K for the fewest
    samples K an item has (K' the largest odd K' <= K); none with one sample per item; scores between 0
    and 1: avg@K only (the others count right samples)."""
    if fewest < 2:
        return ()
    if not binary:
        return (f"avg@{fewest}",)
    odd = fewest if fewest % 2 else fewest - 1
    return ("pass@1", f"pass@{fewest}", f"maj@{odd}", f"avg@{fewest}")
