"""The options of the judge-agreement analysis, in one object: :class:`JudgesOptions`.

What the analysis is told (instructions, embedder, label scales, clustering, bias rules, agreement
settings) travels as one value from the CLI or a notebook to :func:`evalprism.judges.analyze`, and is
recorded in run.json. The clustering and the bias rules keep their own option objects
(:class:`ClusterOptions`, :class:`BiasRules`), each checking its values where it is defined. What the
analysis resolves while running (the instruction chosen, the scales) is in its summary
(:class:`~evalprism.judges.summary.JudgesSummary`), not here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EmbedOptions
from evalprism.io.harness_options import parse_assignments
from evalprism.io.options import Options, check_number, group, option
from evalprism.vocabularies import ClusterSelection, Reduction

DEFAULT_INSTRUCTION = "Judge the document's relevance to the query for ad-hoc retrieval"

#: the scaled min_cluster_size: this many at least, and one per PAIRS_PER_MIN_SIZE pairs above that
MIN_CLUSTER_SIZE_FLOOR = 15
PAIRS_PER_MIN_SIZE = 700


def scaled_min_cluster_size(n_pairs: int) -> int:
    """The default HDBSCAN ``min_cluster_size`` for ``n_pairs`` pairs: max(15, round(n / 700)).

    A fixed size lets the number of clusters grow with the input (and excess of mass merge them into
    one); relative to n it keeps a cluster a comparable share of the pairs. 15 below 10,850 pairs
    (TREC DL 2019, 9,260 pairs, clusters as with the earlier fixed default), 16 for TREC DL 2020
    (11,386), 29 for both years pooled (20,646)."""
    return max(MIN_CLUSTER_SIZE_FLOOR, round(n_pairs / PAIRS_PER_MIN_SIZE))


@dataclass(frozen=True)
class ClusterOptions(Options):
    """HDBSCAN and reduction parameters (recorded in run.json). A clustering is degenerate
    (:mod:`evalprism.judges.degeneracy`) when one cluster holds more than ``max_cluster_share`` of the
    pairs, there are fewer than ``min_clusters`` clusters, or fewer than ``min_query_share`` of the
    queries have pairs in two clusters."""

    reduce: Reduction = option("pca", help="Reduction before HDBSCAN (umap needs: pip install 'evalprism[umap]').")
    n_components: int = option(10, flags="--components", help="Dimensions after reduction.")
    #: None: :func:`scaled_min_cluster_size` of the pairs clustered (per collection when split)
    min_cluster_size: int | None = option(
        None, help="HDBSCAN min_cluster_size (default: max(15, pairs/700), per collection)."
    )
    min_samples: int | None = option(5, help="HDBSCAN min_samples.")
    #: "auto": excess of mass ("eom"), then "leaf" when excess of mass is degenerate
    cluster_selection_method: ClusterSelection = option(
        "auto",
        flags="--cluster-selection",
        help="HDBSCAN cluster_selection_method (auto: eom, then leaf if eom is degenerate; leaf: finer clusters).",
    )
    cluster_selection_epsilon: float = option(0.0, shown=False)
    umap_neighbors: int = option(15, shown=False)
    max_cluster_share: float = option(0.8, shown=False)
    min_clusters: int = option(2, shown=False)
    min_query_share: float = option(0.2, shown=False)

    def size_for(self, n_pairs: int) -> int:
        """The min_cluster_size used for ``n_pairs`` pairs: the one given, or the scaled default."""
        return self.min_cluster_size if self.min_cluster_size is not None else scaled_min_cluster_size(n_pairs)

    def check_shape(self, n_pairs: int, dim: int | None = None, where: str = "") -> None:
        """Refuse what ``n_pairs`` pairs (``where``: of which collection, when split) cannot give: a
        min_cluster_size or min_samples above the number of pairs (HDBSCAN's own message is a traceback),
        a reduction to more dimensions than the vectors have (``dim``, once known) or than PCA/UMAP can
        give for ``n_pairs`` points (it used to be clamped silently, changing the clustering)."""
        if self.reduce != "none":
            limits = [(max(1, n_pairs - 1), f"what {n_pairs} pairs allow ({max(1, n_pairs - 1)})")]
            if dim is not None:
                limits.append((dim, f"the embedding dimension {dim}"))
            most, why = min(limits)
            if self.n_components > most:
                raise EvalprismError(
                    f"n_components {self.n_components} is larger than {why}; "
                    f"expected at most {most} (or reduce 'none')",
                    parameter="n_components",
                )
        size = self.size_for(n_pairs)
        if n_pairs < max(2, size):
            raise EvalprismError(
                f"{n_pairs} pairs{where} are fewer than min_cluster_size={size}: lower it or give more pairs",
                parameter="min_cluster_size",
            )
        if self.min_samples is not None and self.min_samples > n_pairs:
            raise EvalprismError(
                f"min_samples {self.min_samples} is larger than the {n_pairs:,} pairs{where}; "
                f"expected at most {n_pairs:,} (HDBSCAN counts a pair's neighbours among them)",
                parameter="min_samples",
            )


@dataclass(frozen=True)
class BiasRules(Options):
    """Thresholds of the three rules (:mod:`evalprism.judges.bias`; recorded in run.json)."""

    tau: float = option(0.5, help="Bias rule 1: ΔAC1 >= tau.")
    iqr_k: float = option(1.5, shown=False)
    flip_high: float = option(0.8, shown=False)
    flip_low: float = option(0.2, shown=False)

    def check(self) -> None:
        """Rule 3's upper AC1 lies above its lower one."""
        check_number("flip_high", self.flip_high, low=self.flip_low)


def column_values(values: Any, parameter: str) -> dict[str, Any] | None:
    """Per label column values: a mapping as it is, or the command line's ``COLUMN=VALUE`` items."""
    if values is None or isinstance(values, Mapping):
        return None if values is None else dict(values)
    return parse_assignments(values, parameter, allow_global=False, keyword="COLUMN") or None


def judge_names(values: Any, parameter: str) -> tuple[str, ...]:
    """Label columns, repeated and each possibly comma-separated: ``a,b`` and ``c`` -> (a, b, c)."""
    if values is None:
        return ()
    items = [values] if isinstance(values, str) else list(values)
    return tuple(v.strip() for item in items for v in str(item).split(",") if v.strip())


@dataclass(frozen=True)
class JudgesOptions(Options):
    """Options of :func:`evalprism.judges.analyze`.

    ``human`` / ``llm``: the human label column and the LLM label columns. ``instructions``: candidate
    task instructions (default: the seed's one); the one whose clustering has the highest
    ``purity_percentile``-th percentile cluster purity is used. ``embedding``: how pairs are embedded (:class:`~evalprism.io.embed_options.EmbedOptions`: the spec
    in :mod:`evalprism.embed.spec`). ``scales``/``thresholds``: per label column, its declared scale and
    the label from which a pair counts as relevant. ``cluster``: reduction and HDBSCAN; ``bias``: the
    three bias rules. A per-query AC1 needs at least ``min_query_pairs`` pairs of the query in the
    cluster; intervals are at ``confidence``. ``by``: the column whose values are clustered apart
    ("auto": ``collection`` or ``year`` when the input has two or more; None: pooled;
    :mod:`evalprism.judges.groups`).
    """

    human: str = option("human", help="Human label column (or judge name of a --qrels file).")
    llm: Sequence[str] = option(
        (), help="LLM label column(s): repeat, or comma-separated.", parse=judge_names, cli=list[str]
    )
    instructions: Sequence[str] | None = option(
        None, flags="--instruction", help="Candidate task instruction (repeat; the purest clustering wins)."
    )
    embedding: EmbedOptions = group(EmbedOptions)
    scales: Mapping[str, tuple[int, int] | str] | None = option(
        None,
        flags="--scale",
        help="COL=LOW-HIGH: declared label scale (default 0-3, or 0/1).",
        parse=column_values,
        cli=list[str],
    )
    thresholds: Mapping[str, float | str] | None = option(
        None,
        flags="--threshold",
        help="COL=T: relevant at label >= T (default 2 on 0-3).",
        parse=column_values,
        cli=list[str],
    )
    cluster: ClusterOptions = group(ClusterOptions)
    bias: BiasRules = group(BiasRules)
    min_query_pairs: int = option(5, help="Pairs of a query in a cluster needed for its per-query AC1.")
    by: str | None = option(
        "auto",
        help="Column whose values are clustered apart (auto: 'collection' or 'year' if present; none: pool all pairs).",
    )
    purity_percentile: float = option(80.0, shown=False)
    confidence: float = option(0.95, shown=False)
    seed: int = option(0, help="Random seed.")

    def candidate_instructions(self) -> list[str]:
        """The instructions to try, each once, in the order given."""
        return list(dict.fromkeys(self.instructions or [DEFAULT_INSTRUCTION]))
