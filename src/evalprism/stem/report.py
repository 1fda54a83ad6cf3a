"""HTML reports of STEM: the pool / contamination audit and the localization of new models."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from evalprism.report import Report
from evalprism.stats.irv import KINDS
from evalprism.stem.located import METHODS

#: one colour per method of :data:`~evalprism.stem.located.METHODS` (STEM, random, Bayesian)
_METHOD_COLOURS = ("#2ca02c", "#1f77b4", "#ff7f0e")

if TYPE_CHECKING:
    from evalprism.stem.evaluate import Trials
    from evalprism.stem.located import LocationResult
    from evalprism.stem.pool import Pool

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
    "<li><b>Balanced subset</b>: items // (n+1) items from each TI level, drawn without replacement "
    "(trial t of seed s uses numpy's default_rng([s, t])); a level with fewer items gives all it has.</li>"
    "<li><b>Capability boundary</b> (rule chosen here; the paper only says 'where accuracy begins to drop "
    "significantly'): member M<sub>j</sub> answers exactly the levels ≤ j. The model is placed above M<sub>j</sub> "
    "when it is right on more items of levels &gt; j than it is wrong on items of levels ≤ j (it beats M<sub>j</sub> "
    "on the subset; ties: not above). The members beaten are always M<sub>1</sub>..M<sub>p</sub>: the boundary lies "
    "between TI levels p and p+1, the interval is (M<sub>p</sub>, M<sub>p+1</sub>).</li>"
    "<li><b>Confidence</b> = 1 − p<sub>lower</sub> − p<sub>upper</sub> (Bonferroni), from exact one-sided McNemar "
    "(sign) tests on the discordant items against M<sub>p</sub> (is it better?) and M<sub>p+1</sub> (is it "
    "worse?).</li>"
    "<li><b>Ground truth</b>: members whose full-benchmark reference score is below the model's. <b>Random "
    "sampling</b>: the same number of items drawn uniformly from all benchmark items, placed by its weighted score. "
    "<b>Bayesian</b> (after Xiao et al. 2025): uniform prior over the n+1 intervals, per-item success probability "
    "of an interval = mean of its bounding members' results, shrunk to [0.05, 0.95]; MAP interval.</li>"
    "<li><b>Weighting</b> ({weighting}): <i>balanced</i> (the paper) counts every drawn item once in the decision; "
    "<i>stratified</i> (an option, not in the paper) counts an item of level k as N<sub>k</sub>/m<sub>k</sub> "
    "(pool items of the level over items drawn), so that the decision estimates the comparison on the whole pool "
    "— the full-benchmark ground truth weighs a level by its size, the balanced subset does not.</li>"
    "</ul>"
)


def _polarization_figure(pool: Pool) -> go.Figure:
    b = pool.benchmarks
    fig = go.Figure()
    for col, name, color in (("easy_share", "easy (all right)", "#9ecae1"),
                             ("intermediate_share", "intermediate", "#3182bd"),
                             ("hard_share", "hard (all wrong)", "#08306b")):
        fig.add_trace(go.Bar(x=b["benchmark"], y=b[col], name=name, marker_color=color))
    fig.add_trace(go.Scatter(x=b["benchmark"], y=b["anomaly_rate"], name="anomaly rate", mode="markers",
                             marker={"symbol": "diamond", "size": 13, "color": "#d62728"}))
    fig.update_layout(barmode="stack", template="plotly_white", height=380, yaxis={"title": "share of items",
                      "tickformat": ".0%"}, xaxis_title="benchmark", margin={"l": 60, "r": 20, "t": 20, "b": 60},
                      legend={"orientation": "h", "y": 1.08})
    return fig


def _ti_figure(pool: Pool) -> go.Figure:
    n = pool.n
    fig = go.Figure()
    for code, bench in enumerate(pool.benchmarks["benchmark"]):
        sel = (pool.bench_code == code) & (pool.ti > 0)
        counts = np.bincount(pool.ti[sel], minlength=n + 2)[1:]
        fig.add_trace(go.Bar(x=[f"TI {k}" for k in range(1, n + 2)], y=counts, name=str(bench)))
    ticks = [f"TI {k}" for k in range(1, n + 2)]
    fig.update_layout(barmode="group", template="plotly_white", height=340, yaxis_title="items",
                      xaxis={"categoryorder": "array", "categoryarray": ticks,
                             "title": "transition index (the first member that answers the item)"},
                      margin={"l": 60, "r": 20, "t": 20, "b": 50}, legend={"orientation": "h", "y": 1.1})
    return fig


def pool_index_line(pool: Pool) -> str:
    """One line for an index page: the pool's size and the highest anomaly rate."""
    kinds = np.bincount(pool.kind, minlength=len(KINDS))
    worst = pool.benchmarks.sort_values("anomaly_rate", ascending=False).iloc[0]
    return (f"{kinds[1]:,} transition items + {kinds[0]:,} easy + {kinds[2]:,} hard in the pool; highest anomaly rate "
            f"{worst['anomaly_rate']:.1%} ({worst['benchmark']})")


