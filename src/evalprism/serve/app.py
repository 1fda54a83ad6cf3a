"""The router service: an OpenAI-compatible front for a set of candidate models, routed by P2L.

Endpoints (all but ``/health`` behind bearer auth when keys are configured):

- ``GET /health`` (with each upstream's circuit); ``GET /v1/models``, ``GET /v1/models/{id}``;
- ``GET /metrics``: Prometheus metrics (:mod:`~evalprism.serve.metrics`);
- ``POST /v1/leaderboard``: per-prompt P2L coefficients, and the eq. (3) leaderboard of a list;
- ``POST /v1/route``: the routing decision for a conversation (Theorem 1, Algorithm 1);
- ``POST /v1/chat/completions``: routes, forwards to the chosen upstream (failover in value order,
  :mod:`~evalprism.serve.upstream`), returns the upstream's answer with the decision in the extra
  field ``evalprism``; streaming and not.

P2L inference runs micro-batched in a worker thread (:mod:`~evalprism.serve.batcher`); every
routing decision is one line of the decision log (:mod:`~evalprism.serve.decisions`); while that
log cannot be written, routing and chat answer 503 and ``/health`` is degraded, naming the reason.

The endpoints are on :data:`router` (an ``APIRouter``); each reaches the :class:`Service` of the app
serving it (``app.state.service``, built at start-up) through ``Depends``, so that several apps in
one process (tests) share no circuits, metrics or logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import math
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from evalprism import __version__
from evalprism.errors import EvalprismError
from evalprism.p2l.aggregate import aggregate_leaderboards
from evalprism.p2l.model import P2LModel
from evalprism.p2l.routing import check_budget
from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.config import Secrets, ServeConfig, realised_cost
from evalprism.serve.decisions import (
    AttemptRecord,
    ChatOutcome,
    DecisionLine,
    DecisionLog,
    DecisionLogUnwritable,
    Endpoint,
    elapsed_ms,
    prompt_hash,
)
from evalprism.serve.drain import REFUSAL_HEADERS, CloseWhileDraining, Drain, ShuttingDown, refusal_line
from evalprism.serve.lean import LeanEndpoint, LeanRoutes
from evalprism.serve.loop_lag import LoopLag
from evalprism.serve.metrics import CONTENT_TYPE, Metrics
from evalprism.serve.observe import Observe
from evalprism.serve.retries import NO_RETRY, retry_field
from evalprism.serve.router import Decision, Job, RoutingCore
from evalprism.serve.schemas import (
    ERROR_STATUS,
    MAX_PROMPTS_PER_REQUEST,
    ChatCompletionRequest,
    DecisionLogHealth,
    ErrorBody,
    EventLoopHealth,
    Health,
    HealthStatus,
    LeaderboardRequest,
    LeaderboardResponse,
    Messages,
    ModelCard,
    ModelList,
    PromptLeaderboard,
    RouteRequest,
    RouteResponse,
    UpstreamHealth,
    error_content,
    routing_prompt,
)
from evalprism.serve.security import BearerAuth, BodyLimit
from evalprism.serve.streaming import ClientLeft, RelayResponse, until_client_leaves
from evalprism.serve.upstream import Attempt, Outcome, Relayed, Upstreams, relay_events

log = logging.getLogger("evalprism.serve")


class RequestError(HTTPException):
    """A 4xx with a message for the client (``code``: OpenAI's machine-readable error code, if any)."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(status_code=status, detail=message)
        self.param = param
        self.code = code


def _error(
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse({**error_content(message, kind, param, code), **extra}, status_code=status, headers=headers)


#: the statuses each operation can answer besides 200, for the OpenAPI schema
_COMMON = (400, 401, 413, 415, 422)
_STATUS_TEXT = {
    400: "malformed JSON or text that is not valid Unicode",
    401: "missing or invalid bearer token",
    404: "unknown model",
    405: "method not allowed",
    413: "body or prompt too large",
    415: "the body is not sent as JSON",
    422: "invalid field values",
    429: "every upstream attempt was rate-limited (Retry-After: the shortest wait an upstream asked for)",
    502: "no upstream answered (evalprism.attempts says why)",
    503: "the decision log cannot be written (the error names it and why; GET /health too); for a "
    "chat: no upstream could take it now (all connections busy, the router starved, or a circuit's one trial in "
    "flight); the service is shutting down (Retry-After, code shutting_down)",
}


def _responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody, "description": _STATUS_TEXT[status]} for status in statuses}


