"""The options of the ECDF analysis (`evalprism ecdf`), declared once (:mod:`evalprism.io.options`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EmbedOptions
from evalprism.io.options import Options, group, option
from evalprism.vocabularies import FinalRule, KMedoidsMethod, ScoreRule

#: the most clusters ``clusters="auto"`` tries
DEFAULT_K_MAX = 16


def cluster_count(clusters: object, name: str = "clusters") -> int | str:
    """The ``clusters`` option: a whole number K (also as text, e.g. from a command line) or "auto"."""
    if clusters == "auto":
        return "auto"
    try:
        if isinstance(clusters, bool) or float(clusters) != int(float(clusters)):  # type: ignore[arg-type]
            raise ValueError
        return int(float(clusters))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise EvalprismError(f"clusters: expected a whole number or 'auto', got '{clusters}'", parameter=name) from None


#: what each final rule (``final``) picks, in the report's words
FINAL_NAMES: dict[FinalRule, str] = {
    "medoid": "the answer nearest the mean embedding (eq. 6 medoid)",
    "majority": "the majority vote over normalised answers (self-consistency)",
}


@dataclass(frozen=True)
class EcdfOptions(Options):
    """How :func:`evalprism.ecdf.analyze` reads, scores and clusters the responses (seed 001)."""

    by: Sequence[str] = option((), help="Setting column (repeat for several).")
    clusters: int | str = option(
        "auto",
        flags=("--clusters", "-k"),
        help="Number of clusters K, or 'auto': K chosen by stability, the K whose clusterings of random 80% "
        "question subsets agree best (adjusted Rand index); among K within 0.005 of the most stable, the mean "
        "silhouette breaks the tie.",
        parse=cluster_count,
        cli=str,
    )
    embedding: EmbedOptions = group(EmbedOptions)
    method: KMedoidsMethod = option("fasterpam", help="k-medoids algorithm.")
    score: ScoreRule = option(
        "cosine",
        help="Response quality against the references: cosine (max cosine similarity, eq. 3), exact "
        "(normalised exact match, numbers as numbers: 3.0 = 3, $70 = 70, 1,000 = 1000; 0/1) or contains (a "
        "reference occurs in the response, 0/1).",
    )
    final: FinalRule = option(
        "medoid",
        help="Each setting's final answer (for accuracy): medoid (eq. 6, the answer nearest the mean "
        "embedding) or majority (the self-consistency vote over normalised answers); the other is "
        "kept beside it in settings.csv.",
    )
    baseline: str | None = option(
        None, help="Compare every configuration with this one (e.g. temperature=0.0) instead of all pairs."
    )
    permutations: int = option(999, help="Label permutations per paired test (999 resolves p = 0.001).")
    seed: int = option(0, help="Random seed.")
    extract: str | None = option(None, help="Regex taking the answer span out of each response (last match, group 1).")
    choices: str | None = option(None, help="Column mapping answer labels to choice texts.")
    group: str | None = option("group", help="Topic/subject column, if present.")
    k_max: int = option(DEFAULT_K_MAX, shown=False)
