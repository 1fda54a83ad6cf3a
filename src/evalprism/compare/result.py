"""The result of `evalprism compare`: its tables, its run record, its report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from evalprism.io.outputs import OutputKind, SavedResult


@dataclass
class CompareResult(SavedResult):
    """``comparisons``: one row per (pair, benchmark) plus the ``all`` row of each pair (difference
    B - A on the 0..1 scale, SE, interval, test, p, adjusted p, MDE, items needed, variance parts,
    verdict); ``items``: one row per (pair, item) with both scores and the difference, including
    items only one run answered (``status``; the text columns are categoricals, built from integer
    codes, and write as their values); ``notes``: what was changed from the input (no-answer
    scores); ``read``: what the harness readers chose; ``sources``: the file each run came from."""

    output_kind: ClassVar[OutputKind] = OutputKind.COMPARE

    comparisons: pd.DataFrame
    items: pd.DataFrame
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def findings(self) -> list[str]:
        """The verdict of every pair over all benchmarks: "B vs A: ..."."""
        return [f"{r['run_b']} vs {r['run_a']}: {r['verdict']}" for _, r in self.overall().iterrows()]

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"comparisons": self.comparisons, "items": self.items}

    def run_info(self) -> dict[str, Any]:
        return {"options": self.options, "notes": self.notes, "read": self.read, "sources": self.sources}

    def overall(self) -> pd.DataFrame:
        """The ``all`` row of every pair."""
        return self.comparisons[self.comparisons["benchmark"] == "all"].reset_index(drop=True)

    def report(self) -> Any:
        from evalprism.compare.report import build_report

        return build_report(self)
