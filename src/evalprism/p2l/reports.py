"""HTML reports of the P2L work: training, prompt-set leaderboards with strengths, routing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from evalprism.report import Report

if TYPE_CHECKING:
    from evalprism.p2l.evaluate import EvaluationResult
    from evalprism.p2l.prompt_set import PromptSetResult
    from evalprism.p2l.router import RoutingResult
    from evalprism.p2l.train import TrainResult


def training_report(result: TrainResult) -> Report:
    o = result.options
    history, evaluation = result.history, result.evaluation.set_index("predictor")
    report = Report(title="P2L training",
                    subtitle=f"{o['loss']} loss on {o['backbone']} ({'fine-tuned' if o['finetune'] else 'frozen'}); "
                             f"{o['train_battles']} training and {o['val_battles']} validation battles")
    gain_marginal = evaluation.loc["constant", "nll"] - evaluation.loc["marginal", "nll"]
    gain_p2l = evaluation.loc["marginal", "nll"] - evaluation.loc["p2l", "nll"]
    report.summary(
        f"On held-out prompts, P2L's NLL is {evaluation.loc['p2l', 'nll']:.4f} per battle against "
        f"{evaluation.loc['marginal', 'nll']:.4f} for the marginal leaderboard and "
        f"{evaluation.loc['constant', 'nll']:.4f} for the constant predictor.",
        f"The prompt adds {gain_p2l:.4f} nats per battle over the marginal leaderboard, "
        + (f"{gain_p2l / gain_marginal:.1f}× what the marginal leaderboard adds over a coin flip."
           if gain_marginal > 1e-9 else "while the marginal leaderboard adds nothing over a coin flip."),
        f"Best epoch {o['best_epoch']} ({o['stopped']}); the model directory loads with "
        "`P2LModel.load(dir)` and needs no network.",
    )
    fig = go.Figure()
    for col, name in (("train_nll", "training"), ("val_nll", "validation")):
        fig.add_trace(go.Scatter(x=history["epoch"], y=history[col], mode="lines+markers", name=name))
    fig.add_hline(y=float(evaluation.loc["marginal", "nll"]), line_dash="dot",
                  annotation_text="marginal (validation)")
    fig.update_layout(template="plotly_white", height=360, xaxis_title="epoch (0 = marginal start)",
                      yaxis_title="NLL per battle", margin={"l": 60, "r": 20, "t": 20, "b": 50})
    report.figure(fig, "Loss by epoch",
                  "Epoch 0 is the head's starting point, the marginal leaderboard fitted on the training battles. "
                  "Validation prompts were never seen in training; the saved model is the epoch with the lowest "
                  "validation loss.")
    report.table(result.evaluation.round(4), "Held-out prediction of votes",
                 "nll: mean negative log-likelihood per battle (lower is better); accuracy: expected share of "
                 "outcomes predicted right; brier: squared error of the outcome probabilities.")
    report.details.update(o)
    return report


def prompt_set_report(result: PromptSetResult) -> Report:
    o = result.options
    board, cats, strong = result.leaderboard, result.categories, result.strengths
    leader = board.iloc[0]
    top_share = board.sort_values("best_share", ascending=False).iloc[0]
    report = Report(title="Prompt-set leaderboard (P2L)",
                    subtitle=f"{o['n_prompts']} prompts, {o['models']} models; categories from {o['categories']}")
    category_leaders = cats[cats["rank"] == 1]
    n_other = int((category_leaders["model"] != leader["model"]).sum())
    report.summary(
        f"{leader['model']} leads the aggregated leaderboard, yet it is the best model on only "
        f"{leader['best_share']:.0%} of the prompts; {top_share['model']} is best on the most prompts "
        f"({top_share['best_share']:.0%}).",
        f"In {n_other} of {len(category_leaders)} categories another model leads: "
        + ", ".join(f"{r.category} → {r.model}" for r in category_leaders.itertuples()
                    if r.model != leader["model"])[:600] + "." if n_other else
        f"{leader['model']} also leads every one of the {len(category_leaders)} categories.",
        f"Strengths are win rates against {o['reference']} within each category (BT model on the category's "
        "aggregated leaderboard).",
    )
    shown = board.iloc[::-1]
    fig = go.Figure([go.Bar(x=shown["coef"], y=shown["model"], orientation="h", name="eq. 3 (win-rate fit)"),
                     go.Scatter(x=shown["mean_coef"], y=shown["model"], mode="markers", name="mean of coefficients (B.1)",
                                marker={"symbol": "diamond", "size": 9, "color": "#d62728"})])
    fig.update_layout(template="plotly_white", height=max(320, 22 * len(board) + 120), xaxis_title="coefficient",
                      margin={"l": 200, "r": 20, "t": 20, "b": 50}, yaxis={"type": "category"},
                      legend={"orientation": "h", "y": 1.05})
    report.figure(fig, "Aggregated leaderboard of the prompt set",
                  "Bars: the BT leaderboard that best predicts the average win rate over these prompts (eq. 3). "
                  "Diamonds: the plain average of the per-prompt coefficients, which can order models differently "
                  "when a model is great on some prompts and poor on others.")
    heat = strong.pivot(index="model", columns="category", values="win_rate")
    heat = heat.loc[board["model"][::-1]]
    order = cats.drop_duplicates("category").sort_values("prompts", ascending=False)["category"]
    heat = heat[order]
    fig = go.Figure(go.Heatmap(
        z=heat.to_numpy(), x=[f"{c} ({n})" for c, n in zip(order, cats.drop_duplicates('category').set_index('category').loc[order, 'prompts'], strict=True)],
        y=heat.index, zmid=0.5, colorscale="RdBu", zmin=0, zmax=1, text=np.round(heat.to_numpy() * 100).astype(int),
        texttemplate="%{text}", hovertemplate="%{y} in %{x}<br>win rate %{z:.1%}<extra></extra>",
        colorbar={"title": "win rate"}))
    fig.update_layout(template="plotly_white", height=max(320, 24 * len(heat) + 160),
                      margin={"l": 200, "r": 20, "t": 20, "b": 160}, xaxis={"tickangle": -35})
    report.figure(fig, f"Strengths and weaknesses against {o['reference']}",
                  f"Each cell: the probability (%) that the row's model beats {o['reference']} on the column's prompts "
                  "(number of prompts in brackets). Blue: stronger than the reference there; red: weaker. Read along a "
                  "row to see where one model is strong or weak; a row that changes colour is what the average hides.")
    report.table(board.round(4), "Aggregated leaderboard",
                 "coef: eq. 3; rating: 1000 + 400/ln(10) × coef; mean_coef: appendix B.1; best_share: share of "
                 "prompts on which the model has the top coefficient.")
    report.table(category_leaders[["category", "prompts", "model", "coef"]].rename(columns={"model": "leader"}),
                 "Leader of each category")
    report.details.update(o)
    return report


def evaluation_report(result: EvaluationResult) -> Report:
    o = result.options
    metrics = result.metrics.set_index("predictor")
    report = Report(title="P2L evaluation", subtitle=f"{o['n_battles']} held-out battles on {o['n_prompts']} prompts")
    lines = [f"NLL per battle: P2L {metrics.loc['p2l', 'nll']:.4f}"
             + (f", marginal {metrics.loc['marginal', 'nll']:.4f}" if "marginal" in metrics.index else "")
             + f", constant {metrics.loc['constant', 'nll']:.4f} (lower is better)."]
    scaling = result.scaling.groupby("prompts")["l1"].agg(["mean", "std"]).reset_index()
    full = scaling.iloc[-1]
    lines.append(f"Aggregating P2L over all {int(full['prompts'])} prompts gives a leaderboard whose win probabilities "
                 f"differ from this prompt set's own BT fit by {full['mean']:.4f} on average (L1 per model pair).")
    if "marginal_train_l1" in result.scaling.columns:
        lines.append(f"The marginal leaderboard of the training battles differs by "
                     f"{result.scaling['marginal_train_l1'].iloc[0]:.4f}.")
    report.summary(*lines)
    fig = go.Figure(go.Scatter(x=scaling["prompts"], y=scaling["mean"], mode="lines+markers", name="P2L aggregate",
                               error_y={"type": "data", "array": scaling["std"].fillna(0)}))
    if "marginal_train_l1" in result.scaling.columns:
        fig.add_hline(y=float(result.scaling["marginal_train_l1"].iloc[0]), line_dash="dot",
                      annotation_text="marginal leaderboard of the training battles")
    fig.update_layout(template="plotly_white", height=380, xaxis={"type": "log", "title": "prompts aggregated"},
                      yaxis_title="L1 distance of win probabilities", margin={"l": 60, "r": 20, "t": 20, "b": 50})
    report.figure(fig, "Aggregation scaling (Fig. 6)",
                  "How close the eq. 3 aggregate of k random prompts' P2L leaderboards comes to the BT leaderboard "
                  "fitted on all these battles, as k grows (mean ± sd over random draws). A curve that flattens "
                  "early means a few prompts already give a stable leaderboard.")
    report.table(result.metrics.round(4), "Prediction of the held-out votes",
                 "nll: mean negative log-likelihood per battle; accuracy: expected share of outcomes predicted "
                 "right; brier: squared error of the outcome probabilities.")
    report.details.update(o)
    return report


def routing_report(result: RoutingResult) -> Report:
    o = result.options
    curve, traffic = result.curve, result.traffic
    budget = "no budget" if o["budget"] is None else f"budget {o['budget']:g} ({o['budget_scope']} cost)"
    report = Report(title="P2L router", subtitle=f"{o['n_prompts']} prompts; {budget}; opponent {o['opponent']}")
    used = traffic[traffic["share"] > 0.005]
    gains = curve["router_winrate"] - curve["best_single_winrate"]
    widest = curve.iloc[int(gains.argmax())]
    report.summary(
        f"At this budget the router's expected win rate against {o['opponent']} is {o['mean_expected_winrate']:.1%} "
        f"at a mean cost of {o['mean_expected_cost']:.4g}; it sends traffic to {len(used)} models "
        f"({', '.join(f'{r.model} {r.share:.0%}' for r in used.head(4).itertuples())}).",
        f"The largest gain over the best single model within budget is at budget {widest['budget']:.4g}: "
        f"{widest['router_winrate']:.1%} against {widest['best_single_winrate']:.1%} for {widest['best_single_model']}.",
        "Win rates are predicted by the P2L model (Theorem 1 is exact for its leaderboards; real gains depend on "
        "how well the leaderboards predict votes: see the model's evaluation).",
    )
    fig = go.Figure([
        go.Scatter(x=curve["router_cost"], y=curve["router_winrate"], mode="lines+markers", name="P2L router"),
        go.Scatter(x=curve["best_single_cost"], y=curve["best_single_winrate"], mode="markers",
                   name="best single model within budget", text=curve["best_single_model"],
                   hovertemplate="%{text}<br>cost %{x:.4g}<br>win rate %{y:.1%}<extra></extra>",
                   marker={"symbol": "circle-open", "size": 10, "color": "black"}),
    ])
    fig.update_layout(template="plotly_white", height=400, xaxis_title="mean cost per prompt",
                      yaxis_title=f"expected win rate vs {o['opponent']}", yaxis_tickformat=".0%",
                      margin={"l": 70, "r": 20, "t": 20, "b": 50})
    report.figure(fig, "Win rate against cost",
                  "Each point of the line is the optimal router at one budget (Theorem 1); circles are the best single "
                  "model that fits that budget. The vertical gap is what routing prompt by prompt buys.")
    shown = traffic.iloc[::-1]
    fig = go.Figure(go.Bar(x=shown["share"], y=shown["model"], orientation="h",
                           hovertemplate="%{y}: %{x:.1%} of prompts<extra></extra>"))
    fig.update_layout(template="plotly_white", height=max(300, 22 * len(traffic) + 100), xaxis_tickformat=".0%",
                      margin={"l": 200, "r": 20, "t": 20, "b": 50}, yaxis={"type": "category"})
    report.figure(fig, "Where the traffic goes", "Share of prompts routed to each model at the chosen budget.")
    report.table(result.routes.head(40), "Routes of the first prompts",
                 "model/prob: the routed model and its probability; model_2/prob_2: the second model of a mix "
                 "(Theorem 1 never needs more than two); router_coef: the router's BT coefficient on the prompt's "
                 "leaderboard (Algorithm 1).")
    report.details.update(o)
    return report
