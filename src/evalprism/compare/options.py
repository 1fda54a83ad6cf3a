"""The options of `evalprism compare`, declared once (:mod:`evalprism.io.options`). Importing this
module imports neither numpy nor pandas."""

from __future__ import annotations

from dataclasses import dataclass

from evalprism.io.harness_options import HarnessOptions
from evalprism.io.options import Options, group, option
from evalprism.io.response_options import ResponseOptions
from evalprism.vocabularies import Adjustment


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
