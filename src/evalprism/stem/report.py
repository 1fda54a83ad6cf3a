"""HTML reports of STEM: the pool / contamination audit, the plan and the localization of new models.

Every STEM result writes its report (``save`` calls ``report()``, the contract of
:mod:`evalprism.io.outputs`), the pool first of all, so this module sits below every result class:
at run time it imports of STEM only the registry of methods (:mod:`~evalprism.stem.methods`: their
labels, colours and what their confidence is); the results it renders it names for annotations alone. ``located.csv`` is the summary table of the locate report
(:func:`located_table`), so it is built here too.
"""

from __future__ import annotations

import html
import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
import plotly.graph_objects as go

from evalprism.report import Report
from evalprism.stats.irv import KINDS
from evalprism.stem.adaptive import LEAD_RULE, LEAD_STAGE1
from evalprism.stem.confidence import CEILING_WRONG, REDRAWS
from evalprism.stem.methods import BASELINE, METHODS, TRIAL_METHODS

if TYPE_CHECKING:
    import pandas as pd

    from evalprism.stem.location_result import LocationResult
    from evalprism.stem.placement import Localization
    from evalprism.stem.plan import Plan
    from evalprism.stem.pool import Pool
    from evalprism.stem.trials import Trials

_RULES = (
    "<ul>"
    "<li><b>IRV</b>: each item's results (1 right, 0 wrong, -1 no answer) over the family ordered by params. "
    "<b>Missing answers</b> ({missing}): <i>wrong</i> counts a -1 as 0; <i>exclude</i> leaves out every item on "
    "which a member gave no answer.</li>"
    "<li><b>Transition index</b> TI = position of the first member that is right (1-based): TI = 1 every member "
    "right (easy), 2..n exactly one 0→1 transition (strict significant transition samples), n+1 every member "
    "wrong (hard, kept in the pool as in the paper). <b>Anomalous</b>: a smaller member right where a larger one "
    "is wrong (non-monotone IRV).</li>"
    "<li><b>Anomaly rate</b> = anomalous / items considered; <b>difficulty shares</b>: easy, intermediate "
    "(everything between, anomalous included), hard.</li>"
    "<li><b>Discriminability</b> D = population SD of the members' scores (percent) × Pearson correlation "
    "with ln(params); weight = max(D, 0) / Σ max(D, 0) (equal weights when no D is positive); reference "
    "score = Σ weight × score.</li>"
    "</ul>"
)

_LOCATE_RULES = (
    "<ul>"
    "<li><b>Method</b> ({method}). <b>auto</b> (the default) uses B when the pool has a reference panel of at "
    "least 10 models, else A. The real-data study (ZeroEval, MMLU-Pro; README) found the paper's rule worse than "
    "plain random sampling of the same items, and A and B better than random sampling in every family in trials "
    "drawn from whole-pool models; from a plan's items alone, B was better than random sampling of 50 items (+0.06) "
    "and level with random sampling of 100 (+0.02, interval holding 0).</li>"
    "<li><b>A: stratified</b> estimate of the full-benchmark reference score. Strata h = (benchmark b, number "
    "of members right on the item), anomalous items included; n<sub>h</sub> ∝ w<sub>b</sub> N<sub>h</sub>/N<sub>b</sub>, "
    "at least one item per non-empty stratum, largest-remainder rounding; T = 100 Σ<sub>b</sub> w<sub>b</sub> "
    "Σ<sub>h</sub> (N<sub>h</sub>/N<sub>b</sub>) mean<sub>h</sub>(y); V = 10<sup>4</sup> Σ<sub>b</sub> "
    "w<sub>b</sub><sup>2</sup> Σ<sub>h</sub> (N<sub>h</sub>/N<sub>b</sub>)<sup>2</sup> (1 − n<sub>h</sub>/N<sub>h</sub>) "
    "s<sub>h</sub><sup>2</sup>/n<sub>h</sub> (n<sub>h</sub> = 1: the benchmark's pooled sample variance; a stratum "
    "answered all right or all wrong: s<sub>h</sub><sup>2</sup> at least p̃(1 − p̃), p̃ = (k + 1)/(k + 2) or 1/(k + 2), "
    "k the items of all such strata of its benchmark, so a model near 100% keeps a standard error).</li>"
    "<li><b>B: IRT difference (GREG) estimator</b>: a 2PL P<sub>i</sub>(θ) = σ(a<sub>i</sub>θ + c<sub>i</sub>) fitted "
    "by MAP on the reference panel (the family and the pool's panel models, never the located model); the "
    "model's θ by MAP from its sampled items; T = 100 Σ<sub>b</sub> w<sub>b</sub> [ mean<sub>i∈b</sub> "
    "P<sub>i</sub>(θ) + mean of the sampled residuals y − P(θ) ]; V as in A on the residuals.</li>"
    "<li><b>Adaptive plan</b> (<code>stem plan --method adaptive</code>, then <code>--plan --answers</code>): "
    "stage 1 is A's stratified sample; each later stage takes items with the highest expected Fisher information "
    "a<sub>i</sub><sup>2</sup> P<sub>i</sub>(1 − P<sub>i</sub>) of the panel's 2PL over the ability posterior from "
    "the answers so far (drawn from the 3k most informative). Estimate: the posterior mean of Σ<sub>b</sub> "
    "w<sub>b</sub> (1/N<sub>b</sub>) [answered items' answers + the rest's P<sub>i</sub>(θ)]; its variance is the "
    "posterior's plus the unanswered items' Bernoulli variance. Calibration: the panel models, each run through the "
    "same plan with the 2PL refitted without it, show how far the posterior mean is pulled toward the panel's middle; "
    "the estimate is corrected by their least-squares line of error on estimate, what they still erred beyond their "
    "posterior variance is added, and the interval is widened by max(1, q/1.96), q the split-conformal 95% quantile "
    "of their |error / se|. It is "
    "model-based: a model the 2PL fits worse than the panel's can fall outside; the design-based estimate of the "
    "stage-1 items is shown beside it.</li>"
    "<li><b>Calibration on a plan</b> (A and B from a plan's items): every reference-panel model with answers on "
    "every pool item is read through the plan and 9 more draws of its design with the same estimator (B's 2PL refitted "
    "without it); the standard error is multiplied by max(0.5, q/1.96) (narrower than the design's where the design "
    "overstates its error), q the split-conformal 95% quantile of "
    "|error / se| over the 60 panel runs off the ceiling nearest the model in share of planned items right. A model wrong on fewer than 5 planned items is at the ceiling: its interval is one-sided, at or "
    "above T − q<sub>c</sub>·se, q<sub>c</sub> the one-sided conformal quantile of the panel's runs at the ceiling "
    "(at least 1.645).</li>"
    "<li><b>Placement</b> (A and B): above every member whose reference score is below T; the confidence is the "
    "probability of the interval between the two bounding members under N(T, V): Φ((μ<sub>p+1</sub> − T)/√V) − "
    "Φ((μ<sub>p</sub> − T)/√V).</li>"
    "<li><b>The paper's rule</b> (STEM as published): items // (n+1) items from each TI level (a balanced subset); "
    "the model is placed above M<sub>j</sub> when it is right on more items of levels &gt; j than it is wrong on "
    "items of levels ≤ j; its <i>rule strength</i> = 1 − the two exact one-sided McNemar p-values is a test "
    "statistic, not a probability of being right (measured out of sample: near 0.97, right 39% of the time). "
    "Weighting ({weighting}): "
    "<i>balanced</i> (the paper) or <i>stratified</i> (each level by its pool size; not in the paper).</li>"
    "<li><b>Ground truth</b>: members whose full-benchmark reference score is below the model's. <b>Random "
    "sampling</b>: the same number of items drawn uniformly from all benchmark items, placed by its weighted score. "
    "<b>Bayesian</b> (after Xiao et al. 2025): uniform prior over the n+1 intervals, per-item success probability "
    "of an interval = mean of its bounding members' results, shrunk to [0.05, 0.95]; MAP interval.</li>"
    "<li><b>Trials</b>: trial t of seed s uses numpy's default_rng([s, t]) for every method's draw, so each "
    "method is compared with random sampling on the same trials: the differences carry paired 95% intervals "
    "(mean ± 1.96 sd/√trials).</li>"
    "</ul>"
)


