"""The HTML report of `evalprism compare`: one sentence per pair, a forest plot of the differences
with their 95% intervals and the minimum detectable effect beside each, and the tables."""

from __future__ import annotations

import dataclasses
import html
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalprism.report import Report, literal

if TYPE_CHECKING:
    from evalprism.compare.result import CompareResult


def _label(r: pd.Series) -> str:
    scope = " · all items" if r["benchmark"] == "all" else f" · {r['benchmark']}"
    return f"{r['run_b']} − {r['run_a']}{scope}"


#: the forest plot's colours, by what the test found: B better, B worse (p_adj < 0.05), or not detected
_FOREST_KINDS = (
    ("#1a7f37", "B better (p_adj < 0.05)"),
    ("#cf222e", "B worse (p_adj < 0.05)"),
    ("#57606a", "not detected [95% interval]"),
)


def _forest(rows: pd.DataFrame):
    import plotly.graph_objects as go

    rows = rows[rows["items"] > 0].iloc[::-1]  # first pair at the top
    labels = [_label(r) for _, r in rows.iterrows()]
    x = 100 * rows["difference"].to_numpy(dtype=float)
    lo = 100 * rows["ci_low"].to_numpy(dtype=float)
    hi = 100 * rows["ci_high"].to_numpy(dtype=float)
    mde = 100 * rows["mde"].to_numpy(dtype=float)
    detected = (rows["p_adj"] < 0.05).to_numpy()
    kind = np.where(detected, np.where(x > 0, 0, 1), 2)
    untestable = (rows["p_floor"] >= 0.05).to_numpy()  # too few differing items for any p < 0.05
    customdata = np.column_stack([lo, hi, mde, rows["p_adj"].to_numpy(dtype=float), rows["items"].to_numpy()])
    fig = go.Figure()
    # one trace per colour: plotly draws an error bar in one colour per trace (an array of colours is
    # refused with "Invalid color specifier" and every bar turns black)
    for k, (colour, name) in enumerate(_FOREST_KINDS):
        at = np.flatnonzero(kind == k)
        if not len(at):
            continue
        fig.add_trace(
            go.Scatter(
                x=x[at],
                y=[labels[i] for i in at],
                mode="markers",
                marker={"color": colour, "size": 10, "symbol": np.where(untestable[at], "diamond-open", "diamond")},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": np.nan_to_num(hi[at] - x[at]),
                    "arrayminus": np.nan_to_num(x[at] - lo[at]),
                    "thickness": 2,
                    "width": 6,
                    "color": colour,
                },
                customdata=customdata[at],
                hovertemplate="%{y}<br>difference %{x:.1f} points [%{customdata[0]:.1f}, %{customdata[1]:.1f}]"
                "<br>MDE %{customdata[2]:.1f} points · p_adj %{customdata[3]:.2g} · %{customdata[4]} items"
                "<extra></extra>",
                name=name,
            )
        )
    fig.update_yaxes(categoryorder="array", categoryarray=labels)
    fig.add_trace(
        go.Scatter(  # the MDE: the band a true difference must leave to be found 80% of the time
            x=np.concatenate([mde, -mde]),
            y=labels + labels,
            mode="markers",
            marker={"symbol": "line-ns-open", "size": 14, "color": "#8c959f", "line": {"width": 2}},
            hoverinfo="skip",
            name="± MDE (80% power)",
            showlegend=True,
        )
    )
    fig.add_vline(x=0, line={"color": "#24292f", "width": 1})
    span = np.nanmax(np.abs(np.concatenate([lo, hi, mde, [1.0]])))
    fig.update_xaxes(title="difference B − A (points, 0-100 scale)", range=[-1.15 * span, 1.6 * span], zeroline=False)
    same = ((rows["se"] == 0) & (rows["difference"] == 0)).to_numpy()
    differing = rows["differing"].to_numpy()
    texts = [
        "identical scores"
        if identical
        else f"cannot tell ({k} differ)"
        if cannot
        else f"MDE {m:.1f}"
        if np.isfinite(m)
        else "MDE —"
        for m, identical, cannot, k in zip(mde, same, untestable, differing, strict=True)
    ]
    # one annotation per row, set at once: plotly's add_annotation copies every annotation already there
    # on each call, which made a report of 435 pairs (1,740 rows) take 40 minutes
    annotations = [
        {
            "x": 1.0,
            "xref": "paper",
            "y": label,
            "text": text,
            "showarrow": False,
            "xanchor": "right",
            "font": {"size": 12, "color": "#57606a"},
        }
        for label, text in zip(labels, texts, strict=True)
    ]
    fig.update_layout(annotations=annotations)
    fig.update_layout(
        height=140 + 34 * len(labels),
        margin={"l": 10, "r": 10, "t": 30, "b": 50},
        legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0},
        plot_bgcolor="white",
    )
    fig.update_yaxes(automargin=True, gridcolor="#eaeef2")
    return fig