@dataclass
class Setup:
    """What :func:`create_app` was given, on ``app.state.setup``: the start-up (:func:`_lifespan`)
    builds the :class:`Service` from it."""

    model: P2LModel
    config: ServeConfig
    secrets: Secrets
    decision_log: str | Path | DecisionLog
    precision: str
    transport: httpx.AsyncBaseTransport | None
    core: RoutingCore
    metrics: Metrics
    drain: Drain


@dataclass
class Service:
    """Everything a request handler needs, built at startup, on ``app.state.service``; a handler
    reaches it as a dependency (:data:`ServiceDep`). One per app: apps share no state."""

    config: ServeConfig
    core: RoutingCore
    batcher: MicroBatcher[Job, Decision]
    upstreams: Upstreams
    decisions: DecisionLog
    metrics: Metrics
    precision: str
    cards: dict[str, ModelCard]
    loop_lag: LoopLag
    drain: Drain

    def prompt_of(self, messages: Messages, param: str = "messages") -> str:
        """The routing prompt of a conversation; 4xx when it has no user text or is too long."""
        prompt = routing_prompt(messages)
        if not prompt:
            raise RequestError(422, "no user message with text to route on", param)
        if len(prompt) > self.config.max_prompt_chars:
            raise RequestError(
                413,
                f"the user turns are {len(prompt)} characters, more than the limit of {self.config.max_prompt_chars}",
                param,
            )
        return prompt

    def admit(self, request: Request, endpoint: Endpoint, prompt: str, **fields: Any) -> None:
        """Refuse a request that arrived after the shutdown began (:mod:`~evalprism.serve.drain`: its line is
        logged, then 503), else require that its decision can be logged (before an upstream is paid for an
        answer that could not be): the last check before a decision."""
        if self.drain.refuses(request.state.arrived):
            self.decisions.write(refusal_line(endpoint, request.state, prompt, **fields))
            raise ShuttingDown
        self.decisions.require()

    def budget_of(self, requested: float | None) -> float | None:
        """The request's budget (else the config's), checked before the batch it would fail."""
        if requested is None:
            return self.config.budget  # checked when the config was loaded
        budget = requested
        try:
            check_budget(budget, self.core.costs, self.core.candidates)
        except EvalprismError as exc:
            raise RequestError(422, str(exc), "budget") from None
        return budget

    def decision_fields(self, decision: Decision, budget: float | None) -> dict[str, Any]:
        return {
            "distribution": decision.probs,
            "budget": budget,
            "expected_winrate": decision.expected_winrate,
            "router_coef": decision.router_coef,
            "expected_cost": decision.expected_cost,
        }


async def _service(request: Request) -> Service:
    """The app's :class:`Service` (async: a plain function dependency would cost a thread-pool hop)."""
    service: Service = request.app.state.service
    return service


#: a handler's parameter for the Service of the app it serves, which exists once the app has started
ServiceDep = Annotated[Service, Depends(_service)]

#: the endpoints, on the Service of whichever app includes them (:func:`create_app`)
router = APIRouter()


