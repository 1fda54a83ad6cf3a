"""The routing core of the service: P2L leaderboards for a batch of prompts, then the optimal router
of :func:`evalprism.p2l.route` for each, among the configured candidates.

Routing is among the candidates only (their columns of the P2L leaderboard), against the
configured opponent distribution over the candidates, with each prompt's budget (Theorem 1, per
prompt). A P2L model trained with the grounded Rao-Kupper outcome model routes by its ``grk`` value (the
probability of not being worse than the fictitious "bad" model); every other outcome model by BT win rate.
A mixed routing distribution (at most two models) is sampled with the service's random generator.

Failover order: if the chosen model's upstream fails, the next is the candidate of highest value
on this prompt among those that cost no more than the larger of the budget and the chosen
model's cost (a retry never spends more than the first attempt could have).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from evalprism.p2l.model import P2LModel
from evalprism.p2l.routing import opponent_vector, route
from evalprism.serve.config import ServeConfig


@dataclass(frozen=True)
class Job:
    """One prompt for a batch; ``route`` False: only its leaderboard is wanted."""

    prompt: str
    budget: float | None = None
    route: bool = True


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


class RoutingCore:
    """P2L inference and routing for batches of :class:`Job` (runs in the batcher's thread)."""

    def __init__(self, model: P2LModel, config: ServeConfig) -> None:
        self.model = model
        self.candidates = list(config.models)
        self.columns = np.array([model.models.index(name) for name in self.candidates])
        self.costs = np.array([config.models[name].cost for name in self.candidates], dtype=float)
        self.opponent = opponent_vector(config.opponent, self.candidates)
        self.route_value = model.routing_value
        self.rng = np.random.default_rng(config.seed)
        #: batches run in the event loop's thread when the backbone is fast (:attr:`Backbone.fast`)
        self.inline = bool(getattr(model.backbone, "fast", False))

    def __call__(self, jobs: Sequence[Job]) -> list[Decision]:
        prediction = self.model.predict([job.prompt for job in jobs])
        extras = prediction.extra if prediction.extra is not None else np.full(len(jobs), np.nan)
        decisions: list[Decision | None] = [None] * len(jobs)
        routed = [i for i, job in enumerate(jobs) if job.route]
        for budget in {jobs[i].budget for i in routed}:  # one vectorised route() per distinct budget
            rows = [i for i in routed if jobs[i].budget == budget]
            for i, decision in zip(rows, self.decide(prediction.coefs[rows], budget), strict=True):
                decisions[i] = replace(decision, extra=_finite_or_none(extras[i]))
        for i, job in enumerate(jobs):
            if not job.route:
                decisions[i] = Decision(prediction.coefs[i], _finite_or_none(extras[i]))
        return decisions  # type: ignore[return-value]

    def decide(self, coefs: np.ndarray, budget: float | None) -> list[Decision]:
        """Decisions for leaderboards ``coefs`` (n, all P2L models) under one budget."""
        theta = coefs[:, self.columns]
        chosen = route(theta, self.costs, budget, self.opponent, names=self.candidates, value=self.route_value)
        probs, values = np.atleast_2d(chosen.probs), np.atleast_2d(chosen.values)
        out = []
        for k in range(theta.shape[0]):
            p = np.clip(probs[k], 0.0, None)
            pick = int(self.rng.choice(len(self.candidates), p=p / p.sum()))
            limit = max(np.inf if budget is None else budget, self.costs[pick])
            order = [int(j) for j in np.argsort(-values[k], kind="stable") if j != pick and self.costs[j] <= limit]
            out.append(
                Decision(
                    coefs=coefs[k],
                    extra=None,
                    chosen=self.candidates[pick],
                    probs={self.candidates[j]: float(p[j]) for j in np.flatnonzero(p > 0)},
                    expected_winrate=float(np.atleast_1d(chosen.expected_winrate)[k]),
                    router_coef=float(np.atleast_1d(chosen.router_coef)[k]),
                    expected_cost=float(np.atleast_1d(chosen.expected_cost)[k]),
                    fallbacks=tuple(self.candidates[j] for j in order),
                )
            )
        return out


def _finite_or_none(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
