"""What a judge-agreement run decided and counted, as typed values: :class:`JudgesSummary`.

The options (:class:`~evalprism.judges.options.JudgesOptions`) say what the analysis was told; the
summary holds what it resolved while running (the label columns as analysed, the instruction chosen,
each label column's scale, the embedder or precomputed vectors), the counts of its clustering, how the
pairs were clustered and how healthy that clustering is (:class:`Clustering`), and what the embedders
counted (:class:`EmbeddingCounts`). The run record's ``results`` are this summary as JSON
(``dataclasses.asdict``); the report and the index line read its attributes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from evalprism.judges.degeneracy import Attempt, ClusteringHealth


@dataclass(frozen=True)
class GroupClustering:
    """How one group of pairs was clustered (``group``: its value of the grouping column; None: all
    pairs): the HDBSCAN selection kept, the min_cluster_size used, the health of the clustering kept,
    and every attempt (excess of mass, then leaf when it was degenerate)."""

    group: str | None
    selection: str
    min_cluster_size: int
    health: ClusteringHealth
    attempts: tuple[Attempt, ...]

    @property
    def fell_back(self) -> bool:
        """Whether leaf clusters were kept after excess of mass was degenerate."""
        return len(self.attempts) > 1 and self.selection == "leaf"


@dataclass(frozen=True)
class Clustering:
    """How the pairs were clustered: ``by``, the column whose values were clustered apart (None:
    pooled), one :class:`GroupClustering` per value, and the ``warnings`` said about them (one per
    degenerate or thin group). ``degenerate`` / ``thin``: whether some group's clustering is (fields
    that follow from the groups, so that run.json holds them)."""

    by: str | None
    groups: tuple[GroupClustering, ...]
    warnings: tuple[str, ...] = ()
    degenerate: bool = field(init=False)
    thin: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "degenerate", any(g.health.degenerate for g in self.groups))
        object.__setattr__(self, "thin", any(g.health.caveats for g in self.groups))


@dataclass(frozen=True)
class EmbeddingCounts:
    """One instruction's embedding of the pair texts: the model, and how many texts were requested,
    distinct, read from the cache and encoded (:attr:`evalprism.embed.Embedder.stats`)."""

    instruction: str
    model_id: str
    requested: int
    distinct: int
    cached: int
    encoded: int


@dataclass(frozen=True)
class JudgesSummary:
    """What one run resolved and counted.

    ``llm``: the LLM label columns as analysed (each once, in the order given); ``embedder``: the
    embedder spec, or ``precomputed`` when the vectors were given; ``instruction``: the instruction whose
    clustering was kept; ``scales``: per label column, its scale and threshold as resolved;
    ``n_pairs`` / ``n_clusters`` / ``noise_pairs``: the pairs, the dense clusters and the pairs in none;
    ``clustering``: how the pairs were clustered and its health; ``embedding``: per instruction
    embedded, the embedder's counts (none for precomputed vectors)."""

    llm: tuple[str, ...]
    embedder: str
    instruction: str
    scales: Mapping[str, str]
    n_pairs: int
    n_clusters: int
    noise_pairs: int
    clustering: Clustering
    embedding: tuple[EmbeddingCounts, ...] = ()