def create_app(
    model: P2LModel,
    config: ServeConfig,
    secrets: Secrets,
    *,
    decision_log: str | Path | DecisionLog,
    precision: str = "float32",
    transport: httpx.AsyncBaseTransport | None = None,
) -> FastAPI:
    """The service as an ASGI app (run it with uvicorn; :func:`evalprism.serve.run.serve` does).
    ``precision`` is what ``model`` was loaded with (reported by /health, with the backbone's runtime);
    ``decision_log``: its path, or an open :class:`DecisionLog` (the app closes it on shutdown);
    ``transport``: the upstream clients' httpx transport (None: the network). Every app has its own
    state (``app.state``): breakers, metrics, batcher, decision log and upstream clients."""
    metrics, drain = Metrics(), Drain()
    app = FastAPI(
        title="evalprism P2L router",
        version=__version__,
        lifespan=_lifespan,
        description="Routes each prompt to the candidate model P2L ranks best for it under a cost budget "
        "(Frick et al., Prompt-to-Leaderboard, Theorem 1 and Algorithm 1).",
    )
    app.state.setup = Setup(
        model, config, secrets, decision_log, precision, transport, RoutingCore(model, config), metrics, drain
    )
    app.state.drain = drain  # for the server that shuts it down (serve.drain.DrainingServer)
    _install_error_handlers(app)
    app.include_router(router)
    _publish_schema(app, bool(secrets.api_keys), min(up.cost for up in config.models.values()))
    lean = {
        "/v1/route": LeanEndpoint(RouteRequest, route_endpoint),
        "/v1/chat/completions": LeanEndpoint(ChatCompletionRequest, chat),
    }
    app.add_middleware(LeanRoutes, state=app.state, handlers=app.exception_handlers, endpoints=lean)  # innermost
    app.add_middleware(BearerAuth, keys=secrets.api_keys)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)  # before auth reads anything
    app.add_middleware(CloseWhileDraining, drain=drain)
    app.add_middleware(Observe, metrics=metrics)  # outermost: every answer gets its request id and is counted
    return app


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start-up and shutdown: the micro-batcher (warmed up), the upstream clients and the decision
    log make the :class:`Service` on ``app.state.service``; shutdown stops and closes them."""
    setup: Setup = app.state.setup
    config, metrics = setup.config, setup.metrics
    batcher: MicroBatcher[Job, Decision] = MicroBatcher(
        setup.core, window_s=config.batch_window_ms / 1e3, max_batch=config.max_batch
    )
    await batcher.start()
    await batcher.submit(Job("warm-up", route=False))  # first-call costs (allocations, JIT) before traffic
    batcher.stats.batches = batcher.stats.items = 0
    batcher.on_batch = metrics.batch_size.observe
    # The heap now holds millions of long-lived objects (torch, transformers, the encoder); a full
    # collection under load would walk them all (a 340 ms pause every ~2,000 requests, measured).
    # Freezing moves them out of the collector's reach; what requests allocate is still collected.
    gc.collect()
    gc.freeze()
    lag = LoopLag(
        2 * (config.timeout_s + config.connect_timeout_s + config.pool_timeout_s), observe=metrics.loop_lag.observe
    )
    await lag.start()
    given = setup.decision_log
    service = Service(
        config,
        setup.core,
        batcher,
        Upstreams(config, setup.secrets.upstream_keys, setup.transport, lag),
        given if isinstance(given, DecisionLog) else DecisionLog(given),
        metrics,
        setup.precision,
        _model_cards(setup.model, config),
        lag,
        setup.drain,
    )
    app.state.service = service
    try:
        yield
    finally:  # uvicorn's graceful shutdown (SIGTERM/SIGINT): in-flight requests have finished
        await lag.stop()
        await batcher.stop()
        await service.upstreams.aclose()
        service.decisions.close()


def _model_cards(model: P2LModel, config: ServeConfig) -> dict[str, ModelCard]:
    """What ``/v1/models`` lists: the router, then each candidate; "created" is when the service started."""
    created = int(time.time())
    cards = {config.router_name: ModelCard(id=config.router_name, created=created, owned_by="evalprism")}
    return cards | {
        name: ModelCard(id=name, created=created, owned_by="upstream", cost=up.cost)
        for name, up in config.models.items()
    }


def _publish_schema(app: FastAPI, auth: bool, cheapest: float) -> None:
    """What the OpenAPI schema cannot learn from the routes: the bearer scheme (the auth is middleware,
    which FastAPI cannot see) and the config's lowest admissible budget (the cheapest candidate's cost)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            components = schema.setdefault("components", {})
            components["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "one of the keys in api_keys_env"}
            }
            if auth:
                for path, operations in schema["paths"].items():
                    if path != "/health":
                        for operation in operations.values():
                            operation["security"] = [{"bearer": []}]
            for name in ("RouteRequest", "ChatCompletionRequest"):
                budget = components["schemas"][name]["properties"]["budget"]
                number = next(branch for branch in budget["anyOf"] if branch.get("type") == "number")
                number["minimum"] = cheapest
                budget["description"] = (
                    f"cost bound for this prompt, at least the cheapest candidate's cost ({cheapest:g})"
                )
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


