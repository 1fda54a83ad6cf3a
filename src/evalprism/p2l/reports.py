"""HTML reports of the P2L work: training, prompt-set leaderboards with strengths, routing."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from evalprism.p2l.train_summary import EpochChoice, PenaltyChoice
from evalprism.report import Report
from evalprism.report.figures import chosen_point

if TYPE_CHECKING:
    from evalprism.p2l.evaluate import EvaluationResult, EvaluationSummary
    from evalprism.p2l.marginal import LeaderboardResult
    from evalprism.p2l.prompt_set import PromptSetResult
    from evalprism.p2l.router import RoutingResult
    from evalprism.p2l.train import TrainResult


def _overlapping_pairs(board: pd.DataFrame) -> pd.DataFrame:
    """Pairs of models whose 95% intervals overlap (the battles do not order them), closest first:
    columns upper_model, lower_model, rating_gap."""
    rows = [
        (a.model, b.model, a.rating - b.rating)
        for i, a in enumerate(board.itertuples())
        for b in board.iloc[i + 1 :].itertuples()
        if a.lower <= b.upper
    ]
    return pd.DataFrame(rows, columns=["upper_model", "lower_model", "rating_gap"]).sort_values(
        "rating_gap", kind="stable"
    )


def leaderboard_index_line(result: LeaderboardResult) -> str:
    """One line for an index page: the leader and how many pairs the battles cannot order."""
    board = result.leaderboard
    n_pairs = len(board) * (len(board) - 1) // 2
    top = board.iloc[0]
    return (
        f"{top['model']} leads (rating {top['rating']:.0f}); {len(_overlapping_pairs(board))} of {n_pairs} "
        "model pairs have overlapping 95% intervals"
    )


def leaderboard_report(result: LeaderboardResult) -> Report:
    """The marginal leaderboard: coefficients with intervals, and which orderings the battles do not
    support (pairs of models whose intervals overlap, closest first)."""
    board, summary = result.leaderboard, result.summary
    report = Report(
        title="Marginal leaderboard",
        subtitle=f"{result.options.outcome_model} fit to {summary.n_battles} battles; 95% intervals by "
        f"{result.options.ci}",
    )
    top = board.iloc[0]
    overlaps = _overlapping_pairs(board)
    n_pairs = len(board) * (len(board) - 1) // 2
    lines = [f"{len(board)} models; {top['model']} leads with rating {top['rating']:.0f}."]
    if len(overlaps):
        closest = "; ".join(
            f"{r.upper_model} and {r.lower_model} ({r.rating_gap:.0f} rating points apart)"
            for r in overlaps.head(3).itertuples()
        )
        lines.append(
            f"{len(overlaps)} of {n_pairs} pairs of models have overlapping 95% intervals, so these battles "
            f"do not order them; the closest: {closest}."
        )
    else:
        lines.append(f"All {n_pairs} pairs of models are separated: no two 95% intervals overlap.")
    if summary.not_identified:
        lines.append(summary.not_identified[0].upper() + summary.not_identified[1:])
    lines.append(
        "One rating per model is an average over every prompt: a model that leads on some kinds of prompts "
        "and trails on others gets one middling number. Per-prompt leaderboards need P2L "
        "(`evalprism p2l train`, then `evalprism p2l leaderboard` for a prompt set's categories)."
    )
    report.summary(*lines)
    shown = board[np.isfinite(board["coef"])].iloc[::-1]  # an infinite coefficient has no point to draw
    fig = go.Figure(
        go.Scatter(
            x=shown["coef"],
            y=shown["model"],
            mode="markers",
            error_x={
                "type": "data",
                "symmetric": False,
                "array": shown["upper"] - shown["coef"],
                "arrayminus": shown["coef"] - shown["lower"],
            },
            hovertemplate="%{y}<br>coefficient %{x:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(320, 22 * len(board) + 120),
        template="plotly_white",
        xaxis_title="coefficient (higher is better)",
        margin={"l": 20, "r": 20, "t": 20, "b": 50},
        yaxis={"type": "category", "automargin": True},
    )
    report.figure(
        fig,
        "Coefficients with 95% intervals",
        "One row per model, best on top. Two models whose intervals overlap are not reliably ordered by "
        "these battles. One unit of coefficient is 400/ln(10) ≈ 174 rating points.",
    )
    report.table(board, "Leaderboard", "coef: fitted coefficient; rating: 1000 + 400/ln(10) × coef.")
    if len(overlaps):
        report.table(
            overlaps.round(1),
            "Pairs the battles do not order",
            "Pairs of models whose 95% intervals overlap, closest ratings first.",
        )
    report.details.update(leaderboard_details(result))
    return report


def leaderboard_details(result: LeaderboardResult) -> dict[str, Any]:
    """The report's run details of a marginal fit: the options as run, the fit's numbers, the readers'
    choices and, when some model is not identified, which."""
    o, summary = result.options, result.summary
    details: dict[str, Any] = {
        "outcome_model": o.outcome_model,
        "ci": o.ci,
        "rounds": summary.rounds,
        "seed": o.seed,
        "n_battles": summary.n_battles,
        "nll": summary.nll,
        "read": list(result.provenance.choices),
    }
    if summary.not_identified is not None:
        details["not_identified"] = summary.not_identified
    return details


def _loss_figure(history: pd.DataFrame, marginal_nll: float, best_epoch: int) -> go.Figure:
    """Training and validation NLL by epoch, the marginal leaderboard's level, the saved epoch starred."""
    fig = go.Figure()
    for col, name in (("train_nll", "training"), ("val_nll", "validation")):
        fig.add_trace(go.Scatter(x=history["epoch"], y=history[col], mode="lines+markers", name=name))
    best = history[history["epoch"] == best_epoch]
    if len(best):
        fig.add_trace(chosen_point(best["epoch"], best["val_nll"], "best epoch (saved)", f"best epoch {best_epoch}"))
        fig.add_vline(x=best_epoch, line_dash="dash", line_color="#d62728", line_width=1)
    fig.add_hline(
        y=marginal_nll,
        line_dash="dot",
        annotation_text="marginal leaderboard (validation)",
        annotation_position="bottom right",
    )
    fig.update_layout(
        template="plotly_white",
        height=380,
        xaxis_title="epoch (0 = marginal start)",
        yaxis_title="NLL per battle",
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
    )
    return fig


