"""The ECDF analysis report: clusters, reordered assignments, accuracy view, medoid examples."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from evalprism.ecdf.compare import ALPHA, format_p, pair_sentence
from evalprism.ecdf.options import FINAL_NAMES, EcdfOptions
from evalprism.io.lexical import normalise_answer
from evalprism.report import Report
from evalprism.stats import ecdf_steps

if TYPE_CHECKING:
    from evalprism.ecdf.result import EcdfResult

#: a cluster panel draws at most this many of its settings' ECDF curves (a seeded sample beyond it)
MEMBER_CURVES = 120
#: the colour of those member curves (faint: the medoid and centroid curves stand out)
GREY = "rgba(120,128,140,0.25)"
#: the colour of a cluster's medoid curve
MEDOID = "#111111"
#: the colour of a cluster's pooled (centroid) curve, also of the chosen K's line on the stability plot
CENTROID = "#2f5fd0"


def _joined_steps(samples: Sequence[np.ndarray], lo: float, hi: float) -> tuple[list[float | None], list[float | None]]:
    """Many ECDF curves as one trace (None between curves keeps the HTML small)."""
    xs: list[float | None] = []
    ys: list[float | None] = []
    for s in samples:
        x, y = ecdf_steps(s, lo, hi)
        xs.extend([*x.tolist(), None])
        ys.extend([*y.tolist(), None])
    return xs, ys


def _panel_grid(n: int, cols: int = 4) -> tuple[int, int]:
    cols = min(cols, n)
    return math.ceil(n / cols), cols


#: px per row of small multiples
PANEL_HEIGHT = 250
#: px between rows: x tick labels, the axis title and the next panel's title
PANEL_GAP = 72
#: the colour of heatmap cells with no responses
MISSING = "#d9dce3"
#: accuracies this close (absolute) count as the same in the headline, if the McNemar test agrees
SAME_ACCURACY = 0.02
#: heatmap rows beyond which row labels are hidden (hover names them)
MAX_ROW_LABELS = 100
#: the most heatmap rows drawn: a larger table is drawn as this many evenly spaced rows (in MDS order)
MAX_HEATMAP_ROWS = 1_000
#: heatmap columns up to which every configuration is labelled; past it every k-th label is shown,
#: upright, so that the labels never overlap (hover names every column)
MAX_COLUMN_LABELS = 40
#: answers and references in the examples are cut at this many characters, marked "…"
EXAMPLE_CHARS = 300


def _steps_line(
    x: Sequence[float | None] | np.ndarray,
    y: Sequence[float | None] | np.ndarray,
    colour: str,
    width: float,
    name: str,
    group: str,
    legend: bool,
) -> go.Scatter:
    """One ECDF drawn as steps in a panel, in the legend once (``legend``) under its ``group``."""
    return go.Scatter(
        x=x,
        y=y,
        mode="lines",
        line={"color": colour, "width": width, "shape": "hv"},
        name=name,
        legendgroup=group,
        showlegend=legend,
    )


def _ecdf_panels(
    groups: Sequence[tuple[str, Sequence[np.ndarray], np.ndarray | None]], lo: float, hi: float, x_title: str, seed: int
) -> go.Figure:
    """Small multiples: member ECDFs in grey, the medoid in black (if any), the centroid in blue.

    Every panel has its own x tick labels (shared axes would show them on the bottom row only), and
    the lowest panel of each column carries the axis title.
    """
    rows, cols = _panel_grid(len(groups))
    margin = {"l": 50, "r": 20, "t": 50, "b": 60}
    height = PANEL_HEIGHT * rows + PANEL_GAP * (rows - 1) + margin["t"] + margin["b"]
    fig = make_subplots(
        rows=rows,
        cols=cols,
        subplot_titles=[g[0] for g in groups],
        shared_xaxes=True,
        shared_yaxes=True,
        vertical_spacing=PANEL_GAP / (height - margin["t"] - margin["b"]) if rows > 1 else 0.0,
        horizontal_spacing=0.03,
    )
    rng = np.random.default_rng(seed)
    for i, (_, members, medoid) in enumerate(groups):
        r, c = divmod(i, cols)
        shown = members
        if len(members) > MEMBER_CURVES:
            shown = [members[j] for j in sorted(rng.choice(len(members), MEMBER_CURVES, replace=False))]
        xs, ys = _joined_steps(shown, lo, hi)
        first = i == 0
        members_line = _steps_line(xs, ys, GREY, 1, "settings", "m", first)
        members_line.update(hoverinfo="skip")
        fig.add_trace(members_line, r + 1, c + 1)
        if medoid is not None:
            x, y = ecdf_steps(medoid, lo, hi)
            fig.add_trace(_steps_line(x, y, MEDOID, 2.2, "medoid", "d", first), r + 1, c + 1)
        x, y = ecdf_steps(np.concatenate(members), lo, hi)
        fig.add_trace(_steps_line(x, y, CENTROID, 2.2, "centroid (pooled)", "c", first), r + 1, c + 1)
        if i + cols >= len(groups):  # nothing below this panel
            fig.update_xaxes(title_text=x_title, row=r + 1, col=c + 1)
    fig.update_layout(
        height=height,
        margin=margin,
        template="plotly_white",
        legend={"x": 1.01, "y": 1, "xanchor": "left", "yanchor": "top"},
    )
    fig.update_xaxes(range=[lo, hi], showticklabels=True)
    fig.update_yaxes(range=[-0.02, 1.02])
    for r in range(1, rows + 1):
        fig.update_yaxes(title_text="ECDF", row=r, col=1)
    return fig


def _cluster_colours(k: int) -> list[str]:
    """One colour per cluster from viridis, bright for cluster 0 (the best) to dark for the worst."""
    from plotly.colors import sample_colorscale

    return sample_colorscale("Viridis", [1 - i / max(k - 1, 1) for i in range(k)])


def column_label_step(n_columns: int) -> int:
    """Label every k-th heatmap column: 1 up to :data:`MAX_COLUMN_LABELS` columns, else the
    smallest k that leaves at most that many labels."""
    return max(1, math.ceil(n_columns / MAX_COLUMN_LABELS))


def _assignment_figure(result: EcdfResult) -> go.Figure:
    """The reordered question × configuration grid coloured by cluster (one discrete colour each);
    cells without responses are grey and named in the legend."""
    a = result.assignment
    if len(a) > MAX_HEATMAP_ROWS:  # an evenly spaced sample of the rows in their MDS order: the page stays small
        a = a.iloc[np.linspace(0, len(a) - 1, MAX_HEATMAP_ROWS).round().astype(int)]
    s = result.settings
    groups = s.groupby("question_id")["group"].first() if "group" in s.columns else None
    ylabels = [f"{q} ({groups[q]})" if groups is not None else str(q) for q in a.index]
    xlabels = [str(c) for c in a.columns]
    k = int(result.clusters["cluster"].max()) + 1
    z = a.to_numpy(dtype=float)
    mean = s.pivot_table(index="question_id", columns="configuration", values="mean_score", aggfunc="first")
    mean = mean.reindex(index=a.index, columns=a.columns).to_numpy(dtype=float)
    text = np.where(np.isnan(mean), "no responses", np.char.mod("mean score %.3f", np.nan_to_num(mean)))
    colours = _cluster_colours(k)
    scale = [[edge, colours[i]] for i in range(k) for edge in (i / k, (i + 1) / k)]
    # the cluster index is categorical: one legend entry per colour, no continuous colour bar
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xlabels,
            y=ylabels,
            zmin=-0.5,
            zmax=k - 0.5,
            colorscale=scale,
            text=text,
            xgap=1,
            ygap=1,
            hovertemplate="question %{y}<br>%{x}<br>cluster %{z}<br>%{text}<extra></extra>",
            showscale=False,
        )
    )
    for i in range(k):
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=f"cluster {i}{' (best)' if i == 0 else ''}",
                marker={"symbol": "square", "size": 12, "color": colours[i]},
            )
        )
    missing = np.isnan(z)
    if missing.any():
        fig.add_trace(
            go.Heatmap(
                z=np.where(missing, 1.0, np.nan),
                x=xlabels,
                y=ylabels,
                showscale=False,
                xgap=1,
                ygap=1,
                colorscale=[[0, MISSING], [1, MISSING]],
                hoverinfo="skip",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name="no responses upstream",
                marker={"symbol": "square", "size": 12, "color": MISSING},
            )
        )
    many = len(ylabels) > MAX_ROW_LABELS  # 2,400 px cannot show more row labels legibly: hover names them
    yaxis: dict[str, object] = {"type": "category", "autorange": "reversed", "tickfont": {"size": 11}}
    yaxis.update({"showticklabels": False} if many else {"tickmode": "array", "tickvals": ylabels})
    step = column_label_step(len(xlabels))
    xaxis = {
        "tickangle": -45 if step == 1 else -90,
        "type": "category",
        "tickmode": "array",
        "tickvals": xlabels[::step],
        "tickfont": {"size": 11 if step == 1 else 10},
    }
    # room below for the slanted (or upright) labels, so that they do not squeeze the rows
    label_px = 6.5 * max(len(x) for x in xlabels[::step]) * (0.71 if step == 1 else 1.0)
    bottom = int(min(600, max(200, label_px + 70)))
    fig.update_layout(
        height=min(2200, max(260, 20 * len(ylabels) + 60)) + bottom,
        template="plotly_white",
        margin={"l": 40 if many else 140, "r": 20, "t": 40, "b": bottom},
        xaxis=xaxis,
        yaxis=yaxis,
        showlegend=True,
        legend={"x": 1.0, "y": 1.0, "xanchor": "left", "yanchor": "top"},
        xaxis_title="configuration"
        if step == 1
        else f"configuration ({len(xlabels)}: every {_ordinal(step)} labelled, hover for each)",
        yaxis_title=(
            f"{len(ylabels)} {'of ' + str(len(result.assignment)) + ' ' if len(ylabels) < len(result.assignment) else ''}"
            "questions (hover for names)"
            if many
            else "question (group)"
        ),
    )
    return fig


def _ordinal(k: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st, ..."""
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