@router.get("/health", response_model=Health)
async def health(s: ServiceDep) -> Health:
    """Liveness, each upstream's circuit and the decision log: ``status`` is ``degraded`` while some
    circuit is open or the decision log cannot be written (``reasons`` say which), ``unavailable``
    while every circuit is open or the service shuts down (the service itself answers either way). While the log fails, each
    call tries again to write the decisions kept meanwhile."""
    upstreams = {name: UpstreamHealth(**vars(state)) for name, state in s.upstreams.health.report().items()}
    opened = [name for name, u in upstreams.items() if u.state == "open"]
    writable = s.decisions.retry()
    reasons = [f"upstream {name}: circuit open ({upstreams[name].last_error})" for name in opened]
    if s.drain.since is not None:
        reasons.append("the service is shutting down: new requests are refused (503)")
    if not writable:
        reasons.append(
            f"the decision log {s.decisions.path} cannot be written ({s.decisions.error}): routing and chat answer 503"
        )
    every_circuit_open = bool(opened) and len(opened) == len(upstreams)
    status: HealthStatus = (
        "unavailable" if every_circuit_open or s.drain.since is not None else "degraded" if reasons else "ok"
    )
    log_health = DecisionLogHealth(
        path=str(s.decisions.path),
        writable=writable,
        error=s.decisions.error,
        unwritten=s.decisions.unwritten,
        dropped=s.decisions.dropped,
    )
    return Health(
        status=status,
        reasons=reasons,
        models=len(s.core.candidates),
        precision=s.precision,
        runtime=s.core.model.backbone.runtime,
        batches=s.batcher.stats.batches,
        prompts=s.batcher.stats.items,
        decisions=s.decisions.count,
        decision_log=log_health,
        event_loop=EventLoopHealth(
            lag_ms=round(s.loop_lag.recent() * 1e3, 1),
            starved_attempts=sum(u.starved_attempts for u in upstreams.values()),
        ),
        upstreams=upstreams,
    )


@router.get("/metrics", include_in_schema=False)
async def metrics(s: ServiceDep) -> Response:
    return Response(s.metrics.render(), media_type=CONTENT_TYPE)


@router.get("/v1/models", response_model=ModelList, responses=_responses(401))
async def models(s: ServiceDep) -> ModelList:
    return ModelList(data=list(s.cards.values()))


@router.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=_responses(401, 404))
async def retrieve_model(model_id: str, s: ServiceDep) -> ModelCard:
    if model_id not in s.cards:
        raise RequestError(
            404, f"model {model_id!r} is not served here: {', '.join(s.cards)}", "model", "model_not_found"
        )
    return s.cards[model_id]


@router.post("/v1/leaderboard", response_model=LeaderboardResponse, responses=_responses(*_COMMON))
async def leaderboard(req: LeaderboardRequest, s: ServiceDep) -> LeaderboardResponse:
    """Per-prompt coefficients, and the aggregate leaderboard of a list."""
    if (req.prompt is None) == (req.messages is None):
        raise RequestError(422, "give exactly one of 'prompt' and 'messages'")
    prompts, many = _leaderboard_prompts(s, req)
    decisions = await asyncio.gather(*(s.batcher.submit(Job(p, route=False)) for p in prompts))
    coefs = np.stack([d.coefs for d in decisions])
    aggregate = await asyncio.to_thread(aggregate_leaderboards, coefs, None, req.aggregate) if many else None
    order = np.argsort(-(aggregate if aggregate is not None else coefs[0]), kind="stable")
    model = s.core.model
    return LeaderboardResponse(
        models=model.models,
        outcome_model=model.outcome_model,
        ranking=[model.models[i] for i in order],
        leaderboards=[
            PromptLeaderboard(prompt_sha256=prompt_hash(p), coefs=d.coefs.tolist(), extra=d.extra)
            for p, d in zip(prompts, decisions, strict=True)
        ],
        aggregate=None if aggregate is None else aggregate.tolist(),
    )