def _polarization_figure(pool: Pool) -> go.Figure:
    b = pool.benchmarks
    fig = go.Figure()
    for col, name, color in (
        ("easy_share", "easy (all right)", "#9ecae1"),
        ("intermediate_share", "intermediate", "#3182bd"),
        ("hard_share", "hard (all wrong)", "#08306b"),
    ):
        fig.add_trace(go.Bar(x=b["benchmark"], y=b[col], name=name, marker_color=color))
    fig.add_trace(
        go.Scatter(
            x=b["benchmark"],
            y=b["anomaly_rate"],
            name="anomaly rate",
            mode="markers",
            marker={"symbol": "diamond", "size": 13, "color": "#d62728"},
        )
    )
    fig.update_layout(
        barmode="stack",
        template="plotly_white",
        height=380,
        yaxis={"title": "share of items", "tickformat": ".0%"},
        xaxis_title="benchmark",
        margin={"l": 60, "r": 20, "t": 20, "b": 60},
        legend={"orientation": "h", "y": 1.08},
    )
    return fig


def _ti_figure(pool: Pool) -> go.Figure:
    n = pool.n
    fig = go.Figure()
    for code, bench in enumerate(pool.benchmarks["benchmark"]):
        sel = (pool.bench_code == code) & (pool.ti > 0)
        counts = np.bincount(pool.ti[sel], minlength=n + 2)[1:]
        fig.add_trace(go.Bar(x=[f"TI {k}" for k in range(1, n + 2)], y=counts, name=str(bench)))
    ticks = [f"TI {k}" for k in range(1, n + 2)]
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        height=340,
        yaxis_title="items",
        xaxis={
            "categoryorder": "array",
            "categoryarray": ticks,
            "title": "transition index (the first member that answers the item)",
        },
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
        legend={"orientation": "h", "y": 1.1},
    )
    return fig


def pool_index_line(pool: Pool) -> str:
    """One line for an index page: the pool's size and the highest anomaly rate."""
    kinds = np.bincount(pool.kind, minlength=len(KINDS))
    worst = pool.benchmarks.sort_values("anomaly_rate", ascending=False).iloc[0]
    return (
        f"{kinds[1]:,} transition items + {kinds[0]:,} easy + {kinds[2]:,} hard in the pool; highest anomaly rate "
        f"{worst['anomaly_rate']:.1%} ({worst['benchmark']})"
    )