def _heatmap_caption(result: EcdfResult) -> str:
    """How to read the assignment heatmap, and which columns carry a label when not all do."""
    text = (
        "Rows are questions (with their group), columns configurations; the colour is the cluster of that setting "
        "(bright = better). Rows and columns are sorted by one-dimensional MDS so that similar ones sit together: "
        "horizontal bands mean the question decides the distribution, vertical bands mean the configuration does."
    )
    n = result.assignment.shape[1]
    step = column_label_step(n)
    if step > 1:
        text += (
            f" With {n} configurations only every {_ordinal(step)} column is labelled (upright, in the sorted "
            "order), so that the labels do not overlap; hover over a cell for its configuration."
        )
    return text


def clip(text: object, limit: int = EXAMPLE_CHARS) -> str:
    """``text`` HTML-escaped, cut at ``limit`` characters with "…" marking the cut."""
    text = str(text)
    return html.escape(text) if len(text) <= limit else html.escape(text[:limit].rstrip()) + "…"


def _k_figure(curve: pd.DataFrame, chosen: int) -> go.Figure:
    """Stability (mean adjusted Rand index between clusterings of resampled questions) per K, +- 1 sd."""
    fig = go.Figure(
        go.Scatter(
            x=curve["k"],
            y=curve["stability"],
            mode="lines+markers",
            name="stability",
            error_y={"type": "data", "array": curve["stability_sd"], "visible": True},
        )
    )
    fig.add_vline(x=chosen, line_dash="dash", line_color=CENTROID, annotation_text=f"K={chosen}")
    fig.update_layout(
        height=320,
        template="plotly_white",
        xaxis_title="K (number of clusters)",
        yaxis_title="stability (mean adjusted Rand index)",
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
    )
    return fig


