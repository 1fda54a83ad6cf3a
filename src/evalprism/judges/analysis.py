"""The judge-agreement bias map (seed 004): embed pairs, cluster, measure agreement where it varies.

Steps (section numbers of the seed):

1. validate the judgments and binarize each label column (:mod:`evalprism.io.judgments`);
2. embed every query-document pair as one text with a task instruction (3.2); ``instructor:<path>``
   gives the instruction as INSTRUCTOR's prompt, ``minilm`` and ``st:`` prepend it as text (a
   departure: the paper used INSTRUCTOR-XL);
3. for each candidate instruction: reduce, cluster with HDBSCAN (3.3), per collection when the input
   mixes collections (:mod:`evalprism.judges.groups`), check that the clustering is not degenerate
   (:mod:`evalprism.judges.degeneracy`: excess of mass, else leaf) and score the 80th-percentile
   cluster purity w.r.t. the human label; keep the best instruction's clustering (a degenerate one only
   when every candidate is);
4. agreement (3.4): Gwet's AC1 with SE and interval, Cohen's kappa and percent agreement, overall, per
   cluster (noise apart) and per query within each cluster;
5. ΔAC1 per query and the three bias rules with a direction (3.5, :mod:`evalprism.judges.bias`);
6. whether disagreement concentrates in dense clusters rather than the noise set (4.1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as _st

from evalprism.embed import Embedder, get_embedder
from evalprism.embed.factory import EmbedderChoice
from evalprism.errors import EvalprismError
from evalprism.io.judgments import Judgments, prepare_judgments
from evalprism.io.record import Provenance
from evalprism.judges.agreement import cluster_table, overall_table, query_cluster_table
from evalprism.judges.bias import flag_queries
from evalprism.judges.clustering import (
    check_reduction_available,
    cluster_purity,
    map_2d,
    purity_score,
    reduce_dimensions,
    renumber,
)
from evalprism.judges.degeneracy import ClusteringHealth, cluster_checked
from evalprism.judges.groups import Groups, split_groups
from evalprism.judges.options import DEFAULT_INSTRUCTION, JudgesOptions
from evalprism.judges.result import JudgesResult
from evalprism.judges.summary import Clustering, EmbeddingCounts, GroupClustering, JudgesSummary
from evalprism.progress import counted, status, warn, working
from evalprism.stats.steps import Steps

__all__ = ["DEFAULT_INSTRUCTION", "JudgesOptions", "analyze", "make_embedder", "pair_text"]


def pair_text(query: str, doc: str) -> str:
    """One text per query-document pair (the seed embeds the concatenated pair)."""
    return f"Query: {query}\nDocument: {doc}"


def make_embedder(spec: EmbedderChoice, instruction: str, *, cache_dir: str | Path | None, progress: bool) -> Embedder:
    """An embedder for one instruction, from the embedders' factory: INSTRUCTOR's format for
    ``instructor:`` specs, else the instruction prepended as text. The instruction is part of every
    cache key."""
    return get_embedder(spec, instruction=instruction, cache_dir=cache_dir, progress=progress)


def _concentration(
    pairs_cluster: np.ndarray, human: np.ndarray, llm: dict[str, np.ndarray], clusters: pd.DataFrame, confidence: float
) -> pd.DataFrame:
    """Per judge: agreement in the dense clusters pooled vs the noise set, the spread of the
    per-cluster values, a chi-square test that the disagreement rate is the same in every dense
    cluster, and the share of disagreements held by the worst clusters covering 10% of dense pairs."""
    region = np.where(pairs_cluster >= 0, 0, 1)
    pooled = overall_table(human, llm, confidence, groups=region, group_names=["dense", "noise"], group_column="region")
    rows = []
    for judge in llm:
        dense = pooled[(pooled["judge"] == judge) & (pooled["region"] == "dense")].iloc[0]
        noise = pooled[(pooled["judge"] == judge) & (pooled["region"] == "noise")].iloc[0]
        c = clusters[(clusters["judge"] == judge) & ~clusters["is_noise"] & (clusters["n_pairs"] > 0)]
        n = c["n_pairs"].to_numpy(dtype=float)
        wrong = (c["false_negatives"] + c["false_positives"]).to_numpy(dtype=float)
        rate = wrong / n
        ac1 = c["ac1"].to_numpy(dtype=float)
        p_value = float("nan")
        if len(c) >= 2 and 0 < wrong.sum() < n.sum():
            p_value = float(_st.chi2_contingency(np.c_[wrong, n - wrong])[1])
        order = np.argsort(-rate, kind="stable")
        cover = np.cumsum(n[order]) / n.sum() if n.sum() else np.array([])
        take = order[: int(np.searchsorted(cover, 0.10) + 1)] if cover.size else order
        share_pairs = float(n[take].sum() / n.sum()) if n.sum() else float("nan")
        share_wrong = float(wrong[take].sum() / wrong.sum()) if wrong.sum() else float("nan")
        finite = np.isfinite(ac1)
        rows.append(
            {
                "judge": judge,
                "n_dense": int(dense["n_pairs"]),
                "n_noise": int(noise["n_pairs"]),
                "ac1_dense": dense["ac1"],
                "ac1_noise": noise["ac1"],
                "disagreement_dense": 1 - dense["percent_agreement"],
                "disagreement_noise": 1 - noise["percent_agreement"],
                "kappa_dense": dense["kappa"],
                "kappa_noise": noise["kappa"],
                "clusters": len(c),
                "cluster_ac1_min": float(ac1[finite].min()) if finite.any() else np.nan,
                "cluster_ac1_median": float(np.median(ac1[finite])) if finite.any() else np.nan,
                "cluster_ac1_max": float(ac1[finite].max()) if finite.any() else np.nan,
                "clusters_below_noise_ac1": int((ac1[finite] < noise["ac1"]).sum()) if np.isfinite(noise["ac1"]) else 0,
                "homogeneity_p": p_value,
                "worst_clusters_pair_share": share_pairs,
                "worst_clusters_disagreement_share": share_wrong,
            }
        )
    return pd.DataFrame(rows)


def analyze(
    table: pd.DataFrame,
    options: JudgesOptions,
    *,
    embeddings: np.ndarray | Mapping[str, np.ndarray] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> JudgesResult:
    """Where do the LLM judges ``options.llm`` disagree with the human labels ``options.human``? (seed 004)

    ``table``: judgments (query_id, query, doc_id, doc and the label columns). ``options``: a
    :class:`JudgesOptions` (the label columns, the embedder and instructions, clustering, bias rules).
    ``embeddings``: precomputed pair vectors (an array, or one array per instruction) instead of the
    embedder; ``cache_dir``: the embedding cache; ``progress``: say what is being done.
    """
    check_reduction_available(options.cluster)
    given = prepare_judgments(table, options.human, options.llm, scales=options.scales, thresholds=options.thresholds)
    # every step sees the pairs in (query_id, doc_id) order; the pair table keeps the order given
    judged, rows = given.in_pair_order()
    _warn_unlabelled(judged)
    groups = split_groups(judged.table, options.by)
    for name, idx in groups.parts:  # the pair counts are known before embedding, the dimension after
        options.cluster.check_shape(idx.size, where=groups.where(name))
    candidates, counts = _candidates(judged, options, groups, embeddings, rows, cache_dir, progress)
    best = _best(candidates)
    chosen = candidates[best]
    for line in chosen.clustering.warnings:
        warn(line)
    with working(f"the 2-D map of {len(judged.table)} pairs", progress):
        coords = map_2d(chosen.vectors, options.cluster, options.seed)
    status("agreement per cluster and per query", progress)
    agreement = _agreement(judged, chosen, options)
    _name_groups(agreement, judged.table, groups, chosen.labels)
    back = np.argsort(rows)
    return JudgesResult(
        pairs=_pair_table(given, chosen.labels[back], coords[back]),
        clusters=agreement.clusters,
        queries=agreement.queries,
        query_clusters=agreement.cells,
        overall=agreement.overall,
        instructions=_instruction_table(candidates, best, options.purity_percentile),
        concentration=agreement.concentration,
        texts=given.table[["query", "doc"]],
        options=options,
        summary=_summary(judged, options.embedding.embedder if embeddings is None else "precomputed", chosen, counts),
        provenance=Provenance(notes=tuple(judged.notes)),
        notes=tuple(agreement.notes),
    )


def _summary(
    judged: Judgments, embedder: str, chosen: _Candidate, counts: tuple[EmbeddingCounts, ...]
) -> JudgesSummary:
    """What the run resolved and counted: the label columns and their scales, the embedder (or
    ``precomputed``), the instruction and clustering kept, the pair and cluster counts."""
    labels = chosen.labels
    return JudgesSummary(
        llm=tuple(judged.llm),
        embedder=embedder,
        instruction=chosen.instruction,
        scales={column: scale.describe() for column, scale in judged.scales.items()},
        n_pairs=len(labels),
        n_clusters=int(labels.max()) + 1,
        noise_pairs=int((labels < 0).sum()),
        clustering=chosen.clustering,
        embedding=counts,
    )


def _warn_unlabelled(judged: Judgments) -> None:
    """Say, before the embedding, how many pairs have no human label (e.g. human qrels of 2 queries
    beside an LLM's of 43): they are embedded and clustered, but in no agreement."""
    unlabelled = int(np.isnan(judged.labels[judged.human]).sum())
    if unlabelled:
        warn(
            f"{unlabelled:,} of {len(judged.table):,} pairs have no human label ('{judged.human}'): they are "
            "embedded and clustered, but left out of every agreement"
        )


def _name_groups(agreement: _Agreement, table: pd.DataFrame, groups: Groups, labels: np.ndarray) -> None:
    """When the pairs were clustered per value of a column, add that column to clusters.csv (each
    cluster's value) and queries.csv (each query's value)."""
    if groups.column is None:
        return
    dense = labels >= 0
    group_of = pd.Series(table[groups.column].to_numpy()[dense], index=labels[dense])
    group_of = group_of[~group_of.index.duplicated()]
    agreement.clusters.insert(1, groups.column, agreement.clusters["cluster"].map(group_of))
    query_group = table.groupby("query_id", sort=False)[groups.column].first()
    agreement.queries.insert(3, groups.column, agreement.queries["query_id"].map(query_group))


@dataclass(frozen=True)
class _Candidate:
    """One candidate instruction: its pair vectors, their clustering, and its purity score."""

    instruction: str
    vectors: np.ndarray
    labels: np.ndarray
    purity: np.ndarray
    score: float
    clustering: Clustering

    @property
    def degenerate(self) -> bool:
        return self.clustering.degenerate


def _cluster(
    x: np.ndarray, judged: Judgments, groups: Groups, options: JudgesOptions, steps: Steps | None = None
) -> tuple[np.ndarray, Clustering]:
    """Reduce and cluster each group of pairs on its own (all pairs: one group); the labels of all
    groups renumbered together by size, and how each group was clustered: the selection used, its
    min_cluster_size, its health and every attempt, with the warnings about degenerate or thin groups.
    ``steps`` hears the groups when there are several; one group is one HDBSCAN call (and maybe its
    leaf fallback), which cannot count, so a listener shows only the phase and its time."""
    copts = options.cluster
    q_codes = np.asarray(pd.factorize(judged.table["query_id"], sort=True)[0])
    labels = np.full(len(judged.table), -1, dtype=np.int64)
    offset = 0
    described, warnings = [], []
    if steps is not None and len(groups.parts) > 1:
        steps.start(len(groups.parts))
    for name, idx in groups.parts:
        where = groups.where(name)
        copts.check_shape(idx.size, x.shape[1], where)
        checked = cluster_checked(
            reduce_dimensions(x[idx], copts, options.seed), q_codes[idx], copts, options.min_query_pairs
        )
        labels[idx] = np.where(checked.labels >= 0, checked.labels + offset, -1)
        offset += checked.health.n_clusters
        described.append(
            GroupClustering(name, checked.selection, checked.min_cluster_size, checked.health, checked.attempts)
        )
        warnings += _health_warnings(checked.health, where)
        if steps is not None:
            steps.update(1)
    return renumber(labels), Clustering(groups.column, tuple(described), tuple(warnings))


def _health_warnings(health: ClusteringHealth, where: str) -> list[str]:
    """What is said about one group's clustering (``where``: which group, when split): that it is
    degenerate, and each reason it is thin."""
    warnings = []
    if health.degenerate:
        warnings.append(
            f"degenerate clustering{where}: {'; '.join(health.reasons)}. Per-cluster AC1, "
            "ΔAC1 and the bias-prone queries say little about it; try a smaller min_cluster_size, "
            "leaf selection, or clustering each collection apart (--min-cluster-size, "
            "--cluster-selection leaf, --by COLUMN)"
        )
    for caveat in health.caveats:
        warnings.append(
            f"few queries comparable across clusters{where}: {caveat}; the bias-prone queries are "
            "ranked among those only (the pairs cluster mostly by query)"
        )
    return warnings


def _candidates(
    judged: Judgments,
    options: JudgesOptions,
    groups: Groups,
    embeddings: np.ndarray | Mapping[str, np.ndarray] | None,
    rows: np.ndarray,
    cache_dir: str | Path | None,
    progress: bool,
) -> tuple[list[_Candidate], tuple[EmbeddingCounts, ...]]:
    """Embed the pairs with each candidate instruction (3.2) and cluster them (3.3); also the
    embedders' counts by instruction. Precomputed ``embeddings`` follow the table as given: their
    row ``rows[i]`` belongs to pair ``i`` of ``judged``."""
    df = judged.table
    texts = [pair_text(q, d) for q, d in zip(df["query"].tolist(), df["doc"].tolist(), strict=True)]
    copts = options.cluster
    candidates = []
    counts: list[EmbeddingCounts] = []
    for instruction in options.candidate_instructions():
        if embeddings is not None:
            x = _given_vectors(embeddings, instruction, rows)
        else:
            emb = make_embedder(options.embedding, instruction, cache_dir=cache_dir, progress=progress)
            x = emb.embed(texts, what=f"{len(texts)} pairs, instruction {instruction!r}")
            counts.append(EmbeddingCounts(instruction, emb.model_id, **emb.stats))
        sizes = ", ".join(f"{copts.size_for(idx.size)}" for _, idx in groups.parts)
        with counted(
            f"clustering ({copts.reduce}, {copts.cluster_selection_method} selection, min_cluster_size={sizes}"
            f"{f', per {groups.column}' if groups.column else ''})",
            "groups",
            progress,
        ) as steps:
            labels, clustering = _cluster(x, judged, groups, options, steps)
        purity = cluster_purity(labels, judged.relevant[judged.human])
        candidates.append(
            _Candidate(instruction, x, labels, purity, purity_score(purity, options.purity_percentile), clustering)
        )
    return candidates, tuple(counts)


def _given_vectors(embeddings: np.ndarray | Mapping[str, np.ndarray], instruction: str, rows: np.ndarray) -> np.ndarray:
    """The precomputed vectors of ``instruction`` (one array for all, or one per instruction), in the
    pairs' order: row ``rows[i]`` of the table as given is pair ``i``."""
    x = np.asarray(embeddings[instruction] if isinstance(embeddings, Mapping) else embeddings, dtype=np.float32)
    if x.shape[0] != len(rows):
        raise EvalprismError(f"embeddings have {x.shape[0]} rows, expected one per pair ({len(rows)})")
    return x[rows]


def _best(candidates: list[_Candidate]) -> int:
    """The candidate with the highest purity score among those whose clustering is not degenerate
    (among all when every one is; the first on ties, or when none has a score)."""
    usable = [not c.degenerate for c in candidates]
    scores = np.array(
        [c.score if (ok or not any(usable)) else np.nan for c, ok in zip(candidates, usable, strict=True)]
    )
    return int(np.nanargmax(scores)) if np.isfinite(scores).any() else (usable.index(True) if any(usable) else 0)


def _instruction_table(candidates: list[_Candidate], best: int, purity_percentile: float) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "instruction": [c.instruction for c in candidates],
            "clusters": [int(c.labels.max()) + 1 for c in candidates],
            "noise_share": [float(np.mean(c.labels < 0)) for c in candidates],
            "degenerate": [c.degenerate for c in candidates],
            f"purity_p{purity_percentile:g}": [c.score for c in candidates],
            "purity_median": [
                float(np.nanmedian(c.purity)) if np.isfinite(c.purity).any() else np.nan for c in candidates
            ],
            "chosen": [i == best for i in range(len(candidates))],
        }
    )


