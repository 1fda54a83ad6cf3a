"""The result of a judge-agreement analysis: its tables and how to save them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import pandas as pd

from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.judges.options import JudgesOptions
from evalprism.judges.summary import JudgesSummary


@dataclass
class JudgesResult(SavedResult):
    """Everything :func:`evalprism.judges.analyze` found (all tables long: one row per judge and unit).

    ``pairs``: one row per query-document pair with its cluster (-1 = noise), every label, its binary
    value and its 2-D map position; ``clusters``: per (cluster, judge) size, AC1 with SE and interval,
    kappa, percent agreement, purity, false negatives/positives; ``queries``: per (judge, query) the
    AC1 range ΔAC1 over its clusters, the three bias flags and the direction, ranked; ``query_clusters``:
    the per-query-per-cluster cells behind ΔAC1; ``overall``: per judge over all pairs;
    ``instructions``: the candidate instructions and their purity scores; ``concentration``: dense
    clusters against the noise set per judge. ``clustering``: how the pairs were clustered (the
    grouping column, per group the selection and min_cluster_size used, the health of the clustering,
    every attempt) and whether it is degenerate, with its ``warnings``. ``texts``: query and document text per pair (for the
    report's examples; not written to the CSV files); ``title``: the report's title (None: the default).
    """

    output_kind: ClassVar[OutputKind] = OutputKind.JUDGES

    pairs: pd.DataFrame
    clusters: pd.DataFrame
    queries: pd.DataFrame
    query_clusters: pd.DataFrame
    overall: pd.DataFrame
    instructions: pd.DataFrame
    concentration: pd.DataFrame
    texts: pd.DataFrame
    options: JudgesOptions
    summary: JudgesSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    title: str | None = None

    def findings(self) -> list[str]:
        """The map's headline: the clusters, each judge's overall AC1 against its worst cluster's, and
        how many bias-prone queries each judge has."""
        from evalprism.judges.report import index_line

        flagged = ", ".join(f"{j}: {len(self.bias_prone(j))}" for j in self.overall["judge"])
        return [index_line(self), f"bias-prone queries {flagged}"]

    def frames(self) -> dict[str, pd.DataFrame]:
        """The output tables by file stem."""
        return {
            "pairs": self.pairs,
            "clusters": self.clusters,
            "queries": self.queries,
            "query_clusters": self.query_clusters,
            "overall": self.overall,
            "instructions": self.instructions,
            "concentration": self.concentration,
        }

    @property
    def degenerate(self) -> bool:
        """Whether the clustering (of some collection) is degenerate: its warnings say why."""
        return self.summary.clustering.degenerate

    def bias_prone(self, judge: str | None = None) -> pd.DataFrame:
        """The flagged queries (of one judge, or all), most variable first."""
        q = self.queries[self.queries["bias_prone"].astype(bool)]
        return q if judge is None else q[q["judge"] == judge]

    def report(self) -> Any:
        from evalprism.judges.report import build_report

        return build_report(self)