def _penalty_figure(cv: pd.DataFrame) -> go.Figure:
    """Cross-validated NLL by ridge penalty, the marginal leaderboard (λ = ∞) as a level, the chosen
    penalty starred."""
    finite = cv[np.isfinite(cv["penalty"])]
    fig = go.Figure(
        go.Scatter(x=finite["penalty"], y=finite["cv_nll"], mode="lines+markers", name="P2L, cross-validated")
    )
    marginal = cv[~np.isfinite(cv["penalty"])]
    if len(marginal):
        fig.add_hline(
            y=float(marginal["cv_nll"].iloc[0]),
            line_dash="dot",
            annotation_text="marginal leaderboard (λ = ∞), cross-validated",
            annotation_position="top right",
        )
    chosen = finite[finite["chosen"]]
    if len(chosen):
        penalty = f"λ = {chosen['penalty'].iloc[0]:g}"
        fig.add_trace(chosen_point(chosen["penalty"], chosen["cv_nll"], "chosen penalty (saved)", penalty))
    levels = cv["cv_nll"].to_numpy(dtype=float)
    pad = 0.08 * (np.nanmax(levels) - np.nanmin(levels) or 0.01)
    fig.update_layout(
        template="plotly_white",
        height=380,
        xaxis_title="penalty λ on the head's weights (log scale)",
        yaxis_title="out-of-fold NLL per battle",
        yaxis_range=[np.nanmin(levels) - pad, np.nanmax(levels) + pad],
        xaxis={
            "type": "log",
            "tickvals": finite["penalty"].tolist(),
            "ticktext": [f"{v:g}" for v in finite["penalty"]],
        },
        margin={"l": 60, "r": 20, "t": 30, "b": 50},
    )
    return fig


def _fit_sentence(chosen: PenaltyChoice | EpochChoice) -> str:
    """How the head was fitted and what the fit chose, for the report's summary."""
    if isinstance(chosen, PenaltyChoice):
        lam = float(chosen.penalty_chosen)
        if chosen.penalty_by == "option":
            return f"The head was fitted by ridge with the given penalty λ = {lam:g}."
        if math.isinf(lam):
            return (
                "Cross-validation over the training prompts chose λ = ∞: these battles support no prompt "
                "dependence, and the model is the marginal leaderboard."
            )
        return f"Cross-validation over the training prompts chose the ridge penalty λ = {lam:g}."
    return f"Best epoch {chosen.best_epoch} of {chosen.epochs_run} ({chosen.stopped})."


def training_index_line(result: TrainResult) -> str:
    """One line for an index page: held-out NLL of P2L against the marginal leaderboard."""
    ev = result.evaluation.set_index("predictor")["nll"]
    chosen = result.summary.chosen
    chose = (
        f"ridge λ = {float(chosen.penalty_chosen):g}"
        if isinstance(chosen, PenaltyChoice)
        else f"best epoch {chosen.best_epoch}"
    )
    return (
        f"P2L held-out NLL {ev['p2l']:.3f} vs marginal {ev['marginal']:.3f} (coin flip {ev['constant']:.3f}); {chose}"
    )


def _relative_gain(ratio: float) -> str:
    """P2L's gain over the marginal as a share of the marginal's gain over a coin flip: a percentage
    below 1 (a "0.0×" would read as no gain at all), a multiple above."""
    if ratio < 1:
        return f"{ratio:.1%} of what the marginal leaderboard adds over a coin flip."
    return f"{ratio:.1f}× what the marginal leaderboard adds over a coin flip."


def training_report(result: TrainResult) -> Report:
    o, summary, chosen = result.options, result.summary, result.summary.chosen
    history, evaluation = result.history, result.evaluation.set_index("predictor")
    report = Report(
        title="P2L training",
        subtitle=f"{o.outcome_model} outcome model on {o.backbone} ({'fine-tuned' if o.finetune else 'frozen'}, "
        f"fit {o.fit}); {summary.train_battles} training and {summary.val_battles} validation battles",
    )
    gain_marginal = evaluation.loc["constant", "nll"] - evaluation.loc["marginal", "nll"]
    gain_p2l = evaluation.loc["marginal", "nll"] - evaluation.loc["p2l", "nll"]
    report.summary(
        f"On held-out prompts, P2L's NLL is {evaluation.loc['p2l', 'nll']:.4f} per battle against "
        f"{evaluation.loc['marginal', 'nll']:.4f} for the marginal leaderboard and "
        f"{evaluation.loc['constant', 'nll']:.4f} for the constant predictor.",
        (
            f"The prompt adds {gain_p2l:.4f} nats per battle over the marginal leaderboard, "
            + (
                _relative_gain(gain_p2l / gain_marginal)
                if gain_marginal > 1e-9
                else "while the marginal leaderboard adds nothing over a coin flip."
            )
        )
        if gain_p2l >= 0
        else f"On these validation prompts P2L is {-gain_p2l:.4f} nats per battle worse than the marginal leaderboard.",
        _fit_sentence(chosen) + " The model directory loads with `P2LModel.load(dir)` and needs no network.",
    )
    verdict = p2l_versus_marginal(result.evaluation)
    if verdict:
        report.summary(verdict.replace("on these battles", "on these validation battles"))
    if isinstance(chosen, PenaltyChoice):
        if history["cv_nll"].notna().any():
            report.figure(
                _penalty_figure(history),
                "Choosing the penalty",
                "Each point: the NLL on the held-out folds of a cross-validation over the training "
                "battles, grouped by prompt. A larger λ pulls the prompt-dependent weights toward zero, "
                "i.e. toward the marginal leaderboard (the dotted level). The chosen λ is the largest "
                "within one standard error of the best (the one-standard-error rule).",
            )
    else:
        report.figure(
            _loss_figure(history, float(evaluation.loc["marginal", "nll"]), chosen.best_epoch),
            "Loss by epoch",
            "Epoch 0 is the head's starting point, the marginal leaderboard fitted on the training "
            "battles. Validation prompts were never seen in training; the saved model is the best epoch "
            "(star): the lowest validation loss.",
        )
    report.table(
        result.evaluation.round(4),
        "Held-out prediction of votes",
        "nll: mean negative log-likelihood per battle (lower is better); accuracy: expected share of "
        "outcomes predicted right; brier: squared error of the outcome probabilities.",
    )
    report.details.update(result.training())
    return report