def build_report(result: CompareResult) -> Report:
    o, summary = result.options, result.summary
    c = result.comparisons
    overall = result.overall()
    n_pairs = len(overall)
    sub = (
        f"{len(summary.run_names)} runs · {n_pairs} pair{'s' * (n_pairs != 1)} · "
        f"{'against baseline ' + summary.baseline if summary.baseline else 'all pairs'} · "
        f"{'clustered by ' + o.cluster if o.cluster else 'items independent'} · "
        f"p adjusted by {'Benjamini-Hochberg' if o.adjust == 'bh' else 'Holm'}"
    )
    report = Report(title="Is B better than A? Paired comparison of runs", subtitle=sub, summary_title="Verdicts")
    for _, r in overall.iterrows():
        extra = ""
        if r["only_a"] or r["only_b"]:
            extra = f" ({r['items']:,} items in common; {r['only_a']:,} only in {r['run_a']}, {r['only_b']:,} only in {r['run_b']}, left out)"
        report.summary(f"**{literal(r['run_b'])} vs {literal(r['run_a'])}**: {literal(r['verdict'] + extra)}.")
    if (c["benchmark"] != "all").any():
        lines = "".join(
            f"<li><b>{html.escape(str(r['run_b']))} vs {html.escape(str(r['run_a']))}</b> on "
            f"{html.escape(str(r['benchmark']))} ({r['items']:,} items): {html.escape(r['verdict'])}</li>"
            for _, r in c[c["benchmark"] != "all"].iterrows()
        )
        per_benchmark = f"<ul>{lines}</ul>"
    else:
        per_benchmark = ""
    for note in result.notes:
        report.summary(f"Note: {literal(note)}.")
    test_names = ", ".join(sorted(set(c["test"]) - {""})) or "none"
    report.html_block(
        "What this shows",
        (
            "<p>Each pair is compared on the items <b>both</b> runs answered: the difference is the mean over those "
            "items of (score of B − score of A), in points on a 0-100 scale (an accuracy of 0.71 is 71 points). "
            "Because both runs answered the same items, the comparison is <i>paired</i>: item difficulty cancels "
            f"out of the difference. {html.escape(_pairing_gain(result))}</p>"
            "<p><b>MDE</b> (minimum detectable effect) is the smallest true difference this many items would find "
            "80% of the time with a two-sided 5% test. When the test finds nothing, the MDE says how large a "
            'difference could still be hiding: "no difference detectable" is not "no difference".</p>'
            "<p><b>The items cannot tell</b> when too few items differ between the two runs for the test to reach "
            "p &lt; 0.05 whatever they say: McNemar on k items that only one run got right cannot go below 2/2<sup>k</sup> "
            "(4 such items: 0.125), and a sign-flip test not below 2/2<sup>k</sup> either. Such a pair is evidence of "
            "nothing yet, in either direction (columns <i>differing</i> and <i>p_floor</i>).</p>"
            f"<p>Tests used here: {test_names}. p_adj corrects for comparing several pairs "
            f"({'Benjamini-Hochberg, false discovery rate' if o.adjust == 'bh' else 'Holm, family-wise error'}); "
            "a difference is reported when p_adj &lt; 0.05.</p>"
        ),
    )
    if per_benchmark:
        report.html_block(
            "Per benchmark",
            per_benchmark,
            "The same test on each benchmark's items alone; p_adj corrects across the pairs on that benchmark.",
        )
    report.figure(
        _forest(c),
        "Differences with 95% intervals",
        "One row per pair (and per benchmark when there are several; all items: every benchmark together). Diamond: the mean difference B − A; bar: its 95% interval; grey ticks: ± the MDE. Green "
        "or red: a difference the test detects (p_adj < 0.05); grey: not detectable; hollow: the items cannot "
        "tell (too few differ for any p < 0.05). An interval wholly "
        "inside the MDE ticks means a difference of that size was within reach and is not there.",
    )
    shown = c.copy()
    for col in ("mean_a", "mean_b", "difference", "ci_low", "ci_high", "se", "se_naive", "mde"):
        shown[col] = (100 * shown[col]).round(2)
    one_sided = bool((c["only_a"] > 0).any() or (c["only_b"] > 0).any())
    cols = [
        "run_a",
        "run_b",
        "benchmark",
        "items",
        *(["only_a", "only_b"] if one_sided else []),
        "mean_a",
        "mean_b",
        "difference",
        "ci_low",
        "ci_high",
        "se",
        *(["se_naive"] if o.cluster else []),
        "test",
        "differing",
        "p_adj",
        "mde",
        "items_needed",
    ]
    caption = ["Scores, differences, SEs and MDE in points."]
    if o.cluster:
        caption.append("se_naive: the SE if items were independent (compare with se).")
    caption.append(
        f"items_needed: items to detect a {100 * o.effect:.1f}-point difference at 80% power with this "
        "pair's per-item variance."
    )
    caption.append(
        "only_a / only_b: items one run answered and the other did not (left out of the comparison, listed "
        "in items.csv)."
        if one_sided
        else "Both runs of every pair answered the same items."
    )
    caption.append(
        "comparisons.csv has the same rows on the 0-1 scale, with the unadjusted p, the number of clusters "
        "and the variance parts."
    )
    report.table(shown[cols], "Comparisons (points)", " ".join(caption), nowrap=["benchmark", "test"])
    if c["var_within"].notna().any():
        v = c[c["var_within"].notna()][
            ["run_a", "run_b", "benchmark", "items", "var_total", "var_within", "var_between"]
        ]
        report.table(
            v,
            "Within-item and between-item variance",
            "Several samples per item: the variance over items of the per-item mean difference (var_total), "
            "the part due to sampling within items (var_within: more samples per item shrink it) and the "
            "part due to items differing (var_between: only more items shrink it).",
        )
    report.html_block(
        "What more samples or more items would buy",
        "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in noise_lines(result)) + "</ul>",
        "Per pair over all its items: the MDE now, with twice the samples per item (where several samples "
        "split the noise into its within-item part) and with twice the items; the resolution ratio N/N* is "
        "the items compared over the items needed to detect the difference observed (below 1: unresolved).",
    )
    _release_sections(report, result)
    report.details.update(_details(result))
    return report


