"""The router benchmark's findings and report: sentences per budget, the quality-vs-cost plot (the
Pareto view RouterBench uses) with intervals for every policy, the AIQ table and the policy table."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from evalprism.p2l.reports import cost_axis_layout
from evalprism.report import Report

if TYPE_CHECKING:
    from evalprism.p2l.bench import BenchResult

#: colours and markers of the policies in the plot; a policy not listed gets the default cycle
STYLES = {
    "p2l": ("#1f77b4", "circle"),
    "knn": ("#ff7f0e", "square"),
    "mlp": ("#9467bd", "triangle-up"),
    "mf": ("#8c564b", "triangle-down"),
    "benchmark leaderboard": ("#2ca02c", "diamond"),
    "best single": ("black", "circle-open"),
    "random mix": ("#7f7f7f", "x"),
    "oracle": ("#d62728", "star"),
}
LEARNED_NOTE = "(routers fitted on the training items; the oracle reads the held-out scores)"


def aiq_line(aiq: pd.DataFrame, unit: str = "prompt") -> str:
    """The AIQ ranking in one sentence, with each interval (bootstrapped by ``unit``)."""
    ranked = aiq.sort_values("aiq", ascending=False)
    parts = [f"{r.policy} {r.aiq:.3f} [{r.low:.3f}, {r.high:.3f}]" for r in ranked.itertuples()]
    return f"AIQ (mean quality over the cost range, non-decreasing convex hull; 95% bootstrap by {unit}): " + (
        "; ".join(parts) + "."
    )


def leaderboard_line(result: BenchResult) -> str:
    """Whether any learned router beats the per-benchmark leaderboard at some budget (BH-adjusted p of
    their paired difference is not computed between two baselines, so this compares AIQ intervals)."""
    aiq = result.aiq.set_index("policy")
    if "benchmark leaderboard" not in aiq.index:
        return ""
    base = aiq.loc["benchmark leaderboard"]
    learned = [p for p in result.summary.learned if p != "benchmark leaderboard"]
    above = [p for p in learned if aiq.loc[p, "low"] > base["high"]]
    board, what = "per-benchmark leaderboard", ""
    if on_battles(result):
        board, what = "leaderboard", "; each model's mean result, per category where the battles name one"
    if above:
        return f"Learned routers whose AIQ interval lies above the {board}'s: {', '.join(above)}."
    return (
        f"No learned router's AIQ interval lies above the {board}'s ({base['aiq']:.3f} "
        f"[{base['low']:.3f}, {base['high']:.3f}]{what})."
    )


def on_battles(result: BenchResult) -> bool:
    """True when the policies were valued by held-out win rate on battles (not pointwise)."""
    return result.summary.valuation != "pointwise"


def bench_findings(result: BenchResult) -> list[str]:
    s = result.summary
    if on_battles(result):
        head = (
            f"Win-rate valuation (pairwise battles, as `p2l evaluate --costs`) on {s.heldout_items:,} held-out prompts "
            f"({s.train_items:,} training prompts, {len(s.models)} models)"
        )
    else:
        head = (
            f"Pointwise valuation on {s.heldout_items:,} held-out items ({s.train_items:,} training items, "
            f"{len(s.models)} models)"
        )
    head += f"; costs {s.cost_source}; reference: {s.reference} ({s.reference_why})."
    return [head, *result.verdicts(), aiq_line(result.aiq, result.options.se_by), leaderboard_line(result)]


def valuation_sentence(result: BenchResult) -> str:
    """How the policies were valued, for the report's summary."""
    s = result.summary
    if on_battles(result):
        return (
            "Valuation: win rate on held-out pairwise battles (the valuation of `p2l evaluate --costs`): a model's "
            "score on a held-out prompt is its win rate in that prompt's battles (a tie of either kind ½); a policy's "
            "value is the expected score of the model it draws, draws on a model without a battle on the prompt "
            "excluded and counted (prompts_excluded); its cost that model's cost: "
            f"{s.cost_source}. The baselines learned each training prompt's per-model results, sparse (only the "
            "models that fought there)."
        )
    return (
        "Valuation: pointwise (every model scored on each held-out item; a policy's value on an item is the score "
        f"of the model it routes to, expected over a mix; its cost that model's cost: {s.cost_source})."
    )


