"""The judge-agreement report: the pair map, per-cluster agreement, bias-prone queries with examples."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evalprism.embed.spec import spec_kind
from evalprism.report import Report

if TYPE_CHECKING:
    from evalprism.judges.result import JudgesResult

MAP_POINTS = 6000
MAX_MAP_LABELS = 20  # clusters named on the map itself (all are in the legend)
TOP = 10
EXAMPLES = 2
PALETTE = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
    "#393b79",
    "#637939",
    "#8c6d31",
    "#843c39",
    "#7b4173",
    "#3182bd",
    "#e6550d",
    "#31a354",
    "#756bb1",
]
OUTCOME_COLOURS = {
    "agree": "rgba(44,160,44,0.45)",
    "LLM misses (FN)": "#d62728",
    "LLM adds (FP)": "#1f4fd0",
    "no label": "rgba(150,150,150,0.4)",
}


def _shown(n: int, seed: int) -> np.ndarray:
    """Indices of the pairs drawn on the maps (all, or a fixed random sample keeping the HTML small)."""
    if n <= MAP_POINTS:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, MAP_POINTS, replace=False))


def cluster_name(cluster: int) -> str:
    """The label a cluster has on every figure and table of the report: C0, C1, ... or noise."""
    return "noise" if cluster < 0 else f"C{cluster}"


def _cluster_map(result: JudgesResult, idx: np.ndarray, map_name: str) -> go.Figure:
    """The pairs coloured by cluster: one legend entry per cluster (and the noise set), each cluster
    also labelled at its median position so the map reads without matching colours."""
    p = result.pairs.iloc[idx]
    n_clusters = result.summary.n_clusters
    fig = go.Figure()
    for cluster in sorted(p["cluster"].unique(), key=lambda c: (c < 0, c)):
        members = p[p["cluster"] == cluster]
        name = cluster_name(int(cluster))
        colour = "rgba(160,160,160,0.45)" if cluster < 0 else PALETTE[int(cluster) % len(PALETTE)]
        fig.add_trace(
            go.Scatter(
                x=members["map_x"],
                y=members["map_y"],
                mode="markers",
                marker={"size": 5, "color": colour},
                name=f"{name} ({len(members)} pairs)" + (" — in no dense region" if cluster < 0 else ""),
                text=members["query_id"],
                hovertemplate=f"{name} · query %{{text}}<extra></extra>",
            )
        )
        if cluster >= 0 and n_clusters <= MAX_MAP_LABELS:  # beyond that the labels cover the points
            fig.add_annotation(
                x=float(members["map_x"].median()),
                y=float(members["map_y"].median()),
                text=f"<b>{name}</b>",
                showarrow=False,
                font={"size": 13, "color": colour},
                bgcolor="rgba(255,255,255,0.75)",
            )
    fig.update_layout(
        height=520,
        template="plotly_white",
        margin={"l": 50, "r": 20, "t": 20, "b": 50},
        xaxis_title=f"{map_name} 1",
        yaxis_title=f"{map_name} 2",
        legend={"title": {"text": "cluster"}},
    )
    return fig


def _agreement_map(result: JudgesResult, idx: np.ndarray, map_name: str) -> go.Figure:
    p = result.pairs.iloc[idx]
    human = result.options.human
    judges = list(result.summary.llm)
    fig = make_subplots(
        rows=1, cols=len(judges), subplot_titles=judges, shared_xaxes=True, shared_yaxes=True, horizontal_spacing=0.03
    )
    h = p[f"{human}_relevant"].to_numpy(dtype=float)
    in_legend: set[str] = set()
    for j, judge in enumerate(judges):
        m = p[f"{judge}_relevant"].to_numpy(dtype=float)
        outcome = np.select(
            [np.isnan(h) | np.isnan(m), h == m, (h == 1) & (m == 0)],
            ["no label", "agree", "LLM misses (FN)"],
            "LLM adds (FP)",
        )
        for name, colour in OUTCOME_COLOURS.items():
            sel = outcome == name
            fig.add_trace(
                go.Scatter(
                    x=p["map_x"].to_numpy()[sel],
                    y=p["map_y"].to_numpy()[sel],
                    mode="markers",
                    name=name,
                    legendgroup=name,
                    showlegend=bool(sel.any()) and name not in in_legend,
                    marker={"size": 4 if name == "agree" else 5, "color": colour},
                    hoverinfo="skip",
                ),
                1,
                j + 1,
            )
            if sel.any():
                in_legend.add(name)
    fig.update_layout(height=430, template="plotly_white", margin={"l": 50, "r": 20, "t": 40, "b": 50})
    fig.update_xaxes(title_text=f"{map_name} 1")
    fig.update_yaxes(title_text=f"{map_name} 2", col=1)
    return fig


def _cluster_bars(result: JudgesResult) -> go.Figure:
    c = result.clusters.copy()
    c["label"] = [cluster_name(int(k)) for k in c["cluster"]]
    order = list(dict.fromkeys(c.sort_values(["is_noise", "cluster"])["label"]))
    fig = go.Figure()
    for j, judge in enumerate(result.summary.llm):
        s = c[c["judge"] == judge].set_index("label").reindex(order)
        fig.add_trace(
            go.Bar(
                x=order,
                y=s["ac1"],
                name=judge,
                marker_color=PALETTE[j % len(PALETTE)],
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": (s["ac1_hi"] - s["ac1"]).clip(lower=0),
                    "arrayminus": (s["ac1"] - s["ac1_lo"]).clip(lower=0),
                    "thickness": 1,
                },
                customdata=np.c_[s["size"], s["percent_agreement"], s["false_negatives"], s["false_positives"]],
                hovertemplate=(
                    "%{x}: AC1 %{y:.3f}<br>%{customdata[0]} pairs, agreement %{customdata[1]:.2f}"
                    "<br>FN %{customdata[2]}, FP %{customdata[3]}<extra>" + html.escape(judge) + "</extra>"
                ),
            )
        )
    fig.update_layout(
        barmode="group",
        height=420,
        template="plotly_white",
        yaxis_title="Gwet's AC1 (95% CI)",
        margin={"l": 50, "r": 20, "t": 20, "b": 60},
        yaxis_range=[-1.05, 1.05],
    )
    return fig


def _examples(result: JudgesResult, judge: str, query_id: str, cluster: int) -> str:
    human = result.options.human
    p = result.pairs
    sel = (
        (p["query_id"] == query_id)
        & (p["cluster"] == cluster)
        & (p[f"{human}_relevant"] != p[f"{judge}_relevant"])
        & p[f"{judge}_relevant"].notna()
        & p[f"{human}_relevant"].notna()
    )
    rows = np.flatnonzero(sel.to_numpy())[:EXAMPLES]
    items = []
    for r in rows:
        doc = str(result.texts["doc"].iat[r])
        snippet = doc if len(doc) <= 220 else doc[:217] + "…"
        items.append(
            f"<li><b>{html.escape(str(p['doc_id'].iat[r]))}</b> human {p[human].iat[r]:g}, "
            f"{html.escape(judge)} {p[judge].iat[r]:g}: {html.escape(snippet)}</li>"
        )
    return f"<ul class='examples'>{''.join(items)}</ul>" if items else ""


def _top_queries(result: JudgesResult, judge: str) -> str:
    q = result.queries[(result.queries["judge"] == judge) & result.queries["bias_prone"].astype(bool)].head(TOP)
    if q.empty:
        return f"<p>No bias-prone queries for {html.escape(judge)}.</p>"
    rows = []
    for _, r in q.iterrows():
        flags = ", ".join(
            n for n, f in (("ΔAC1≥τ", r["flag_abs"]), ("outlier", r["flag_outlier"]), ("flip", r["flag_flip"])) if f
        )
        by = result.summary.clustering.by
        where = f"<br><span class='more'>{html.escape(str(r[by]))}</span>" if by and by in r.index else ""
        rows.append(
            f"<tr><td>{int(r['rank'])}</td><td>{html.escape(str(r['query_id']))}{where}</td><td>{html.escape(str(r['query']))}"
            f"{_examples(result, judge, r['query_id'], int(r['cluster_min']))}</td><td>{r['dac1']:.2f}</td>"
            f"<td>{r['ac1_max']:.2f} (C{int(r['cluster_max'])}) / {r['ac1_min']:.2f} (C{int(r['cluster_min'])})</td>"
            f"<td>{flags}</td><td>{html.escape(str(r['direction']))} (FN {int(r['false_negatives_min'])}, "
            f"FP {int(r['false_positives_min'])})</td></tr>"
        )
    head = (
        "<tr><th>rank</th><th>query id</th><th>query, and disagreeing pairs in its lowest-AC1 cluster</th>"
        "<th>ΔAC1</th><th>AC1 max / min (cluster)</th><th>flags</th><th>direction in the min cluster</th></tr>"
    )
    return f"<table class='data'>{head}{''.join(rows)}</table>"


def _fmt(x: float, digits: int = 3) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"


def index_line(result: JudgesResult) -> str:
    """One line for an index page: clusters, and per judge its overall AC1 against its worst cluster's."""
    dense = result.clusters[~result.clusters["is_noise"]]
    parts = []
    for _, r in result.overall.iterrows():
        mine = dense[dense["judge"] == r["judge"]]
        if len(mine):
            worst = mine.loc[mine["ac1"].idxmin()]
            parts.append(
                f"{r['judge']} AC1 {_fmt(r['ac1'], 2)} overall, {_fmt(worst['ac1'], 2)} in "
                f"{cluster_name(int(worst['cluster']))}"
            )
    warn = " (degenerate clustering: see the report's warning)" if result.degenerate else ""
    return f"{result.summary.n_clusters} clusters{warn}; " + "; ".join(parts)


