"""Routing a prompt set with a trained P2L model (`evalprism p2l route`): the optimal router per
prompt at one budget, the traffic it sends to each model and the budget curve (expected win rate
of the router and of the best single model that fits each budget)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.io.costs import cost_vector
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.p2l.model import P2LModel, model_names
from evalprism.p2l.options import RouteOptions
from evalprism.p2l.routing import BudgetScope, Route, check_budget, opponent_vector, route
from evalprism.progress import status
from evalprism.vocabularies import RouteValue


@dataclass(frozen=True)
class RoutingSummary:
    """What one routing run counted and decided: the prompts routed, the routing value of the P2L
    model's outcome model, the cost column read, and the router's mean expected win rate and cost
    over the prompts at the chosen budget."""

    n_prompts: int
    routing_value: RouteValue
    cost_column: str
    mean_expected_winrate: float
    mean_expected_cost: float


@dataclass
class RoutingResult(SavedResult):
    """``routes`` (one row per prompt), ``traffic`` (share per model) and ``curve`` (budget curve); the
    options it ran with and what it counted and decided (:class:`RoutingSummary`)."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_ROUTE

    routes: pd.DataFrame
    traffic: pd.DataFrame
    curve: pd.DataFrame
    route: Route
    options: RouteOptions
    summary: RoutingSummary
    provenance: Provenance = field(default_factory=Provenance)

    def findings(self) -> list[str]:
        """The router against the best single model at the chosen budget."""
        from evalprism.p2l.reports import routing_index_line

        return [routing_index_line(self)]

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"routes": self.routes, "traffic": self.traffic, "curve": self.curve}

    def report(self) -> Any:
        from evalprism.p2l.reports import routing_report

        return routing_report(self)


def budget_curve(
    coefs: np.ndarray,
    cost: np.ndarray,
    names: list[str],
    opponent: str | np.ndarray,
    scope: BudgetScope,
    points: int = 12,
    value: RouteValue = "bt",
) -> pd.DataFrame:
    """Predicted win rate of the optimal router and of the best affordable single model, for budgets
    from the cheapest to the most expensive model's cost; ``value``: the routing value of the
    leaderboards (:attr:`P2LModel.routing_value`). Both are valued with the same predicted
    leaderboards (hence the ``predicted_`` columns), so the router wins by construction;
    :mod:`evalprism.p2l.heldout_routing` values policies on held-out verdicts instead."""
    budgets = np.unique(np.r_[np.linspace(cost.min(), cost.max(), points), cost])
    values = route(coefs, cost, None, opponent, names=names, value=value, budget_scope=scope).values
    per_model = np.atleast_2d(values).mean(axis=0)
    rows = []
    for b in budgets:
        r = route(coefs, cost, float(b), opponent, names=names, value=value, budget_scope=scope)
        affordable = cost <= b + 1e-12
        best = int(np.flatnonzero(affordable)[per_model[affordable].argmax()])
        rows.append(
            {
                "budget": float(b),
                "predicted_router_winrate": float(np.mean(r.expected_winrate)),
                "router_cost": float(np.mean(r.expected_cost)),
                "best_single_model": names[best],
                "predicted_best_single_winrate": float(per_model[best]),
                "best_single_cost": float(cost[best]),
            }
        )
    return pd.DataFrame(rows)


def route_prompts(
    model: P2LModel,
    prompts: pd.DataFrame,
    costs: dict[str, float],
    options: RouteOptions | None = None,
    *,
    progress: bool = True,
) -> RoutingResult:
    """Route every prompt of ``prompts`` (a table with a ``prompt`` column) among the model's models.

    ``costs`` maps each model to its cost per query (a model without a cost is an error: it could not
    be routed to safely). ``options`` (:class:`~evalprism.p2l.options.RouteOptions`): the ``budget``
    (None: each prompt's best model), the ``opponent``, and ``budget_scope``: ``average`` bounds the mean
    cost over the prompt set, ``prompt`` bounds every prompt's expected cost (Theorem 1 as stated).
    Costs and budget are checked before the P2L model runs."""
    o = options or RouteOptions()
    budget, opponent, budget_scope = o.budget, o.opponent, o.budget_scope
    names = model.models
    cost = check_route_options(names, costs, budget, opponent, budget_scope)
    texts = prompts["prompt"].astype(str).tolist()
    status(f"routing {len(texts)} prompts among {len(model.models)} models", progress)
    coefs = model.leaderboards(texts)
    chosen = route(coefs, cost, budget, opponent, names=names, value=model.routing_value, budget_scope=budget_scope)
    routes = chosen.frame().drop(columns="prompt")
    routes.insert(0, "prompt", texts)
    traffic = pd.DataFrame({"model": names, "cost": cost, "share": np.atleast_2d(chosen.probs).mean(axis=0)})
    traffic = traffic.sort_values("share", ascending=False, kind="stable").reset_index(drop=True)
    curve = budget_curve(coefs, cost, names, opponent, budget_scope, value=model.routing_value)
    summary = RoutingSummary(
        n_prompts=len(texts),
        routing_value=model.routing_value,
        cost_column=getattr(costs, "column", "cost"),
        mean_expected_winrate=float(np.mean(chosen.expected_winrate)),
        mean_expected_cost=float(np.mean(chosen.expected_cost)),
    )
    return RoutingResult(routes, traffic, curve, chosen, o, summary)


def check_route_options(
    names: list[str], costs: dict[str, float], budget: float | None, opponent: str, budget_scope: BudgetScope
) -> np.ndarray:
    """Every check of a routing run that needs only the model list: a cost for each model
    (:func:`~evalprism.io.costs.cost_vector`), a budget that covers the cheapest
    (:func:`~evalprism.p2l.routing.check_budget`) and a known opponent; returns the costs in ``names``
    order."""
    cost = cost_vector(costs, names)
    check_budget(budget, cost, names, budget_scope)
    opponent_vector(opponent, names)
    return cost


def route_model_dir(
    model_dir: str | Path,
    prompts: pd.DataFrame,
    costs: dict[str, float],
    options: RouteOptions | None = None,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> RoutingResult:
    """:func:`route_prompts` with the model in ``model_dir``: costs, budget and opponent are checked
    against its model list first (:func:`~evalprism.p2l.model.model_names`, milliseconds), so a bad
    one fails before the encoder loads and encodes every prompt (tens of seconds)."""
    o = options or RouteOptions()
    check_route_options(model_names(model_dir), costs, o.budget, o.opponent, o.budget_scope)
    model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=progress)
    return route_prompts(model, prompts, costs, o, progress=progress)
