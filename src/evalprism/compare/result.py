"""The result of `evalprism compare`: its tables, what the run decided, its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from evalprism.compare.options import CompareOptions
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance


@dataclass(frozen=True)
class CompareSummary:
    """What a comparison read and decided: the inputs as given (a table in memory by its source),
    the runs' names in input order and the file each came from, the baseline every run was compared
    with (None: all pairs), and whether every score was 0/1 (``"0/1"``) or some lay between (``"0..1"``)."""

    runs: tuple[str, ...]
    run_names: tuple[str, ...]
    sources: dict[str, str]
    baseline: str | None
    scores: str


@dataclass
class CompareResult(SavedResult):
    """``comparisons``: one row per (pair, benchmark) plus the ``all`` row of each pair (difference
    B - A on the 0..1 scale, SE, interval, test, p, adjusted p, MDE, items needed, variance parts,
    verdict); ``items``: one row per (pair, item) with both scores and the difference, including
    items only one run answered (``status``; the text columns are categoricals, built from integer
    codes, and write as their values). ``options``: what the run was asked
    (:class:`~evalprism.compare.options.CompareOptions`); ``summary``: what it read and decided
    (:class:`CompareSummary`); ``provenance``: what the readers read and chose; ``notes``: what was
    changed from the input (no-answer scores)."""

    output_kind: ClassVar[OutputKind] = OutputKind.COMPARE

    comparisons: pd.DataFrame
    items: pd.DataFrame
    options: CompareOptions
    summary: CompareSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()

    def findings(self) -> list[str]:
        """The verdict of every pair over all benchmarks: "B vs A: ..."."""
        return [f"{r['run_b']} vs {r['run_a']}: {r['verdict']}" for _, r in self.overall().iterrows()]

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"comparisons": self.comparisons, "items": self.items}

    def overall(self) -> pd.DataFrame:
        """The ``all`` row of every pair."""
        return self.comparisons[self.comparisons["benchmark"] == "all"].reset_index(drop=True)

    def report(self) -> Any:
        from evalprism.compare.report import build_report

        return build_report(self)