@router.post("/v1/route", response_model=RouteResponse, responses=_responses(*_COMMON, 503))
async def route_endpoint(req: RouteRequest, request: Request, s: ServiceDep) -> Response:
    """The routing decision for a conversation, logged."""
    start = time.perf_counter()
    prompt = s.prompt_of(req.messages)
    budget = s.budget_of(req.budget)
    s.admit(request, "/v1/route", prompt)
    decision = await s.batcher.submit(Job(prompt, budget))
    digest = prompt_hash(prompt)
    s.metrics.decisions.labels(decision.chosen).inc()
    s.decisions.write(
        DecisionLine(
            endpoint="/v1/route",
            request_id=request.state.request_id,
            **retry_field(request.state.client_retry),
            prompt_sha256=digest,
            chosen=decision.chosen,
            **s.decision_fields(decision, budget),
            latency_ms=elapsed_ms(start),
        )
    )
    # a routed job's decision carries every routing field (serve.router.RoutingCore.decide)
    assert decision.chosen is not None and decision.probs is not None and decision.expected_winrate is not None
    assert decision.router_coef is not None and decision.expected_cost is not None
    # built without validation: every value is this service's own, of the declared type (plain floats
    # and strings from RoutingCore.decide); a validated RouteResponse cost a tenth of a static request
    body = RouteResponse.model_construct(
        model=decision.chosen,
        distribution=decision.probs,
        expected_winrate=decision.expected_winrate,
        router_coef=decision.router_coef,
        expected_cost=decision.expected_cost,
        budget=budget,
        coefs=dict(zip(s.core.candidates, decision.coefs[s.core.columns].tolist(), strict=True)),
        prompt_sha256=digest,
    )
    # the hot path: serialise the model once ourselves instead of FastAPI's re-validation + jsonable_encoder
    return Response(body.model_dump_json(), media_type="application/json")


_CHAT_RESPONSES = {
    200: {
        "description": "the upstream's chat completion (or its server-sent events with `stream`), "
        "with the routing decision in `evalprism`",
        "content": {
            "application/json": {"schema": {"type": "object"}},
            # the schema of one server-sent event, as schemathesis reads it
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {
                        "data": {
                            "type": "string",
                            "description": "a chat.completion.chunk as JSON (the first with `evalprism`), or [DONE]",
                        },
                        "event": {"type": "string"},
                        "id": {"type": "string"},
                        "retry": {"type": "integer"},
                    },
                }
            },
        },
    },
    **_responses(*_COMMON, 404, 429, 502, 503),
}


@router.post("/v1/chat/completions", response_model=None, responses=_CHAT_RESPONSES)
async def chat(req: ChatCompletionRequest, request: Request, s: ServiceDep) -> Response:
    """Route (or take the named candidate), forward with failover, return the upstream's answer
    with the decision; streaming and not. Every way it ends writes the request's decision-log line."""
    start = time.perf_counter()
    prompt = s.prompt_of(req.messages)
    s.admit(request, "/v1/chat/completions", prompt, stream=req.stream)
    order, decided = await _chat_decision(s, req, prompt)
    call = ChatCall(
        request.state.request_id,
        req.stream,
        start,
        {**decided, "routing_ms": elapsed_ms(start)},
        client_retry=request.state.client_retry,
    )
    try:  # a client that leaves while the upstream is answering is noticed at once, not after the answer
        outcome = await until_client_leaves(
            request.receive,
            s.upstreams.complete(order, req.upstream_body(), stream=req.stream, attempts=call.attempts),
            lambda abandoned: _abandon(s, abandoned),
        )
    except ClientLeft:
        return _client_left(s, call)
    s.metrics.observe_attempts(outcome.attempts)
    call.model = outcome.model
    headers = {"x-evalprism-model": outcome.model or ""}
    if outcome.stream is not None:
        return _relay(s, outcome, call, headers)
    if outcome.body is None:
        return _failed(s, outcome, call)
    return _answered(s, outcome, call, headers)