def pool_report(pool: Pool, audit: bool = False) -> Report:
    b = pool.benchmarks
    n = pool.n
    members = pool.members
    title = "STEM contamination audit" if audit else "STEM pool"
    report = Report(title=title, subtitle=f"family {pool.family}: {', '.join(members['model'])} "
                                          f"({', '.join(f'{p:g}B' for p in members['params'])}); {len(pool.kind)} items")
    worst = b.sort_values("anomaly_rate", ascending=False).iloc[0]
    kinds = np.bincount(pool.kind, minlength=len(KINDS))
    report.summary(
        f"{kinds[1]} significant transition samples (TI 2..{n}) plus {kinds[0]} easy and {kinds[2]} hard items "
        f"form the pool; {kinds[3]} items ({kinds[3] / max(len(pool.kind) - kinds[4], 1):.1%} of those considered) "
        "have non-monotone IRVs.",
        f"Highest anomaly rate: {worst['benchmark']} at {worst['anomaly_rate']:.1%} — items a smaller member "
        "answers right while a larger one fails; candidates for contamination or noisy grading.",
        "Reference scores: " + ", ".join(f"{r.model} {r.reference_score:.1f}" for r in members.itertuples()) + ".",
    )
    report.html_block("What this shows", "<p>STEM orders a model family by size and looks at every item's "
                      "results across it (its IRV). Items that flip once from wrong to right as the models grow are "
                      "<i>significant transition samples</i>; the member at which they flip, the <i>transition "
                      "index</i>, is a difficulty level measured in family members. Items that flip back are "
                      "<i>anomalous</i>: the contamination audit lists them. The pool of easy, transition and hard "
                      "items is what new models are located with (<code>evalprism stem locate</code>).</p>"
                      + _RULES.format(missing=html.escape(str(pool.options.get("missing", "wrong")))))
    report.figure(_polarization_figure(pool), "Difficulty polarization and anomaly rate per benchmark",
                  "Bars: shares of easy, intermediate and hard items among the items considered; diamonds: anomaly "
                  "rate. A benchmark dominated by easy and hard items separates the family poorly (paper, Fig. 1).")
    report.figure(_ti_figure(pool), "Items per transition index",
                  f"TI k: first answered by member k (TI 1: by all, TI {n + 1}: by none). Localization draws the "
                  "same number of items from every level, so a thin level limits the subset size.")
    shown = b.copy()
    for col in ("anomaly_rate", "easy_share", "intermediate_share", "hard_share", "weight"):
        shown[col] = shown[col].round(4)
    report.table(shown.round(4), "Benchmarks", "D: discriminability (percent points); weight: share in the reference "
                 "score; incomplete: items some member has no row for (left out).")
    report.table(pool.members_frame().round(3), "Family members", "Scores in percent of all items of each benchmark "
                 "(-1 counts as wrong); reference_score: the weighted score used as ground truth.")
    report.table(pool.anomalies(), "Anomalous items (contamination audit)",
                 "Most inversions first: pairs of members where the smaller is right and the larger wrong. "
                 "anomalies.csv has the full list.", max_rows=40)
    report.details.update({"family": pool.family, **pool.options})
    return report


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
    titles = [f"{loc.model}: {loc.interval}" for loc, _ in result.results]
    margin = {"l": 60, "r": 20, "t": 50, "b": 110}
    panel, gap = 300, 90  # px: panel height, space between rows for the axis title and next panel title
    plot_height = panel * rows + gap * (rows - 1)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=titles, shared_yaxes=True,
                        horizontal_spacing=0.05, vertical_spacing=gap / plot_height if rows > 1 else 0.0)
    for i, (loc, _) in enumerate(result.results):
        r, c = divmod(i, cols)
        r, c = r + 1, c + 1
        for j, (name, shade) in enumerate(zip(names, shades, strict=True), 1):
            fig.add_trace(go.Scatter(x=levels, y=(levels <= j).astype(float), mode="lines", name=f"family: {name}",
                                     line={"dash": "dot", "width": 1.5, "color": shade}, legendgroup=f"family{j}",
                                     showlegend=i == 0,
                                     hovertemplate=f"{html.escape(name)}: TI %{{x}} → %{{y:.0%}}<extra></extra>"), r, c)
            fig.add_annotation(x=j + 0.5, y=0.5, text=html.escape(name), showarrow=False, textangle=-60,
                               font={"size": 10, "color": shade}, bgcolor="rgba(255,255,255,0.7)", row=r, col=c)
        fig.add_vrect(x0=loc.position + 0.5, x1=loc.position + 1.5, fillcolor="#ffe08a", opacity=0.35, line_width=0,
                      layer="below", row=r, col=c)
        lv = loc.levels
        colour = MODEL_COLOURS[i % len(MODEL_COLOURS)]
        fig.add_trace(go.Scatter(
            x=lv["ti"], y=lv["accuracy"], mode="lines+markers", name=loc.model, line={"width": 2.5, "color": colour},
            marker={"size": 7}, error_y={"type": "data", "symmetric": False, "array": lv["ci_high"] - lv["accuracy"],
                                         "arrayminus": lv["accuracy"] - lv["ci_low"], "thickness": 1.5, "width": 5},
            hovertemplate="TI %{x}: %{y:.0%}<extra>" + html.escape(loc.model) + "</extra>"), r, c)
        fig.update_xaxes(title_text="TI level", tickmode="array", tickvals=levels, range=[levels[0] - 0.4,
                         levels[-1] + 0.4], row=r, col=c)
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="accuracy on the subset", row=r, col=1)
    fig.update_yaxes(tickformat=".0%", range=[-0.05, 1.05])
    fig.update_layout(template="plotly_white", height=plot_height + margin["t"] + margin["b"], margin=margin,
                      legend={"orientation": "h", "y": -60 / plot_height, "yanchor": "top"})
    return fig


