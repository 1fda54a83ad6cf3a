"""Intervals that settle a router ranking: values, paired differences, BH, plain sentences and AIQ.

Given each policy's pointwise value and cost on every held-out item at every budget
(:func:`~evalprism.p2l.bench_policies.item_outcomes`):

- a policy's ``value`` is its mean over the items, with an SE clustered by prompt (items sharing a
  prompt text are one draw; or by benchmark with ``--se-by benchmark``: each benchmark one draw;
  :func:`~evalprism.stats.compare_tests.paired_difference` on the values);
- ``diff_vs_ref`` = reference − policy on the same items (positive: the reference is better), with its
  paired SE clustered the same way, a t interval (``low``, ``high``, G − 1 degrees of freedom), a
  two-sided ``p`` and ``p_adj``: Benjamini-Hochberg over every policy and budget (the oracle, which
  reads the truth, is shown but not tested); ``mde``: the difference a 5% test finds with 80% power;
- one sentence per budget and policy that follows from those numbers (:func:`verdict`);
- AIQ (:mod:`evalprism.stats.aiq`) per policy over the cost range of the models, with a percentile
  interval from a bootstrap of the same units (the policies fixed, the items resampled by cluster).

On pairwise battles (:mod:`evalprism.p2l.bench_battles`) a policy's value is its held-out win rate,
:func:`~evalprism.stats.policy_value.policy_value` (a ratio over the prompts whose routed model has a
verdict), and :func:`battle_policy_table` takes value, SE and paired difference from there (the
prompt-clustered sandwich ``p2l evaluate --costs`` reports); intervals, p, BH and MDE follow as above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from evalprism.stats.aiq import aiq
from evalprism.stats.compare_tests import adjust_pvalues, minimum_detectable_effect, paired_difference, t_quantile
from evalprism.stats.policy_value import PolicyValue, paired_value_difference

#: (policy, budget) -> per-item (value, cost)
Outcomes = Mapping[tuple[str, float], tuple[np.ndarray, np.ndarray]]
#: (policy, budget) -> its held-out value on battles and its expected cost per prompt
BattleOutcomes = Mapping[tuple[str, float], tuple[PolicyValue, np.ndarray]]
#: the columns of the policy table, in order
COLUMNS = ["policy", "budget", "value", "se", "cost", "diff_vs_ref", "low", "high", "p", "p_adj", "mde"]
#: policies shown but never tested against the reference (they read the held-out truth)
REFERENCES_ONLY = ("oracle",)
#: a quality of 1 is this many points in the sentences
POINTS = 100.0


def _two_sided_p(mean: float, se: float, df: int) -> float:
    if not (np.isfinite(se) and se > 0 and df >= 1):
        return 1.0 if mean == 0 else float("nan")
    return float(2.0 * stats.t.sf(abs(mean / se), df))


def policy_table(outcomes: Outcomes, reference: str, clusters: np.ndarray) -> pd.DataFrame:
    """One row per (policy, budget): value, se, cost, diff_vs_ref, low, high, p, p_adj, mde (module
    docstring), in the order of ``outcomes``."""
    rows = []
    for (policy, budget), (value, cost) in outcomes.items():
        own = paired_difference(value, clusters)
        row = {"policy": policy, "budget": budget, "value": own.mean, "se": own.se, "cost": float(cost.mean())}
        if policy == reference:
            row |= {"diff_vs_ref": np.nan, "low": np.nan, "high": np.nan, "p": np.nan, "mde": np.nan}
        else:
            diff = paired_difference(outcomes[(reference, budget)][0] - value, clusters)
            tested = policy not in REFERENCES_ONLY
            row |= {
                "diff_vs_ref": diff.mean,
                "low": diff.low,
                "high": diff.high,
                "p": _two_sided_p(diff.mean, diff.se, diff.df) if tested else np.nan,
                "mde": float(minimum_detectable_effect(diff.se)),
            }
        rows.append(row)
    table = pd.DataFrame(rows)
    table["p_adj"] = adjust_pvalues(table["p"].to_numpy(dtype=float), "bh")
    return table[COLUMNS]


def battle_policy_table(outcomes: BattleOutcomes, reference: str) -> pd.DataFrame:
    """:func:`policy_table` on battles: value and SE of each policy's held-out win rate, the paired
    difference to the reference by prompt (both from :mod:`evalprism.stats.policy_value`), a t interval
    with G − 1 degrees of freedom (G held-out prompts), p, BH-adjusted p and MDE; and
    ``prompts_scored`` / ``prompts_excluded``: the routed mass with and without a verdict, in prompts."""
    rows = []
    for (policy, budget), (pv, cost) in outcomes.items():
        row = {"policy": policy, "budget": budget, "value": pv.value, "se": pv.se, "cost": float(cost.mean())}
        if policy == reference:
            row |= {"diff_vs_ref": np.nan, "low": np.nan, "high": np.nan, "p": np.nan, "mde": np.nan}
        else:
            diff, se = paired_value_difference(outcomes[(reference, budget)][0], pv)
            df = pv.covered.size - 1
            half = t_quantile(0.975, df) * se if df >= 1 and np.isfinite(se) else np.nan
            row |= {
                "diff_vs_ref": diff,
                "low": diff - half,
                "high": diff + half,
                "p": _two_sided_p(diff, se, df) if policy not in REFERENCES_ONLY else np.nan,
                "mde": float(minimum_detectable_effect(se)),
            }
        rows.append(row | {"prompts_scored": pv.scored, "prompts_excluded": pv.excluded})
    table = pd.DataFrame(rows)
    table["p_adj"] = adjust_pvalues(table["p"].to_numpy(dtype=float), "bh")
    return table[[*COLUMNS, "prompts_scored", "prompts_excluded"]]


def verdict(row: pd.Series, reference: str, level: float = 0.05) -> str:
    """The plain sentence of one policy against the reference at one budget: who beats whom by how many
    points with the interval when the BH-adjusted p is below ``level``; otherwise that the two cannot be
    told apart, with the difference's MDE."""
    name, diff = str(row["policy"]), float(row["diff_vs_ref"])
    low, high = POINTS * float(row["low"]), POINTS * float(row["high"])
    if np.isfinite(row["p_adj"]) and row["p_adj"] < level:
        if diff > 0:
            return f"{reference} beats {name} by {POINTS * diff:.1f} points [{low:.1f}, {high:.1f}]"
        return f"{name} beats {reference} by {-POINTS * diff:.1f} points [{-high:.1f}, {-low:.1f}]"
    if float(row["mde"]) == 0.0:
        return f"{reference} and {name} score the same on every item"
    if name in REFERENCES_ONLY:
        return f"{name} is {-POINTS * diff:+.1f} points [{-high:.1f}, {-low:.1f}] from {reference} (reads the truth)"
    return (
        f"{reference} and {name} cannot be told apart: {reference} − {name} = {POINTS * diff:+.1f} points "
        f"[{low:.1f}, {high:.1f}], MDE {POINTS * float(row['mde']):.1f} points"
    )


