"""Leaderboards for a set of prompts from a trained P2L model (`evalprism p2l leaderboard`).

Per-prompt leaderboards, the prompt set's aggregated leaderboard (eq. 3, with the appendix B.1
average beside it), leaderboards per category (a column of the prompts or HDBSCAN clusters) and
the strength/weakness table against a reference model (section 3.4).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.embed import get_embedder
from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.p2l.model import P2LModel
from evalprism.p2l.options import PromptSetOptions
from evalprism.p2l.strengths import category_leaderboards, cluster_prompts, strengths
from evalprism.progress import status
from evalprism.stats.aggregate import aggregate_leaderboards
from evalprism.stats.pairwise import elo_ratings
from evalprism.vocabularies import OutcomeModelName


@dataclass(frozen=True)
class PromptSetSummary:
    """What one prompt-set analysis counted and decided: the prompts and models, where the categories
    came from (a column or HDBSCAN clusters), the strengths' reference model (the option's, or the
    aggregated leader) and the P2L model's outcome model."""

    n_prompts: int
    categories: str
    reference: str
    models: int
    outcome_model: OutcomeModelName


@dataclass
class PromptSetResult(SavedResult):
    """``prompts`` (one row per prompt: its category, best model and every model's coefficient),
    ``leaderboard`` (aggregated), ``categories`` (aggregated per category) and ``strengths``; the
    options it ran with and what it counted and decided (:class:`PromptSetSummary`)."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_LEADERBOARD

    prompts: pd.DataFrame
    leaderboard: pd.DataFrame
    categories: pd.DataFrame
    strengths: pd.DataFrame
    options: PromptSetOptions
    summary: PromptSetSummary
    provenance: Provenance = field(default_factory=Provenance)

    def findings(self) -> list[str]:
        """The prompt set's headline: the overall leader, how often it is best, and category leaders."""
        from evalprism.p2l.reports import prompt_set_index_line

        return [prompt_set_index_line(self)]

    def frames(self) -> dict[str, pd.DataFrame]:
        return {
            "prompts": self.prompts,
            "leaderboard": self.leaderboard,
            "categories": self.categories,
            "strengths": self.strengths,
        }

    def report(self) -> Any:
        from evalprism.p2l.reports import prompt_set_report

        return prompt_set_report(self)


def aggregated_table(coefs: np.ndarray, models: list[str]) -> pd.DataFrame:
    """rank, model, coef (eq. 3), rating, mean_coef (appendix B.1), best_share (share of prompts
    on which the model has the top coefficient)."""
    agg = aggregate_leaderboards(coefs, method="bt")
    best = np.bincount(coefs.argmax(axis=1), minlength=len(models)) / coefs.shape[0]
    table = pd.DataFrame(
        {
            "model": models,
            "coef": agg,
            "rating": elo_ratings(agg),
            "mean_coef": aggregate_leaderboards(coefs, method="mean"),
            "best_share": best,
        }
    )
    table = table.sort_values(["coef", "model"], ascending=[False, True], kind="stable").reset_index(drop=True)
    table.insert(0, "rank", np.arange(1, len(table) + 1))
    return table


def analyze_prompt_set(
    model: P2LModel,
    prompts: pd.DataFrame,
    options: PromptSetOptions | None = None,
    *,
    cache_dir: str | Path | bool | None = None,
    progress: bool = True,
) -> PromptSetResult:
    """Run the model on ``prompts`` (a table with a ``prompt`` column) and aggregate
    (:class:`~evalprism.p2l.options.PromptSetOptions`).

    Categories: ``category_column`` of the table if given, else HDBSCAN clusters of the prompts'
    ``minilm`` embeddings. ``reference`` (default: the aggregated leader) is the model every other
    is compared with in the strengths table.
    """
    o = options or PromptSetOptions()
    category_column, reference, aggregation = o.category_column, o.reference, o.aggregation
    texts = prompts["prompt"].astype(str).tolist()
    # the options are checked before the prompts are encoded (minutes on a large prompt set)
    if category_column is not None and category_column not in prompts.columns:
        where = prompts.attrs.get("source", "prompts")
        raise EvalprismError(
            f"{where}: no column '{category_column}' (columns: {', '.join(map(str, prompts.columns))})",
            parameter="category_column",
        )
    status(f"predicting leaderboards for {len(texts)} prompts over {len(model.models)} models", progress)
    coefs = model.leaderboards(texts)
    if category_column is not None:
        categories = prompts[category_column].fillna("(none)").astype(str).to_numpy()
        source = f"column '{category_column}'"
    else:
        status("clustering prompts into categories (HDBSCAN on minilm embeddings)", progress)
        emb = get_embedder("minilm", cache_dir=cache_dir, progress=progress).embed(texts)
        categories = cluster_prompts(texts, emb, o.min_cluster_size)
        source = "HDBSCAN clusters"
    leaderboard = aggregated_table(coefs, model.models)
    reference = reference or str(leaderboard["model"].iloc[0])
    cats = category_leaderboards(coefs, categories, model.models, method=aggregation)
    table = prompts.copy()
    table["category"] = categories
    table["best_model"] = np.asarray(model.models)[coefs.argmax(axis=1)]
    table = pd.concat([table, pd.DataFrame(coefs, columns=model.models)], axis=1)
    summary = PromptSetSummary(len(texts), source, reference, len(model.models), model.outcome_model)
    return PromptSetResult(table, leaderboard, cats, strengths(cats, reference), o, summary)