@dataclass
class _Agreement:
    """Agreement with the human labels over the chosen clustering (3.4-3.5, 4.1)."""

    clusters: pd.DataFrame
    cells: pd.DataFrame
    queries: pd.DataFrame
    overall: pd.DataFrame
    concentration: pd.DataFrame
    notes: list[str]


def _agreement(judged: Judgments, chosen: _Candidate, options: JudgesOptions) -> _Agreement:
    """AC1 per cluster and per query within each cluster, the bias flags, overall agreement and
    whether disagreement concentrates in dense clusters, over the chosen clustering."""
    df, labels, confidence = judged.table, chosen.labels, options.confidence
    h = judged.relevant[judged.human]
    llm_rel = {c: judged.relevant[c] for c in judged.llm}
    clusters = cluster_table(labels, h, llm_rel, chosen.purity, confidence)
    q_codes, q_ids = pd.factorize(df["query_id"], sort=True)
    cells = query_cluster_table(
        np.asarray(q_codes), np.asarray(q_ids, dtype=object), labels, h, llm_rel, confidence, options.min_query_pairs
    )
    flags = flag_queries(cells, options.bias)
    notes = list(judged.notes)
    for judge, n_multi in flags.groupby("judge", sort=False)["n_clusters"].agg(lambda s: int((s >= 2).sum())).items():
        notes.append(
            f"{judge}: {n_multi} of {len(q_ids)} queries have per-query AC1 values in two or more clusters "
            f"(>= {options.min_query_pairs} pairs each); ΔAC1 and the flags exist only for those"
        )
    return _Agreement(
        clusters=clusters,
        cells=cells,
        queries=_query_table(df, flags),
        overall=overall_table(h, llm_rel, confidence),
        concentration=_concentration(labels, h, llm_rel, clusters, confidence),
        notes=notes,
    )


