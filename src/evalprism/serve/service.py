"""What every request handler reaches: the :class:`Service` of the app serving it (built at start-up by
:func:`evalprism.serve.app.create_app`'s lifespan), and :class:`RequestError`, a 4xx with a message.

The checks every routed request passes live here once, for every endpoint and API: the text it is routed
on (:meth:`Service.prompt_of`: the human's, by :mod:`~evalprism.serve.extraction`), its budget
(:meth:`Service.budget_of`, against the candidates its API may go to), and whether it is admitted at all
(:meth:`Service.admit`: not during the shutdown, not while its decision could not be logged).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request

from evalprism.errors import EvalprismError
from evalprism.p2l.routing import check_budget
from evalprism.serve.affinity import AffinityStore
from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.config import ServeConfig
from evalprism.serve.decisions import DecisionLog, Endpoint
from evalprism.serve.drain import Drain, ShuttingDown, refusal_line
from evalprism.serve.extraction import Extraction, Reading
from evalprism.serve.loop_lag import LoopLag
from evalprism.serve.metrics import Metrics
from evalprism.serve.router import ALL, Decision, Job, RoutingCore
from evalprism.serve.schemas import ModelCard
from evalprism.serve.upstream import Upstreams


class RequestError(HTTPException):
    """A 4xx with a message for the client (``code``: OpenAI's machine-readable error code, if any)."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(status_code=status, detail=message)
        self.param = param
        self.code = code


@dataclass
class Service:
    """Everything a request handler needs, built at startup, on ``app.state.service``; a handler
    reaches it as a dependency. One per app: apps share no state."""

    config: ServeConfig
    core: RoutingCore
    batcher: MicroBatcher[Job, Decision]
    upstreams: Upstreams
    decisions: DecisionLog
    metrics: Metrics
    precision: str
    cards: dict[str, ModelCard]
    affinity: AffinityStore
    extraction: Extraction
    loop_lag: LoopLag
    drain: Drain

    def prompt_of(self, reading: Reading, param: str = "messages") -> str:
        """The text a conversation is routed on (:meth:`Reading.routed_on`); 422 when it has none."""
        prompt = reading.routed_on(self.config.max_prompt_chars)
        if not prompt:
            raise RequestError(422, "no user message with text to route on", param)
        return prompt

    def admit(self, request: Request, endpoint: Endpoint, prompt: Callable[[], str], **fields: Any) -> None:
        """Refuse a request that arrived after the shutdown began (:mod:`~evalprism.serve.drain`: its line is
        logged, with the hash of ``prompt()``, read only then; then 503), else require that its decision
        can be logged (before an upstream is paid for an answer that could not be): the last check before
        a decision."""
        if self.drain.refuses(request.state.arrived):
            self.decisions.write(refusal_line(endpoint, request.state, prompt(), **fields))
            raise ShuttingDown
        self.decisions.require()

    def check_length(self, prompt: str, param: str = "messages") -> str:
        """``prompt``, or a 413 when it is too long to route on (checked where P2L reads it)."""
        limit = self.config.max_prompt_chars
        if len(prompt) > limit:
            raise RequestError(
                413, f"the user turns are {len(prompt)} characters, more than the limit of {limit}", param
            )
        return prompt

    def budget_of(self, requested: float | None, pool: str = ALL) -> float | None:
        """The request's budget (else the config's), checked against the candidates of ``pool`` before
        the batch it would fail."""
        if requested is None:
            return self.config.budget  # checked against every pool when the config was loaded
        among = self.core.pools[pool]
        try:
            check_budget(requested, among.costs, among.candidates)
        except EvalprismError as exc:
            raise RequestError(422, str(exc), "budget") from None
        return requested

    def decision_fields(self, decision: Decision, budget: float | None) -> dict[str, Any]:
        """A routing decision as the responses and the decision log give it."""
        return {
            "distribution": decision.probs,
            "budget": budget,
            "expected_winrate": decision.expected_winrate,
            "router_coef": decision.router_coef,
            "expected_cost": decision.expected_cost,
        }