def _answer_counts(rows: pd.DataFrame, max_answers: int) -> pd.DataFrame:
    """The distinct answers of one setting, most frequent first: answer, count, mean score, and
    whether the answer is one of the references (see :func:`normalise_answer`)."""
    answers = (rows["answer"] if "answer" in rows.columns else rows.get("response", pd.Series(dtype=str))).fillna("")
    refs = rows["references"].iloc[0] if "references" in rows.columns and len(rows) else []
    gold = {normalise_answer(r) for r in (refs if isinstance(refs, (list, tuple, np.ndarray)) else [])}
    table = pd.DataFrame({"answer": answers.astype(str), "score": rows["quality"].to_numpy(dtype=float)})
    out = table.groupby("answer", sort=False).agg(count=("score", "size"), score=("score", "mean")).reset_index()
    out["is_reference"] = out["answer"].map(normalise_answer).isin(gold)
    return out.sort_values("count", ascending=False, kind="stable").head(max_answers)


def _medoid_answers(result: EcdfResult, max_answers: int = 8) -> list[tuple[pd.Series, list, pd.DataFrame]]:
    """Per cluster: its row of ``clusters``, the medoid's references and its distinct answers."""
    s, resp = result.settings, result.responses
    out = []
    for _, row in result.clusters.iterrows():
        medoid = s[(s["cluster"] == row["cluster"]) & s["is_medoid"]].iloc[0]
        rows = resp[resp["setting"] == medoid["setting"]]
        refs = rows["references"].iloc[0] if "references" in rows.columns and len(rows) else []
        out.append(
            (row, list(refs) if isinstance(refs, (list, tuple, np.ndarray)) else [], _answer_counts(rows, max_answers))
        )
    return out


