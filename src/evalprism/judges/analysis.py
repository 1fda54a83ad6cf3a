"""The judge-agreement bias map (seed 004): embed pairs, cluster, measure agreement where it varies.

Steps (section numbers of the seed):

1. validate the judgments and binarize each label column (:mod:`evalprism.io.judgments`);
2. embed every query-document pair as one text with a task instruction (3.2); ``instructor:<path>``
   gives the instruction as INSTRUCTOR's prompt, ``minilm`` and ``st:`` prepend it as text (a
   departure: the paper used INSTRUCTOR-XL);
3. for each candidate instruction: reduce, cluster with HDBSCAN (3.3) and score the 80th-percentile
   cluster purity w.r.t. the human label; keep the best instruction's clustering;
4. agreement (3.4): Gwet's AC1 with SE and interval, Cohen's kappa and percent agreement, overall, per
   cluster (noise apart) and per query within each cluster;
5. ΔAC1 per query and the three bias rules with a direction (3.5, :mod:`evalprism.judges.bias`);
6. whether disagreement concentrates in dense clusters rather than the noise set (4.1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as _st

from evalprism.embed import Embedder, get_embedder
from evalprism.errors import EvalprismError
from evalprism.io.judgments import prepare_judgments
from evalprism.io.options import check_number
from evalprism.judges.agreement import cluster_table, overall_table, query_cluster_table
from evalprism.judges.bias import BiasRules, flag_queries
from evalprism.judges.clustering import ClusterOptions, cluster_pairs, cluster_purity, map_2d, purity_score, reduce_dimensions
from evalprism.judges.result import JudgesResult
from evalprism.progress import status

DEFAULT_INSTRUCTION = "Judge the document's relevance to the query for ad-hoc retrieval"


def pair_text(query: str, doc: str) -> str:
    """One text per query-document pair (the seed embeds the concatenated pair)."""
    return f"Query: {query}\nDocument: {doc}"


def make_embedder(spec: str, instruction: str, *, cache_dir: str | Path | None, progress: bool) -> Embedder:
    """An embedder for one instruction, from the embedders' factory: INSTRUCTOR's format for
    ``instructor:`` specs, else the instruction prepended as text. The instruction is part of every
    cache key."""
    return get_embedder(spec, instruction=instruction, cache_dir=cache_dir, progress=progress)


def _concentration(pairs_cluster: np.ndarray, human: np.ndarray, llm: dict[str, np.ndarray],
                   clusters: pd.DataFrame, confidence: float) -> pd.DataFrame:
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
        rows.append({
            "judge": judge,
            "n_dense": int(dense["n_pairs"]), "n_noise": int(noise["n_pairs"]),
            "ac1_dense": dense["ac1"], "ac1_noise": noise["ac1"],
            "disagreement_dense": 1 - dense["percent_agreement"], "disagreement_noise": 1 - noise["percent_agreement"],
            "kappa_dense": dense["kappa"], "kappa_noise": noise["kappa"],
            "clusters": len(c),
            "cluster_ac1_min": float(ac1[finite].min()) if finite.any() else np.nan,
            "cluster_ac1_median": float(np.median(ac1[finite])) if finite.any() else np.nan,
            "cluster_ac1_max": float(ac1[finite].max()) if finite.any() else np.nan,
            "clusters_below_noise_ac1": int((ac1[finite] < noise["ac1"]).sum()) if np.isfinite(noise["ac1"]) else 0,
            "homogeneity_p": p_value,
            "worst_clusters_pair_share": share_pairs,
            "worst_clusters_disagreement_share": share_wrong,
        })
    return pd.DataFrame(rows)


def analyze(
    table: pd.DataFrame,
    human: str,
    llm: Sequence[str],
    *,
    instructions: Sequence[str] | None = None,
    embedder: str = "minilm",
    embeddings: np.ndarray | Mapping[str, np.ndarray] | None = None,
    scales: Mapping[str, tuple[int, int] | str] | None = None,
    thresholds: Mapping[str, float | str] | None = None,
    reduce: str = "pca",
    n_components: int = 10,
    min_cluster_size: int = 15,
    min_samples: int | None = 5,
    cluster_selection_method: str = "eom",
    min_query_pairs: int = 5,
    tau: float = 0.5,
    outlier_iqr: float = 1.5,
    flip_high: float = 0.8,
    flip_low: float = 0.2,
    purity_percentile: float = 80.0,
    confidence: float = 0.95,
    seed: int = 0,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> JudgesResult:
    """Where do the LLM judges ``llm`` disagree with the human labels ``human``? (seed 004)

    ``table``: judgments (query_id, query, doc_id, doc and the label columns). ``instructions``:
    candidate task instructions (default: the seed's one); the one with the highest
    ``purity_percentile``-th percentile cluster purity is used. ``embeddings``: precomputed pair
    vectors (an array, or one array per instruction) instead of the embedder. Clustering:
    ``reduce`` (none | pca | umap) to ``n_components`` dimensions, HDBSCAN with
    ``min_cluster_size``, ``min_samples``, ``cluster_selection_method``. A per-query AC1 needs at
    least ``min_query_pairs`` pairs of the query in the cluster. Bias rules: ``tau``, ``outlier_iqr``,
    ``flip_high``/``flip_low`` (:mod:`evalprism.judges.bias`).
    """
    check_number("min_query_pairs", min_query_pairs, flag="--min-query-pairs", low=2, integer=True)
    check_number("purity_percentile", purity_percentile, low=0, high=100, low_open=True)
    check_number("confidence", confidence, low=0, high=1, low_open=True, high_open=True)
    copts = ClusterOptions(reduce=reduce, n_components=n_components, min_cluster_size=min_cluster_size,
                           min_samples=min_samples, cluster_selection_method=cluster_selection_method)
    rules = BiasRules(tau=tau, iqr_k=outlier_iqr, flip_high=flip_high, flip_low=flip_low)
    copts.check()
    judged = prepare_judgments(table, human, llm, scales=scales, thresholds=thresholds)
    df = judged.table
    instructions = list(dict.fromkeys(instructions or [DEFAULT_INSTRUCTION]))
    copts.check_shape(len(df))  # the pair count is known before embedding, the dimension after
    h = judged.relevant[human]
    llm_rel = {c: judged.relevant[c] for c in judged.llm}

    texts = [pair_text(q, d) for q, d in zip(df["query"].tolist(), df["doc"].tolist(), strict=True)]
    candidates = []
    embed_stats: dict[str, object] = {}
    for instruction in instructions:
        if embeddings is not None:
            x = embeddings[instruction] if isinstance(embeddings, Mapping) else embeddings
            x = np.asarray(x, dtype=np.float32)
            if x.shape[0] != len(df):
                raise EvalprismError(f"embeddings have {x.shape[0]} rows, expected one per pair ({len(df)})")
        else:
            status(f"embedding {len(texts)} pairs with '{embedder}' ({instruction!r})", progress)
            emb = make_embedder(embedder, instruction, cache_dir=cache_dir, progress=progress)
            x = emb.embed(texts)
            embed_stats[instruction] = dict(emb.stats, model_id=emb.model_id)
        copts.check_shape(*x.shape)
        status(f"clustering ({copts.reduce}, min_cluster_size={copts.min_cluster_size})", progress)
        labels = cluster_pairs(reduce_dimensions(x, copts, seed), copts)
        purity = cluster_purity(labels, h)
        candidates.append((instruction, x, labels, purity, purity_score(purity, purity_percentile)))

    scores = [c[4] for c in candidates]
    best = int(np.nanargmax(scores)) if np.isfinite(scores).any() else 0
    instruction, x, labels, purity, _ = candidates[best]
    instruction_table = pd.DataFrame({
        "instruction": [c[0] for c in candidates],
        "clusters": [int(c[2].max()) + 1 for c in candidates],
        "noise_share": [float(np.mean(c[2] < 0)) for c in candidates],
        f"purity_p{purity_percentile:g}": scores,
        "purity_median": [float(np.nanmedian(c[3])) if np.isfinite(c[3]).any() else np.nan for c in candidates],
        "chosen": [i == best for i in range(len(candidates))],
    })

    status("agreement per cluster and per query", progress)
    coords = map_2d(x, copts, seed)
    clusters = cluster_table(labels, h, llm_rel, purity, confidence)
    q_codes, q_ids = pd.factorize(df["query_id"], sort=True)
    cells = query_cluster_table(np.asarray(q_codes), np.asarray(q_ids, dtype=object), labels, h, llm_rel,
                                confidence, min_query_pairs)
    flags = flag_queries(cells, rules)
    query_text = df.groupby("query_id", sort=True)["query"].first()
    pairs_per_query = df.groupby("query_id", sort=True).size()
    queries = flags.merge(pd.DataFrame({"query_id": query_text.index, "query": query_text.to_numpy(),
                                        "n_query_pairs": pairs_per_query.to_numpy()}), on="query_id", how="left")
    queries = queries.sort_values(["judge", "bias_prone", "dac1", "query_id"], ascending=[True, False, False, True],
                                  kind="stable", na_position="last").reset_index(drop=True)
    queries.insert(0, "rank", queries.groupby("judge").cumcount() + 1)
    lead = ["rank", "judge", "query_id", "query", "n_query_pairs"]
    queries = queries[lead + [c for c in queries.columns if c not in lead]]

    pairs = df[["query_id", "doc_id"]].copy()
    pairs["cluster"] = labels
    for col in [human, *judged.llm]:
        pairs[col] = judged.labels[col]
        pairs[f"{col}_relevant"] = judged.relevant[col]
    pairs["map_x"], pairs["map_y"] = coords[:, 0], coords[:, 1]
    extra = [c for c in df.columns if c not in {"query_id", "query", "doc_id", "doc", human, *judged.llm}]
    for c in extra:
        pairs[c] = df[c].to_numpy()

    notes = list(judged.notes)
    for judge, n_multi in flags.groupby("judge", sort=False)["n_clusters"].agg(lambda s: int((s >= 2).sum())).items():
        notes.append(f"{judge}: {n_multi} of {len(q_ids)} queries have per-query AC1 values in two or more clusters "
                     f"(>= {min_query_pairs} pairs each); ΔAC1 and the flags exist only for those")
    overall = overall_table(h, llm_rel, confidence)
    concentration = _concentration(labels, h, llm_rel, clusters, confidence)
    options = {
        "human": human, "llm": judged.llm, "embedder": embedder if embeddings is None else "precomputed",
        "instructions": instructions, "instruction": instruction, "reduce": copts.reduce,
        "n_components": copts.n_components, "min_cluster_size": copts.min_cluster_size,
        "min_samples": copts.min_samples, "cluster_selection_method": copts.cluster_selection_method,
        "min_query_pairs": min_query_pairs, "tau": tau, "outlier_iqr": outlier_iqr, "flip_high": flip_high,
        "flip_low": flip_low, "purity_percentile": purity_percentile, "confidence": confidence, "seed": seed,
        "scales": {c: s.describe() for c, s in judged.scales.items()},
    }
    return JudgesResult(pairs=pairs, clusters=clusters, queries=queries, query_clusters=cells, overall=overall,
                        instructions=instruction_table, concentration=concentration, texts=df[["query", "doc"]],
                        options=options, embed_stats=embed_stats or None, notes=notes)
