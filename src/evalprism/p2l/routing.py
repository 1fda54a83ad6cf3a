"""Optimal cost-constrained routing from prompt leaderboards (seed 002, section 2.1.2, Algorithm 1).

:func:`route` takes one leaderboard (M,) or per-prompt leaderboards (n, M) (e.g. the output of a
trained P2L model), model costs and a budget, and returns a :class:`Route`: the optimal routing
distribution per prompt (Theorem 1, at most two models per prompt), its expected win rate, its
expected cost and the router's own BT coefficient on the prompt's leaderboard (Algorithm 1 step 3).
The numerics live in :mod:`evalprism.stats.routing`.

This module is the boundary that owns what a routing problem means, so its checks are the only
ones a user meets, whichever front end they came through (``route`` and ``route_prompts`` in a
notebook, ``evalprism p2l route``, the service's config and requests):

- :func:`check_budget`: a budget below the cheapest model's cost (one message);
- :func:`opponent_vector`: the opponent, ``"uniform"``, a model name, weights or a probability
  vector (one tolerance, :data:`~evalprism.stats.routing.Q_SUM_TOL`);
- missing costs: :func:`evalprism.io.costs.cost_vector`, which ``route`` calls for a mapping.

The kernels below only assert their preconditions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import expit

from evalprism.errors import EvalprismError
from evalprism.io.costs import cost_vector
from evalprism.io.options import check_choice
from evalprism.stats.routing import Q_SUM_TOL, best_mix, best_mix_average_budget, router_coefficient, win_values
from evalprism.vocabularies import BudgetScope, RouteValue


@dataclass(frozen=True)
class Route:
    """The optimal router for one prompt (arrays of shape (M,), floats) or n prompts ((n, M), (n,)).

    ``probs``: the routing distribution over ``names``. ``expected_winrate``: π·W q, the win rate
    against the opponent mix (for ``grk``: the probability of not being worse than the fictitious
    "bad" model). ``router_coef``: the router's BT coefficient on the prompt's leaderboard
    (Algorithm 1 step 3). ``expected_cost``: π·c. ``budget``: the limit used (inf: none).
    ``values``: each model's own value on each prompt, shaped as ``coefs``: the win rate W q for
    ``bt``, σ(β) for ``grk``; ``expected_winrate`` is π·values.
    """

    names: list[str]
    probs: np.ndarray
    expected_winrate: float | np.ndarray
    router_coef: float | np.ndarray
    expected_cost: float | np.ndarray
    budget: float
    values: np.ndarray

    def frame(self) -> pd.DataFrame:
        """One row per prompt: ``prompt``, ``model`` / ``prob`` (the more likely model), ``model_2`` /
        ``prob_2`` (the second model of a mix, else empty / 0), ``expected_winrate``,
        ``expected_cost``, ``router_coef``. :func:`route` never mixes more than two models."""
        probs = np.atleast_2d(self.probs)
        n = probs.shape[0]
        order = np.argsort(-probs, axis=1, kind="stable")[:, :2]  # ties: lower index first
        rows = np.arange(n)
        names = np.asarray(self.names, dtype=object)
        second = probs[rows, order[:, 1]] if probs.shape[1] > 1 else np.zeros(n)
        runner_up = np.asarray(names[order[:, -1]], dtype=object)
        runner_up[~(second > 0)] = None
        return pd.DataFrame(
            {
                "prompt": rows,
                "model": names[order[:, 0]],
                "prob": probs[rows, order[:, 0]],
                "model_2": runner_up,
                "prob_2": second,
                "expected_winrate": np.atleast_1d(self.expected_winrate),
                "expected_cost": np.atleast_1d(self.expected_cost),
                "router_coef": np.atleast_1d(self.router_coef),
            }
        )


def route(
    coefs: np.ndarray,
    costs: np.ndarray | Mapping[str, float],
    budget: float | None,
    opponent: str | np.ndarray | Mapping[str, float] = "uniform",
    *,
    names: Sequence[str] | None = None,
    value: RouteValue = "bt",
    budget_scope: BudgetScope = "prompt",
) -> Route:
    """Route prompts to models optimally under a cost budget (Theorem 1, Algorithm 1).

    Args:
        coefs: (M,) one leaderboard or (n, M) one per prompt: BT coefficients θ (``value="bt"``) or
            grounded Rao-Kupper coefficients β (``value="grk"``, seed eq. 8).
        costs: cost per model, (M,) or (n, M) per prompt, or a mapping name -> cost (then ``names``
            is required; extra entries are ignored, a missing model is an error).
        budget: the cost limit; ``None`` or ``inf`` means unconstrained (each prompt's best model).
        opponent: the opponent distribution q of eq. (4), see :func:`opponent_vector`: ``"uniform"``
            over the M models, a model name (a point mass; ``"uniform"`` always means the keyword),
            weights ``{model: weight}`` (normalised) or a probability vector (M,) or (n, M) (entries
            >= 0 summing to 1 within 1e-9; renormalised). Ignored for ``grk``.
        names: the M model names (default ``model_0`` ...).
        value: how a model is valued (:data:`~evalprism.vocabularies.RouteValue`, the outcome model
            registry's ``route_by``). ``"bt"``: the value of model m is its win rate against q, v = W q with
            W_ba = σ(θ_b − θ_a). ``"grk"``: the value is the probability that m is not worse than
            the fictitious "bad" model whose coefficient is 0, σ(β_m) (m against "bad" as a BT pair);
            the router coefficient is then the root of σ(θ − 0) = π·v, i.e. logit(π·v).
        budget_scope: ``"prompt"``: every prompt's expected cost is at most ``budget`` (Theorem 1 per
            prompt, :func:`~evalprism.stats.routing.best_mix`). ``"average"``: the mean expected cost
            over the n prompts is at most ``budget``
            (:func:`~evalprism.stats.routing.best_mix_average_budget`).

    Raises:
        EvalprismError: shapes that do not match, a costs mapping without some model (named), an
            unknown opponent name, an invalid q, or a budget below the cheapest model's cost.
    """
    theta = np.asarray(coefs, dtype=np.float64)
    if theta.ndim not in (1, 2) or theta.shape[-1] == 0:
        raise EvalprismError(f"coefs must have shape (M,) or (n, M); got shape {theta.shape}")
    m = theta.shape[-1]
    check_choice("value", value, RouteValue)
    check_choice("budget_scope", budget_scope, BudgetScope)
    names = _model_names(names, m, need=isinstance(costs, Mapping) or (value == "bt" and _names_models(opponent)))
    cost = _cost_array(costs, names)
    limit = float("inf") if budget is None else float(budget)
    if np.isnan(limit):
        raise EvalprismError("budget is NaN; expected a number, or None for no limit")

    q = None if value == "grk" else opponent_vector(opponent, names)
    _check_prompts({"coefs": theta, "costs": cost, "opponent vector": q})
    values = expit(theta) if q is None else win_values(theta, q)
    if not np.all(np.isfinite(cost)) or np.any(cost < 0):
        raise EvalprismError("costs must be finite numbers >= 0")
    check_budget(limit, cost, names, budget_scope)
    if budget_scope == "average":
        probs = best_mix_average_budget(values, cost, limit)
    else:
        probs = best_mix(values, cost, limit)

    single = probs.ndim == 1
    winrate = np.sum(probs * values, axis=-1)
    spent = np.sum(probs * cost, axis=-1)
    if q is None:  # grk: the opponent is "bad" (coefficient 0): the root of σ(θ − 0) = winrate
        router = router_coefficient(np.zeros((*probs.shape[:-1], 1)), np.ones(1), winrate)
    else:
        router = router_coefficient(np.broadcast_to(theta, probs.shape), q, winrate)
    if single:
        return Route(
            names=names,
            probs=probs,
            expected_winrate=float(winrate),
            router_coef=float(router),
            expected_cost=float(spent),
            budget=limit,
            values=values,
        )
    return Route(
        names=names,
        probs=probs,
        expected_winrate=winrate,
        router_coef=router,
        expected_cost=spent,
        budget=limit,
        values=values,
    )


def _names_models(opponent: object) -> bool:
    """Whether ``opponent`` refers to models by name (a model name or weights by name)."""
    return isinstance(opponent, Mapping) or (isinstance(opponent, str) and opponent != "uniform")


def _model_names(names: Sequence[str] | None, m: int, *, need: bool) -> list[str]:
    if names is None:
        if need:
            raise EvalprismError("names is required when costs is a mapping or the opponent is a model name")
        return [f"model_{k}" for k in range(m)]
    out = [str(x) for x in names]
    if len(out) != m:
        raise EvalprismError(f"names has {len(out)} entries but coefs has {m} models")
    dupes = sorted({x for x in out if out.count(x) > 1})
    if dupes:
        raise EvalprismError(f"names must be unique; repeated: {', '.join(dupes)}")
    return out


def _cost_array(costs: np.ndarray | Mapping[str, float], names: list[str]) -> np.ndarray:
    """Costs as a float array aligned with ``names`` (a mapping is looked up by name)."""
    if isinstance(costs, Mapping):
        return cost_vector(costs, names)
    cost = np.asarray(costs, dtype=np.float64)
    if cost.ndim not in (1, 2) or cost.shape[-1] != len(names):
        raise EvalprismError(f"costs must have shape ({len(names)},) or (n, {len(names)}); got shape {cost.shape}")
    return cost


def opponent_vector(opponent: str | np.ndarray | Mapping[str, float], names: Sequence[str]) -> np.ndarray:
    """The opponent distribution q over ``names``: the one validator of an opponent, for the library,
    the CLI (``--opponent``) and the service config (``opponent:``).

    ``"uniform"``; a model name (a point mass); weights ``{model: weight}`` over some of the models
    (>= 0 with a positive sum; normalised, absent models weigh 0); or a probability vector (M,) or
    (n, M) (entries >= 0 summing to 1 within :data:`~evalprism.stats.routing.Q_SUM_TOL`;
    renormalised)."""
    names = list(names)
    m = len(names)
    if isinstance(opponent, str):
        if opponent == "uniform":
            return np.full(m, 1.0 / m)
        if opponent not in names:
            shown = ", ".join(names[:10]) + (", ..." if m > 10 else "")
            raise EvalprismError(
                f"unknown opponent {opponent!r}: expected 'uniform', a model name ({shown}) or a probability vector"
            )
        return np.eye(m)[names.index(opponent)]
    if isinstance(opponent, Mapping):
        return _opponent_weights(opponent, names)
    q = np.asarray(opponent, dtype=np.float64)
    if q.ndim not in (1, 2) or q.shape[-1] != m:
        raise EvalprismError(f"opponent vector must have shape ({m},) or (n, {m}); got shape {q.shape}")
    total = q.sum(axis=-1, keepdims=True)
    if not np.all(np.isfinite(q)) or np.any(q < 0) or np.any(np.abs(total - 1.0) > Q_SUM_TOL):
        raise EvalprismError("opponent vector must be a probability distribution: entries >= 0 summing to 1")
    return q / total


def _opponent_weights(opponent: Mapping[str, float], names: list[str]) -> np.ndarray:
    """q from weights by model name (see :func:`opponent_vector`)."""
    if not opponent:
        raise EvalprismError("opponent: expected 'uniform' or at least one {model: weight}")
    outside = [str(k) for k in opponent if k not in names]
    if outside:
        raise EvalprismError(
            f"opponent: {', '.join(outside)} not among the candidate models; "
            "the opponent distribution is over the candidates"
        )
    weights = np.array([opponent.get(name, 0.0) for name in names], dtype=float)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
        raise EvalprismError("opponent: expected weights >= 0 with a positive sum")
    return weights / weights.sum()


def _check_prompts(arrays: dict[str, np.ndarray | None]) -> None:
    """Every per-prompt (2-D) input must have the same number of prompts."""
    rows = {what: a.shape[0] for what, a in arrays.items() if a is not None and a.ndim == 2}
    if len(set(rows.values())) > 1:
        raise EvalprismError(
            "the per-prompt inputs disagree on the number of prompts: "
            + ", ".join(f"{what} has {n}" for what, n in rows.items())
        )


def check_budget(
    budget: float | None, costs: np.ndarray | Sequence[float], names: Sequence[str], scope: BudgetScope = "prompt"
) -> None:
    """The one check that ``budget`` can be met: it must cover the cheapest model's cost.

    ``costs`` (M,) or (n, M) per prompt, aligned with ``names``. For ``scope="prompt"`` (and whenever
    the costs are the same on every prompt) the budget must cover the cheapest model on every prompt;
    for ``scope="average"`` with per-prompt costs, the mean over the prompts of each prompt's cheapest
    cost. ``None`` or ``inf``: no limit. ``route`` calls it; so do ``route_prompts`` (before the P2L
    model runs), the service's config loader and each service request, so a user meets one message:
    ``budget 0.1 is below the cheapest model's cost 0.2 (gpt-x)``."""
    if budget is None:
        return
    limit = float(budget)
    cost = np.asarray(costs, dtype=np.float64)
    cheapest = cost.min(axis=-1)
    if scope == "average" and cost.ndim == 2 and not np.all(cost == cost[0]):
        if limit < cheapest.mean():
            raise _below_cheapest(limit, float(cheapest.mean()), "each prompt's cheapest, averaged over the prompts")
        return
    short = np.flatnonzero(np.atleast_1d(limit < cheapest))
    if short.size:
        row = np.atleast_2d(cost)[int(short[0])]
        k = int(np.argmin(row))
        where = f", on prompt {int(short[0])}" if cost.ndim == 2 else ""
        raise _below_cheapest(limit, float(row[k]), f"{names[k]}{where}")


def _below_cheapest(budget: float, cost: float, detail: str) -> EvalprismError:
    return EvalprismError(f"budget {budget:g} is below the cheapest model's cost {cost:g} ({detail})")