def _near_miss_note(medoids: list[tuple[pd.Series, list, pd.DataFrame]]) -> str:
    """Why a high cosine score is not a right answer, with the highest-scoring wrong answer shown."""
    wrong = [
        (a.score, a.answer, refs)
        for _, refs, answers in medoids
        for a in answers.itertuples()
        if not a.is_reference and a.answer.strip() and refs
    ]
    text = (
        "<p class='how'><b>Cosine similarity rewards near misses:</b> the score is the similarity of sentence "
        "embeddings, so a wrong answer worded like the reference (another name, number or option in the same "
        "sentence) still scores high. Read a cluster as how close the responses are in wording and meaning; "
        "whether they are right is in the accuracy view."
    )
    if wrong:
        score, answer, refs = max(wrong, key=lambda w: w[0])
        text += (
            f" Here, the wrong answer <span class='example'>{clip(answer)}</span> scores "
            f"{score:.2f} against <span class='example'>{clip(refs[0])}</span>."
        )
    return text + "</p>"


def _examples_html(result: EcdfResult, max_answers: int = 8) -> str:
    medoids = _medoid_answers(result, max_answers)
    blocks = [_near_miss_note(medoids)] if result.summary.score == "cosine" else []
    for row, refs, answers in medoids:
        items = "".join(
            f"<li>{clip(a.answer) or '<i>(no answer)</i>'} <b>×{a.count}</b> "
            f"<span class='score'>score {a.score:.2f}{' ✓ reference' if a.is_reference else ''}</span></li>"
            for a in answers.itertuples()
        )
        # each reference on its own (a reference may span lines; ", " would run them together)
        refs_html = (
            " ".join(
                f"<span class='example' style='white-space:pre-wrap;display:inline-block'>{clip(r)}</span>"
                for r in refs
            )
            if refs
            else "—"
        )
        blocks.append(
            f"<div><h3>Cluster {int(row['cluster'])} — {html.escape(str(row['medoid_setting']))}</h3>"
            f"<p>mean score {row['medoid_mean_score']:.3f}; reference{'s' if len(refs) > 1 else ''}: {refs_html}</p>"
            f"<ul class='example'>{items}</ul></div>"
        )
    return "".join(blocks)


def _same_accuracy_different_quality(result: EcdfResult) -> pd.Series | None:
    """The pair of configurations with (practically) the same accuracy, within :data:`SAME_ACCURACY`
    and not told apart by the McNemar test, whose response distributions the permutation test does
    tell apart (both BH-adjusted, at :data:`ALPHA`), with the largest mean W1; None when no pair
    qualifies. A non-significant test alone is not "the same": 0.84 vs 0.32 on 19 questions can be."""
    c = result.comparisons
    if c is None or "p_accuracy_adjusted" not in c.columns:
        return None
    hits = c[
        (c["accuracy_difference"].abs() <= SAME_ACCURACY + 1e-12)
        & (c["p_accuracy_adjusted"] >= ALPHA)
        & (c["p_distribution_adjusted"] < ALPHA)
    ]
    return None if hits.empty else hits.loc[hits["mean_w1"].idxmax()]


