"""The result of `evalprism compare`: its tables, what the run decided, its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pandas as pd

from evalprism.compare.options import CompareOptions
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.stats.confidence_set import ConfidenceSet
from evalprism.stats.gate import GateResult


@dataclass(frozen=True)
class CompareSummary:
    """What a comparison read and decided: the inputs as given (a table in memory by its source),
    the runs' names in input order and the file each came from, the baseline every run was compared
    with (None: all pairs), whether every score read was 0/1 (``"0/1"``) or some lay between (``"0..1"``), and
    with a release gate its exit code (0 pass, 1 regression, 3 cannot tell; None without a gate)."""

    runs: tuple[str, ...]
    run_names: tuple[str, ...]
    sources: dict[str, str]
    baseline: str | None
    scores: str
    gate_exit_code: int | None = None


@dataclass
class CompareResult(SavedResult):
    """``comparisons``: one row per (pair, benchmark) plus the ``all`` row of each pair (difference
    B - A on the 0..1 scale, SE, interval, test, p, adjusted p, MDE, items needed, variance parts,
    verdict); ``items``: one row per (pair, item) with both scores and the difference, including
    items only one run answered (``status``; the text columns are categoricals, built from integer
    codes, and write as their values; None when ``options.items_table`` is off). ``options``: what the run was asked
    (:class:`~evalprism.compare.options.CompareOptions`); ``summary``: what it read and decided
    (:class:`CompareSummary`); ``provenance``: what the readers read and chose; ``notes``: what was
    changed from the input (no-answer scores, a k-sample rule); ``runs_table``: each run's k-sample scores
    with their standard errors (None: one sample per item and none asked); ``gate``: each run against the
    baseline under the release gate (empty without ``margin``); ``confidence_set``: the runs tied for best
    (None unless asked)."""

    output_kind: ClassVar[OutputKind] = OutputKind.COMPARE

    comparisons: pd.DataFrame
    items: pd.DataFrame | None
    options: CompareOptions
    summary: CompareSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    runs_table: pd.DataFrame | None = None
    gate: tuple[GateResult, ...] = ()
    confidence_set: ConfidenceSet | None = None

    def findings(self) -> list[str]:
        """The verdict of every pair over all benchmarks ("B vs A: ..."), the runs tied for best, and
        each run's gate verdict."""
        out = [f"{r['run_b']} vs {r['run_a']}: {r['verdict']}" for _, r in self.overall().iterrows()]
        if self.confidence_set is not None:
            out.append(self.confidence_set.sentence())
        return out + [g.sentence() for g in self.gate]

    def frames(self) -> dict[str, pd.DataFrame]:
        from evalprism.compare.release import confidence_set_table, gate_table

        out = {"comparisons": self.comparisons}
        if self.items is not None:
            out["items"] = self.items
        if self.runs_table is not None:
            out["runs"] = self.runs_table
        if self.gate:
            out["gate"] = gate_table(self.gate)
        if self.confidence_set is not None:
            out["confidence_set"] = confidence_set_table(self.confidence_set)
        return out

    def write_extra(self, directory: Path) -> None:
        """junit.xml with a release gate (one test case per run)."""
        if self.gate:
            from evalprism.compare.release import junit_xml

            (directory / "junit.xml").write_text(junit_xml(self.gate), encoding="utf-8")

    @property
    def exit_code(self) -> int:
        """What the command exits with: the gate's code (0 without a gate)."""
        return self.summary.gate_exit_code or 0

    def ci_annotations(self) -> list[str]:
        """The gate's CI annotation lines (none without a gate)."""
        from evalprism.compare.release import annotation_lines

        return annotation_lines(self.gate)

    def overall(self) -> pd.DataFrame:
        """The ``all`` row of every pair."""
        return self.comparisons[self.comparisons["benchmark"] == "all"].reset_index(drop=True)

    def report(self) -> Any:
        from evalprism.compare.report import build_report

        return build_report(self)