def verdict_lines(table: pd.DataFrame, reference: str) -> list[str]:
    """One line per budget: every policy's sentence against the reference."""
    lines = []
    for budget, rows in table.groupby("budget", sort=False):
        said = [verdict(row, reference) for _, row in rows.iterrows() if row["policy"] != reference]
        lines.append(f"Budget {float(budget):.4g}: " + "; ".join(said) + ".")
    return lines


def bootstrap_weights(clusters: np.ndarray, rounds: int, seed: int) -> np.ndarray:
    """(rounds, n) item weights of a bootstrap of prompt clusters: each round draws G clusters with
    replacement, an item weighing as many times as its cluster was drawn."""
    codes = np.unique(clusters, return_inverse=True)[1].ravel()
    g = int(codes.max()) + 1
    counts = np.random.default_rng(seed).multinomial(g, np.full(g, 1.0 / g), size=rounds)
    return counts[:, codes].astype(np.float64)


def aiq_table(
    outcomes: Outcomes,
    policies: Sequence[str],
    budgets: Sequence[float],
    cost_range: tuple[float, float],
    clusters: np.ndarray,
    rounds: int,
    seed: int,
    covered: Mapping[tuple[str, float], np.ndarray] | None = None,
) -> pd.DataFrame:
    """Per policy: its AIQ over ``cost_range`` from its (cost, value) point at every budget, and a 95%
    percentile interval from ``rounds`` bootstrap resamples of prompt clusters. ``covered``: on battles,
    each prompt's routed mass with a verdict (w_p), the value then the ratio Σ w_p v_p / Σ w_p
    (:func:`~evalprism.stats.policy_value.policy_value`) in the point and in every resample (a resample
    whose draws at some budget have no verdict at all has no value and is left out)."""
    weights = bootstrap_weights(clusters, rounds, seed)
    total = weights.sum(axis=1)
    rows = []
    for policy in policies:
        values = np.column_stack([outcomes[(policy, b)][0] for b in budgets])
        costs = np.column_stack([outcomes[(policy, b)][1] for b in budgets])
        boot_c = (weights @ costs) / total[:, None]
        if covered is None:
            point = aiq(costs.mean(axis=0), values.mean(axis=0), *cost_range)
            boot_v = (weights @ values) / total[:, None]
        else:
            w = np.column_stack([covered[(policy, b)] for b in budgets])
            point = aiq(costs.mean(axis=0), (w * values).sum(axis=0) / w.sum(axis=0), *cost_range)
            with np.errstate(invalid="ignore", divide="ignore"):  # a resample without a scored prompt
                boot_v = (weights @ (w * values)) / (weights @ w)
            keep = np.isfinite(boot_v).all(axis=1)
            boot_v, boot_c = boot_v[keep], boot_c[keep]
        draws = np.array([aiq(c, v, *cost_range) for c, v in zip(boot_c, boot_v, strict=True)])
        low, high = np.percentile(draws, [2.5, 97.5])
        rows.append({"policy": policy, "aiq": point, "low": float(low), "high": float(high)})
    return pd.DataFrame(rows)