def _comparison_sentences(result: EcdfResult) -> list[str]:
    """How many configuration pairs differ, and the widest same-accuracy quality gap, each stated
    only as far as the paired tests support it."""
    c = result.comparisons
    if c is None:
        return []
    tested = c["p_distribution_adjusted"].notna()
    differ = int((c["p_distribution_adjusted"] < ALPHA).sum())
    pooled = (
        tested
        & c["distribution_test"].astype(str).str.contains("conservative")
        & ~(c["p_distribution_adjusted"] < ALPHA)
    )
    if tested.any():
        text = (
            f"{differ} of {int(tested.sum())} configuration pairs tested have different response-quality "
            f"distributions (paired permutation test over shared questions, Benjamini-Hochberg adjusted p < {ALPHA})"
        )
        if pooled.any():  # a conservative test's large p is no evidence of sameness
            text += (
                f"; {int(pooled.sum())} of the others cannot be told apart: with sources pooled the test is "
                "conservative, so its p says nothing against a difference"
            )
        if not tested.all():
            text += f"; for the other {int((~tested).sum())} the distribution test is not applicable"
    else:
        text = (
            f"The response-quality distribution test is not applicable to any of the {len(c)} configuration "
            "pairs (one response per question on a side: p would be 1 by construction), so the paired score "
            "and accuracy tests answer"
        )
    text += (
        f"{':' if not tested.any() else ';'} {int((c['p_score_adjusted'] < ALPHA).sum())} of {len(c)} differ "
        "in mean score (paired sign-flip test)"
    )
    if "p_accuracy_adjusted" in c.columns:
        text += f"; {int((c['p_accuracy_adjusted'] < ALPHA).sum())} differ in accuracy (exact McNemar test)"
    items = [text + "."]
    pair = _same_accuracy_different_quality(result)
    if pair is not None:
        items.append("Same accuracy, different quality: " + pair_sentence(pair, result.options.permutations))
    return items


def _settings_count(result: EcdfResult) -> str:
    """How many settings there are, counted against the question × configuration grid of the
    heatmap: cells with no responses upstream are named so the two numbers agree."""
    s = result.settings
    questions, configurations = s["question_id"].nunique(), s["configuration"].nunique()
    cells = questions * configurations
    text = f"{len(s)} settings"
    if len(s) == cells:
        return text + f" ({questions} questions × {configurations} configuration{'s' if configurations > 1 else ''})"
    if len(s) == questions:  # the settings that exist: one per question, not a grid
        return text + (
            f" ({questions} questions, each under one of {configurations} configurations; the other cells "
            "of the heatmap are grey)"
        )
    return (
        text + f" with responses ({questions} questions × {configurations} configurations = {cells} cells; "
        f"{cells - len(s)} had no responses upstream and are grey in the heatmap)"
    )


def index_line(result: EcdfResult) -> str:
    """One line for an index page: K, the settings, and the widest same-accuracy quality gap."""
    line = f"K={result.summary.k} clusters of {len(result.settings)} settings"
    pair = _same_accuracy_different_quality(result)
    if pair is not None:
        line += (
            f"; {pair['configuration_a']} vs {pair['configuration_b']}: accuracy {pair['accuracy_a']:.2f} vs "
            f"{pair['accuracy_b']:.2f} (within {SAME_ACCURACY:.2f}), response distributions differ (mean W1 "
            f"{pair['mean_w1']:.3f}, {format_p(pair['p_distribution_adjusted'], result.options.permutations)})"
        )
    return line


def _correct_outside_sentence(s: pd.DataFrame) -> list[str]:
    """The settings whose final answer is right though their ECDF is not in the best cluster: a
    sentence only when there are such settings (with none, "yet 0% of them" asserts the opposite of
    its number)."""
    correct = s[s["correct"] == 1]  # a tied vote right by a share is not counted as a correct final answer
    outside = int((correct["cluster"] != 0).sum())
    if not outside:
        return []
    return [
        (
            f"{len(correct)} settings have a correct final answer, yet {outside} of them "
            f"({share_text(outside, len(correct))}) are outside the best cluster: their individual responses are "
            "spread out, which a single final answer hides."
        )
    ]