def pool_report(pool: Pool, audit: bool = False) -> Report:
    b = pool.benchmarks
    n = pool.n
    members = pool.members
    title = "STEM contamination audit" if audit else "STEM pool"
    report = Report(
        title=title,
        subtitle=f"family {pool.family}: {', '.join(members['model'])} "
        f"({', '.join(f'{p:g}B' for p in members['params'])}); {len(pool.kind)} items",
    )
    worst = b.sort_values("anomaly_rate", ascending=False).iloc[0]
    kinds = np.bincount(pool.kind, minlength=len(KINDS))
    report.summary(
        f"{kinds[1]} significant transition samples (TI 2..{n}) plus {kinds[0]} easy and {kinds[2]} hard items "
        f"form the pool; {kinds[3]} items ({kinds[3] / max(len(pool.kind) - kinds[4], 1):.1%} of those considered) "
        "have non-monotone IRVs.",
        f"Highest anomaly rate: {worst['benchmark']} at {worst['anomaly_rate']:.1%} — items a smaller member "
        "answers right while a larger one fails; candidates for contamination or noisy grading.",
        "Reference scores: " + ", ".join(f"{r.model} {r.reference_score:.1f}" for r in members.itertuples()) + ".",
        *[note[0].upper() + note[1:] + "." for note in pool.notes],
    )
    report.html_block(
        "What this shows",
        "<p>STEM orders a model family by size and looks at every item's "
        "results across it (its IRV). Items that flip once from wrong to right as the models grow are "
        "<i>significant transition samples</i>; the member at which they flip, the <i>transition "
        "index</i>, is a difficulty level measured in family members. Items that flip back are "
        "<i>anomalous</i>: the contamination audit lists them. The pool of easy, transition and hard "
        "items is what new models are located with (<code>evalprism stem locate</code>).</p>"
        + _RULES.format(missing=html.escape(str(pool.missing))),
    )
    report.figure(
        _polarization_figure(pool),
        "Difficulty polarization and anomaly rate per benchmark",
        "Bars: shares of easy, intermediate and hard items among the items considered; diamonds: anomaly "
        "rate. A benchmark dominated by easy and hard items separates the family poorly (paper, Fig. 1).",
    )
    report.figure(
        _ti_figure(pool),
        "Items per transition index",
        f"TI k: first answered by member k (TI 1: by all, TI {n + 1}: by none). Localization draws the "
        "same number of items from every level, so a thin level limits the subset size.",
    )
    shown = b.copy()
    for col in ("anomaly_rate", "easy_share", "intermediate_share", "hard_share", "weight"):
        shown[col] = shown[col].round(4)
    report.table(
        shown.round(4),
        "Benchmarks",
        "D: discriminability (percent points); weight: share in the reference "
        "score; incomplete: items some member has no row for (left out).",
    )
    report.table(
        pool.members_frame().round(3),
        "Family members",
        "Scores in percent of all items of each benchmark "
        "(-1 counts as wrong); reference_score: the weighted score used as ground truth.",
    )
    report.table(
        pool.anomalies(),
        "Anomalous items (contamination audit)",
        "Most inversions first: pairs of members where the smaller is right and the larger wrong. "
        "anomalies.csv has the full list.",
        max_rows=40,
    )
    report.details.update(_pool_details(pool))
    return report


def _pool_details(pool: Pool) -> dict[str, Any]:
    """The report's run details of a pool: family, what a -1 counts as, the fewest members, the
    benchmarks left out, the panel's item-response model and the readers' choices (each of the last
    three where there is one)."""
    details: dict[str, Any] = {"family": pool.family, "missing": pool.missing, "min_models": pool.options.min_models}
    if pool.notes:
        details["left_out"] = list(pool.notes)
    if pool.irt_kind is not None:
        details["irt"] = pool.irt_kind
    if pool.provenance.choices:
        details["read"] = list(pool.provenance.choices)
    return details


MODEL_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def _family_colours(n: int) -> list[str]:
    """One colour per family member, light (smallest) to dark (largest), so the steps read in order."""
    from plotly.colors import sample_colorscale

    return sample_colorscale("Greys", [0.35 + 0.6 * j / max(n - 1, 1) for j in range(n)])


def _curves_figure(result: LocationResult) -> go.Figure:
    """One panel per located model: its accuracy per TI level with 95% bars, over the family's step
    curves (member j answers exactly the levels up to j; each drawn in its own shade and named at its
    drop), with the level between the two members it was placed between shaded."""
    from plotly.subplots import make_subplots

    first = result.results[0][0]
    levels = first.levels["ti"].to_numpy()
    names = first.tests["member"].tolist()
    shades = _family_colours(len(names))
    n = len(result.results)
    cols = min(n, 3)
    rows = -(-n // cols)
    # model and interval on two lines: side by side, "model: between A and B" overran the next panel
    titles = [
        f"<b>{html.escape(loc.model)}</b><br>{html.escape(loc.interval).replace(' and ', '<br>and ')}"
        for loc, _ in _sorted(result)
    ]
    margin = {"l": 60, "r": 20, "t": 90, "b": 110}
    panel, gap = 300, 130  # px: panel height, space between rows for the axis title and next (three-line) title
    plot_height = panel * rows + gap * (rows - 1)
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=titles,
        shared_yaxes=True,
        horizontal_spacing=0.05,
        vertical_spacing=gap / plot_height if rows > 1 else 0.0,
    )
    fig.update_annotations(font_size=12)  # the subplot titles (the member labels below set their own size)
    for i, (loc, _) in enumerate(_sorted(result)):
        r, c = divmod(i, cols)
        r, c = r + 1, c + 1
        for j, (name, shade) in enumerate(zip(names, shades, strict=True), 1):
            fig.add_trace(
                go.Scatter(
                    x=levels,
                    y=(levels <= j).astype(float),
                    mode="lines",
                    name=f"family: {name}",
                    line={"dash": "dot", "width": 1.5, "color": shade},
                    legendgroup=f"family{j}",
                    showlegend=i == 0,
                    hovertemplate=f"{html.escape(name)}: TI %{{x}} → %{{y:.0%}}<extra></extra>",
                ),
                r,
                c,
            )
            fig.add_annotation(
                x=j + 0.5,
                y=0.5,
                text=html.escape(name),
                showarrow=False,
                textangle=-60,
                font={"size": 10, "color": shade},
                bgcolor="rgba(255,255,255,0.7)",
                row=r,
                col=c,
            )
        fig.add_vrect(
            x0=loc.position + 0.5,
            x1=loc.position + 1.5,
            fillcolor="#ffe08a",
            opacity=0.35,
            line_width=0,
            layer="below",
            row=r,
            col=c,
        )
        lv = loc.levels
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        fig.add_trace(
            go.Scatter(
                x=lv["ti"],
                y=lv["accuracy"],
                mode="lines+markers",
                name=loc.model,
                line={"width": 2.5, "color": colour},
                marker={"size": 7},
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": lv["ci_high"] - lv["accuracy"],
                    "arrayminus": lv["accuracy"] - lv["ci_low"],
                    "thickness": 1.5,
                    "width": 5,
                },
                hovertemplate="TI %{x}: %{y:.0%}<extra>" + html.escape(loc.model) + "</extra>",
            ),
            r,
            c,
        )
        fig.update_xaxes(
            title_text="TI level",
            tickmode="array",
            tickvals=levels,
            range=[levels[0] - 0.4, levels[-1] + 0.4],
            row=r,
            col=c,
        )
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="accuracy on the subset", row=r, col=1)
    fig.update_yaxes(tickformat=".0%", range=[-0.05, 1.05])
    fig.update_layout(
        template="plotly_white",
        height=plot_height + margin["t"] + margin["b"],
        margin=margin,
        legend={"orientation": "h", "y": -60 / plot_height, "yanchor": "top"},
    )
    return fig