def noise_lines(result: CompareResult) -> list[str]:
    """Per pair over all items: what doubling the samples or the items would do to the MDE, and the
    resolution ratio (:class:`~evalprism.stats.noise_plan.NoisePlan`)."""
    from evalprism.stats.noise_plan import NoisePlan

    lines = []
    for _, r in result.overall().iterrows():
        if r["items"] < 2 or not np.isfinite(r["var_total"]) or r["var_total"] == 0:
            lines.append(f"{r['run_b']} vs {r['run_a']}: no variance between the items to plan with")
            continue
        n, k, several = int(r["items"]), float(r["samples"]), bool(np.isfinite(r["var_within"]))
        plan = NoisePlan.from_parts(n, k, r["var_total"], r["var_within"], r["se"], r["se_naive"])
        now = 100 * plan.mde()
        parts = [f"{r['run_b']} vs {r['run_a']}: MDE {now:.1f} points"]
        if several:
            parts.append(f"{k:g} more samples per item: {100 * plan.mde(samples=2 * k):.1f}")
        parts.append(f"{n:,} more items: {100 * plan.mde(items=2 * n):.1f}")
        ratio = r["resolution"]
        resolved = "resolved" if ratio >= 1 else "unresolved"
        parts.append(
            f"resolution ratio N/N* {ratio:.2f} ({resolved})" if np.isfinite(ratio) else "no difference to resolve"
        )
        lines.append("; ".join(parts))
    return lines