def _p_cell(p: float, permutations: int | None) -> str:
    """A p-value in a table cell: ``0.015``, ``≤ 0.005`` at a permutation floor, ``< 0.001``; a test
    that was not run reads "not applicable"."""
    if pd.isna(p):
        return "not applicable"
    text = format_p(p, permutations)
    return text.removeprefix("p = ").removeprefix("p ")


def share_text(part: int, whole: int) -> str:
    """``part / whole`` as a percentage that never rounds a nonzero share to 0% or a partial one to 100%."""
    share = part / whole
    if 0 < share < 0.005:
        return "<1%"
    if 0.995 <= share < 1:
        return ">99%"
    return f"{share:.0%}"


#: the report's table box shows about this many rows before it scrolls (max-height 520px)
ROWS_IN_VIEW = 15


def rows_caption(frame: pd.DataFrame, caption: str, max_rows: int = 60) -> str:
    """``caption`` with how many rows the table has when its box scrolls, so hidden rows are not missed."""
    if len(frame) <= ROWS_IN_VIEW:
        return caption
    shown = min(len(frame), max_rows)
    return (
        caption
        + f" {len(frame)} rows"
        + (f", the first {shown} here" if shown < len(frame) else "")
        + " (scroll inside the box to see them all)."
    )


def _accuracy_panel_title(s: pd.DataFrame, level: object, members: np.ndarray, group: str | None) -> str:
    """An accuracy panel's title: the value and which group × configurations have it (up to 3 named)."""
    units = s.iloc[members]
    names = (
        (
            units["group"].astype(str) + " · " + units["configuration"]
            if group and "group" in units.columns
            else units["configuration"]
        )
        .drop_duplicates()
        .tolist()
    )
    shown = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "")
    return f"accuracy {level}: {shown} (n={members.size})"


def final_name(options: EcdfOptions) -> str:
    """What the final answer of each setting is, in words."""
    return FINAL_NAMES[options.final or "medoid"]


def _final_answer_sentence(result: EcdfResult) -> list[str]:
    """Accuracy by the final-answer rule used and by the other one, when they differ: the eq. 6
    medoid is not the self-consistency vote."""
    s = result.settings
    other = "majority" if (result.options.final or "medoid") == "medoid" else "medoid"
    if f"{other}_correct" not in s.columns or "correct" not in s.columns:
        return []
    used, alt = float(s["correct"].mean()), float(s[f"{other}_correct"].mean())
    differ = int((s["final_answer"] != s[f"{other}_answer"]).sum())
    if not differ:
        return []
    flag = "--final majority" if other == "majority" else "--final medoid"
    return [
        (
            f"Final answers: {final_name(result.options)}, accuracy {used:.4f} over all settings; "
            f"{FINAL_WORDS[other]} picks another answer in {differ} settings (accuracy {alt:.4f}; {flag} uses it, "
            "settings.csv has both)."
        )
    ]


FINAL_WORDS = {"medoid": "the answer nearest the mean embedding (eq. 6)", "majority": "the majority vote"}


def _k_origin(result: EcdfResult) -> str:
    if result.k_curve is not None:
        return "K chosen by clustering stability under resampling of questions"
    return "K given" if result.options.clusters != "auto" else "K set by the number of distinct ECDFs"


def headline(result: EcdfResult) -> list[str]:
    """A few sentences a colleague can read in a minute."""
    s = result.settings
    summary = result.summary
    items = [
        f"{_settings_count(result)}, {int(s['n_responses'].sum())} responses, clustered into K={summary.k} groups of "
        f"similar response-quality distributions ({_k_origin(result)}; "
        "cluster 0 is best).",
        f"Each response's quality: {summary.quality}.",
    ]
    f = result.factors
    if len(f):
        parts = ", ".join(f"{r.factor} (AMI {r.ami:.2f})" for r in f.itertuples())
        items.append(f"What separates the clusters, strongest first: {parts}.")
    if "correct" in s.columns:
        items.extend(_final_answer_sentence(result))
        items.extend(_correct_outside_sentence(s))
    items.extend(_comparison_sentences(result))
    items.extend(result.notes)
    return items


MAX_PAIR_SENTENCES = 12