def counts_readable(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its whole-number columns as text with thousands separators (20,060, not the
    2.006e+04 a float column or a transposed table would show)."""
    out = frame.copy()
    for col in out.columns:
        values = out[col]
        if pd.api.types.is_integer_dtype(values) and not pd.api.types.is_bool_dtype(values):
            out[col] = values.map(lambda v: f"{int(v):,}").astype(object)
    return out


def _clustering_lines(result: JudgesResult) -> list[str]:
    """The headline about the clustering: how it was made (per collection, selection, min_cluster_size)
    and, first and in bold, a warning when it is degenerate."""
    c = result.summary.clustering
    lines = [f"**Warning: {w}**" for w in c.warnings]
    parts = []
    for g in c.groups:
        name = "" if g.group is None else f"{g.group}: "
        fallback = " (after excess of mass was degenerate)" if g.fell_back else ""
        h = g.health
        parts.append(
            f"{name}{h.n_clusters:,} clusters ({g.selection} selection{fallback}, min_cluster_size "
            f"{g.min_cluster_size:,}), the largest holding {h.largest_share:.0%} of {h.n_pairs:,} pairs; "
            f"ΔAC1 defined for {h.queries_with_dac1:,} of {h.n_queries:,} queries"
        )
    split = f"Clustered per `{c.by}`. " if c.by else ""
    lines.append(split + "; ".join(parts) + ".")
    return lines


def _clustering_table(result: JudgesResult) -> pd.DataFrame:
    """One row per group of pairs clustered apart: its selection, min_cluster_size and health (the
    grouping column's name as the first column's header; "all pairs" when not split)."""
    clustering = result.summary.clustering
    table = pd.DataFrame(
        [
            {
                "group": g.group,
                "selection": g.selection,
                "min_cluster_size": g.min_cluster_size,
                "n_pairs": g.health.n_pairs,
                "n_clusters": g.health.n_clusters,
                "largest_share": g.health.largest_share,
                "noise_share": g.health.noise_share,
                "n_queries": g.health.n_queries,
                "queries_with_dac1": g.health.queries_with_dac1,
                "degenerate": g.health.degenerate,
            }
            for g in clustering.groups
        ]
    )
    table["group"] = table["group"].fillna("all pairs")
    return counts_readable(table.rename(columns={"group": clustering.by or "group"}))


def _options_shown(result: JudgesResult) -> list[tuple[str, object]]:
    """The options the report lists, with the values the run resolved (the embedder or precomputed
    vectors, the instructions tried and the one chosen, the scales), in the report's order."""
    o, summary = result.options, result.summary
    c, b = o.cluster, o.bias
    min_cluster_size: object = c.min_cluster_size
    if min_cluster_size is None:
        min_cluster_size = (
            "scaled with the pairs: max(15, pairs / 700) per collection (see How the pairs were clustered)"
        )
    return [
        ("human", o.human),
        ("llm", list(summary.llm)),
        ("embedder", summary.embedder),
        ("instructions", o.candidate_instructions()),
        ("instruction", summary.instruction),
        ("reduce", c.reduce),
        ("n_components", c.n_components),
        ("min_cluster_size", min_cluster_size),
        ("min_samples", c.min_samples),
        ("cluster_selection_method", c.cluster_selection_method),
        ("max_cluster_share", c.max_cluster_share),
        ("min_clusters", c.min_clusters),
        ("min_query_share", c.min_query_share),
        ("by", o.by),
        ("min_query_pairs", o.min_query_pairs),
        ("tau", b.tau),
        ("outlier_iqr", b.iqr_k),
        ("flip_high", b.flip_high),
        ("flip_low", b.flip_low),
        ("purity_percentile", o.purity_percentile),
        ("confidence", o.confidence),
        ("seed", o.seed),
        ("scales", dict(summary.scales)),
    ]


def build_report(result: JudgesResult) -> Report:
    o, summary = result.options, result.summary
    n_clusters = summary.n_clusters
    noise_share = float((result.pairs["cluster"] < 0).mean())
    report = Report(
        title=result.title or "Where LLM relevance judges disagree with humans",
        subtitle=f"{len(result.pairs):,} query-document pairs · {result.pairs['query_id'].nunique():,} queries · "
        f"{n_clusters:,} dense clusters + noise ({noise_share:.0%} of pairs) · judges: "
        f"{', '.join(summary.llm)} vs human '{o.human}'",
    )
    report.summary(*_clustering_lines(result))
    for _, r in result.overall.iterrows():
        flagged = int(result.bias_prone(r["judge"]).shape[0])
        report.summary(
            f"{r['judge']}: AC1 {_fmt(r['ac1'])} [{_fmt(r['ac1_lo'])}, {_fmt(r['ac1_hi'])}], "
            f"kappa {_fmt(r['kappa'])}, agreement {_fmt(r['percent_agreement'])}; "
            f"{flagged} bias-prone queries."
        )
    for _, r in result.concentration.iterrows():
        line = (
            f"{r['judge']}: disagreement {_fmt(r['disagreement_dense'])} in dense clusters vs "
            f"{_fmt(r['disagreement_noise'])} in noise; per-cluster AC1 from {_fmt(r['cluster_ac1_min'], 2)} "
            f"to {_fmt(r['cluster_ac1_max'], 2)}"
        )
        if r["clusters"] >= 2 and r["worst_clusters_pair_share"] <= 0.5:
            line += (
                f"; the worst clusters holding {_fmt(r['worst_clusters_pair_share'] * 100, 0)}% of dense pairs "
                f"hold {_fmt(r['worst_clusters_disagreement_share'] * 100, 0)}% of their disagreements"
            )
        else:  # one cluster holds most dense pairs: there is no concentration to measure
            line += f"; the worst cluster alone holds {_fmt(r['worst_clusters_pair_share'] * 100, 0)}% of dense pairs"
        report.summary(line + ".")
    report.html_block(
        "What this shows",
        (
            "<p>Every query-document pair is embedded as one text together with a task instruction, the pairs are "
            "grouped into dense semantic neighbourhoods by HDBSCAN (pairs in no dense region form the noise set, "
            "cluster -1), and the human and LLM relevance labels are compared inside each neighbourhood with Gwet's "
            "AC1 (robust to the many non-relevant pairs that make Cohen's kappa collapse). If disagreement were "
            "random, every cluster would show about the same AC1; clusters with low AC1 are semantic regions where a "
            "judge systematically departs from the human assessors.</p>"
            "<p>For each query, ΔAC1 is the range of its per-cluster AC1 values: a query whose pairs are judged like "
            "the humans in one neighbourhood and unlike them in another is <i>bias-prone</i>. The direction says "
            "whether, where it disagrees most, the LLM misses relevant passages (under-recalls: false negatives) or "
            "accepts non-relevant ones (over-includes: false positives).</p>"
        ),
    )
    idx = _shown(len(result.pairs), o.seed)
    shown = (
        ""
        if idx.size == len(result.pairs)
        else f" ({idx.size:,} of {len(result.pairs):,} pairs drawn, a fixed random sample)"
    )
    map_name = "UMAP" if o.cluster.reduce == "umap" else "PCA"
    report.figure(
        _cluster_map(result, idx, map_name),
        "Map of the pairs by cluster",
        f"Each point is a query-document pair, placed by a 2-D {map_name} of its embedding{shown}; colour = "
        f"HDBSCAN cluster, named in the legend and, up to {MAX_MAP_LABELS} clusters, at its median position (the names of the bars below); grey = noise. Clusters were found in the reduced space, so the 2-D map only "
        "approximates them.",
    )
    report.figure(
        _agreement_map(result, idx, map_name),
        "Map of the pairs by agreement, per judge",
        "Green: the judge agrees with the human (after binarization). Red: the human said relevant, the "
        "LLM not (false negative). Blue: the LLM said relevant, the human not (false positive). Red or "
        "blue patches are neighbourhoods of systematic disagreement.",
    )
    report.figure(
        _cluster_bars(result),
        "Agreement per cluster (Gwet's AC1 with 95% intervals)",
        "One group of bars per cluster (C0 is the largest), the noise set last. Bars far below the others "
        "with intervals that do not overlap theirs are the regions where a judge departs from the humans.",
    )
    report.table(
        counts_readable(result.overall),
        "Overall agreement per judge",
        "All pairs with both labels; AC1 interval: Student t with n-1 degrees of freedom (as irrCAC).",
    )
    report.table(
        counts_readable(result.concentration),
        "Dense clusters against the noise set",
        "The seed's claim is that disagreement concentrates in dense clusters rather than noise. "
        "homogeneity_p: chi-square test that every dense cluster has the same disagreement rate "
        "(small = disagreement is not spread evenly). worst_clusters_*: the clusters with the highest "
        "disagreement rate that together cover at least 10% of the dense pairs, and the share of all "
        "dense-cluster disagreements they hold.",
        transpose=True,
    )
    for judge in summary.llm:
        report.html_block(
            f"Top {TOP} bias-prone queries: {judge}",
            _top_queries(result, judge),
            "Ranked by ΔAC1 among the flagged queries; all queries are in queries.csv. Examples: up to "
            f"{EXAMPLES} pairs of the query's lowest-AC1 cluster where the judge and the human disagree "
            "(raw labels shown).",
        )
    if summary.clustering.groups:
        report.table(
            _clustering_table(result),
            "How the pairs were clustered",
            "One row per collection clustered apart (all pairs when the input holds one). Selection: HDBSCAN's "
            "excess of mass (eom), or leaf clusters when excess of mass was degenerate. A clustering is "
            f"degenerate when one cluster holds more than {o.cluster.max_cluster_share:.0%} of the pairs, there are "
            f"fewer than {o.cluster.min_clusters} clusters, or fewer than {o.cluster.min_query_share:.0%} of the "
            f"queries have at least {o.min_query_pairs} pairs in each of two clusters (queries_with_dac1); run.json "
            "records every attempt.",
        )
    report.table(
        counts_readable(result.instructions),
        "Instruction choice",
        f"Cluster purity w.r.t. the human label, {o.purity_percentile:g}th percentile over the dense "
        "clusters (the seed's criterion); the chosen instruction is used for everything above.",
    )
    opts = "".join(f"<li><b>{html.escape(str(k))}</b>: {html.escape(str(v))}</li>" for k, v in _options_shown(result))
    departures = [
        "The paper embedded pairs with INSTRUCTOR-XL. With the 'minilm' or 'st:' embedders the instruction is "
        "prepended to the pair text as plain text instead of INSTRUCTOR's [instruction, text] format (use "
        "'instructor:<path>' with local weights for the paper's format)."
        if spec_kind(summary.embedder) != "instructor"
        else "INSTRUCTOR format: the instruction is the model's prompt, excluded from pooling.",
        "HDBSCAN parameters, the reduction before it and the minimum pairs per query-cluster cell are not given "
        "in the paper; the values used are listed above.",
        "Outlier rule (the paper names no rule): ΔAC1 above Q3 + 1.5 IQR of the judge's ΔAC1 values.",
        "Direction: counted in the query's lowest-AC1 cluster.",
    ]
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in [*departures, *result.provenance.notes, *result.notes])
    report.html_block("Options, departures from the paper, notes", f"<ul>{opts}</ul><ul>{notes}</ul>")
    return report
