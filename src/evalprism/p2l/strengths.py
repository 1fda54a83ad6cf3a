"""Strengths and weaknesses of models by prompt category (seed 002 section 3.4, Fig. 5).

For every category, the prompts' leaderboards are aggregated by eq. (3); a model's strength there
is its predicted BT win rate against one reference model, σ(θ̃_m − θ̃_ref). Categories come from a
column of the user's prompts or, without one, from clustering the prompt embeddings with HDBSCAN
(on a 5-dimensional PCA projection: density estimates in 384 dimensions call almost everything
noise, the reason topic-modelling pipelines reduce dimension first); prompts HDBSCAN leaves out
join the cluster with the nearest centroid, so every prompt counts. Clusters are named by their
most distinctive terms (class-based TF-IDF: terms frequent in the cluster and rare elsewhere).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit
from sklearn.cluster import HDBSCAN
from sklearn.decomposition import PCA
from sklearn.feature_extraction.text import TfidfVectorizer

from evalprism.errors import EvalprismError
from evalprism.stats.aggregate import Aggregation, aggregate_leaderboards


def cluster_prompts(
    prompts: list[str], embeddings: np.ndarray, min_cluster_size: int | None = None, n_terms: int = 3
) -> np.ndarray:
    """A category name per prompt: HDBSCAN clusters of the embeddings, each named by its top terms.

    ``min_cluster_size`` defaults to max(5, n/40): small enough to find niches, large enough that a
    category's leaderboard averages over several prompts. With no cluster found, every prompt is
    in ``all prompts``.
    """
    n = len(prompts)
    size = min_cluster_size or max(5, n // 40)
    if n < 2 * size:
        return np.array(["all prompts"] * n, dtype=object)
    emb = np.asarray(embeddings, dtype=np.float64)
    reduced = PCA(n_components=min(5, emb.shape[1], n - 1), random_state=0).fit_transform(emb)
    labels = HDBSCAN(min_cluster_size=size, min_samples=3, copy=True).fit_predict(reduced)
    clusters = sorted(set(labels) - {-1})
    if not clusters:
        return np.array(["all prompts"] * n, dtype=object)
    noise = labels == -1
    if noise.any():
        centroids = np.stack([emb[labels == c].mean(axis=0) for c in clusters])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        unit = emb[noise] / np.linalg.norm(emb[noise], axis=1, keepdims=True)
        labels = labels.copy()
        labels[noise] = np.asarray(clusters)[(unit @ centroids.T).argmax(axis=1)]
    docs = [" ".join(p for p, lab in zip(prompts, labels, strict=True) if lab == c) for c in clusters]
    vectorizer = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[a-zA-Z][a-zA-Z]+\b", sublinear_tf=True)
    try:
        tfidf = vectorizer.fit_transform(docs).toarray()
        vocab = vectorizer.get_feature_names_out()
        names = {c: ", ".join(vocab[np.argsort(-tfidf[i])[:n_terms]]) for i, c in enumerate(clusters)}
    except ValueError:  # no words at all (e.g. only numbers): number the clusters instead
        names = {c: f"cluster {i + 1}" for i, c in enumerate(clusters)}
    seen: dict[str, int] = {}
    for c in clusters:  # two clusters with the same top terms stay distinct
        seen[names[c]] = seen.get(names[c], 0) + 1
        if seen[names[c]] > 1:
            names[c] = f"{names[c]} ({seen[names[c]]})"
    return np.array([names[lab] for lab in labels], dtype=object)


def category_leaderboards(
    coefs: np.ndarray, categories: np.ndarray, models: list[str], method: Aggregation = "bt"
) -> pd.DataFrame:
    """Long table: category, prompts, model, coef (aggregated over the category's prompts), rank."""
    categories = np.asarray(categories).astype(str)
    rows = []
    for cat in pd.unique(categories):
        mask = categories == cat
        agg = aggregate_leaderboards(coefs[mask], method=method)
        order = np.argsort(-agg, kind="stable")
        rank = np.empty(len(models), int)
        rank[order] = np.arange(1, len(models) + 1)
        rows += [
            {"category": cat, "prompts": int(mask.sum()), "model": m, "coef": float(c), "rank": int(r)}
            for m, c, r in zip(models, agg, rank, strict=True)
        ]
    return pd.DataFrame(rows)


def strengths(categories_table: pd.DataFrame, reference: str) -> pd.DataFrame:
    """Win rate of every model against ``reference`` in every category: σ(θ̃_m − θ̃_ref).

    Returns category, prompts, model, win_rate, and the gap to the model's own median win rate
    across categories (positive: a relative strength of that model)."""
    if reference not in set(categories_table["model"]):
        raise EvalprismError(
            f"reference model '{reference}' is not one of the model's {categories_table['model'].nunique()} models"
        )
    ref = categories_table[categories_table["model"] == reference].set_index("category")["coef"]
    out = categories_table[["category", "prompts", "model"]].copy()
    out["win_rate"] = expit(categories_table["coef"].to_numpy() - ref.loc[categories_table["category"]].to_numpy())
    out["vs_own_median"] = out["win_rate"] - out.groupby("model")["win_rate"].transform("median")
    out.insert(2, "reference", reference)
    return out