def quality_cost_figure(
    policies: pd.DataFrame, quality: str = "held-out quality (mean score of the routed model)"
) -> go.Figure:
    """Held-out value against mean cost per item, one trace per policy (its points at the budgets),
    ± 1.96 SE bars (clustered by the benchmark's unit)."""
    fig = go.Figure()
    for name, rows in policies.groupby("policy", sort=False):
        colour, symbol = STYLES.get(str(name), (None, "circle"))
        fig.add_trace(
            go.Scatter(
                x=rows["cost"],
                y=rows["value"],
                mode="lines+markers",
                name=str(name),
                error_y={"type": "data", "array": 1.96 * rows["se"]},
                line={"color": colour, "width": 3 if name == "p2l" else 2},
                marker={"symbol": symbol, "size": 9, "color": colour},
                customdata=rows["budget"],
                hovertemplate="budget %{customdata:.4g}<br>cost %{x:.4g}<br>value %{y:.3f}<extra>"
                + str(name)
                + "</extra>",
            )
        )
    return cost_axis_layout(fig, policies["cost"], "mean cost per item", quality, 460)


def _shown(policies: pd.DataFrame) -> pd.DataFrame:
    shown = policies.copy()
    for col in ("value", "se", "diff_vs_ref", "low", "high", "mde"):
        shown[col] = shown[col].map(lambda v: "" if not np.isfinite(v) else f"{v:.3f}")
    for col in ("p", "p_adj"):
        shown[col] = shown[col].map(lambda v: "" if not np.isfinite(v) else f"{v:.2g}")
    for col in ("budget", "cost"):
        shown[col] = shown[col].map(lambda v: f"{v:.4g}")
    return shown


def bench_report(result: BenchResult) -> Report:
    s = result.summary
    unit = "prompts" if on_battles(result) else "items"
    report = Report(
        title="Router benchmark",
        subtitle=f"{len(s.models)} models, {s.train_items:,} training and {s.heldout_items:,} held-out {unit}",
    )
    report.summary(
        valuation_sentence(result) + " Every "
        "learned router routes by one rule: per item, maximise its predicted quality with expected cost at most "
        f"the budget (Theorem 1). Reference: {s.reference} ({s.reference_why}). Differences are reference − policy "
        f"on the same items, SE clustered by {result.options.se_by}, p adjusted by Benjamini-Hochberg over every "
        "policy and budget.",
        *result.verdicts(),
        aiq_line(result.aiq, result.options.se_by),
        leaderboard_line(result),
    )
    report.figure(
        quality_cost_figure(
            result.policies, *(["held-out win rate of the routed model"] if on_battles(result) else [])
        ),
        "Quality against cost, every policy " + LEARNED_NOTE,
        f"Each point is one budget: the policy's mean held-out quality (bars: 95% intervals by {result.options.se_by}) "
        "against its mean cost per item. Up and to the left is better; the oracle reads the held-out truth.",
    )
    report.table(
        result.aiq.round(4),
        "AIQ per policy",
        "Area under the non-decreasing convex hull over the models' cost range, normalised by the range; 95% bootstrap "
        f"by {result.options.se_by}.",
    )
    report.table(
        _shown(result.policies),
        "Every policy at every budget",
        "diff_vs_ref: reference − policy (positive: the reference is better); low/high its 95% interval; mde: the difference a 5% test finds with 80% power.",
        max_rows=200,
    )
    chosen = "; ".join(f"{k}: {v}" for k, v in s.hyperparameters.items())
    if chosen:
        report.summary(f"Hyper-parameters chosen inside the training split: {chosen}. Prompt embedder: {s.embedder}.")
    return report
