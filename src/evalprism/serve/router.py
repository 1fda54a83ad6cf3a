"""The routing core of the service: P2L leaderboards for a batch of prompts, then the optimal router
of :func:`evalprism.p2l.route` for each, among the configured candidates.

Routing is among the candidates only (their columns of the P2L leaderboard), against the
configured opponent distribution over the candidates, with each prompt's budget (Theorem 1, per
prompt). A request of one API routes among the candidates serving that API (its :class:`Pool`: the
opponent restricted to them and renormalised); ``/v1/route`` among all of them. A P2L model trained with the grounded Rao-Kupper outcome model routes by its ``grk`` value (the
probability of not being worse than the fictitious "bad" model); every other outcome model by BT win rate.
A mixed routing distribution (at most two models) is sampled with the service's random generator.

Failover order: if the chosen model's upstream fails, the next is the candidate of highest value
on this prompt among those that cost no more than the larger of the budget and the chosen
model's cost (a retry never spends more than the first attempt could have).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from evalprism.p2l.model import P2LModel
from evalprism.p2l.routing import opponent_vector, route
from evalprism.serve.config import ServeConfig, pool_opponent
from evalprism.serve.conversation import API_NAMES

#: the pool of every candidate (``/v1/route``); the other pools are named by their API
ALL = "all"


@dataclass(frozen=True)
class Job:
    """One prompt for a batch; ``route`` False: only its leaderboard is wanted; ``pool``: the candidates
    it is routed among (:data:`ALL`, or an API's name)."""

    prompt: str
    budget: float | None = None
    route: bool = True
    pool: str = ALL


@dataclass(frozen=True)
class Pool:
    """Candidates one request may be routed to: their names, columns of the P2L leaderboard, costs and
    the opponent distribution over them."""

    candidates: list[str]
    columns: np.ndarray
    costs: np.ndarray
    opponent: np.ndarray

    @classmethod
    def of(cls, model: P2LModel, config: ServeConfig, names: list[str], opponent: np.ndarray) -> Pool:
        return cls(
            names,
            np.array([model.models.index(name) for name in names], dtype=int),
            np.array([config.models[name].cost for name in names], dtype=float),
            opponent,
        )


@dataclass(frozen=True)
class Decision:
    """The leaderboard of one prompt over all P2L models and, for a routed job, the decision."""

    coefs: np.ndarray
    extra: float | None
    chosen: str | None = None
    probs: dict[str, float] | None = None
    expected_winrate: float | None = None
    router_coef: float | None = None
    expected_cost: float | None = None
    fallbacks: tuple[str, ...] = ()
    values: dict[str, float] | None = None  # each candidate's value on the prompt (its win rate; grk: σ(β))


class RoutingCore:
    """P2L inference and routing for batches of :class:`Job` (runs in the batcher's thread)."""

    def __init__(self, model: P2LModel, config: ServeConfig) -> None:
        self.model = model
        self.candidates = list(config.models)
        self.columns = np.array([model.models.index(name) for name in self.candidates])
        self.costs = np.array([config.models[name].cost for name in self.candidates], dtype=float)
        self.opponent = opponent_vector(config.opponent, self.candidates)
        self.pools = {ALL: Pool(self.candidates, self.columns, self.costs, self.opponent)}
        for api in API_NAMES:
            names = config.serving(api)
            if names:
                self.pools[api] = Pool.of(model, config, names, pool_opponent(config, names, api))
        self.route_value = model.routing_value
        self.rng = np.random.default_rng(config.seed)
        #: batches run in the event loop's thread when the backbone is fast (:attr:`Backbone.fast`)
        self.inline = bool(getattr(model.backbone, "fast", False))

    def __call__(self, jobs: Sequence[Job]) -> list[Decision]:
        prediction = self.model.predict([job.prompt for job in jobs])
        extras = prediction.extra if prediction.extra is not None else np.full(len(jobs), np.nan)
        decisions: list[Decision | None] = [None] * len(jobs)
        routed = [i for i, job in enumerate(jobs) if job.route]
        for budget, pool in {(jobs[i].budget, jobs[i].pool) for i in routed}:  # one vectorised route() per group
            rows = [i for i in routed if jobs[i].budget == budget and jobs[i].pool == pool]
            extra = [_finite_or_none(extras[i]) for i in rows]
            for i, decision in zip(rows, self.decide(prediction.coefs[rows], budget, extra, pool), strict=True):
                decisions[i] = decision
        for i, job in enumerate(jobs):
            if not job.route:
                decisions[i] = Decision(prediction.coefs[i], _finite_or_none(extras[i]))
        return decisions  # type: ignore[return-value]

    def decide(
        self, coefs: np.ndarray, budget: float | None, extras: Sequence[float | None] | None = None, pool: str = ALL
    ) -> list[Decision]:
        """Decisions for leaderboards ``coefs`` (n, all P2L models; tie parameters ``extras``) under one
        budget, among the candidates of ``pool``: each prompt's model drawn from its routing
        distribution, the other affordable candidates as fallbacks, best first.
        Vectorised over the batch (this runs for every routed request): the draw is numpy's
        ``Generator.choice(p=...)`` written out (a uniform per prompt against the cumulative
        distribution, the same draws from the same seed), the fallback order one argsort."""
        among = self.pools[pool]
        theta = coefs[:, among.columns]
        chosen = route(theta, among.costs, budget, among.opponent, names=among.candidates, value=self.route_value)
        n = theta.shape[0]
        probs = np.clip(np.atleast_2d(chosen.probs), 0.0, None)
        cdf = np.cumsum(probs / probs.sum(axis=1, keepdims=True), axis=1)
        cdf /= cdf[:, -1:]
        picks = (cdf <= self.rng.random((n, 1))).sum(axis=1).tolist()  # choice(): searchsorted, side right
        order = np.argsort(-np.atleast_2d(chosen.values), axis=1, kind="stable").tolist()
        limit = np.maximum(np.inf if budget is None else budget, among.costs[picks]).tolist()
        costs, names = among.costs.tolist(), among.candidates
        values = np.atleast_2d(chosen.values).tolist()
        winrate = np.broadcast_to(chosen.expected_winrate, n).tolist()
        router_coef = np.broadcast_to(chosen.router_coef, n).tolist()
        expected_cost = np.broadcast_to(chosen.expected_cost, n).tolist()
        out = []
        for k, (pick, row) in enumerate(zip(picks, probs.tolist(), strict=True)):
            out.append(
                Decision(
                    coefs=coefs[k],
                    extra=None if extras is None else extras[k],
                    chosen=names[pick],
                    probs={names[j]: p for j, p in enumerate(row) if p > 0},
                    expected_winrate=winrate[k],
                    router_coef=router_coef[k],
                    expected_cost=expected_cost[k],
                    fallbacks=tuple(names[j] for j in order[k] if j != pick and costs[j] <= limit[k]),
                    values=dict(zip(names, values[k], strict=True)),
                )
            )
        return out


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