def _query_table(df: pd.DataFrame, flags: pd.DataFrame) -> pd.DataFrame:
    """The flags with each query's text and pair count, ranked per judge: bias-prone first, by ΔAC1."""
    query_text = df.groupby("query_id", sort=True)["query"].first()
    pairs_per_query = df.groupby("query_id", sort=True).size()
    queries = flags.merge(
        pd.DataFrame(
            {"query_id": query_text.index, "query": query_text.to_numpy(), "n_query_pairs": pairs_per_query.to_numpy()}
        ),
        on="query_id",
        how="left",
    )
    queries = queries.sort_values(
        ["judge", "bias_prone", "dac1", "query_id"],
        ascending=[True, False, False, True],
        kind="stable",
        na_position="last",
    ).reset_index(drop=True)
    queries.insert(0, "rank", queries.groupby("judge").cumcount() + 1)
    lead = ["rank", "judge", "query_id", "query", "n_query_pairs"]
    return queries[lead + [c for c in queries.columns if c not in lead]]


def _pair_table(judged: Judgments, labels: np.ndarray, coords: np.ndarray) -> pd.DataFrame:
    """One row per pair: its cluster, raw and binarized labels, map position and the user's columns."""
    df, human = judged.table, judged.human
    pairs = df[["query_id", "doc_id"]].copy()
    pairs["cluster"] = labels
    for col in [human, *judged.llm]:
        pairs[col] = judged.labels[col]
        pairs[f"{col}_relevant"] = judged.relevant[col]
    pairs["map_x"], pairs["map_y"] = coords[:, 0], coords[:, 1]
    extra = [c for c in df.columns if c not in {"query_id", "query", "doc_id", "doc", human, *judged.llm}]
    for c in extra:
        pairs[c] = df[c].to_numpy()
    return pairs
