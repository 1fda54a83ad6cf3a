"""The ECDF analysis report: clusters, reordered assignments, accuracy view, medoid examples."""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evalprism.report import Report
from evalprism.stats import ecdf_steps

if TYPE_CHECKING:
    from evalprism.ecdf.result import EcdfResult

MEMBER_CURVES = 120
GREY = "rgba(120,128,140,0.25)"
MEDOID = "#111111"
CENTROID = "#2f5fd0"


def _joined_steps(samples: list[np.ndarray], lo: float, hi: float) -> tuple[list[float | None], list[float | None]]:
    """Many ECDF curves as one trace (None between curves keeps the HTML small)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for s in samples:
        x, y = ecdf_steps(s, lo, hi)
        xs.extend(x.tolist() + [None])
        ys.extend(y.tolist() + [None])
    return xs, ys


def _panel_grid(n: int, cols: int = 4) -> tuple[int, int]:
    cols = min(cols, n)
    return math.ceil(n / cols), cols


def _ecdf_panels(groups: list[tuple[str, list[np.ndarray], np.ndarray | None]], lo: float, hi: float,
                 x_title: str, seed: int) -> go.Figure:
    """Small multiples: member ECDFs in grey, the medoid in black (if any), the centroid in blue."""
    rows, cols = _panel_grid(len(groups))
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[g[0] for g in groups],
                        shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.6 / max(rows, 1) / 3 + 0.04,
                        horizontal_spacing=0.03)
    rng = np.random.default_rng(seed)
    for i, (_, members, medoid) in enumerate(groups):
        r, c = divmod(i, cols)
        shown = members
        if len(members) > MEMBER_CURVES:
            shown = [members[j] for j in sorted(rng.choice(len(members), MEMBER_CURVES, replace=False))]
        xs, ys = _joined_steps(shown, lo, hi)
        first = i == 0
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line={"color": GREY, "width": 1, "shape": "hv"},
                                 name="settings", legendgroup="m", showlegend=first, hoverinfo="skip"), r + 1, c + 1)
        if medoid is not None:
            x, y = ecdf_steps(medoid, lo, hi)
            fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line={"color": MEDOID, "width": 2.2, "shape": "hv"},
                                     name="medoid", legendgroup="d", showlegend=first), r + 1, c + 1)
        x, y = ecdf_steps(np.concatenate(members), lo, hi)
        fig.add_trace(go.Scatter(x=x, y=y, mode="lines", line={"color": CENTROID, "width": 2.2, "shape": "hv"},
                                 name="centroid (pooled)", legendgroup="c", showlegend=first), r + 1, c + 1)
    fig.update_layout(height=max(320, 230 * rows), margin={"l": 50, "r": 20, "t": 50, "b": 50},
                      legend={"x": 1.01, "y": 1, "xanchor": "left", "yanchor": "top"}, template="plotly_white")
    fig.update_xaxes(range=[lo, hi])
    fig.update_yaxes(range=[-0.02, 1.02])
    for c in range(1, cols + 1):
        fig.update_xaxes(title_text=x_title, row=rows, col=c)
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="ECDF", row=r, col=1)
    return fig


def _assignment_figure(result: EcdfResult) -> go.Figure:
    a = result.assignment
    s = result.settings
    groups = s.groupby("question_id")["group"].first() if "group" in s.columns else None
    ylabels = [f"{q} ({groups[q]})" if groups is not None else str(q) for q in a.index]
    k = int(result.clusters["cluster"].max()) + 1
    z = a.to_numpy(dtype=float)
    mean = s.pivot_table(index="question_id", columns="configuration", values="mean_score", aggfunc="first")
    mean = mean.loc[a.index, a.columns].to_numpy(dtype=float)
    text = np.where(np.isnan(mean), "no responses", np.char.mod("mean score %.3f", np.nan_to_num(mean)))
    fig = go.Figure(go.Heatmap(
        z=z, x=[str(c) for c in a.columns], y=ylabels, zmin=-0.5, zmax=k - 0.5,
        colorscale="Viridis", reversescale=True, text=text,
        hovertemplate="question %{y}<br>%{x}<br>cluster %{z}<br>%{text}<extra></extra>",
        colorbar={"title": "cluster", "tickvals": list(range(k)), "dtick": 1},
    ))
    fig.update_layout(height=min(2400, max(420, 14 * len(ylabels) + 200)), template="plotly_white",
                      margin={"l": 120, "r": 20, "t": 20, "b": 160}, xaxis={"tickangle": -45, "type": "category"},
                      yaxis={"type": "category", "autorange": "reversed", "tickmode": "array", "tickvals": ylabels,
                             "tickfont": {"size": 10}})
    return fig


def _k_figure(curve: pd.DataFrame, chosen: int) -> go.Figure:
    fig = go.Figure(go.Scatter(x=curve["k"], y=curve["silhouette"], mode="lines+markers", name="silhouette"))
    fig.add_vline(x=chosen, line_dash="dash", line_color=CENTROID, annotation_text=f"K={chosen}")
    fig.update_layout(height=320, template="plotly_white", xaxis_title="K (number of clusters)",
                      yaxis_title="mean silhouette", margin={"l": 60, "r": 20, "t": 20, "b": 50})
    return fig


def _examples_html(result: EcdfResult, max_answers: int = 8) -> str:
    s = result.settings
    resp = result.responses
    blocks = []
    for _, row in result.clusters.iterrows():
        medoid = s[(s["cluster"] == row["cluster"]) & s["is_medoid"]].iloc[0]
        rows = resp[resp["setting"] == medoid["setting"]]
        answers = (rows["answer"] if "answer" in rows.columns else rows.get("response", pd.Series(dtype=str))).fillna("")
        counts = answers.value_counts().head(max_answers)
        refs = rows["references"].iloc[0] if "references" in rows.columns else []
        items = "".join(f"<li>{html.escape(str(a)[:300]) or '<i>(no answer)</i>'} <b>×{n}</b></li>"
                        for a, n in counts.items())
        refs_html = ", ".join(html.escape(str(r)[:200]) for r in refs) if refs else "—"
        blocks.append(
            f"<div><h3>Cluster {int(row['cluster'])} — {html.escape(str(row['medoid_setting']))}</h3>"
            f"<p>mean score {row['medoid_mean_score']:.3f}; reference: <span class='example'>{refs_html}</span></p>"
            f"<ul class='example'>{items}</ul></div>"
        )
    return "".join(blocks)


def headline(result: EcdfResult) -> list[str]:
    """A few sentences a colleague can read in a minute."""
    s = result.settings
    o = result.options
    items = [
        f"{len(s)} settings ({s['question_id'].nunique()} questions × {s['configuration'].nunique()} configurations), "
        f"{int(s['n_responses'].sum())} responses, clustered into K={o['k']} groups of similar response-quality "
        f"distributions ({'K chosen by silhouette' if o['clusters'] == 'auto' else 'K given'}; cluster 0 is best)."
    ]
    f = result.factors
    if len(f):
        parts = ", ".join(f"{r.factor} (AMI {r.ami:.2f})" for r in f.itertuples())
        items.append(f"What separates the clusters, strongest first: {parts}.")
    if "correct" in s.columns:
        correct = s[s["correct"]]
        if len(correct):
            outside = float((correct["cluster"] != 0).mean())
            items.append(f"{len(correct)} settings have a correct final answer, yet {outside:.0%} of them are outside "
                         "the best cluster: their individual responses are spread out, which a majority answer hides.")
        by_conf = s.groupby("configuration").agg(acc=("correct", "mean"), score=("mean_score", "mean"),
                                                 n=("question_id", "size"))
        by_conf = by_conf[by_conf["n"] >= 0.5 * by_conf["n"].max()]  # skip configurations with few questions
        by_conf["acc_r"] = by_conf["acc"].round(2)
        best = None
        for _, grp in by_conf.groupby("acc_r"):
            if len(grp) > 1:
                gap = grp["score"].max() - grp["score"].min()
                if best is None or gap > best[0]:
                    best = (gap, grp["score"].idxmax(), grp["score"].idxmin(), grp["acc"].iloc[0],
                            grp["score"].max(), grp["score"].min())
        if best is not None and best[0] > 0:
            items.append(f"Same accuracy, different quality: '{best[1]}' and '{best[2]}' both have accuracy {best[3]:.2f}, "
                         f"but mean response score {best[4]:.3f} vs {best[5]:.3f}.")
    items.extend(result.notes)
    return items


def build_report(result: EcdfResult, title: str | None = None) -> Report:
    """Assemble the report for ``result``."""
    o = result.options
    s = result.settings
    samples = result.samples
    allv = np.concatenate(samples)
    lo, hi = float(allv.min()), float(allv.max())
    pad = (hi - lo) * 0.02 or 0.01
    lo, hi = lo - pad, hi + pad
    x_title = "score" if o["quality"] == "score column" else "max cosine similarity"
    report = Report(
        title=title or "Response-quality distributions (ECDF clustering)",
        subtitle=f"quality = {o['quality']}; settings = question × ({', '.join(result.by) or 'one configuration'}); "
                 f"k-medoids: {o['method']}, K={o['k']}, seed {o['seed']}",
    )
    report.summary(*headline(result))
    groups = []
    for c in result.clusters["cluster"]:
        members = np.flatnonzero(s["cluster"].to_numpy() == c)
        medoid = int(members[s["is_medoid"].to_numpy()[members]][0])
        row = result.clusters.iloc[int(c)]
        groups.append((f"cluster {c} (n={row['size']}, wins={row['wins']})", [samples[i] for i in members], samples[medoid]))
    report.figure(
        _ecdf_panels(groups, lo, hi, x_title, o["seed"]), "ECDFs of each cluster",
        "Each panel is one cluster of settings; a grey step curve is the ECDF of one setting's response scores. "
        "A curve further right (lower) means better responses. Black is the cluster's medoid, blue the ECDF of all "
        "its responses pooled. Clusters are numbered by wins (eq. 7): cluster 0 beats the most other medoids.",
    )
    report.figure(
        _assignment_figure(result), "Cluster of every question × configuration (reordered)",
        "Rows are questions (with their group), columns configurations; the colour is the cluster of that setting "
        "(bright = better). Rows and columns are sorted by one-dimensional MDS so that similar ones sit together: "
        "horizontal bands mean the question decides the distribution, vertical bands mean the configuration does.",
    )
    if "accuracy_level" in s.columns:
        acc_groups = []
        for level in sorted(s["accuracy_level"].dropna().unique()):
            members = np.flatnonzero((s["accuracy_level"] == level).to_numpy())
            acc_groups.append((f"accuracy {level} (n={members.size})", [samples[i] for i in members], None))
        report.figure(
            _ecdf_panels(acc_groups, lo, hi, x_title, o["seed"]), "ECDFs grouped by accuracy",
            "Settings grouped by the exact-match accuracy of their group × configuration (final answer = the "
            "response nearest the mean embedding, eq. 6); blue is the pooled centroid. Wide grey bands inside one "
            "panel show distributions that the same accuracy value hides.",
        )
    if result.k_curve is not None:
        report.figure(_k_figure(result.k_curve, o["k"]), "Choosing K",
                      "Mean silhouette of the k-medoids clustering for each K on the precomputed ECDF distances; "
                      "the K with the highest value (smallest on ties) was used.")
    report.table(result.factors, "What the clusters separate",
                 "Adjusted mutual information between the cluster labels and each factor: 1 = the clusters follow the "
                 "factor exactly, 0 = no more than chance.")
    report.table(result.clusters, "Clusters", "One row per cluster; medoid_setting is the most central setting.")
    if "answer" in result.responses.columns:
        report.html_block("Example answers of the medoids", _examples_html(result),
                          "The distinct (extracted) answers in each medoid setting with their counts, next to the "
                          "reference.")
    if result.accuracy is not None:
        report.table(result.accuracy, "Accuracy per group × configuration",
                     "Exact-match accuracy of the final answers (eq. 6) and the mean response score.")
    report.details.update({k: v for k, v in o.items()})
    if result.embed_stats:
        report.details["embedding"] = result.embed_stats
    return report
