"""The options of the judge-agreement analysis, in one object: :class:`JudgesOptions`.

What the analysis is told (instructions, embedder, label scales, clustering, bias rules, agreement
settings) travels as one value from the CLI or a notebook to :func:`evalprism.judges.analyze`, and is
recorded in run.json. The clustering and the bias rules keep their own option objects
(:class:`~evalprism.judges.clustering.ClusterOptions`, :class:`~evalprism.judges.bias.BiasRules`),
each checking its values where it is defined; the keyword names of the older flat call
(``tau=``, ``outlier_iqr=``, ``min_cluster_size=``, ...) map onto them in :meth:`JudgesOptions.from_keywords`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from evalprism.io.options import check_number
from evalprism.judges.bias import BiasRules
from evalprism.judges.clustering import ClusterOptions

DEFAULT_INSTRUCTION = "Judge the document's relevance to the query for ad-hoc retrieval"

#: flat keyword -> BiasRules field
_BIAS_KEYWORDS = {"tau": "tau", "outlier_iqr": "iqr_k", "flip_high": "flip_high", "flip_low": "flip_low"}
#: flat keywords that are ClusterOptions fields of the same name
_CLUSTER_KEYWORDS = (
    "reduce",
    "n_components",
    "min_cluster_size",
    "min_samples",
    "cluster_selection_method",
    "max_cluster_share",
    "min_clusters",
    "min_query_share",
)


@dataclass(frozen=True)
class JudgesOptions:
    """Options of :func:`evalprism.judges.analyze`.

    ``instructions``: candidate task instructions (default: the seed's one); the one whose clustering
    has the highest ``purity_percentile``-th percentile cluster purity is used. ``embedder``: an
    embedder spec (:mod:`evalprism.embed.spec`). ``scales``/``thresholds``: per label column, its
    declared scale and the label from which a pair counts as relevant. ``cluster``: reduction and
    HDBSCAN; ``bias``: the three bias rules. A per-query AC1 needs at least ``min_query_pairs`` pairs
    of the query in the cluster; intervals are at ``confidence``. ``by``: the column whose values are
    clustered apart ("auto": ``collection`` or ``year`` when the input has two or more; None: pooled;
    :mod:`evalprism.judges.groups`).
    """

    instructions: Sequence[str] | None = None
    embedder: str = "minilm"
    scales: Mapping[str, tuple[int, int] | str] | None = None
    thresholds: Mapping[str, float | str] | None = None
    cluster: ClusterOptions = field(default_factory=ClusterOptions)
    bias: BiasRules = field(default_factory=BiasRules)
    min_query_pairs: int = 5
    by: str | None = "auto"
    purity_percentile: float = 80.0
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        """Refuse values no step can use (the clustering's own are checked by ``cluster.check()``,
        which may import UMAP, so the analysis calls it)."""
        check_number("min_query_pairs", self.min_query_pairs)
        check_number("purity_percentile", self.purity_percentile)
        check_number("confidence", self.confidence)

    @classmethod
    def from_keywords(cls, **keywords: Any) -> JudgesOptions:
        """The options of the flat keyword call (``analyze(..., tau=0.4, min_cluster_size=10)``);
        an unknown name is a TypeError, as for any function."""
        cluster = {name: keywords.pop(name) for name in _CLUSTER_KEYWORDS if name in keywords}
        bias = {_BIAS_KEYWORDS[name]: keywords.pop(name) for name in list(_BIAS_KEYWORDS) if name in keywords}
        return cls(cluster=ClusterOptions(**cluster), bias=BiasRules(**bias), **keywords)

    def candidate_instructions(self) -> list[str]:
        """The instructions to try, each once, in the order given."""
        return list(dict.fromkeys(self.instructions or [DEFAULT_INSTRUCTION]))

    def record(
        self, *, human: str, llm: list[str], embedder: str, chosen: str, scales: dict[str, Any]
    ) -> dict[str, Any]:
        """What run.json says the analysis was run with (``embedder``: the spec, or ``precomputed``;
        ``chosen``: the instruction used; ``scales``: each label column's scale as resolved)."""
        c, b = self.cluster, self.bias
        return {
            "human": human,
            "llm": llm,
            "embedder": embedder,
            "instructions": self.candidate_instructions(),
            "instruction": chosen,
            "reduce": c.reduce,
            "n_components": c.n_components,
            "min_cluster_size": c.min_cluster_size,
            "min_samples": c.min_samples,
            "cluster_selection_method": c.cluster_selection_method,
            "max_cluster_share": c.max_cluster_share,
            "min_clusters": c.min_clusters,
            "min_query_share": c.min_query_share,
            "by": self.by,
            "min_query_pairs": self.min_query_pairs,
            "tau": b.tau,
            "outlier_iqr": b.iqr_k,
            "flip_high": b.flip_high,
            "flip_low": b.flip_low,
            "purity_percentile": self.purity_percentile,
            "confidence": self.confidence,
            "seed": self.seed,
            "scales": scales,
        }
