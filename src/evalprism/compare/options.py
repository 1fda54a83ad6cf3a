"""The options of `evalprism compare`, declared once (:mod:`evalprism.io.options`). Importing this
module imports neither numpy nor pandas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evalprism.io.harness_options import HarnessOptions
from evalprism.io.options import Options, check_applies, group, option
from evalprism.io.response_options import ResponseOptions
from evalprism.vocabularies import Adjustment


def _aggregate(value: Any, name: str) -> str:
    """``mean`` or a k-sample rule (:func:`evalprism.stats.pass_at_k.parse_metric`), as written."""
    if value == "mean":
        return "mean"
    from evalprism.stats.k_rules import parse_metric

    return parse_metric(str(value)).name


def _rules(value: Any, name: str) -> tuple[str, ...]:
    """Each k-sample rule checked and written canonically."""
    from evalprism.stats.k_rules import parse_metric

    return tuple(parse_metric(str(v)).name for v in value)


@dataclass(frozen=True)
class CompareOptions(Options):
    """How :func:`evalprism.compare.compare_runs` compares runs: against a ``baseline`` run or all
    pairs, with items grouped by ``cluster`` (cluster-robust errors), the multiple-comparison
    correction, the sign-flip permutations, the ``effect`` whose items needed are reported, and how
    harness logs and ECDF responses files are read as runs."""

    baseline: str | None = option(
        None, help="Compare every run with this one (a model name) instead of all pairs.", metavar="NAME"
    )
    cluster: str | None = option(
        None,
        help="Column grouping items that are not independent (passage, template, question group): cluster-robust "
        "(CR1) standard errors and cluster sign-flips.",
        metavar="COL",
    )
    adjust: Adjustment = option(
        "bh", help="Multiple-comparison correction across pairs: bh (Benjamini-Hochberg) or holm."
    )
    permutations: int = option(9999, help="Sign flips per permutation test (scores not 0/1, or clustered).")
    effect: float = option(0.02, help="Difference (0..1 scale) whose items_needed is reported (0.02 = 2 points).")
    seed: int = option(0, help="Random seed.")
    aggregate: str = option(
        "mean",
        help="How an item's several samples become the score compared: mean (default), pass@K (at least one of K "
        "right, Chen et al.'s unbiased estimator), maj@K (most of K right; K odd) or gpass@K:TAU (at least a "
        "share TAU of K right). 0/1 scores only, except mean.",
        metavar="RULE",
        parse=_aggregate,
    )
    at_k: Sequence[str] = option(
        (),
        help="k-sample scores reported per run with their standard errors (runs.csv), e.g. pass@1, pass@8, maj@5, "
        "avg@8, gpass@8:0.75 (repeat; default with several samples per item: pass@1, pass@K, maj@K', avg@K for "
        "the fewest samples K an item has, K' the largest odd K' <= K).",
        metavar="RULE",
        parse=_rules,
    )
    confidence_set: float | None = option(
        None,
        help="Also give the model confidence set at this level (e.g. 0.9): the runs tied for best, with the order "
        "the others were eliminated in (Hansen, Lunde and Nason; arch's MCS over items).",
        metavar="LEVEL",
    )
    margin: float | None = option(
        None,
        help="Release gate against --baseline: exit 0 when each run is shown no worse than the baseline by more "
        "than MARGIN (0..1 scale, 0.01 = 1 point), 1 when one is shown worse by more, 3 when the items cannot "
        "tell; writes gate.csv and junit.xml and prints a CI annotation line per run.",
        metavar="MARGIN",
    )
    gate_alpha: float = option(0.05, help="One-sided level of the release gate's bounds.")
    items_table: bool = option(
        True,
        help="Write items.csv (one row per pair and item; the longest output by far).",
        flags=("--items/--no-items",),
    )
    harness: HarnessOptions = group(
        HarnessOptions,
        model_name={
            "help": "Name a run: RUN=NAME (a RUN argument as given, or its last path component), or an lm-eval run "
            "directory inside a RUN (repeat).",
            "metavar": "KEY=NAME",
        },
        epochs={
            "help": "inspect_ai samples run several epochs: mean (inspect's reduction; must be 0 or 1), first, or "
            "all (each epoch one sample of its item: the within-item variance is reported)."
        },
    )
    responses: ResponseOptions = group(ResponseOptions)

    def check(self) -> None:
        check_applies("margin", self.margin, self.baseline is not None, "the release gate compares with --baseline")
