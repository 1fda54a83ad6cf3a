"""A release gate: is the candidate no worse than the baseline by more than a margin?

Non-inferiority with margin M on the paired mean difference d = candidate - baseline (in the score's
units), from its estimate, standard error and t degrees of freedom (clustered where the items are):

- ``pass``: the one-sided lower bound ``d - t_{1-α} SE`` lies above ``-M``: the candidate is shown to be
  no worse than the baseline by more than M (H0: d <= -M rejected at level α);
- ``regression``: the one-sided upper bound ``d + t_{1-α} SE`` lies below ``-M``: shown worse by more
  than the margin;
- ``cannot tell``: neither; the items cannot decide at this margin (the interval holds -M).

Under a true difference of exactly -M the gate passes with probability at most α (its type-I error,
checked on planted nulls in the tests). The exit codes are what a CI step reads: 0 pass, 1 regression,
3 cannot tell (2 stays evalprism's code for bad input).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from evalprism.stats.compare_tests import t_quantile

GateVerdict = Literal["pass", "regression", "cannot tell"]
#: the process exit code of each verdict (2 is bad input, as for every command)
EXIT_CODES: dict[GateVerdict, int] = {"pass": 0, "regression": 1, "cannot tell": 3}


@dataclass(frozen=True)
class GateResult:
    """One candidate against the baseline: the mean difference and its one-sided (1 - α) bounds,
    the margin and level, and the verdict."""

    candidate: str
    baseline: str
    difference: float
    lower: float
    upper: float
    margin: float
    alpha: float
    verdict: GateVerdict

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression, 3 cannot tell."""
        return EXIT_CODES[self.verdict]

    def sentence(self, points: float = 100.0) -> str:
        """The verdict in words, in points (``points`` converts a 0..1 scale)."""
        d, lo, hi, m = (x * points for x in (self.difference, self.lower, self.upper, self.margin))
        bounds = f"difference {d:+.1f} points, one-sided {1 - self.alpha:.0%} bounds [{lo:+.1f}, {hi:+.1f}]"
        if self.verdict == "pass":
            return f"pass: {self.candidate} is no worse than {self.baseline} by more than {m:g} points ({bounds})"
        if self.verdict == "regression":
            return f"regression: {self.candidate} is worse than {self.baseline} by more than {m:g} points ({bounds})"
        return (
            f"cannot tell: the items cannot decide whether {self.candidate} is worse than {self.baseline} "
            f"by more than {m:g} points ({bounds})"
        )


def non_inferiority(
    candidate: str, baseline: str, difference: float, se: float, df: int, margin: float, alpha: float = 0.05
) -> GateResult:
    """The gate's verdict (module docstring) from the paired difference candidate - baseline, its
    standard error and t degrees of freedom; ``margin`` >= 0 in the score's units."""
    assert margin >= 0 and 0 < alpha < 0.5
    t = t_quantile(1 - alpha, df) if df >= 1 and math.isfinite(se) else math.nan
    lower, upper = difference - t * se, difference + t * se
    verdict: GateVerdict = "cannot tell"
    if lower > -margin:
        verdict = "pass"
    elif upper < -margin:
        verdict = "regression"
    return GateResult(candidate, baseline, difference, lower, upper, margin, alpha, verdict)