@dataclass
class ChatCall:
    """One chat request from its routing decision to its answer, and what the response's ``evalprism``
    field and the request's decision-log line say of it: ``decided``: the decision (routed, decided,
    the routing fields when routed, prompt_sha256, routing_ms); ``attempts``: every upstream attempt, as
    made (:meth:`Upstreams.complete` appends them); ``model``: the upstream that answered; ``client_retry``:
    the SDK's retry number when the call is a retry (:mod:`~evalprism.serve.retries`)."""

    request_id: str
    stream: bool
    start: float
    decided: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)
    model: str | None = None
    client_retry: int | None = None

    def annotation(self) -> dict[str, Any]:
        """The response's ``evalprism`` field: the decision, the upstream that answered and every attempt."""
        return {**self.decided, "model": self.model, "attempts": [a.record() for a in self.attempts]}

    def line(self, status: int, outcome: ChatOutcome, **ending: Any) -> DecisionLine:
        """The request's decision-log line: how it ended (``status``, ``outcome`` and the ``ending`` fields
        that apply: realised_cost, a stream's bytes_relayed and stream_error), its latency until now."""
        return DecisionLine(
            endpoint="/v1/chat/completions",
            request_id=self.request_id,
            **retry_field(self.client_retry),
            stream=self.stream,
            **self.decided,
            model=self.model,
            attempts=[AttemptRecord.model_validate(a.record()) for a in self.attempts],
            status=status,
            outcome=outcome,
            **ending,
            latency_ms=elapsed_ms(self.start),
        )


async def _chat_decision(s: Service, req: ChatCompletionRequest, prompt: str) -> tuple[list[str], dict[str, Any]]:
    """The candidates to try, in turn, and the decision as the response and the log give it: routed
    (the request names the router, or no model): the model P2L drew, then the fallbacks; a candidate
    named by the client: that one alone, no routing and no substitute; any other name: 404."""
    config = s.config
    if req.model in (None, config.router_name):
        budget = s.budget_of(req.budget)
        decision = await s.batcher.submit(Job(prompt, budget))
        assert decision.chosen is not None  # a routed job's decision names its model
        s.metrics.decisions.labels(decision.chosen).inc()
        decided = {"routed": True, "decided": decision.chosen, **s.decision_fields(decision, budget)}
        return [decision.chosen, *decision.fallbacks], decided | {"prompt_sha256": prompt_hash(prompt)}
    if req.model in config.models:
        return [req.model], {"routed": False, "decided": req.model, "prompt_sha256": prompt_hash(prompt)}
    raise RequestError(
        404,
        f"model {req.model!r} is not served here: use {config.router_name!r} (routed) "
        f"or one of {', '.join(config.models)}",
        "model",
        "model_not_found",
    )


def _answered(s: Service, outcome: Outcome, call: ChatCall, headers: dict[str, str]) -> JSONResponse:
    """An upstream answered (not streamed): its body and status, with the decision in ``evalprism``
    and the realised cost where the config gives prices; logged as completed, or upstream_refused
    for a 4xx passed back."""
    assert outcome.body is not None
    annotation = call.annotation()
    cost = _realised_cost(s, outcome.model, outcome.body.get("usage"))
    if cost is not None:
        annotation["realised_cost"] = cost
    ended: ChatOutcome = "completed" if outcome.status < 400 else "upstream_refused"
    s.decisions.write(call.line(outcome.status, ended, realised_cost=cost))
    return JSONResponse({**outcome.body, "evalprism": annotation}, status_code=outcome.status, headers=headers)


