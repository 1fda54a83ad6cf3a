"""The result of an ECDF analysis: tables, the samples behind them, and how to save them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.ecdf.options import EcdfOptions
from evalprism.io.outputs import OutputKind, SavedResult

SETTINGS_FIRST = [
    "question_id",
    "group",
    "configuration",
    "n_responses",
    "n_answered",
    "mean_score",
    "cluster",
    "is_medoid",
    "final_answer",
    "correct",
    "majority_votes",
    "medoid_answer",
    "medoid_correct",
    "majority_answer",
    "majority_correct",
    "accuracy",
]


@dataclass(frozen=True)
class EcdfSummary:
    """What an ECDF analysis resolved and counted: the clusters ``k`` (chosen when ``clusters`` was
    "auto"), the ``group`` column used (None: none), the ``embedder`` spec (None when nothing was
    embedded), the scoring rule (None: a score column was used as it is) and each response's
    ``quality`` in words, the clustering's W1 ``loss`` and how it was computed, the settings and
    responses analysed, and per instruction embedded, the embedder's counts (None: nothing embedded)."""

    k: int
    group: str | None
    embedder: str | None
    score: str | None
    quality: str
    loss: float
    clustering: str
    n_settings: int
    n_responses: int
    embedding: dict[str, Any] | None


@dataclass
class EcdfResult(SavedResult):
    """Everything :func:`evalprism.ecdf.analyze` found.

    ``settings``: one row per setting (question x configuration) with its cluster, mean score,
    final answer (eq. 6) and correctness; ``clusters``: size, wins (eq. 7), medoid and scores per
    cluster (0 = best); ``factors``: adjusted mutual information between the clusters and each
    factor (question, group, each ``by`` column); ``accuracy``: exact-match accuracy per group x
    configuration; ``comparisons``: paired tests between configurations over shared questions
    (:mod:`evalprism.ecdf.compare`; None with one configuration); ``k_curve``: stability per K when K was chosen automatically;
    ``assignment``: question x configuration cluster matrix in MDS order; ``samples``: the sorted
    quality values of each setting (the ECDFs), indexed like ``settings``; ``options``: what the
    analysis was asked (:class:`~evalprism.ecdf.options.EcdfOptions`); ``summary``: what it resolved
    and counted (:class:`EcdfSummary`); ``k_samples``: each configuration's pass@k, maj@k and avg@k
    (:mod:`evalprism.ecdf.k_samples`; None with one response per setting or a graded quality); ``notes``: what it changed or left out; ``title``: the
    report's title (None: the default).
    """

    output_kind: ClassVar[OutputKind] = OutputKind.ECDF

    settings: pd.DataFrame
    clusters: pd.DataFrame
    factors: pd.DataFrame
    accuracy: pd.DataFrame | None
    comparisons: pd.DataFrame | None
    k_curve: pd.DataFrame | None
    assignment: pd.DataFrame
    samples: list[np.ndarray]
    responses: pd.DataFrame
    by: list[str]
    options: EcdfOptions
    summary: EcdfSummary
    notes: tuple[str, ...] = ()
    k_samples: pd.DataFrame | None = None
    title: str | None = None

    def settings_table(self) -> pd.DataFrame:
        """settings.csv: setting columns first, then the analysis columns, then carried-through ones."""
        s = self.settings.drop(columns=["setting"])
        first = [c for c in self.by if c in s.columns] + [
            c for c in SETTINGS_FIRST if c in s.columns and c not in self.by
        ]
        return s[first + [c for c in s.columns if c not in first]]

    def findings(self) -> list[str]:
        """The analysis' headline: K, the settings, and the widest same-accuracy quality gap."""
        from evalprism.ecdf.report import index_line

        return [index_line(self)]

    def frames(self) -> dict[str, pd.DataFrame]:
        """The output tables by file stem."""
        out = {"settings": self.settings_table(), "clusters": self.clusters, "factors": self.factors}
        if self.accuracy is not None:
            out["accuracy"] = self.accuracy
        if self.comparisons is not None:
            out["comparisons"] = self.comparisons
        if self.k_curve is not None:
            out["k_selection"] = self.k_curve
        if self.k_samples is not None:
            out["k_samples"] = self.k_samples
        return out

    def report(self) -> Any:
        from evalprism.ecdf.report import build_report

        return build_report(self)
