"""Human-LLM agreement tables: overall, per cluster, per query within each cluster (seed 3.4).

Every table is long (one row per judge and unit) and comes from one call of the vectorised
:func:`evalprism.stats.agreement_by_group` per judge; ratings are the binarized labels (0/1, -1
missing) with categories (0, 1) always declared, so a cell where everyone says "relevant" has AC1 1
rather than an undefined value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from evalprism.stats.agreement import GroupAgreement, agreement_by_group

NOISE = -1


def _codes(relevant: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(relevant), -1, relevant).astype(np.int64)


def _errors(groups: np.ndarray, n_groups: int, human: np.ndarray, llm: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per group: pairs judged by both, false negatives (human 1, LLM 0), false positives,
    human-relevant and LLM-relevant counts among the pairs judged by both."""
    both = (groups >= 0) & ~np.isnan(human) & ~np.isnan(llm)
    g = groups[both]
    h, m = human[both], llm[both]
    count = lambda w: np.bincount(g, weights=w, minlength=n_groups).astype(np.int64)  # noqa: E731
    return count(np.ones(g.size)), count((h == 1) & (m == 0)), count((h == 0) & (m == 1)), count(h), count(m)


def _frame(stat: GroupAgreement, extra: Mapping[str, Any], counts: tuple[np.ndarray, ...]) -> pd.DataFrame:
    n_both, fn, fp, h_rel, m_rel = counts
    out = pd.DataFrame(extra, index=pd.RangeIndex(stat.ac1.size))
    out["n_pairs"] = n_both
    out["ac1"] = stat.ac1
    out["ac1_se"] = stat.se
    out["ac1_lo"] = stat.lo
    out["ac1_hi"] = stat.hi
    out["kappa"] = stat.kappa
    out["percent_agreement"] = stat.pa
    out["false_negatives"] = fn
    out["false_positives"] = fp
    out["human_relevant"] = h_rel
    out["llm_relevant"] = m_rel
    return out


def group_agreement(
    groups: np.ndarray, n_groups: int, human: np.ndarray, llm: np.ndarray, confidence: float
) -> tuple[GroupAgreement, tuple[np.ndarray, ...]]:
    """AC1/kappa/percent agreement and error counts of every group for one judge."""
    stat = agreement_by_group(_codes(human), _codes(llm), groups, n_groups, 2, confidence=confidence)
    return stat, _errors(groups, n_groups, human, llm)


def overall_table(
    human: np.ndarray,
    llm: dict[str, np.ndarray],
    confidence: float,
    groups: np.ndarray | None = None,
    group_names: list[str] | None = None,
    group_column: str = "group",
) -> pd.DataFrame:
    """One row per judge (and per group, when ``groups`` is given) over all pairs."""
    g = np.zeros(human.size, dtype=np.int64) if groups is None else groups
    names = ["all"] if group_names is None else group_names
    frames = []
    for judge, values in llm.items():
        stat, counts = group_agreement(g, len(names), human, values, confidence)
        extra = {"judge": judge} | ({} if groups is None else {group_column: names})
        frames.append(_frame(stat, extra, counts))
    return pd.concat(frames, ignore_index=True)


def cluster_table(
    clusters: np.ndarray, human: np.ndarray, llm: dict[str, np.ndarray], purity: np.ndarray, confidence: float
) -> pd.DataFrame:
    """One row per (cluster, judge); the noise set is the row with cluster -1 (``is_noise``)."""
    k = purity.size
    index = np.where(clusters >= 0, clusters, k)  # noise last
    size = np.bincount(index, minlength=k + 1)
    ids = np.r_[np.arange(k), NOISE]
    frames = []
    for judge, values in llm.items():
        stat, counts = group_agreement(index, k + 1, human, values, confidence)
        extra = {
            "cluster": ids,
            "judge": judge,
            "is_noise": ids == NOISE,
            "size": size,
            "purity": np.r_[purity, np.nan],
        }
        frames.append(_frame(stat, extra, counts))
    out = pd.concat(frames, ignore_index=True)
    return out[out["size"] > 0].reset_index(drop=True)


def query_cluster_table(
    query_codes: np.ndarray,
    query_ids: np.ndarray,
    clusters: np.ndarray,
    human: np.ndarray,
    llm: dict[str, np.ndarray],
    confidence: float,
    min_pairs: int,
) -> pd.DataFrame:
    """One row per (judge, query, dense cluster) cell holding at least ``min_pairs`` pairs judged by
    both; the noise set is left out (the seed's ΔAC1 is taken over a query's clusters)."""
    k = int(clusters.max()) + 1 if (clusters >= 0).any() else 0
    n_q = query_ids.size
    cell = np.where(clusters >= 0, query_codes * max(k, 1) + clusters, -1)
    n_cells = n_q * max(k, 1)
    frames = []
    for judge, values in llm.items():
        stat, counts = group_agreement(cell, n_cells, human, values, confidence)
        present = counts[0] >= min_pairs
        idx = np.flatnonzero(present)
        sub = GroupAgreement(*(getattr(stat, f)[idx] for f in GroupAgreement.__dataclass_fields__))
        extra = {"judge": judge, "query_id": query_ids[idx // max(k, 1)], "cluster": idx % max(k, 1)}
        frames.append(_frame(sub, extra, tuple(c[idx] for c in counts)))
    return pd.concat(frames, ignore_index=True)