def _comparisons_html(result: EcdfResult) -> str:
    """The pairs in words, those that differ most first (up to :data:`MAX_PAIR_SENTENCES`)."""
    c = result.comparisons
    assert c is not None
    sig = (c["p_distribution_adjusted"] < ALPHA) | (c["p_score_adjusted"] < ALPHA)
    if "p_accuracy_adjusted" in c.columns:
        sig |= c["p_accuracy_adjusted"] < ALPHA
    order = c.assign(_sig=sig, _gap=c["score_difference"].abs()).sort_values(
        ["_sig", "mean_w1", "_gap"], ascending=False, kind="stable"
    )
    items = "".join(
        f"<li>{html.escape(pair_sentence(row, result.options.permutations))}</li>"
        for _, row in order.head(MAX_PAIR_SENTENCES).iterrows()
    )
    more = (
        f"<p class='more'>{len(c) - MAX_PAIR_SENTENCES} more pairs in comparisons.csv.</p>"
        if len(c) > MAX_PAIR_SENTENCES
        else ""
    )
    return f"<ul>{items}</ul>{more}"


def build_report(result: EcdfResult) -> Report:
    """Assemble the report for ``result``."""
    o, summary = result.options, result.summary
    s = result.settings
    samples = result.samples
    allv = np.concatenate(samples)
    lo, hi = float(allv.min()), float(allv.max())
    pad = (hi - lo) * 0.02 or 0.01
    lo, hi = lo - pad, hi + pad
    x_title = {
        "cosine": "max cosine similarity",
        "exact": "exact match (0/1)",
        "contains": "contains a reference (0/1)",
    }.get(summary.score or "", "score")
    report = Report(
        title=result.title or "Response-quality distributions (ECDF clustering)",
        subtitle=f"quality = {summary.quality}; settings = question × ({', '.join(result.by) or 'one configuration'}); "
        f"k-medoids: {o.method}, K={summary.k}, seed {o.seed}; {summary.clustering}",
    )
    report.summary(*headline(result))
    groups = []
    for c in result.clusters["cluster"]:
        members = np.flatnonzero(s["cluster"].to_numpy() == c)
        medoid = int(members[s["is_medoid"].to_numpy()[members]][0])
        row = result.clusters.iloc[int(c)]
        groups.append(
            (f"cluster {c} (n={row['size']}, wins={row['wins']})", [samples[i] for i in members], samples[medoid])
        )
    report.figure(
        _ecdf_panels(groups, lo, hi, x_title, o.seed),
        "ECDFs of each cluster",
        "Each panel is one cluster of settings; a grey step curve is the ECDF of one setting's response scores. "
        "A curve further right (lower) means better responses. Black is the cluster's medoid, blue the ECDF of all "
        "its responses pooled. Clusters are numbered by wins (eq. 7): cluster 0 beats the most other medoids.",
    )
    report.figure(
        _assignment_figure(result),
        "Cluster of every question × configuration (reordered)",
        _heatmap_caption(result),
    )
    if "accuracy_level" in s.columns:
        acc_groups = []
        for level in sorted(s["accuracy_level"].dropna().unique()):
            members = np.flatnonzero((s["accuracy_level"] == level).to_numpy())
            acc_groups.append(
                (_accuracy_panel_title(s, level, members, summary.group), [samples[i] for i in members], None)
            )
        report.figure(
            _ecdf_panels(acc_groups, lo, hi, x_title, o.seed),
            "ECDFs grouped by accuracy",
            "Settings grouped by the exact-match accuracy of their group × configuration; final answer: "
            f"{final_name(o)}. Blue is the pooled centroid. Wide grey bands inside one "
            "panel show distributions that the same accuracy value hides.",
        )
    if result.k_curve is not None:
        report.figure(
            _k_figure(result.k_curve, summary.k),
            "Choosing K",
            "For each K, two random subsets of 80% of the questions are clustered (k-medoids on the exact "
            "ECDF distances), both clusterings are extended to every setting (nearest medoid) and compared "
            "by the adjusted Rand index (1 = the same clustering); the mean over resampled pairs, with one "
            "standard deviation, is the stability of K: a K that splits a real cluster arbitrarily does "
            "not reproduce. Among the K within 0.005 of the most stable, the highest mean silhouette "
            "(shown for those K only) decided.",
        )
    report.table(
        result.factors,
        "What the clusters separate",
        "Adjusted mutual information between the cluster labels and each factor: 1 = the clusters follow the "
        "factor exactly, 0 = no more than chance.",
    )
    report.table(result.clusters, "Clusters", "One row per cluster; medoid_setting is the most central setting.")
    if "answer" in result.responses.columns:
        report.html_block(
            "Example answers of the medoids",
            _examples_html(result),
            "The distinct (extracted) answers in each medoid setting with their counts and mean "
            "score, next to the reference; ✓ marks an answer equal to a reference. Answers and references "
            f"longer than {EXAMPLE_CHARS} characters are cut, marked …",
        )
    if result.comparisons is not None:
        report.html_block(
            "Do the configurations differ?",
            _comparisons_html(result),
            "Paired comparisons over the questions both configurations answered. Distributions: the "
            "mean per-question W1 distance between their ECDFs, tested by permuting the configuration "
            f"labels of the responses within each question (up to {o.permutations} permutations, "
            "sequential: a pair stops once 20 permutations reached its statistic, p = 20 / permutations "
            "drawn, about 22% relative error, only ever for p above 20 / the maximum; or once the observed "
            "lies 8 null SDs beyond 100+ permutations, reported at the floor 1 / (permutations + 1); every "
            "other p is the full test's); not "
            "applicable, and said so, when a side has one response per question (greedy decoding: "
            "every relabelling ties, p = 1 by construction). Mean score: the mean per-question "
            "difference with its standard error, tested by random sign flips of the per-question "
            "differences. Accuracy: the exact McNemar test (binomial on the questions only one of them "
            "got right). p-values are Benjamini-Hochberg adjusted across the pairs, each test apart; "
            "brackets are 95% question-level bootstrap intervals. Every pair is in comparisons.csv.",
        )
        shown = [
            "configuration_a",
            "configuration_b",
            "n_questions",
            "mean_w1",
            "p_distribution_adjusted",
            "score_difference",
            "score_difference_se",
            "p_score_adjusted",
            "accuracy_difference",
            "p_accuracy_adjusted",
        ]
        table = result.comparisons[[c for c in shown if c in result.comparisons.columns]].round(4).astype(object)
        for col in [c for c in table.columns if c.startswith("p_")]:
            table[col] = [
                _p_cell(p, o.permutations if col != "p_accuracy_adjusted" else None) for p in result.comparisons[col]
            ]
        report.table(
            table,
            "Paired comparisons",
            rows_caption(
                table,
                "Differences are b minus a; p-values "
                "Benjamini-Hochberg adjusted; 'not applicable': the distribution test cannot tell (see above).",
            ),
        )
    if result.accuracy is not None:
        report.table(
            result.accuracy,
            "Accuracy per group × configuration",
            rows_caption(
                result.accuracy,
                "Exact-match accuracy of the final answers and the mean "
                f"response score; final answer: {final_name(o)}.",
            ),
        )
    if result.k_samples is not None:
        shown = result.k_samples.assign(value=lambda t: t["value"].round(4), se=lambda t: t["se"].round(4))
        report.table(
            shown,
            "k-sample scores per configuration",
            rows_caption(
                shown,
                "Per configuration, the mean over questions of each metric's unbiased value from the n responses "
                "of a question, with its standard error over questions: pass@k, at least one of k responses right "
                "(Chen et al. 2021); maj@k, most of k right; avg@k, the mean of k (a response is right when its "
                "0/1 quality is 1).",
            ),
        )
    report.details.update(_details(result))
    return report


def _details(result: EcdfResult) -> dict[str, Any]:
    """The report's run details: the options as run with what the analysis resolved (K, the group
    column, the embedder, the scoring), in the order the report has listed them since format 1, and
    the embedder's counts when something was embedded."""
    o, summary = result.options, result.summary
    details: dict[str, Any] = {
        "by": list(o.by),
        "clusters": o.clusters,
        "k": summary.k,
        "method": o.method,
        "seed": o.seed,
        "extract": o.extract,
        "choices": o.choices,
        "group": summary.group,
        "embedder": summary.embedder,
        "score": summary.score,
        "baseline": o.baseline,
        "permutations": o.permutations,
        "final": o.final,
        "quality": summary.quality,
        "loss": summary.loss,
        "clustering": summary.clustering,
    }
    if summary.embedding:
        details["embedding"] = summary.embedding
    return details