def _release_sections(report: Report, result: CompareResult) -> None:
    """The k-sample scores per run, the runs tied for best and the release gate, where the run has them."""
    from evalprism.compare.release import confidence_set_table, gate_table

    if result.runs_table is not None:
        shown = result.runs_table.assign(
            value=lambda t: (100 * t["value"]).round(2), se=lambda t: (100 * t["se"]).round(2)
        )
        report.table(
            shown,
            "k-sample scores per run",
            "Per run, the mean over items of each rule's unbiased per-item value (points) and its standard error "
            "over items: pass@k, at least one of k samples right (Chen et al. 2021); maj@k, most of k right; "
            "avg@k, the mean of k samples; gpass@k:τ, at least a share τ of k right (G-Pass@k).",
        )
    if result.confidence_set is not None:
        cs = result.confidence_set
        report.table(
            confidence_set_table(cs),
            "Tied for best: the model confidence set",
            f"{cs.sentence()}. Runs in elimination order (first eliminated first); p_mcs is each run's MCS "
            "p-value: a run stays in the set at level 1 - α while its p_mcs is at least α.",
        )
    if result.gate:
        table = gate_table(result.gate)
        for col in ("difference", "lower", "upper", "margin"):
            table[col] = (100 * table[col]).round(2)
        report.table(
            table,
            "Release gate",
            " ".join(g.sentence() + "." for g in result.gate)
            + " Points; lower/upper: the one-sided bounds of the difference; exit codes: 0 pass, 1 regression, "
            "3 cannot tell.",
        )


def _pairing_gain(result: CompareResult) -> str:
    """How much narrower pairing made the intervals here: the paired SE (items independent) over the SE
    two independent means would have on the same items, per pair over all its items."""
    overall = result.overall()
    ratio = (overall["se_naive"] / overall["se_unpaired"]).replace([np.inf, -np.inf], np.nan).dropna()
    if ratio.empty:
        return "Here no pair has the items to measure what pairing gained."
    low, high = float(ratio.min()), float(ratio.max())
    span = f"{low:.2f}x" if np.isclose(low, high, atol=0.005) else f"{low:.2f}-{high:.2f}x"
    return f"Here the paired standard errors are {span} those of two independent means on the same items."


def _details(result: CompareResult) -> dict[str, Any]:
    """The report's run details: the inputs and runs, the options as run (the baseline as resolved),
    the harness readers' options given, then each choice the readers made."""
    o, summary = result.options, result.summary
    details: dict[str, Any] = {
        "runs": list(summary.runs),
        "run_names": list(summary.run_names),
        "baseline": summary.baseline,
        "cluster": o.cluster,
        "adjust": o.adjust,
        "permutations": o.permutations,
        "seed": o.seed,
        "effect": o.effect,
        "scores": summary.scores,
        "responses": dataclasses.asdict(o.responses) if o.responses.given() else None,
    }
    details.update({f"harness {k}": v for k, v in o.harness.given().items()})
    details.update({f"read {i}": line for i, line in enumerate(result.provenance.choices, 1)})
    return details
