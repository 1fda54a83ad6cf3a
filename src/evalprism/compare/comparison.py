"""One row of comparisons.csv: a pair of runs on one benchmark (or on all of them), what the items
tell about B - A, and the sentence that says it.

:class:`Comparison`'s field order is the CSV's column order: the table is built from the fields, so
a column is added, renamed or moved in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

ALPHA = 0.05
NAN = float("nan")


@dataclass(frozen=True)
class Comparison:
    """B - A on the items both runs answered in one scope (a benchmark, or ``all``), on the 0..1 scale.

    ``items``: items both answered, ``samples`` the median samples per item of both runs; ``only_a`` / ``only_b``: items one run answered (left out);
    ``se`` the paired (or cluster-robust) SE, ``se_naive`` the SE if items were independent, ``se_unpaired`` the SE of two independent means on
    the same items (what pairing saves: compare it with ``se_naive``), ``ci_*``
    the 95% t interval cut to [-1, 1]; ``test`` the paired test (empty when it cannot run), ``differing``
    the items (clusters) whose difference is not zero and ``p_floor`` the smallest p the test can reach
    on them; ``p_adj`` the p corrected across the pairs of this scope (NaN until :meth:`adjusted`);
    ``df`` the t degrees of freedom of the interval (clusters - 1, or items - 1);
    ``mde`` the minimum detectable effect and ``items_needed`` the items to detect the chosen effect;
    ``resolution`` the resolution ratio N / N*: items compared over items needed to detect the observed
    difference (below 1: unresolved; :class:`~evalprism.stats.noise_plan.NoisePlan`);
    ``var_*`` the variance of the item differences and its within-item and between-item parts;
    ``verdict`` what the test can tell, in words (empty until :meth:`adjusted`: it needs ``p_adj``)."""

    run_a: str
    run_b: str
    benchmark: str
    items: int
    samples: float
    only_a: int
    only_b: int
    mean_a: float
    mean_b: float
    difference: float
    se: float
    ci_low: float
    ci_high: float
    se_naive: float
    se_unpaired: float
    clusters: int
    df: int
    test: str
    differing: int
    p_floor: float
    p: float
    p_adj: float
    mde: float
    items_needed: float  # an int where it is defined (NaN where not)
    resolution: float
    var_total: float
    var_within: float
    var_between: float
    verdict: str

    @classmethod
    def no_common_items(cls, run_a: str, run_b: str, benchmark: str, only_a: int, only_b: int) -> Comparison:
        """The row of a scope where no item was answered by both runs: counts only, nothing to test."""
        return cls(
            run_a=run_a,
            run_b=run_b,
            benchmark=benchmark,
            items=0,
            samples=NAN,
            only_a=only_a,
            only_b=only_b,
            mean_a=NAN,
            mean_b=NAN,
            difference=NAN,
            se=NAN,
            ci_low=NAN,
            ci_high=NAN,
            se_naive=NAN,
            se_unpaired=NAN,
            clusters=0,
            df=0,
            test="",
            differing=0,
            p_floor=NAN,
            p=NAN,
            p_adj=NAN,
            mde=NAN,
            items_needed=NAN,
            resolution=NAN,
            var_total=NAN,
            var_within=NAN,
            var_between=NAN,
            verdict="",
        )

    def adjusted(self, p_adj: float) -> Comparison:
        """This row with its corrected p and, now that it is known, its verdict."""
        row = dataclasses.replace(self, p_adj=p_adj)
        return dataclasses.replace(row, verdict=verdict(row))


def comparison_table(rows: Sequence[Comparison]) -> pd.DataFrame:
    """comparisons.csv: one column per field of :class:`Comparison`, in field order."""
    return pd.DataFrame({f.name: [getattr(r, f.name) for r in rows] for f in dataclasses.fields(Comparison)})


def _points(x: float) -> str:
    return f"{100 * x:.1f}"


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _interval(r: Comparison) -> str:
    """``B - A = +d [low, high]`` in points."""
    return f"{r.run_b} - {r.run_a} = {float(_points(r.difference)):+.1f} [{_points(r.ci_low)}, {_points(r.ci_high)}]"


def _cannot_tell(r: Comparison) -> str:
    """No outcome of these items could reach the level: the test cannot tell, and says why."""
    clustered = r.test.endswith("(clusters)")
    k = r.differing
    only = f"only {k:,}" if k else "none"
    caveat = ""
    if r.ci_low > 0 or r.ci_high < 0:  # a t interval on so few items is a large-sample approximation
        units = f"{r.clusters:,} clusters" if clustered else f"{r.items:,} items"
        caveat = f"; the t interval leaves out 0, but {units} are too few for it: the test decides"
    return (
        f"the items cannot tell: {only} of the {r.clusters if clustered else r.items:,} "
        f"{'clusters' if clustered else 'items'} {'differs' if k == 1 else 'differ'} between {r.run_a} and "
        f"{r.run_b}, too few for the test to reach p < {ALPHA} (its smallest possible p is {_p(r.p_floor)}; "
        f"{_interval(r)}{caveat})"
    )


def verdict(r: Comparison) -> str:
    """What the test can tell about B - A (:func:`_verdict`), saying so when it rests on fewer than half
    of the items either run answered (the rest answered by one run only)."""
    said = _verdict(r)
    union = r.items + r.only_a + r.only_b
    if r.items > 0 and 2 * r.items < union:
        said += f" (on {r.items:,} of the {union:,} items; the other {union - r.items:,} were answered by one run only)"
    return said


def _verdict(r: Comparison) -> str:
    """A difference with its interval and adjusted p; "the items cannot tell" when ``p_floor`` is at or
    above the level; else "no difference detectable" with the MDE (never "not significantly different")."""
    a, b, n = r.run_a, r.run_b, r.items
    if n == 0:
        return f"no item both {a} and {b} answered" + ("" if r.benchmark == "all" else " on this benchmark")
    if n >= 2 and r.clusters == 1 and r.test.endswith("(clusters)"):
        return (
            f"cannot tell: the {n:,} items in common form one cluster, and a cluster-robust interval needs at "
            "least two (items of one cluster are not independent evidence)"
        )
    if n < 2 or not np.isfinite(r.se):
        return f"too few items in common to tell (n = {n})"
    if r.difference == 0 and r.se == 0:
        return f"{b} and {a} score the same on every one of the {n:,} items"
    if r.p_floor >= ALPHA:
        return _cannot_tell(r)
    if r.p_adj < ALPHA:
        side = "better" if r.difference > 0 else "worse"
        return (
            f"{b} is {_points(abs(r.difference))} points {side} than {a} "
            f"[{_points(r.ci_low)}, {_points(r.ci_high)}], p_adj = {_p(r.p_adj)}"
        )
    if r.p < ALPHA:  # the test alone would tell, the correction for several pairs does not
        return (
            f"no difference detectable after correcting for several pairs: the MDE is {_points(r.mde)} "
            f"points ({_interval(r)}, p = {_p(r.p)} but p_adj = {_p(r.p_adj)})"
        )
    return f"no difference detectable: the MDE is {_points(r.mde)} points ({_interval(r)}, p_adj = {_p(r.p_adj)})"