def _trials_figure(result: LocationResult) -> go.Figure:
    fig = go.Figure()
    models = [loc.model for loc, t in result.results if t is not None]
    for method, color in zip(METHODS, _METHOD_COLOURS):
        fig.add_trace(go.Bar(x=models, y=[t.accuracy(method) for _, t in result.results if t is not None],
                             name=method, marker_color=color))
    fig.update_layout(barmode="group", template="plotly_white", height=360, xaxis_title="located model",
                      yaxis={"title": "localization accuracy",
                      "tickformat": ".0%", "range": [0, 1.05]}, margin={"l": 60, "r": 20, "t": 20, "b": 80},
                      legend={"orientation": "h", "y": 1.1})
    return fig


def trials_report(trials: Trials) -> Report:
    """The report of one model's repeated trials: how often each method placed it right, and where."""
    report = Report(title="STEM localization trials",
                    subtitle=f"{trials.model} on family {trials.family}: {len(trials.positions)} trials of "
                             f"{trials.options.get('items')} items")
    report.summary(f"{trials.model}: ground truth position {trials.truth}. STEM {trials.accuracy('stem'):.0%}, "
                   f"random sampling {trials.accuracy('random'):.0%}, Bayesian {trials.accuracy('bayesian'):.0%} "
                   "of trials correct.")
    report.html_block("How the trials are run", _LOCATE_RULES.format(
        weighting=html.escape(str(trials.options.get("weighting", "balanced")))))
    fig = go.Figure()
    for (method, positions), color in zip(trials.by_method().items(), _METHOD_COLOURS):
        fig.add_trace(go.Histogram(x=positions, name=method, marker_color=color, xbins={"size": 1}))
    fig.add_vline(x=trials.truth, line_dash="dash", annotation_text="ground truth")
    fig.update_layout(barmode="group", template="plotly_white", height=360,
                      xaxis={"title": "position placed (family members below the model)", "dtick": 1},
                      yaxis_title="trials", margin={"l": 60, "r": 20, "t": 30, "b": 60},
                      legend={"orientation": "h", "y": 1.12})
    report.figure(fig, "Positions placed per method", "How many trials placed the model at each position; the "
                  "dashed line is the full-benchmark ground truth.")
    report.table(trials.summary().round(4), "Trials per method", "modal_position: the position most trials chose.")
    report.details.update(trials.options)
    return report


