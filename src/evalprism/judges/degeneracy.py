"""Is a clustering of the pairs usable for the bias map? Detect degenerate ones, and fall back to leaf.

The seed's ΔAC1 compares one query's agreement across the clusters holding its pairs. A clustering
says nothing about that when

- one cluster holds most pairs (more than ``max_cluster_share``, default 80%): agreement "per
  cluster" is then the overall agreement, and HDBSCAN's excess-of-mass selection does this on large
  inputs (TREC DL 2019 + 2020 pooled: 97% of 20,646 pairs in one cluster);
- there are fewer than ``min_clusters`` (2) dense clusters.

A clustering can also be *thin* without being degenerate: fewer than ``min_query_share`` (a fifth) of
the queries have at least ``min_query_pairs`` pairs in each of two clusters, so ΔAC1 exists for too
few queries to rank them, and "0 bias-prone queries" means "not measured", not "no bias". With a
general-purpose embedder the pairs cluster mostly by topic, one query per cluster: TREC DL 2019 alone
gives 41 clusters, but only 3 of its 43 queries have a ΔAC1. That is said (``caveats``) but does not
replace the seed's excess-of-mass clustering.

:func:`cluster_checked` clusters with the options' selection; with ``"auto"`` it takes excess of mass
unless that is degenerate, then leaf clusters (finer, and never one cluster holding a whole tree
branch), keeping whichever of the two is less degenerate. Every attempt is recorded (run.json).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evalprism.judges.clustering import ClusterOptions, cluster_pairs


@dataclass(frozen=True)
class ClusteringHealth:
    """How usable one clustering is: its counts, why it is degenerate (``reasons``; none: usable) and
    why it is thin (``caveats``). ``degenerate`` follows from ``reasons``; it is a field so that the
    run record (run.json) holds it."""

    n_pairs: int
    n_clusters: int
    largest_share: float
    noise_share: float
    n_queries: int
    queries_with_dac1: int
    reasons: tuple[str, ...] = ()
    caveats: tuple[str, ...] = ()
    degenerate: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "degenerate", bool(self.reasons))

    def summary(self) -> str:
        """One line: the numbers a reader needs to judge the clustering."""
        return (
            f"{self.n_clusters:,} clusters, the largest holding {self.largest_share:.0%} of {self.n_pairs:,} pairs, "
            f"noise {self.noise_share:.0%}; {self.queries_with_dac1:,} of {self.n_queries:,} queries have "
            "pairs in two or more clusters (ΔAC1 defined)"
        )


@dataclass(frozen=True)
class Attempt:
    """One clustering tried: its HDBSCAN cluster selection and the health it gave."""

    selection: str
    health: ClusteringHealth


def assess(
    labels: np.ndarray, query_codes: np.ndarray, options: ClusterOptions, min_query_pairs: int
) -> ClusteringHealth:
    """The health of ``labels`` (-1 = noise) over pairs whose query is ``query_codes`` (0..Q-1)."""
    labels = np.asarray(labels, dtype=np.int64)
    q = np.asarray(query_codes, dtype=np.int64)
    n = labels.size
    k = int(labels.max()) + 1 if (labels >= 0).any() else 0
    dense = labels >= 0
    largest = float(np.bincount(labels[dense]).max() / n) if k else 0.0
    queries = np.unique(q)
    multi = 0
    if k:
        cells = np.bincount(q[dense] * k + labels[dense], minlength=(int(q.max()) + 1) * k).reshape(-1, k)
        multi = int(((cells >= min_query_pairs).sum(axis=1) >= 2).sum())
    reasons = []
    if k < options.min_clusters:
        reasons.append(f"{k} dense cluster{'s' if k != 1 else ''} (fewer than {options.min_clusters})")
    if largest > options.max_cluster_share:
        reasons.append(f"one cluster holds {largest:.0%} of the pairs (more than {options.max_cluster_share:.0%})")
    caveats = []
    if queries.size and multi < options.min_query_share * queries.size:
        caveats.append(
            f"only {multi} of {queries.size} queries have >= {min_query_pairs} pairs in each of two "
            f"clusters (fewer than {options.min_query_share:.0%}), so ΔAC1 exists for too few queries"
        )
    return ClusteringHealth(
        n_pairs=n,
        n_clusters=k,
        largest_share=largest,
        noise_share=float(np.mean(~dense)) if n else 0.0,
        n_queries=int(queries.size),
        queries_with_dac1=multi,
        reasons=tuple(reasons),
        caveats=tuple(caveats),
    )


def _worse(a: ClusteringHealth, b: ClusteringHealth) -> bool:
    """Whether ``a`` is a worse clustering than ``b``: more reasons, then fewer queries with ΔAC1
    (a tie keeps the earlier attempt, excess of mass)."""
    return (len(a.reasons), -a.queries_with_dac1) > (len(b.reasons), -b.queries_with_dac1)


@dataclass(frozen=True)
class CheckedClustering:
    """The labels kept, their health, the selection method that gave them, the min_cluster_size used,
    and every attempt (in the order tried)."""

    labels: np.ndarray
    health: ClusteringHealth
    selection: str
    min_cluster_size: int
    attempts: tuple[Attempt, ...]


def cluster_checked(
    z: np.ndarray, query_codes: np.ndarray, options: ClusterOptions, min_query_pairs: int
) -> CheckedClustering:
    """Cluster ``z`` and assess it; with selection "auto", excess of mass unless it is degenerate, then
    leaf when that is better (see the module docstring)."""
    method = options.cluster_selection_method
    tries = ["eom", "leaf"] if method == "auto" else [method]
    best: tuple[np.ndarray, ClusteringHealth, str] | None = None
    attempts: list[Attempt] = []
    for selection in tries:
        labels = cluster_pairs(z, options, selection)
        health = assess(labels, query_codes, options, min_query_pairs)
        attempts.append(Attempt(selection, health))
        if best is None or _worse(best[1], health):
            best = (labels, health, selection)
        if not health.degenerate:
            break
    assert best is not None
    return CheckedClustering(
        labels=best[0],
        health=best[1],
        selection=best[2],
        min_cluster_size=options.size_for(z.shape[0]),
        attempts=tuple(attempts),
    )