def _trials_figure(result: LocationResult) -> go.Figure:
    fig = go.Figure()
    ran = [t for _, t in result.results if t is not None]
    models = [t.model for t in ran]
    for entry in TRIAL_METHODS:
        method = entry.name
        if not any(method in t.methods for t in ran):
            continue
        fig.add_trace(
            go.Bar(
                x=models,
                y=[t.accuracy(method) if method in t.methods else None for t in ran],
                name=entry.label,
                marker_color=entry.colour,
            )
        )
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        height=380,
        xaxis_title="located model",
        yaxis={"title": "localization accuracy", "tickformat": ".0%", "range": [0, 1.05]},
        margin={"l": 60, "r": 20, "t": 20, "b": 80},
        legend={"orientation": "h", "y": 1.15},
    )
    return fig


def _methods_table(trials: list[Trials]):
    """Every method's accuracy and mean absolute position error with the paired 95% interval of the
    difference to random sampling, the score RMSE and the 95% coverage, per located model."""
    import pandas as pd

    frames = []
    for t in trials:
        s = t.by_method()
        frames.append(
            pd.DataFrame(
                {
                    "model": s["model"],
                    "method": [
                        METHODS[m].label + (" (chosen)" if c else "")
                        for m, c in zip(s["method"], s["chosen"], strict=True)
                    ],
                    "accuracy": s["accuracy"].round(3),
                    "vs random (95%)": _vs_random(s, "accuracy_vs_random"),
                    "mean abs. error": s["mean_abs_error"].round(3),
                    "MAE vs random (95%)": _vs_random(s, "mae_vs_random"),
                    "score RMSE (pp)": s["score_rmse"].round(2),
                    "95% coverage": s["coverage_95"].round(3),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def _add_methods_table(report: Report, trials: list[Trials]) -> None:
    """The table of every method against random sampling, with its one caption (the trials report of one
    model and the localization report of several show the same table)."""
    report.table(
        _methods_table(trials),
        "Every method against random sampling",
        "Per located model: each method's trial accuracy and mean absolute position error with the "
        "paired 95% interval of its difference to random sampling (same trials), the score estimate's "
        "RMSE against the full-benchmark reference score, and the share of trials whose nominal 95% "
        "interval holds it.",
    )


def _vs_random(summary: pd.DataFrame, column: str) -> list[str]:
    """Each method's paired difference to random sampling in ``column`` with its 95% interval (blank
    on random sampling's own row)."""
    rows = zip(summary["method"], summary[column], summary[f"{column}_low"], summary[f"{column}_high"], strict=True)
    return [_diff(d, lo, hi) if m != BASELINE.name else "" for m, d, lo, hi in rows]


def _diff(d: float, lo: float, hi: float) -> str:
    if np.isnan(lo):
        return f"{d:+.3f}"
    return f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _accuracy_line(trials: Trials) -> str:
    parts = [f"{METHODS[m].label} {trials.accuracy(m):.0%}" for m in trials.methods]
    return f"Over {len(trials.positions)} trials of {trials.sampling.items} items: " + ", ".join(parts) + " correct."


def trials_finding(trials: Trials) -> str:
    """The headline of one model's trials: its true position and how often each method placed it there."""
    return f"{trials.model} (true position {trials.truth}): {_accuracy_line(trials)[:-1]}"


def _closeness_line(loc: Localization) -> str:
    """How close the estimate is to the nearest member, and what follows."""
    near = loc.nearest_member
    if near is None:
        return ""
    name, gap = near
    if not loc.standard_error:  # 0: no division; say why it is 0
        drawn, available = len(loc.subset), loc.draw.available
        if drawn >= available:
            return (
                f" Every one of the {available:,} pool items it can be scored on was drawn, so its estimated score "
                f"is its full-benchmark score (standard error 0), {gap:.1f} points from the nearest member, {name}."
            )
        return (
            f" Its {drawn:,} sampled answers do not vary within any stratum (e.g. all right or all wrong), so the "
            f"estimated standard error is 0, which understates the uncertainty; its estimated score is {gap:.1f} "
            f"points from the nearest member, {name}."
        )
    return _abstention_line(loc) + _resolution_line(loc)


def _abstention_line(loc: Localization) -> str:
    """When the 95% interval holds a member's reference score: which, and the probability of each side."""
    a, r = loc.abstention, loc.resolution
    if a is None or r is None:
        return ""
    held = ", ".join(a.straddled)  # the paragraph's lead already says the abstention's interval
    interval = (
        f"one-sided 95% interval (at or above {a.bound:.1f}, the items' ceiling)"
        if a.bound is not None
        else f"95% interval (± {r.distance:.1f} points)"
    )
    return (
        f" Its {interval} holds the reference score of {held} (below {a.member} {a.p_below:.0%}, above "
        f"{a.p_above:.0%}; the wider interval's confidence {a.confidence:.1%}); the point placement above is not "
        "told by these items."
    )


def _resolution_line(loc: Localization) -> str:
    """The design's resolution and what resolving the nearest member takes (:mod:`~evalprism.stem.resolution`)."""
    r = loc.resolution
    if r is None:
        return ""
    line = (
        f" With {r.items:,} items the resolution is {r.distance:.1f} points (1.96 standard errors): a member "
        "closer than that to the estimate cannot be told apart at 95%."
    )
    if r.more is None:
        return line + f" Its estimate sits on {r.nearest}'s reference score: no number of items tells the side."
    if r.more == 0:
        return line + (
            f" The nearest member, {r.nearest}, is {r.gap:.1f} points ({r.gap / r.standard_error:.1f} standard "
            "errors) away: resolved."
        )
    assert r.needed is not None
    line += f" Resolving {r.nearest} ({r.gap:.1f} points away) takes about {r.needed:,} items ({r.more:,} more"
    stages = loc.adaptive.stages if loc.adaptive is not None else ()
    if stages:
        line += f", about {math.ceil(r.more / stages[-1])} more adaptive stage(s) of {stages[-1]}"
    line += ")"
    if r.needed > loc.draw.available:
        line += f", more than the {loc.draw.available:,} pool items it can be scored on"
    return line + "."


def trials_report(trials: Trials) -> Report:
    """The report of one model's repeated trials: how often each method placed it right, and where."""
    report = Report(
        title="STEM localization trials",
        subtitle=f"{trials.model} on family {trials.family}: {len(trials.positions)} trials of "
        f"{trials.sampling.items} items",
    )
    report.summary(
        f"{trials.model}: ground truth position {trials.truth}; method used: {METHODS[trials.method].label}.",
        _accuracy_line(trials),
    )
    report.html_block(
        "How the trials are run",
        _LOCATE_RULES.format(method=html.escape(trials.method), weighting=html.escape(trials.sampling.weighting)),
    )
    fig = go.Figure()
    for method in trials.methods:
        fig.add_trace(
            go.Histogram(
                x=trials.positions_of(method),
                name=METHODS[method].label,
                marker_color=METHODS[method].colour,
                xbins={"size": 1},
            )
        )
    fig.add_vline(x=trials.truth, line_dash="dash", annotation_text="ground truth")
    fig.update_layout(
        barmode="group",
        template="plotly_white",
        height=360,
        xaxis={"title": "position placed (family members below the model)", "dtick": 1},
        yaxis_title="trials",
        margin={"l": 60, "r": 20, "t": 30, "b": 60},
        legend={"orientation": "h", "y": 1.12},
    )
    report.figure(
        fig,
        "Positions placed per method",
        "How many trials placed the model at each position; the dashed line is the full-benchmark ground truth.",
    )
    _add_methods_table(report, [trials])
    report.details.update(_trials_details(trials))
    return report


def _trials_details(trials: Trials) -> dict[str, Any]:
    """The report's run details of one model's trials: how they sampled, with their number after the
    items of each level (the order the report has listed them in since format 1)."""
    sampling = asdict(trials.sampling)
    first = ("items", "per_level")
    return {
        **{k: sampling[k] for k in first},
        "trials": trials.n_trials,
        **{k: v for k, v in sampling.items() if k not in first},
    }


def location_index_line(result: LocationResult) -> str:
    """One line for an index page: models placed right, and each method's mean trial accuracy."""
    located = [loc for loc, _ in result.results]
    told = [loc for loc in located if loc.abstention is None]
    known = [loc for loc in told if loc.truth is not None]
    right = sum(loc.position == loc.truth for loc in known)
    if known:
        line = f"{right} of {len(known)} models placed at their true position"
    elif len(told) == len(located):
        line = f"{len(located)} model(s) located from part of the pool (no truth to compare with)"
    else:
        line = f"{len(told)} model(s) placed"
    line += _abstained_count(located)
    trials = [t for _, t in result.results if t is not None]
    if trials:
        shown = [entry for entry in TRIAL_METHODS if all(entry.name in t.methods for t in trials)]
        means = {entry.name: np.mean([t.accuracy(entry.name) for t in trials]) for entry in shown}
        line += (
            f"; over {len(trials[0].positions)} trials "
            + ", ".join(f"{entry.short} {means[entry.name]:.0%}" for entry in shown)
            + " correct"
        )
    return line


def _abstained_count(located: list[Localization]) -> str:
    """The models whose interval holds a member's score (abstentions), counted apart from the placed
    ones, with how often their wider interval holds the true position (where there is a truth)."""
    out = [loc for loc in located if loc.abstention is not None]
    if not out:
        return ""
    text = f"; {len(out)} more too close to a member to tell which side (abstained)"
    known = [loc for loc in out if loc.truth is not None]
    if known:
        held = sum(
            loc.abstention.holds(loc.truth) for loc in known if loc.abstention is not None and loc.truth is not None
        )
        text += f", their wider interval holding the true position for {held} of {len(known)}"
    return text


def _resolution_headline(result: LocationResult) -> list[str]:
    """The design's resolution, stated once for the report (score estimates only)."""
    rs = [loc.resolution for loc, _ in result.results if loc.resolution is not None]
    if not rs:
        return []
    lo, hi = min(r.distance for r in rs), max(r.distance for r in rs)
    span = f"{lo:.1f}" if round(lo, 1) == round(hi, 1) else f"{lo:.1f}–{hi:.1f}"
    out = sum(loc.abstention is not None for loc, _ in result.results)
    return [
        f"Resolution: with these items a member closer than {span} points to a model's estimated score (1.96 "
        "standard errors) cannot be told apart at 95%. "
        + (
            ("1 model's 95% interval holds" if out == 1 else f"{out} models' 95% intervals hold")
            + " a member's score: the table says "
            "'cannot tell side of' that member, with the probability of each side, and the paragraphs how many "
            "more items would resolve it."
            if out
            else "Every model's 95% interval clears every member's score."
        )
    ]


def location_report(result: LocationResult) -> Report:
    """The report of ``stem locate``: a short headline, ONE table across the located models (sorted by
    estimate), then the per-model paragraphs, curves and method comparisons."""
    first = result.results[0][0]
    members = first.tests["member"].tolist()
    n = len(result.results)
    methods = sorted({loc.method for loc, _ in result.results})
    used = [len(loc.subset) for loc, _ in result.results]
    common = max(set(used), key=lambda k: (used.count(k), -k))
    others = n - used.count(common)
    each = " each" if n > 1 else ""
    items = f"{common:,} items{each}" + (
        f" ({others} model{'s' if others != 1 else ''} used another number: see the items column)" if others else ""
    )
    report = Report(
        title="STEM localization",
        subtitle=f"{n} model{'s' if n != 1 else ''} on family {first.family} ({', '.join(members)}); {items}",
    )
    how = ", ".join(METHODS[m].label for m in methods)
    scoreless = [m for m in methods if not METHODS[m].estimates_score]  # the paper's rule: sorted by position
    order = "highest position" if scoreless == methods else "highest estimate"
    layout = (
        f"the table below has one row per model, {order} first, and the paragraphs under it say more per model"
        if n > 1
        else "the table below sums it up and the paragraph under it says more"
    )
    headline = [
        (
            f"{n} model{'s' if n != 1 else ''} located on family {first.family} ({len(members)} members: "
            f"{', '.join(members)}) with {how}, from {items}; {layout}."
        )
    ]
    if any(METHODS[m].confidence_name == "rule_strength" for m in methods):
        headline.append(
            "The paper's rule gives a position but no probability of it being right: its 'rule "
            "strength' (1 − the two one-sided exact McNemar p-values) is not calibrated; measured out "
            "of sample, placements with a rule strength near 0.97 were right 39% of the time. A and B "
            "give a calibrated confidence."
        )
    headline += _resolution_headline(result)
    report.summary(*headline, *[note[0].upper() + note[1:] + "." for note in result.notes])
    table = located_table(result)
    explain = {
        "interval": "interval: the two family members it lies between (lower – upper)",
        "estimate ± se": "estimate ± se: its estimated full-benchmark reference score (points) and standard error",
        "confidence": "confidence: the probability of that interval under N(estimate, se²), calibrated",
        "rule strength": "rule strength (the paper's rule): 1 − the two one-sided McNemar p-values, a test "
        "statistic, not a probability of being right",
        "cannot tell side of": "cannot tell side of: the member whose reference score the 95% interval holds "
        "(the interval then spans the members it clears), p below / p above: the probability of each side of it",
        "nearest member": "nearest member: the member whose reference score is closest to the estimate, "
        "distance in points; resolution: 1.96 standard errors, the smallest distance these items tell apart at "
        "95%; more items for nearest: how many more items would resolve the nearest member (standard errors "
        "fall as 1/√n; empty: none would)",
        "items": "items: answers used",
    }
    caption = "; ".join(text for column, text in explain.items() if column in table.columns)
    caption += ". Sorted by estimate" + (
        " (the paper's rule, which estimates no score: by position)." if scoreless else "."
    )
    report.table(table, "Located models", caption, max_rows=500, nowrap=("estimate ± se",))
    report.html_block("Per model", "".join(f"<p>{html.escape(line)}</p>" for line in _model_lines(result, members)))
    report.html_block(
        "What this shows",
        "<p>Each new model answered a small sample of the family's items. "
        "Estimators A and B estimate its full-benchmark reference score and place it between the two "
        "members whose scores bound the estimate; the paper's rule reads the drop of its accuracy "
        "across transition-index levels. The curves show its accuracy per level (for A and B, level "
        "k holds the items n+1−k members answer right, anomalous ones included) beside the family's "
        "own curves (dotted; member j answers exactly the levels up to j).</p>"
        + _LOCATE_RULES.format(
            method=html.escape(str(first.method)),
            weighting=html.escape(first.weighting),
        ),
    )
    report.figure(
        _curves_figure(result),
        "Accuracy by transition index",
        "One panel per located model, in the order of the table above: its accuracy on the subset per TI level (95% Clopper-Pearson bars). "
        "Dotted steps: the family's members, lighter for smaller ones, each named where it drops (member j "
        "answers exactly the levels up to j). A model between members j and j+1 keeps high accuracy up to "
        "level j and loses it from level j+2; level j+1, shaded, sits in between.",
    )
    report.table(
        _locations_table(result),
        "Localizations in detail",
        "position: members placed below; p_lower / p_upper: the chance of lying below the lower / above "
        "the upper member (the paper's rule: one-sided exact McNemar p-values); reference_score and "
        "true_position: from the full benchmark, when the model answered it.",
        max_rows=500,
    )
    ran = [t for _, t in result.results if t is not None]
    if ran:
        report.figure(
            _trials_figure(result),
            "Localization accuracy over repeated trials",
            "Share of trials that place the model at its true position (members with a lower full-benchmark "
            "reference score), for every method on the same number of items and the same trials.",
        )
        _add_methods_table(report, ran)
    if result.pool is not None:
        report.table(
            result.pool.benchmarks[
                [
                    "benchmark",
                    "items",
                    "anomaly_rate",
                    "sts",
                    "easy_share",
                    "intermediate_share",
                    "hard_share",
                    "D",
                    "weight",
                ]
            ].round(4),
            "Pool benchmarks and anomaly rates",
        )
    report.details.update(_location_details(result))
    return report


def _location_details(result: LocationResult) -> dict[str, Any]:
    """The report's run details of a localization: what the run decided (the plan's design where
    one was read), then the readers' choices (when a reader made one) and the notes,
    in the order the report has listed them since format 1."""
    details = asdict(result.summary)
    if result.summary.plan is None:
        del details["plan"]
    notes = {"notes": list(result.notes)} if result.notes else {}
    choices = list(result.provenance.choices)
    details.update({"read": choices, **notes} if choices else notes)
    return details


def _short_interval(loc: Localization) -> str:
    """The interval in a table cell: ``lower – upper``, ``above upper-most``, ``below lower-most``; an
    abstention's wider interval with the member whose side is not told."""
    a = loc.abstention
    if a is not None and a.bound is not None:
        return f"at or above {a.bound:.1f}, cannot tell side of {a.untold}"
    if loc.ceiling_bound is not None and loc.lower and not loc.upper:
        return f"above {loc.lower} (at or above {loc.ceiling_bound:.1f})"
    if a is not None:
        wide = f"{a.lower} – {a.upper}" if a.lower and a.upper else (f"above {a.lower}" if a.lower else "")
        wide = wide or (f"below {a.upper}" if a.upper else "anywhere")
        return f"{wide}, cannot tell side of {a.untold}"
    if loc.lower and loc.upper:
        return f"{loc.lower} – {loc.upper}"
    return f"above {loc.lower}" if loc.lower else f"below {loc.upper}"


def _model_lines(result: LocationResult, members: list[str]) -> list[str]:
    """One paragraph per located model, in the summary table's order."""
    lines = []
    for loc, trials in _sorted(result):
        how = METHODS[loc.method].label
        lead = loc.interval if loc.abstention is None else f"{loc.abstention.interval}; point placement {loc.interval}"
        line = f"{loc.model}: {lead} (position {loc.position} of {len(members)}, {how}"
        if loc.estimate is not None:
            line += f", estimated score {loc.estimate:.1f} ± {loc.standard_error:.1f}"
        if loc.confidence_name == "rule_strength":
            line += f", rule strength {loc.confidence:.2f}, not a probability of being right)"
        else:
            line += f", confidence {loc.confidence:.1%})"
        part = loc.part_answered
        if part is not None:
            line += (
                f"; from its answers on {part.items:,} of the {part.pool_items:,} pool items "
                f"({part.design}), an estimate of its full-pool score; it did not answer the whole "
                "pool, so there is no truth to compare with."
            )
        else:
            line += f"; ground truth from full-benchmark scores: position {loc.truth}."
        line += _closeness_line(loc)
        line += _calibration_line(loc)
        line += _adaptive_line(loc)
        if trials is not None:
            line += " " + _accuracy_line(trials)
        lines.append(line)
    return lines


def _calibration_line(loc: Localization) -> str:
    """For A or B on a plan: how its standard error was calibrated on the panel, and the ceiling's
    one-sided interval (:mod:`~evalprism.stem.confidence`)."""
    cal = getattr(loc.draw, "calibration", None)  # a model located from its own answers on a plan
    line = ""
    if cal is not None:
        line = (
            f" Its standard error is calibrated on the panel: read through this plan and {REDRAWS} more draws of "
            f"its design ({cal.models} panel models, {cal.runs} runs), the {cal.neighbours} runs nearest it in share of "
            f"planned items right covered 95% when {'widened' if cal.factor >= 1 else 'narrowed'} {cal.factor:.2f}x "
            "(split-conformal; at the ceiling the "
            "one-sided quantile is "
            f"{cal.ceiling_quantile:.2f}{', from all runs: too few at the ceiling' if cal.ceiling_pooled else ''})."
        )
    if loc.ceiling_bound is not None:
        line += (
            f" It was wrong on fewer than {CEILING_WRONG} of its planned items: at the items' ceiling, which cannot "
            f"show how far below 100% it is, so its interval is one-sided: at or above {loc.ceiling_bound:.1f}."
        )
    return line


def _adaptive_line(loc: Localization) -> str:
    """For an adaptive plan: what the estimate rests on (the panel's 2PL, calibrated), which estimate the
    localization leads with by the stated rule, and the other as a cross-check with what their
    agreement or disagreement means (:data:`~evalprism.stem.adaptive.LEAD_RULE`)."""
    info = loc.adaptive
    if info is None or info.stage1_check is None:
        return ""
    cal, check = info.calibration, info.stage1_check
    line = (
        f" Adaptive estimate (stages {' + '.join(map(str, info.stages))}): the IRT ability posterior gives "
        f"± {info.posterior_se:.1f}; run through the same plan, the {cal.models} panel models erred by "
        f"{cal.panel_rmse:.1f} points (RMS); the estimate is corrected by the panel's line of error on estimate "
        f"(slope {cal.slope:+.2f}), {cal.extra_se:.1f} is added in quadrature and the interval widened "
        f"{cal.factor:.2f}x by a split-conformal factor (their leave-one-out fits: {info.fits})."
    )
    stage1 = f"the design-based estimate from the {check.items} stage-1 items alone (B, no model assumed)"
    if info.lead == LEAD_STAGE1:
        return line + (
            f" The localization leads with {stage1}, {check.estimate:.1f} ± {check.standard_error:.1f}: the "
            f"calibrated adaptive estimate, {info.estimate:.1f} ± {info.standard_error:.1f}, differs from it by more "
            "than 1.96 standard errors of their difference, a sign that the panel's 2PL does not fit this model; "
            f"rule: {LEAD_RULE}."
        )
    return line + (
        f" The localization leads with the adaptive estimate; cross-check: {stage1}, {check.estimate:.1f} "
        f"± {check.standard_error:.1f}, within 1.96 standard errors of their difference, so the two agree and "
        f"the 2PL shows no sign of misfit for this model; rule: {LEAD_RULE}."
    )


def _sorted(result: LocationResult) -> list:
    """The located models, highest estimate first (the paper's rule, which estimates no score: by
    position), ties by name."""
    return sorted(
        result.results,
        key=lambda r: (-(r[0].estimate if r[0].estimate is not None else -1.0), -r[0].position, r[0].model),
    )


def located_table(result: LocationResult):
    """One row per located model (``located.csv`` and the report's summary table): model, interval,
    the member whose side its 95% interval cannot tell and the probability of each side, estimate ±
    se, confidence (A, B: of the row's interval) or rule strength (the paper's rule), nearest member,
    its distance, the design's resolution and the items more that would resolve the nearest member,
    items used; highest estimate first."""
    import pandas as pd

    rows = []
    for loc, _ in _sorted(result):
        near, r, a = loc.nearest_member, loc.resolution, loc.abstention
        paper = loc.confidence_name == "rule_strength"
        confidence = loc.confidence if a is None else a.confidence
        rows.append(
            {
                "model": loc.model,
                "method": loc.method,
                "interval": _short_interval(loc),
                "cannot tell side of": "" if a is None else a.member,
                "p below": None if a is None else round(a.p_below, 3),
                "p above": None if a is None else round(a.p_above, 3),
                "estimate ± se": "" if loc.estimate is None else f"{loc.estimate:.1f} ± {loc.standard_error:.1f}",
                "confidence": None if paper else round(confidence, 3),
                "rule strength": round(loc.confidence, 3) if paper else None,
                "nearest member": "" if near is None else near[0],
                "distance (pp)": None if near is None else round(near[1], 1),
                "resolution (pp)": None if r is None else round(r.distance, 1),
                "more items for nearest": None if r is None else r.more,
                "items": len(loc.subset),
            }
        )
    frame = pd.DataFrame(rows).astype({"more items for nearest": "Int64"})
    if frame["method"].nunique() == 1:  # said in the headline
        frame = frame.drop(columns="method")
    if not frame["rule strength"].notna().any():
        frame = frame.drop(columns="rule strength")
    if not frame["confidence"].notna().any():
        frame = frame.drop(columns="confidence")
    if not frame["nearest member"].astype(bool).any():
        frame = frame.drop(
            columns=[
                "cannot tell side of",
                "p below",
                "p above",
                "estimate ± se",
                "nearest member",
                "distance (pp)",
                "resolution (pp)",
                "more items for nearest",
            ]
        )
    return frame


def _locations_table(result: LocationResult):
    import pandas as pd

    rows = []
    for loc, _ in _sorted(result):
        rows.append(
            {
                "model": loc.model,
                "method": loc.method,
                "position": loc.position,
                "estimate": None if loc.estimate is None else round(loc.estimate, 2),
                "se": None if loc.standard_error is None else round(loc.standard_error, 2),
                loc.confidence_name.replace("_", " "): round(loc.confidence, 4),
                "p_lower": round(loc.p_lower, 4),
                "p_upper": round(loc.p_upper, 4),
                "reference_score": None if loc.reference_score is None else round(loc.reference_score, 2),
                "true_position": loc.truth,
                "items": len(loc.subset),
            }
        )
    return pd.DataFrame(rows)


def plan_report(plan: Plan) -> Report:
    """The report of ``stem plan``: which items to run, per benchmark and stratum (and stage, for an
    adaptive plan, with the localization so far), and how to run them."""
    import pandas as pd

    made = plan.summary
    adaptive = plan.adaptive
    report = Report(
        title="STEM plan" + (f", stage {made.stage or 1}" if adaptive else ""),
        subtitle=f"{len(plan.items)} of {made.pool_items} pool items of family {made.family}; seed {made.seed}",
    )
    if not adaptive:
        report.summary(
            f"Run the new model on these {len(plan.items)} items, then locate it with `evalprism stem "
            f"locate POOL ANSWERS --plan PLAN_DIR`: its full-pool score is estimated by the plan's design "
            f"({made.design}; estimator {made.method})."
        )
    else:
        stage = made.stage or 1
        sizes = plan.stage_sizes()
        lines = [
            (
                f"Adaptive plan, stage {stage}: {len(plan.items)} items in {len(sizes)} stage"
                f"{'s' if len(sizes) != 1 else ''} ({' + '.join(map(str, sizes))}). Stage 1 is a stratified sample "
                "(benchmark x members right); each later stage holds the items whose answers say most about the "
                "model's ability given its answers so far (expected Fisher information of the panel's 2PL)."
            )
        ]
        so_far = made.so_far
        if so_far is not None:
            lines.append(
                f"From its {so_far.items} answers so far: {so_far.interval}, estimated full-pool score "
                f"{so_far.estimate:.1f} ± {so_far.standard_error:.1f}, confidence "
                f"{so_far.confidence:.1%}."
            )
        if made.stopped:
            lines.append(made.stopped[0].upper() + made.stopped[1:] + ".")
        else:
            new = sizes[-1] if stage > 1 else sizes[0]
            lines.append(
                f"Run the model on the {new} items of stage {stage} (the stage column), then either plan "
                f"stage {stage + 1} (`evalprism stem plan POOL --plan PLAN_DIR --answers ANSWERS --items K "
                "--out NEXT`, ANSWERS holding its answers on every stage's items) or locate it (`evalprism "
                "stem locate POOL ANSWERS --plan PLAN_DIR`): the adaptive estimate is the IRT ability "
                "posterior, calibrated on the reference panel."
            )
        report.summary(*lines)
        by_stage = (
            plan.items.groupby("stage", sort=True)
            .agg(items=("item_id", "size"), benchmarks=("benchmark", "nunique"))
            .reset_index()
        )
        report.table(by_stage, "Items per stage")
    by_bench = (
        plan.items.groupby("benchmark", sort=True)
        .agg(items=("item_id", "size"), strata=("stratum", "nunique"))
        .reset_index()
    )
    report.table(by_bench, "Planned items per benchmark")
    first = plan.items[plan.items["stage"] == 1] if "stage" in plan.items else plan.items
    strata = first.drop_duplicates("stratum")[
        ["benchmark", "members_right", "stratum_size", "stratum_drawn", "inclusion_probability", "design_weight"]
    ]
    report.table(
        pd.DataFrame(strata).round(4),
        "Strata (benchmark x members right)" + (" of stage 1" if adaptive else ""),
        "stratum_size: pool items N_h; stratum_drawn: planned items n_h; inclusion probability n_h / N_h; "
        "design weight N_h / n_h."
        + (" Later stages are not a probability sample: their rows in plan.csv leave these empty." if adaptive else ""),
    )
    report.details.update(_plan_details(plan))
    return report


def _plan_details(plan: Plan) -> dict[str, Any]:
    """The report's run details of a plan: what planning decided (an adaptive plan's stage, stages,
    localization so far and why it stopped, where it has them), then, for a later stage, the choices
    the readers of the model's answers made (when they made one): the order the report has listed them in since format 1."""
    details = {k: v for k, v in asdict(plan.summary).items() if v is not None or k not in _ADAPTIVE_ONLY}
    if plan.provenance.choices:  # a later stage, whose answers' readers made a choice
        details["read"] = list(plan.provenance.choices)
    return details


#: the fields of a plan's summary that only an adaptive plan has (left out of the details when None)
_ADAPTIVE_ONLY = ("stage", "stages", "so_far", "stopped")


def plan_finding(plan: Plan) -> str:
    """The headline of a plan: how many items, how chosen; for an adaptive plan's later stage the
    localization from its previous stages, and why no item was added when it stopped."""
    made = plan.summary
    if not plan.adaptive:
        return (
            f"{len(plan.items)} of {made.pool_items} pool items of family {made.family} planned "
            f"(seed {made.seed}; {made.design}; estimator {made.method})"
        )
    sizes = plan.stage_sizes()
    line = f"adaptive plan of family {made.family}, stage {made.stage or 1}: {len(plan.items)} items ({' + '.join(map(str, sizes))})"
    if made.so_far is not None:
        so_far = made.so_far
        line += (
            f"; from its {so_far.items} answers so far: {so_far.interval}, estimated full-pool score "
            f"{so_far.estimate:.1f} ± {so_far.standard_error:.1f}, confidence {so_far.confidence:.1%}"
        )
    return line + ("; no item added" if made.stopped else "")