#: below this share of prompts the leader's is "only" that share: clearly less than all of them
ONLY_BELOW = 0.9


def _share_of_prompts(share: float, n_prompts: int) -> str:
    """A share of the prompts in words that fit it: "every prompt", "all but 3 of the 400 prompts",
    or a percentage that never rounds a share short of all to 100% (or a non-zero one to 0%)."""
    count = round(share * n_prompts)
    if count >= n_prompts:
        return f"every one of the {n_prompts} prompts"
    if share >= ONLY_BELOW:
        return f"all but {n_prompts - count} of the {n_prompts} prompts"
    if count == 0:
        return f"none of the {n_prompts} prompts"
    return f"{count} of the {n_prompts} prompts ({'<1%' if share < 0.005 else f'{share:.0%}'})"


def _leader_sentence(board: pd.DataFrame, n_prompts: int) -> str:
    """How often the aggregated leader is each prompt's best model; "only" when clearly less than all."""
    leader = board.iloc[0]
    top = board.sort_values("best_share", ascending=False, kind="stable").iloc[0]
    share = float(leader["best_share"])
    if share >= ONLY_BELOW:
        text = (
            f"{leader['model']} leads the aggregated leaderboard and is the best model on "
            f"{_share_of_prompts(share, n_prompts)}."
        )
    else:
        text = (
            f"{leader['model']} leads the aggregated leaderboard, yet it is the best model on only "
            f"{_share_of_prompts(share, n_prompts)}."
        )
    if top["model"] != leader["model"]:
        text += (
            f" {top['model']} is best on the most prompts ({_share_of_prompts(float(top['best_share']), n_prompts)})."
        )
    return text


def prompt_set_index_line(result: PromptSetResult) -> str:
    """One line for an index page: the overall leader, how often it is best, and category leaders."""
    board, cats = result.leaderboard, result.categories
    leader = board.iloc[0]
    leaders = cats[cats["rank"] == 1]
    others = int((leaders["model"] != leader["model"]).sum())
    share = float(leader["best_share"])
    link = "but" if share < ONLY_BELOW else "and"
    return (
        f"{leader['model']} leads overall {link} is best on {_share_of_prompts(share, result.summary.n_prompts)}; "
        f"another model leads {others} of {len(leaders)} categories"
    )