def location_index_line(result: LocationResult) -> str:
    """One line for an index page: models placed right, and each method's mean trial accuracy."""
    right = sum(loc.position == loc.truth for loc, _ in result.results)
    line = f"{right} of {len(result.results)} models placed at their true position"
    trials = [t for _, t in result.results if t is not None]
    if trials:
        means = {m: np.mean([t.accuracy(m) for t in trials]) for m in METHODS}
        line += (f"; over {len(trials[0].positions)} trials STEM {means['stem']:.0%}, random sampling "
                 f"{means['random']:.0%}, Bayesian {means['bayesian']:.0%} correct")
    return line


def location_report(result: LocationResult) -> Report:
    first = result.results[0][0]
    members = first.tests["member"].tolist()
    report = Report(title="STEM localization", subtitle=f"{len(result.results)} model(s) on family {first.family} "
                                                       f"({', '.join(members)}); {first.options.get('items')} items")
    lines = []
    for loc, trials in result.results:
        line = (f"{loc.model}: {loc.interval} (position {loc.position} of {len(members)}, confidence "
                f"{loc.confidence:.1%}); ground truth from full-benchmark scores: position {loc.truth}.")
        if trials is not None:
            line += (f" Over {len(trials.positions)} trials: STEM {trials.accuracy('stem'):.0%}, random sampling "
                     f"{trials.accuracy('random'):.0%}, Bayesian {trials.accuracy('bayesian'):.0%} correct.")
        lines.append(line)
    report.summary(*lines)
    report.html_block("What this shows", "<p>Each new model answered a small balanced subset of the family's pool: "
                      "the same number of items per transition-index level. Its accuracy per level (solid lines) "
                      "falls where its capability ends; the family's own curves (dotted) are steps by construction: "
                      "member j answers exactly the levels up to j. The drop is read as an interval between two "
                      "family members.</p>"
                      + _LOCATE_RULES.format(weighting=html.escape(str(first.options.get("weighting", "balanced")))))
    report.figure(_curves_figure(result), "Accuracy by transition index",
                  "One panel per located model: its accuracy on the subset per TI level (95% Clopper-Pearson bars). "
                  "Dotted steps: the family's members, lighter for smaller ones, each named where it drops (member j "
                  "answers exactly the levels up to j). A model between members j and j+1 keeps high accuracy up to "
                  "level j and loses it from level j+2; level j+1, shaded, sits in between.")
    report.table(_locations_table(result), "Localizations", "p_lower / p_upper: one-sided exact McNemar p-values "
                 "for being above the lower and below the upper member.")
    if any(t is not None for _, t in result.results):
        report.figure(_trials_figure(result), "Localization accuracy over repeated trials",
                      "Share of trials that place the model at its true position (members with a lower full-benchmark "
                      "reference score), for STEM and both baselines on the same number of items.")
        import pandas as pd

        summary = pd.concat([t.summary() for _, t in result.results if t is not None], ignore_index=True)
        report.table(summary.round(4), "Trials per method", "modal_position: the position most trials chose.")
    if result.pool is not None:
        report.table(result.pool.benchmarks[["benchmark", "items", "anomaly_rate", "sts", "easy_share",
                                             "intermediate_share", "hard_share", "D", "weight"]].round(4),
                     "Pool benchmarks and anomaly rates")
    report.details.update(result.options)
    return report


def _locations_table(result: LocationResult):
    import pandas as pd

    rows = []
    for loc, trials in result.results:
        rows.append({"model": loc.model, "interval": loc.interval, "position": loc.position,
                     "confidence": round(loc.confidence, 4), "p_lower": loc.p_lower, "p_upper": loc.p_upper,
                     "reference_score": round(loc.reference_score, 2), "true_position": loc.truth,
                     "items": len(loc.subset)})
    return pd.DataFrame(rows)