async def _abandon(s: Service, outcome: Outcome) -> None:
    """An upstream answer that arrived as the client left: close its stream, free its circuit ticket."""
    if outcome.stream is not None:
        await outcome.stream.aclose()
        s.upstreams.stream_ended(outcome, Relayed())


#: the status logged for a client that left before its response started (nginx's "client closed request")
CLIENT_LEFT_STATUS = 499


def _client_left(s: Service, call: ChatCall) -> Response:
    """The client disconnected while the upstream was answering: the attempt was abandoned (no count
    against the upstream), and the log says so; the response goes nowhere."""
    s.metrics.observe_attempts(call.attempts)
    call.model = call.attempts[-1].model if call.attempts else None
    with contextlib.suppress(DecisionLogUnwritable):  # kept for later; nobody is there to answer 503 to
        s.decisions.write(call.line(CLIENT_LEFT_STATUS, "client_left"))
    return Response(status_code=CLIENT_LEFT_STATUS)


def _realised_cost(s: Service, model: str | None, usage: Any) -> float | None:
    cost = None if model is None else realised_cost(s.config.models[model], usage)
    if cost is not None:
        s.metrics.cost.labels(model).inc(cost)
    return cost


#: the decision log's outcome of a chat no upstream answered, by the status it got (else upstream_failed)
_NO_ANSWER: dict[int, ChatOutcome] = {429: "rate_limited", 503: "unavailable"}


def _failed(s: Service, outcome: Outcome, call: ChatCall) -> JSONResponse:
    """No upstream answered: 429 with ``Retry-After`` when every attempt was rate-limited, 503 when
    none could be made now (every connection busy or the router starved, or every circuit open with its
    trial in flight), else 502 with ``x-should-retry: false`` (the router's own failover is exhausted: an
    SDK's retry would repeat it, :mod:`~evalprism.serve.retries`); the attempts are in the body's
    ``evalprism``, as in a successful answer, and the message names each upstream and why it failed."""
    failures = "; ".join(a.error or "" for a in outcome.attempts)
    annotation = call.annotation()
    s.decisions.write(call.line(outcome.status, _NO_ANSWER.get(outcome.status, "upstream_failed")))
    if outcome.status == 429:
        headers = {} if outcome.retry_after is None else {"retry-after": str(math.ceil(outcome.retry_after))}
        return _error(
            429,
            f"every upstream attempt was rate-limited: {failures}",
            "rate_limit_error",
            code="rate_limit_exceeded",
            headers=headers,
            evalprism=annotation,
        )
    if outcome.status == 503:
        return _error(
            503,
            f"no upstream can take the request now, none failed: {failures}",
            "server_error",
            code="upstream_unavailable",
            headers={"retry-after": "1"},
            evalprism=annotation,
        )
    return _error(
        502,
        f"every upstream attempt failed: {failures}",
        "upstream_error",
        code="upstream_error",
        headers=NO_RETRY,
        evalprism=annotation,
    )


def _relay(s: Service, outcome: Outcome, call: ChatCall, headers: dict[str, str]) -> RelayResponse:
    """Relay the upstream stream; when it ends, however it ends, the circuit hears how (completed is a
    success, broken a failure, a client that left neither) and the decision is logged with how it ended
    (completed, stream_broken, cut, or client_left before any byte) and the bytes written to the client."""
    assert outcome.stream is not None and outcome.model is not None
    model = outcome.model
    relayed = Relayed()

    def ended(written: int, left: bool) -> None:
        relayed.bytes = written
        end: ChatOutcome = relayed.end
        status = outcome.status
        if left and relayed.end == "cut" and written == 0:
            end, status = "client_left", CLIENT_LEFT_STATUS
        said = s.upstreams.stream_ended(outcome, relayed)
        if said == "failed":
            s.metrics.upstream_errors.labels(model).inc()
        elif said == "starved":
            s.metrics.starved.labels(model).inc()
        line = call.line(
            status,
            end,
            bytes_relayed=written,
            stream_error=relayed.error,
            realised_cost=realised_cost(s.config.models[model], relayed.usage),
        )
        with contextlib.suppress(DecisionLogUnwritable):  # the stream has gone out; the line is kept for later
            s.decisions.write(line, answered=True)

    events = relay_events(outcome.stream, call.annotation(), relayed, lambda usage: _realised_cost(s, model, usage))
    return RelayResponse(events, ended, headers=headers)