def prompt_set_report(result: PromptSetResult) -> Report:
    summary = result.summary
    board, cats, strong = result.leaderboard, result.categories, result.strengths
    leader = board.iloc[0]
    report = Report(
        title="Prompt-set leaderboard (P2L)",
        subtitle=f"{summary.n_prompts} prompts, {summary.models} models; categories from {summary.categories}",
    )
    category_leaders = cats[cats["rank"] == 1]
    n_other = int((category_leaders["model"] != leader["model"]).sum())
    report.summary(
        _leader_sentence(board, summary.n_prompts),
        f"In {n_other} of {len(category_leaders)} categories another model leads: "
        + "; ".join(f"'{r.category}' → {r.model}" for r in category_leaders.itertuples() if r.model != leader["model"])[
            :600
        ]
        + "."
        if n_other
        else f"{leader['model']} also leads every one of the {len(category_leaders)} categories.",
        f"Strengths are win rates against {summary.reference} within each category (BT model on the category's "
        "aggregated leaderboard).",
    )
    shown = board.iloc[::-1]
    fig = go.Figure(
        [
            go.Bar(x=shown["coef"], y=shown["model"], orientation="h", name="eq. 3 (win-rate fit)"),
            go.Scatter(
                x=shown["mean_coef"],
                y=shown["model"],
                mode="markers",
                name="mean of coefficients (B.1)",
                marker={"symbol": "diamond", "size": 9, "color": "#d62728"},
            ),
        ]
    )
    fig.update_layout(
        template="plotly_white",
        height=max(320, 22 * len(board) + 120),
        xaxis_title="coefficient (higher is better)",
        margin={"l": 20, "r": 20, "t": 20, "b": 50},
        yaxis={"type": "category", "automargin": True},
        legend={"orientation": "h", "y": 1.05},
    )
    report.figure(
        fig,
        "Aggregated leaderboard of the prompt set",
        "Bars: the BT leaderboard that best predicts the average win rate over these prompts (eq. 3). "
        "Diamonds: the plain average of the per-prompt coefficients, which can order models differently "
        "when a model is great on some prompts and poor on others.",
    )
    heat = strong.pivot(index="model", columns="category", values="win_rate")
    heat = heat.loc[board["model"][::-1]]
    order = cats.drop_duplicates("category").sort_values("prompts", ascending=False)["category"]
    heat = heat[order]
    fig = go.Figure(
        go.Heatmap(
            z=heat.to_numpy(),
            x=[
                f"{c} ({n})"
                for c, n in zip(
                    order, cats.drop_duplicates("category").set_index("category").loc[order, "prompts"], strict=True
                )
            ],
            y=heat.index,
            zmid=0.5,
            colorscale="RdBu",
            zmin=0,
            zmax=1,
            text=np.round(heat.to_numpy() * 100).astype(int),
            texttemplate="%{text}",
            hovertemplate="%{y} in %{x}<br>win rate %{z:.1%}<extra></extra>",
            colorbar={"title": "win rate"},
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=max(320, 24 * len(heat) + 180),
        margin={"l": 20, "r": 20, "t": 20, "b": 20},
        xaxis={"tickangle": -35, "automargin": True},
        yaxis={"automargin": True},
        xaxis_title="category (prompts)",
        yaxis_title="model",
    )
    report.figure(
        fig,
        f"Strengths and weaknesses against {summary.reference}",
        f"Each cell: the probability (%) that the row's model beats {summary.reference} on the column's prompts "
        "(number of prompts in brackets). Blue: stronger than the reference there; red: weaker. Read along a "
        "row to see where one model is strong or weak; a row that changes colour is what the average hides.",
    )
    report.table(
        board.round(4),
        "Aggregated leaderboard",
        "coef: eq. 3; rating: 1000 + 400/ln(10) × coef; mean_coef: appendix B.1; best_share: share of "
        "prompts on which the model has the top coefficient.",
    )
    report.table(
        category_leaders[["category", "prompts", "model", "coef"]].rename(columns={"model": "leader"}),
        "Leader of each category",
        f"The model with the top coefficient on each category's aggregated "
        f"leaderboard; {leader['model']} leads the whole prompt set.",
    )
    report.details.update(prompt_set_details(result))
    return report


def prompt_set_details(result: PromptSetResult) -> dict[str, Any]:
    """The report's run details of a prompt-set analysis: what it counted and decided, and its aggregation."""
    summary = result.summary
    return {
        "n_prompts": summary.n_prompts,
        "categories": summary.categories,
        "reference": summary.reference,
        "aggregation": result.options.aggregation,
        "models": summary.models,
        "outcome_model": summary.outcome_model,
    }


#: a difference of more than this many paired standard errors is called a win or a loss, not noise
NOISE_SES = 2.0
#: NLL differences below this are float rounding (a float32 head against a float64 marginal), not a difference
SAME_NLL = 1e-6


def _small(x: float) -> str:
    """A small non-negative number readably: 4 decimals, or 2 significant digits below 0.001 (never "0.0000")."""
    return f"{x:.4f}" if x >= 1e-3 else f"{x:.1e}"


def p2l_versus_marginal(metrics: pd.DataFrame) -> str | None:
    """One plain sentence on whether P2L beat the marginal leaderboard on these battles: better, worse,
    or within noise (the NLL difference within :data:`NOISE_SES` paired standard errors by prompt).
    None when there is no marginal leaderboard to compare with."""
    m = metrics.set_index("predictor")
    if "marginal" not in m.index or "nll_vs_marginal" not in m.columns:
        return None
    diff, se = float(m.loc["p2l", "nll_vs_marginal"]), float(m.loc["p2l", "se_vs_marginal"])
    size = f"{_small(abs(diff))} nats per battle"
    if abs(diff) < SAME_NLL and not se > SAME_NLL:
        return (
            f"P2L predicts these votes as the marginal leaderboard does (the same NLL to within {SAME_NLL:g} "
            "per battle): the prompt changes nothing here."
        )
    if not np.isfinite(se) or se <= 0:
        noise = "(no paired standard error: the battles come from fewer than two prompts)"
        within = False
    else:
        noise = f"(paired standard error by prompt {_small(se)}, so {abs(diff) / se:.1f} SE)"
        within = abs(diff) <= NOISE_SES * se
    if within:
        side = "worse" if diff > 0 else "better"
        return (
            f"P2L does slightly {side} than the marginal leaderboard, by {size} of NLL {noise}: within "
            "noise, so on these battles the prompt adds nothing measurable to the marginal leaderboard."
        )
    if diff > 0:
        return (
            f"**P2L loses to the marginal leaderboard**: its NLL is higher by {size} {noise}; on these "
            "battles conditioning on the prompt predicts the votes worse than one leaderboard for all prompts."
        )
    return f"P2L beats the marginal leaderboard: its NLL is lower by {size} {noise}."


def _battles_subtitle(summary: EvaluationSummary) -> str:
    """The held-out battles and prompts (or, when the model was trained on some of these prompts, not
    held out), and how many the outcome model used (``bt`` leaves out ties)."""
    overlap, n_battles, n_prompts = summary.overlap, summary.n_battles, summary.n_prompts
    if overlap.fit:
        text = (
            f"{n_battles} battles on {n_prompts} prompts, NOT held out: {overlap.fit} of the "
            "prompts were training prompts of this model"
        )
    else:
        text = f"{n_battles} {'held-out ' if overlap.recorded else ''}battles on {n_prompts} prompts"
    used = summary.battles_used
    if used < n_battles:
        text += (
            f"; the {summary.outcome_model} outcome model leaves out the {n_battles - used} ties (not outcomes of that "
            f"model), so the metrics use {used} battles"
        )
    return text


def _pm(x: float, se: float) -> str:
    """A signed difference with its standard error: ``+0.012 ± 0.020``."""
    return f"{x:+.3f} ± {se:.3f}" if np.isfinite(se) else f"{x:+.3f} (no standard error)"


def gain_words(gain: float, se: float) -> str:
    """The P2L router's gain over a policy in words: within noise (within :data:`NOISE_SES` paired
    standard errors), or which side is better, always with the number."""
    if not np.isfinite(gain):
        return "not valued (no prompt scored)"
    if gain == 0 and se == 0:
        return "none (the same routing)"
    if not np.isfinite(se) or abs(gain) <= NOISE_SES * se:
        return f"within noise: {_pm(gain, se)}"
    return f"{_pm(gain, se)}, the router {'better' if gain > 0 else 'worse'}"


def _single_name(row: pd.Series) -> str:
    return str(row["models"])


def routing_lines(routing: pd.DataFrame) -> list[str]:
    """One summary line per budget: the P2L router's held-out value, its gain over each baseline
    (:func:`gain_words`) and the oracle's."""
    lines = []
    for budget, rows in routing.groupby("budget", sort=True):
        r = rows.set_index("policy")
        p2l, single, oracle = r.loc["p2l"], r.loc["best single"], r.loc["oracle"]
        lines.append(
            f"Budget {budget:.4g}: P2L router {p2l['value']:.3f} ± {p2l['se']:.3f} held-out score; gain over the best "
            f"single model ({_single_name(single)}) {gain_words(single['p2l_gain'], single['se_gain'])}; over the "
            f"marginal router {gain_words(r.loc['marginal router', 'p2l_gain'], r.loc['marginal router', 'se_gain'])}; "
            f"over a cost-matched random mix {gain_words(r.loc['random mix', 'p2l_gain'], r.loc['random mix', 'se_gain'])}; "
            f"oracle (reads the test verdicts) {oracle['value']:.3f}."
        )
    return lines


def coverage_line(routing: pd.DataFrame, n_prompts: int) -> str:
    """How many prompts the P2L router could be scored on: a routed model without a battle on a prompt
    is excluded (and counted), which is most prompts when battles cover few models per prompt."""
    scored = routing.loc[routing["policy"] == "p2l", "prompts_scored"]
    return (
        f"The P2L router's routed model has a verdict on {scored.min():.0f} to {scored.max():.0f} of the "
        f"{n_prompts} prompts (by budget); the other prompts are excluded from its value and counted "
        "(prompts_excluded), never silently dropped: the standard errors carry that loss."
    )


def _routing_figure(routing: pd.DataFrame) -> go.Figure:
    """Held-out value against mean cost, one labelled trace per policy, ± 1 SE bars."""
    styles = {
        "oracle": ("oracle (reads the held-out verdicts)", "#d62728", "lines+markers", "star"),
        "random mix": ("cost-matched random mix", "#7f7f7f", "lines+markers", "x"),
        "best single": ("best single model within budget", "black", "markers", "circle-open"),
        "marginal router": ("router on the marginal leaderboard", "#2ca02c", "lines+markers", "diamond"),
        "p2l": ("P2L router", "#1f77b4", "lines+markers", "circle"),
    }  # drawn last: on top where they coincide
    fig = go.Figure()
    for rank, (policy, (label, colour, mode, symbol)) in enumerate(styles.items()):
        rows = routing[routing["policy"] == policy]
        fig.add_trace(
            go.Scatter(
                x=rows["cost"],
                y=rows["value"],
                mode=mode,
                name=label,
                error_y={"type": "data", "array": rows["se"]},
                legendrank=1000 - rank,
                line={"color": colour, "width": 3 if policy == "p2l" else 2},
                marker={"symbol": symbol, "size": 10 if policy != "p2l" else 8, "color": colour},
                customdata=np.c_[rows["budget"], rows["models"]],
                hovertemplate="budget %{customdata[0]:.4g}<br>%{customdata[1]}<br>cost %{x:.4g}<br>held-out score "
                "%{y:.3f}<extra>" + label + "</extra>",
            )
        )
    return cost_axis_layout(fig, routing["cost"], "mean cost per prompt", "held-out score (win 1, tie ½, loss 0)", 440)


def cost_axis_layout(fig: go.Figure, cost: pd.Series, x_title: str, y_title: str, height: int) -> go.Figure:
    """The layout of a quality-vs-cost figure: the cost axis on a log scale when the costs span more than
    20x (and are positive), the legend below."""
    costs = cost.dropna()
    log = bool(len(costs) and costs.min() > 0 and costs.max() / costs.min() > 20)
    fig.update_layout(
        template="plotly_white",
        height=height,
        margin={"l": 70, "r": 20, "t": 20, "b": 50},
        xaxis={"title": x_title + (" (log scale)" if log else ""), "type": "log" if log else "linear"},
        yaxis_title=y_title,
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def _routing_table(routing: pd.DataFrame) -> pd.DataFrame:
    shown = routing.copy()
    for col in ("value", "se", "p2l_gain", "se_gain"):
        shown[col] = shown[col].map(lambda v: "" if not np.isfinite(v) else f"{v:.3f}")
    shown["cost"] = shown["cost"].map(lambda v: "" if not np.isfinite(v) else f"{v:.4g}")
    for col in ("prompts_scored", "prompts_excluded"):
        shown[col] = shown[col].map(lambda v: f"{v:.1f}")
    shown["budget"] = shown["budget"].map(lambda v: f"{v:.4g}")
    return shown


def nll_split_line(split: pd.DataFrame) -> str | None:
    """Where P2L's NLL gain over the marginal comes from: the outcome type or the winner."""
    if not len(split) or "marginal" not in set(split["predictor"]):
        return None
    p = split[split["predictor"] == "p2l"].set_index("part")
    total, kind, winner = (p.loc[k] for k in ("total", "outcome type", "winner given decisive"))

    def part(row: pd.Series) -> str:
        gain, se = -float(row["vs_marginal"]), float(row["se_vs_marginal"])
        noise = " (within noise)" if not np.isfinite(se) or abs(gain) <= NOISE_SES * se else ""
        return f"{gain:+.4f} ± {se:.4f}{noise}"

    return (
        f"Of P2L's NLL gain over the marginal leaderboard, {part(total)} nats per battle, {part(kind)} come "
        "from predicting the outcome type (decisive, tie, both bad: how tie-prone or hard a prompt is) and "
        f"{part(winner)} from predicting who wins a decisive battle."
    )


#: why a grounded-RK model's own routing value cannot tell routers apart
GRK_VALUE_NOTE = (
    "This is a grounded Rao-Kupper model: its own routing value σ(β), the chance of not being worse "
    "than the fictitious 'bad' model, saturates near 1 for the stronger models (on these prompts the "
    "better half of the models have mean σ(β) {own}, where their expected scores against a uniform "
    "opponent span {score}), so the values it predicts barely separate models or routers; the routers "
    "here maximise {value}, and every policy is valued on the verdicts."
)


def evaluation_findings(result: EvaluationResult) -> list[str]:
    """The evaluation's headline: the held-out warning (if the battles were not held out), the NLL of
    P2L against the baselines and the verdict of P2L against the marginal leaderboard."""
    from evalprism.p2l.training_prompts import overlap_sentence

    metrics = result.metrics.set_index("predictor")
    warning = overlap_sentence(result.summary.overlap)
    lines = [warning] if warning else []
    lines.append(
        f"NLL per battle: P2L {metrics.loc['p2l', 'nll']:.4f}"
        + (f", marginal {metrics.loc['marginal', 'nll']:.4f}" if "marginal" in metrics.index else "")
        + f", constant {metrics.loc['constant', 'nll']:.4f} (lower is better)."
    )
    verdict = p2l_versus_marginal(result.metrics)
    return [*lines, verdict] if verdict else lines


def evaluation_report(result: EvaluationResult) -> Report:
    summary = result.summary
    metrics = result.metrics.set_index("predictor")
    report = Report(title="P2L evaluation", subtitle=_battles_subtitle(summary))
    from evalprism.p2l.training_prompts import overlap_sentence

    warning = overlap_sentence(summary.overlap)
    if warning:
        report.summary(warning)
    routing, r = result.routing, summary.routing
    if len(routing) and r is not None:
        value = (
            "the expected score against a uniform opponent, P(win) + ½ P(tie)"
            if r.value == "score"
            else "the model's own routing value (as `p2l route`)"
        )
        report.summary(
            "Routing valued on the held-out verdicts (a model's score on a prompt: its win rate in that prompt's "
            "battles, a tie ½; never the P2L model's own predictions). Each prompt's expected cost is at most the "
            f"budget; the routers maximise {value}; the best single model is chosen on {r.best_single_from}.",
            coverage_line(routing, summary.n_prompts),
            *routing_lines(routing),
        )
        if summary.outcome_model == "grk":
            spread = r.value_spread
            report.summary(
                GRK_VALUE_NOTE.format(
                    value=value,
                    own="{:.2f}-{:.2f}".format(*spread["own"]),
                    score="{:.2f}-{:.2f}".format(*spread["score"]),
                )
            )
    lines = [
        f"NLL per battle: P2L {metrics.loc['p2l', 'nll']:.4f}"
        + (f", marginal {metrics.loc['marginal', 'nll']:.4f}" if "marginal" in metrics.index else "")
        + f", constant {metrics.loc['constant', 'nll']:.4f} (lower is better)."
    ]
    verdict = p2l_versus_marginal(result.metrics)
    if verdict:
        lines.append(verdict)
    scaling = result.scaling.groupby("prompts")["l1"].agg(["mean", "std"]).reset_index()
    full = scaling.iloc[-1]
    lines.append(
        f"Aggregating P2L over all {int(full['prompts'])} prompts gives a leaderboard whose win probabilities "
        f"differ from this prompt set's own BT fit by {full['mean']:.4f} on average (L1 per model pair)."
    )
    if "marginal_train_l1" in result.scaling.columns:
        lines.append(
            f"The marginal leaderboard of the training battles differs by "
            f"{result.scaling['marginal_train_l1'].iloc[0]:.4f}."
        )
    split_line = nll_split_line(result.nll_split)
    if split_line:
        lines.append(split_line)
    report.summary(*lines)
    if len(routing):
        report.figure(
            _routing_figure(routing),
            "Routing policies on the held-out verdicts",
            "Held-out score (mean ± 1 standard error by prompt) against the mean cost per prompt, one point "
            "per budget and policy. The P2L router and the router on the marginal leaderboard maximise "
            "their predicted value under the budget (Theorem 1); the best single model is the best "
            "affordable one on the marginal leaderboard; the random mix ignores quality and spends what the "
            "P2L router spends; the oracle routes by the test verdicts among the models that fought on each "
            "prompt (with few models per prompt it is valued on more prompts than the routers, so at a low "
            "budget it can sit below them).",
        )
        report.table(
            _routing_table(routing),
            "Held-out router table",
            "value, se: held-out score and its standard error by prompt; p2l_gain, se_gain: the P2L "
            "router's score minus this policy's on the same prompts and its paired standard error (within "
            "2 SE: noise); cost: mean expected cost per prompt; prompts_scored: prompts (in expectation "
            "over a mix) whose routed model has a verdict on them; prompts_excluded: routed to a model "
            "without a battle on that prompt, so not scored (counted here, never silently dropped); "
            "models: what a prompt-blind policy routes to.",
            max_rows=60,
            nowrap=["policy"],
        )
    fig = go.Figure(
        go.Scatter(
            x=scaling["prompts"],
            y=scaling["mean"],
            mode="lines+markers",
            name="P2L aggregate",
            error_y={"type": "data", "array": scaling["std"].fillna(0)},
        )
    )
    if "marginal_train_l1" in result.scaling.columns:
        fig.add_hline(
            y=float(result.scaling["marginal_train_l1"].iloc[0]),
            line_dash="dot",
            annotation_text="marginal leaderboard of the training battles",
        )
    fig.update_layout(
        template="plotly_white",
        height=380,
        xaxis={"type": "log", "title": "prompts aggregated"},
        yaxis_title="L1 distance of win probabilities",
        margin={"l": 60, "r": 20, "t": 20, "b": 50},
    )
    report.figure(
        fig,
        "Aggregation scaling (Fig. 6)",
        "How close the eq. 3 aggregate of k random prompts' P2L leaderboards comes to the BT leaderboard "
        "fitted on all these battles, as k grows (mean ± sd over random draws). A curve that flattens "
        "early means a few prompts already give a stable leaderboard.",
    )
    report.table(
        result.metrics,
        "Prediction of the held-out votes",
        "battles: the battles the outcome model uses; nll: mean negative log-likelihood per battle; accuracy: "
        "expected share of outcomes predicted right; brier: squared error of the outcome probabilities; "
        "nll_vs_marginal: NLL minus the marginal leaderboard's on the same battles (negative: better), "
        "se_vs_marginal: its standard error with the battles of one prompt counted as one draw.",
    )
    if len(result.nll_split):
        shown = result.nll_split.copy()
        for col in ("nll", "vs_marginal", "se_vs_marginal"):
            shown[col] = shown[col].map(lambda v: "" if not np.isfinite(v) else f"{v:.4f}")
        report.table(
            shown,
            "NLL by part: outcome type and winner",
            "Each battle's NLL is −log P(outcome type) − [decisive] log P(winner | decisive), the outcome "
            "type being decisive, tie or both bad; the two parts sum to the total. vs_marginal: the part "
            "minus the marginal leaderboard's on the same battles (negative: better), se_vs_marginal: its "
            "paired standard error by prompt.",
        )
    report.details.update(evaluation_details(result))
    return report


def evaluation_details(result: EvaluationResult) -> dict[str, Any]:
    """The report's run details of an evaluation: what it counted, the options it ran with, the battles
    left out, the readers' choices, the overlap with the training prompts and, with costs, the routing."""
    o, summary = result.options, result.summary
    details: dict[str, Any] = {
        "n_battles": summary.n_battles,
        "n_prompts": summary.n_prompts,
        "outcome_model": summary.outcome_model,
        "repeats": o.repeats,
        "seed": o.seed,
        "battles_used": summary.battles_used,
        "left_out": list(result.notes),
        "read": list(result.provenance.choices),
        "overlap": asdict(summary.overlap),
    }
    if summary.routing is not None:
        details["routing"] = asdict(summary.routing)
    return details


ROUTE_SAMPLE = 16  # rows of the routes table shown in the report (about what its box shows unscrolled)


def _best_single_within(curve: pd.DataFrame, budget: float | None) -> pd.Series:
    """The best single model whose cost fits ``budget`` (the curve's budgets include every model's
    cost, so its rows up to the budget hold that model); any budget when there is none."""
    rows = curve if budget is None else curve[curve["best_single_cost"] <= budget + 1e-12]
    rows = rows if len(rows) else curve
    return rows.loc[rows["predicted_best_single_winrate"].idxmax()]


def _route_sample(routes: pd.DataFrame, order: list[str], rows: int = ROUTE_SAMPLE) -> pd.DataFrame:
    """Prompts spread over the models they are routed to: up to ``rows // models`` per model (in
    ``order``), mixes first, the rest evenly spaced through that model's prompts; the second
    model of a pure route is blank, not a probability of 0 beside no model."""
    used = [m for m in order if (routes["model"] == m).any()]
    per = max(1, rows // max(len(used), 1))
    parts = []
    for model in used:
        mine = routes[routes["model"] == model]
        mixed = mine[mine["model_2"].notna()]
        pure = mine[mine["model_2"].isna()]
        take = mixed.head(per)
        if len(take) < per and len(pure):
            picks = np.unique(np.linspace(0, len(pure) - 1, min(per - len(take), len(pure))).round().astype(int))
            take = pd.concat([take, pure.iloc[picks]])
        parts.append(take)
    shown = pd.concat(parts) if parts else routes.head(rows)
    shown = shown.assign(prompt=[_clip(p) for p in shown["prompt"]]).astype({"prob_2": object})
    shown.loc[shown["model_2"].isna(), "prob_2"] = None
    return shown


#: characters of a prompt shown in a report table (routes.csv has the whole text)
PROMPT_CHARS = 300


def _clip(prompt: object) -> str:
    """A prompt for a table cell: at most :data:`PROMPT_CHARS` characters, "…" where cut."""
    text = str(prompt).strip()
    return text if len(text) <= PROMPT_CHARS else text[:PROMPT_CHARS].rstrip() + " …"


def _against(result: RoutingResult) -> str:
    """Whom the router's win rates are against: the opponent distribution, or for a grounded-RK model
    the fictitious "bad" model its absolute coefficients are measured from (seed eq. 8)."""
    if result.summary.routing_value == "grk":
        return "the 'bad' reference model (grounded Rao-Kupper: P(not worse than bad))"
    return str(result.options.opponent)


def _value_axis_title(result: RoutingResult) -> str:
    """The y-axis title of the predicted curve: short enough to fit beside the plot."""
    if result.summary.routing_value == "grk":
        return "predicted P(not worse than 'bad')"
    return f"predicted win rate vs {result.options.opponent}"


def _short(name: str) -> str:
    """A model name without its organisation prefix (``meta-llama/Llama-2-7b`` -> ``Llama-2-7b``), for plot labels."""
    return name.rsplit("/", 1)[-1]


def _winrate_figure(result: RoutingResult) -> go.Figure:
    """Router and best single models on predicted win rate against cost, each single model named on
    the plot, the chosen budget and the router's point at it marked. Costs spanning more than a factor
    20 are drawn on a log axis (cheap models would otherwise pile up at the left edge)."""
    curve, summary, budget = result.curve, result.summary, result.options.budget
    singles = curve.drop_duplicates("best_single_model")
    fig = go.Figure(
        [
            go.Scatter(
                x=curve["router_cost"],
                y=curve["predicted_router_winrate"],
                mode="lines+markers",
                name="P2L router",
                customdata=curve["budget"],
                hovertemplate="budget %{customdata:.4g}<br>cost %{x:.4g}<br>win rate %{y:.1%}<extra>router</extra>",
            ),
            go.Scatter(
                x=singles["best_single_cost"],
                y=singles["predicted_best_single_winrate"],
                mode="markers+text",
                name="best single model within budget",
                text=[_short(m) for m in singles["best_single_model"]],
                textposition=["bottom right"] * (len(singles) - 1) + ["bottom left"],
                customdata=singles["best_single_model"],
                hovertemplate="%{customdata}<br>cost %{x:.4g}<br>win rate %{y:.1%}<extra></extra>",
                marker={"symbol": "circle-open", "size": 11, "color": "black", "line": {"width": 2}},
            ),
            go.Scatter(
                x=[summary.mean_expected_cost],
                y=[summary.mean_expected_winrate],
                mode="markers",
                name="router at the chosen budget",
                marker={"symbol": "star", "size": 16, "color": "#d62728"},
                hovertemplate="chosen budget: cost %{x:.4g}<br>win rate %{y:.1%}<extra></extra>",
            ),
        ]
    )
    costs = pd.concat([curve["router_cost"], curve["best_single_cost"]])
    log = bool(costs.min() > 0 and costs.max() / costs.min() > 20)
    if budget is not None:
        fig.add_shape(
            type="line",
            x0=budget,
            x1=budget,
            y0=0,
            y1=1,
            yref="paper",
            line={"dash": "dash", "color": "#d62728", "width": 1},
        )
        # on a log axis an annotation's x is log10 of the value (a shape's is the value itself)
        fig.add_annotation(
            x=math.log10(budget) if log and budget > 0 else budget,
            y=1,
            yref="paper",
            text=f"chosen budget {budget:g}",
            showarrow=False,
            xanchor="left",
            yanchor="bottom",
        )
    values = pd.concat([curve["predicted_router_winrate"], curve["predicted_best_single_winrate"]])
    fine = values.max() - values.min() < 0.1  # whole percents would repeat on the ticks
    fig.update_layout(
        template="plotly_white",
        height=440,
        xaxis={"title": "mean cost per prompt" + (" (log scale)" if log else ""), "type": "log" if log else "linear"},
        yaxis_title=_value_axis_title(result),
        yaxis_tickformat=".1%" if fine else ".0%",
        margin={"l": 80, "r": 20, "t": 30, "b": 50},
    )
    return fig


def routing_index_line(result: RoutingResult) -> str:
    """One line for an index page: the router against the best single model at the chosen budget."""
    summary, chosen = result.summary, result.options.budget
    single = _best_single_within(result.curve, chosen)
    budget = "" if chosen is None else f" within budget {chosen:g}"
    return (
        f"router {summary.mean_expected_winrate:.1%} predicted win rate at mean cost {summary.mean_expected_cost:.3g} vs "
        f"{single['predicted_best_single_winrate']:.1%} for the best single model{budget} ({single['best_single_model']})"
    )


def routing_report(result: RoutingResult) -> Report:
    o, summary = result.options, result.summary
    curve, traffic = result.curve, result.traffic
    budget = "no budget" if o.budget is None else f"budget {o.budget:g} ({o.budget_scope} cost)"
    report = Report(title="P2L router", subtitle=f"{summary.n_prompts} prompts; {budget}; opponent {_against(result)}")
    used = traffic[traffic["share"] > 0.005]
    single = _best_single_within(curve, o.budget)
    gains = curve["predicted_router_winrate"] - curve["predicted_best_single_winrate"]
    widest = curve.iloc[int(gains.argmax())]
    report.summary(
        f"At this budget the router's predicted win rate against {_against(result)} is "
        f"{summary.mean_expected_winrate:.1%} at a mean cost of {summary.mean_expected_cost:.4g}, against {single['predicted_best_single_winrate']:.1%} for the best "
        f"single model that fits it ({single['best_single_model']}, cost {single['best_single_cost']:.4g}). It sends "
        f"traffic to {len(used)} models ({', '.join(f'{r.model} {r.share:.0%}' for r in used.head(4).itertuples())}).",
        f"The largest predicted gain over the best single model within budget is from budget {widest['budget']:.4g}: "
        f"{widest['predicted_router_winrate']:.1%} against {widest['predicted_best_single_winrate']:.1%} for {widest['best_single_model']}.",
        "**These win rates are the P2L model's own predictions**, for the router and for the best single model "
        "alike, so the router wins by construction (Theorem 1 is exact for its leaderboards). Whether it wins on "
        "real verdicts is measured by `evalprism p2l evaluate MODEL HELD_OUT --costs COSTS`, which values every "
        "policy on held-out battles.",
    )
    report.figure(
        _winrate_figure(result),
        "Predicted win rate against cost",
        "Each point of the line is the optimal router at one budget (Theorem 1); open circles are the best "
        "single model that fits a budget, named; the star is the router at the chosen budget (dashed line). "
        "All values are P2L's predictions (curve.csv: predicted_*), not verdicts: the vertical gap is what "
        "routing buys if the predicted leaderboards were exact; `p2l evaluate --costs` measures it.",
    )
    shown = traffic.iloc[::-1]
    fig = go.Figure(
        go.Bar(
            x=shown["share"],
            y=[f"{m} (cost {c:g})" for m, c in zip(shown["model"], shown["cost"], strict=True)],
            orientation="h",
            text=[f"{v:.0%}" for v in shown["share"]],
            textposition="outside",
            hovertemplate="%{y}: %{x:.1%} of prompts<extra></extra>",
        )
    )
    fig.update_layout(
        template="plotly_white",
        height=max(300, 22 * len(traffic) + 100),
        xaxis_tickformat=".0%",
        xaxis_title="share of prompts at the chosen budget",
        margin={"l": 20, "r": 40, "t": 20, "b": 50},
        yaxis={"type": "category", "automargin": True},
    )
    report.figure(fig, "Where the traffic goes", "Share of prompts routed to each model at the chosen budget.")
    sample = _route_sample(result.routes, traffic["model"].tolist())
    if result.routes["model_2"].notna().any():
        mixes = (
            "model_2/prob_2: the second model of a mix, blank for a pure route (Theorem 1 never needs more than two); "
        )
    else:
        sample = sample.drop(columns=["model_2", "prob_2"])
        mixes = "no prompt is split between two models at this budget; "
    report.table(
        sample,
        "Routes of sample prompts, by routed model",
        f"Up to {max(1, ROUTE_SAMPLE // max(len(used), 1))} prompts per routed model (routes.csv has all "
        f"{len(result.routes)}). model/prob: the routed model and its probability; {mixes}router_coef: the "
        "router's BT coefficient on the prompt's leaderboard (Algorithm 1).",
        lines=["prompt"],
    )
    report.details.update(routing_details(result))
    return report


def routing_details(result: RoutingResult) -> dict[str, Any]:
    """The report's run details of a routing run: the options as run and what it counted and decided."""
    o, summary = result.options, result.summary
    return {
        "n_prompts": summary.n_prompts,
        "budget": o.budget,
        "opponent": o.opponent,
        "budget_scope": o.budget_scope,
        "routing_value": summary.routing_value,
        "cost_column": summary.cost_column,
        "mean_expected_winrate": summary.mean_expected_winrate,
        "mean_expected_cost": summary.mean_expected_cost,
    }
