"""How a k-sample rule is written and read (``pass@4``, ``maj@5``, ``gpass@8:0.75``) and which rules are
reported by default; no numpy here, so an options class can check a rule before any heavy import
(:mod:`evalprism.stats.pass_at_k` computes them)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

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