def _leaderboard_prompts(s: Service, req: LeaderboardRequest) -> tuple[list[str], bool]:
    """The request's prompt texts, and whether it asked for a list (then it gets an aggregate)."""
    if req.prompt is not None:
        param, many = "prompt", isinstance(req.prompt, list)
        texts = [p.strip() for p in (req.prompt if many else [req.prompt])]  # type: ignore[union-attr]
    else:
        assert req.messages is not None
        param, many = "messages", not req.messages or isinstance(req.messages[0], list)
        conversations = req.messages if many else [req.messages]
        texts = [routing_prompt(c) for c in conversations]  # type: ignore[arg-type]
    if not texts:
        raise RequestError(422, f"'{param}' is an empty list", param)
    if len(texts) > MAX_PROMPTS_PER_REQUEST:
        raise RequestError(413, f"{len(texts)} prompts in one request, more than {MAX_PROMPTS_PER_REQUEST}", param)
    for i, text in enumerate(texts):
        where = param if len(texts) == 1 else f"{param}[{i}]"
        if not text:
            raise RequestError(422, f"{where}: no text to score", where)
        if len(text) > s.config.max_prompt_chars:
            raise RequestError(
                413, f"{where}: {len(text)} characters, more than the limit of {s.config.max_prompt_chars}", where
            )
    return texts, many


def _branch_label(part: object) -> bool:
    """Whether a pydantic error location part names a union branch (``str``, ``list[...]``), not a field."""
    return isinstance(part, str) and (part in ("str", "int", "float", "bool") or "[" in part)


def _install_error_handlers(app: FastAPI) -> None:
    """Every error is an OpenAI-style ``{"error": {...}}`` with a 4xx, never a bare 500."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        if "json" not in (content_type or "").lower():  # FastAPI parses JSON only when the header says so
            got = f"'{content_type}'" if content_type else "no Content-Type"
            return _error(415, f"send the body as JSON with 'Content-Type: application/json' (got {got})")
        errors = exc.errors()
        first: dict[str, Any] = dict(errors[0]) if errors else {"loc": (), "msg": "invalid request", "type": ""}
        if first.get("type") in ERROR_STATUS:  # the body checks of schemas.py: their message names the place
            return _error(ERROR_STATUS[first["type"]], first["msg"], param=first.get("ctx", {}).get("param"))
        loc = ".".join(str(part) for part in first.get("loc", ()) if part != "body" and not _branch_label(part))
        if first.get("type") == "json_invalid":
            return _error(
                400, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'decode error')})"
            )
        message = f"{loc or 'body'}: {first.get('msg')}"
        if first.get("type") == "extra_forbidden":
            message = f"unknown field '{loc}'"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem(s))"
        return _error(422, message, param=loc or None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # keeps e.g. Allow on a 405
        return _error(
            exc.status_code,
            str(exc.detail),
            param=getattr(exc, "param", None),
            code=getattr(exc, "code", None),
            headers=exc.headers,
        )

    @app.exception_handler(DecisionLogUnwritable)
    async def unlogged(request: Request, exc: DecisionLogUnwritable) -> JSONResponse:
        return _error(
            503,
            f"{exc}; the service refuses to route until it can, as every decision is logged "
            "(GET /health shows the log's state)",
            "server_error",
            code="decision_log_unwritable",
        )

    @app.exception_handler(ShuttingDown)
    async def shutting_down(request: Request, exc: ShuttingDown) -> JSONResponse:
        return _error(503, str(exc), "server_error", code="shutting_down", headers=REFUSAL_HEADERS)

    @app.exception_handler(EvalprismError)
    async def refused(request: Request, exc: EvalprismError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return _error(500, "internal error (logged on the server)", "server_error")
