"""Bias-prone queries: cluster-based agreement variation ΔAC1 and the seed's three rules (3.5).

For each judge and query, ΔAC1 = max - min of the query's per-cluster AC1 values (cells with at least
the minimum number of pairs, noise left out; a query needs values in two clusters). A query is
bias-prone when any rule fires:

1. absolute: ΔAC1 >= ``tau`` (default 0.5, the seed's τ_abs);
2. outlier: ΔAC1 > Q3 + ``iqr_k`` · IQR of the judge's ΔAC1 values over queries (Tukey's fence; the
   seed names "outlier thresholds" without a rule, this is the stated one);
3. directional flip: max AC1 > ``flip_high`` (0.8) and min AC1 < ``flip_low`` (0.2).

Direction: in the query's lowest-AC1 cluster (where its disagreement concentrates) the LLM
*under-recalls* when false negatives (human relevant, LLM not) outnumber false positives, and
*over-includes* in the opposite case; equal counts are *mixed*.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalprism.judges.options import BiasRules

__all__ = ["BiasRules", "direction", "flag_queries", "outlier_fence"]


def direction(false_negatives: np.ndarray, false_positives: np.ndarray) -> np.ndarray:
    """'under-recalls' / 'over-includes' / 'mixed' / 'none' from error counts."""
    fn, fp = np.asarray(false_negatives), np.asarray(false_positives)
    return np.select([fn > fp, fp > fn, (fn + fp) > 0], ["under-recalls", "over-includes", "mixed"], "none")


def outlier_fence(values: np.ndarray, iqr_k: float) -> float:
    """Q3 + iqr_k · IQR of the finite values (NaN when there are none)."""
    v = values[np.isfinite(values)]
    if v.size == 0:
        return float("nan")
    q1, q3 = np.percentile(v, [25, 75])
    return float(q3 + iqr_k * (q3 - q1))


def flag_queries(cells: pd.DataFrame, rules: BiasRules) -> pd.DataFrame:
    """Per (judge, query): the AC1 range over its clusters, the three flags and the direction.

    ``cells``: one row per (judge, query_id, cluster) with ``ac1``, ``false_negatives``,
    ``false_positives`` (as from :func:`evalprism.judges.agreement.query_cluster_table`).
    """
    cols = [
        "judge",
        "query_id",
        "n_clusters",
        "ac1_max",
        "ac1_min",
        "dac1",
        "cluster_max",
        "cluster_min",
        "flag_abs",
        "flag_outlier",
        "flag_flip",
        "bias_prone",
        "direction",
        "false_negatives_min",
        "false_positives_min",
        "outlier_fence",
    ]
    valid = cells[np.isfinite(cells["ac1"].to_numpy(dtype=float))]
    if valid.empty:
        return pd.DataFrame(columns=cols)
    # Sort so that the first row of a group is its minimum and the last its maximum (ties: lower cluster id).
    ordered = valid.sort_values(["judge", "query_id", "ac1", "cluster"], kind="stable")
    grouped = ordered.groupby(["judge", "query_id"], sort=True)
    lowest = grouped.first()  # each query's lowest-AC1 cell
    highest = grouped.last()
    out = pd.DataFrame(
        {
            "n_clusters": grouped.size(),
            "ac1_max": highest["ac1"],
            "ac1_min": lowest["ac1"],
            "cluster_max": highest["cluster"],
            "cluster_min": lowest["cluster"],
            "false_negatives_min": lowest["false_negatives"],
            "false_positives_min": lowest["false_positives"],
        }
    ).reset_index()
    multi = out["n_clusters"].to_numpy() >= 2
    out["dac1"] = np.where(multi, out["ac1_max"] - out["ac1_min"], np.nan)
    fences = out.groupby("judge")["dac1"].agg(lambda s: outlier_fence(s.to_numpy(dtype=float), rules.iqr_k))
    out["outlier_fence"] = out["judge"].map(fences).astype(float)
    dac1 = out["dac1"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        out["flag_abs"] = multi & (dac1 >= rules.tau)
        out["flag_outlier"] = multi & (dac1 > out["outlier_fence"].to_numpy())
        out["flag_flip"] = (
            multi & (out["ac1_max"].to_numpy() > rules.flip_high) & (out["ac1_min"].to_numpy() < rules.flip_low)
        )
    out["bias_prone"] = out["flag_abs"] | out["flag_outlier"] | out["flag_flip"]
    out["direction"] = np.where(multi, direction(out["false_negatives_min"], out["false_positives_min"]), "")
    return out[cols]
