"""The router service: an OpenAI- and Anthropic-compatible front for a set of candidate models, routed by P2L.

Endpoints (all but ``/health`` behind bearer or ``x-api-key`` auth when keys are configured):

- ``GET /health`` (with each upstream's circuit); ``GET /v1/models``, ``GET /v1/models/{id}``;
- ``GET /metrics``: Prometheus metrics (:mod:`~evalprism.serve.metrics`);
- ``POST /v1/leaderboard``: per-prompt P2L coefficients, and the eq. (3) leaderboard of a list;
- ``POST /v1/route``: the routing decision for a conversation (Theorem 1, Algorithm 1);
- ``POST /v1/chat/completions``, ``POST /v1/responses``, ``POST /v1/messages`` (Chat Completions,
  OpenAI Responses, Anthropic Messages; one adapter each, :mod:`~evalprism.serve.apis`): the one path of
  :mod:`~evalprism.serve.forward` places the request (a conversation keeps its model, else P2L routes
  it on what the human wrote), forwards it to the chosen upstream (failover in value order,
  :mod:`~evalprism.serve.upstream`), and returns the upstream's answer with the candidate's name as
  ``model`` and the decision in the extra field ``evalprism``; streaming and not.

P2L inference runs micro-batched in a worker thread (:mod:`~evalprism.serve.batcher`); every
routing decision is one line of the decision log (:mod:`~evalprism.serve.decisions`); while that
log cannot be written, routing and chat answer 503 and ``/health`` is degraded, naming the reason.

The endpoints are on :data:`router` (an ``APIRouter``); each reaches the
:class:`~evalprism.serve.service.Service` of the app serving it (``app.state.service``, built at
start-up) through ``Depends``, so that several apps in one process (tests) share no circuits, metrics,
conversations or logs. Every error is in the shape of the API whose path it answers
(:mod:`~evalprism.serve.error_shapes`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import numpy as np
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from evalprism import __version__
from evalprism.errors import EvalprismError
from evalprism.p2l.aggregate import aggregate_leaderboards
from evalprism.p2l.model import P2LModel
from evalprism.serve.affinity import AffinityStore
from evalprism.serve.apis import APIS, Api
from evalprism.serve.apis.chat import chat_conversation
from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.config import Secrets, ServeConfig
from evalprism.serve.conversation import ApiName
from evalprism.serve.decisions import DecisionLine, DecisionLog, DecisionLogUnwritable, elapsed_ms, prompt_hash
from evalprism.serve.drain import REFUSAL_HEADERS, CloseWhileDraining, Drain, ShuttingDown
from evalprism.serve.error_shapes import error_body, shape_of
from evalprism.serve.extraction import Extraction
from evalprism.serve.forward import forward
from evalprism.serve.lean import LeanEndpoint, LeanRoutes
from evalprism.serve.loop_lag import LoopLag
from evalprism.serve.metrics import CONTENT_TYPE, Metrics
from evalprism.serve.observe import Observe
from evalprism.serve.retries import retry_field
from evalprism.serve.router import Decision, Job, RoutingCore
from evalprism.serve.schemas import (
    ERROR_STATUS,
    MAX_PROMPTS_PER_REQUEST,
    AnthropicErrorBody,
    ApiRequest,
    DecisionLogHealth,
    ErrorBody,
    EventLoopHealth,
    Health,
    HealthStatus,
    LeaderboardRequest,
    LeaderboardResponse,
    ModelCard,
    ModelList,
    PromptLeaderboard,
    RouteRequest,
    RouteResponse,
    UpstreamHealth,
)
from evalprism.serve.security import BearerAuth, BodyLimit
from evalprism.serve.service import RequestError, Service
from evalprism.serve.upstream import Upstreams

__all__ = ["RequestError", "Service", "create_app", "router"]

log = logging.getLogger("evalprism.serve")


def _error(
    request: Request,
    status: int,
    message: str,
    kind: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """An error answer in the shape the clients of the request's path read."""
    status, content = error_body(shape_of(request.url.path), status, message, kind, param, code)
    return JSONResponse(content, status_code=status, headers=headers)


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


def _responses(*statuses: int, body: type[BaseModel] = ErrorBody) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": body, "description": _STATUS_TEXT[status]} for status in statuses}


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
    _publish_schema(app, bool(secrets.api_keys), config)
    lean = {
        "/v1/route": LeanEndpoint(RouteRequest, route_endpoint),
        "/v1/chat/completions": LeanEndpoint(APIS["chat"].request, _ENDPOINTS["chat"]),
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
        AffinityStore(config.affinity.max_entries, config.affinity.ttl_s),
        Extraction(config.routing_prompt.drop_blocks, config.routing_prompt.drop_parts),
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


#: the request bodies whose ``budget`` the schema bounds, and the API whose candidates bound it (None: all)
_BUDGETED: dict[str, ApiName | None] = {"RouteRequest": None} | {
    api.request.__name__: name for name, api in APIS.items()
}


def _publish_schema(app: FastAPI, auth: bool, config: ServeConfig) -> None:
    """What the OpenAPI schema cannot learn from the routes: the bearer and ``x-api-key`` schemes (the
    auth is middleware, which FastAPI cannot see) and each body's lowest admissible budget (the cost of
    the cheapest candidate it can go to)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = FastAPI.openapi(app)
            components = schema.setdefault("components", {})
            components["securitySchemes"] = {
                "bearer": {"type": "http", "scheme": "bearer", "description": "one of the keys in api_keys_env"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "x-api-key", "description": "the same keys"},
            }
            if auth:
                for path, operations in schema["paths"].items():
                    if path != "/health":
                        for operation in operations.values():
                            operation["security"] = [{"bearer": []}, {"apiKey": []}]
            for name, api in _BUDGETED.items():
                names = list(config.models) if api is None else config.serving(api)
                cheapest = min((config.models[n].cost for n in names), default=0.0)
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
    prompt = s.check_length(s.prompt_of(s.extraction.read(chat_conversation(req.messages))))
    budget = s.budget_of(req.budget)
    s.admit(request, "/v1/route", lambda: prompt)
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


def _forwarded(api: Api) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI responses of a forwarding endpoint: what its API answers, one event of its stream, its
    errors in its API's shape (Anthropic's has no 422: its invalid requests are 400s)."""
    errors = (
        _responses(*_COMMON, 404, 429, 502, 503)
        if api.shape == "openai"
        else _responses(400, 401, 404, 413, 415, 429, 502, 503, body=AnthropicErrorBody)
    )
    return {
        200: {
            "description": f"the upstream's {api.answers} (or its server-sent events with `stream`), with the "
            "candidate's name as `model` and the routing decision in `evalprism`",
            "content": {
                "application/json": {"schema": {"type": "object"}},
                # the schema of one server-sent event, as schemathesis reads it
                "text/event-stream": {
                    "schema": {
                        "type": "object",
                        "required": ["data"],
                        "properties": {
                            "data": {"type": "string", "description": api.events},
                            "event": {"type": "string"},
                            "id": {"type": "string"},
                            "retry": {"type": "integer"},
                        },
                    }
                },
            },
        },
        **errors,
    }


def _forwarding(api: Api) -> Callable[..., Awaitable[Response]]:
    """The endpoint of one API: the body read as the API's request model, then the one forwarding path
    (:func:`~evalprism.serve.forward.forward`); its description is the adapter's docstring."""

    async def endpoint(req: ApiRequest, request: Request, s: ServiceDep) -> Response:
        return await forward(s, api, req, request)

    # FastAPI reads the body's model from the annotation: each API's own request model
    endpoint.__annotations__ = {**endpoint.__annotations__, "req": api.request}
    endpoint.__name__ = endpoint.__qualname__ = api.name
    endpoint.__doc__ = type(api).__doc__
    return endpoint


#: chat, responses, messages: one endpoint each, from the registry (the lean path calls chat's too)
_ENDPOINTS: dict[ApiName, Callable[..., Awaitable[Response]]] = {name: _forwarding(api) for name, api in APIS.items()}
for _name, _api in APIS.items():
    router.add_api_route(
        _api.path, _ENDPOINTS[_name], methods=["POST"], response_model=None, responses=_forwarded(_api)
    )


def _leaderboard_prompts(s: Service, req: LeaderboardRequest) -> tuple[list[str], bool]:
    """The request's prompt texts, and whether it asked for a list (then it gets an aggregate)."""
    if req.prompt is not None:
        param, many = "prompt", isinstance(req.prompt, list)
        texts = [p.strip() for p in (req.prompt if many else [req.prompt])]  # type: ignore[union-attr]
    else:
        assert req.messages is not None
        param, many = "messages", not req.messages or isinstance(req.messages[0], list)
        conversations = req.messages if many else [req.messages]
        texts = [s.extraction.read(chat_conversation(c)).prompt for c in conversations]  # type: ignore[arg-type]
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
    """Every error is in its path's API shape (:mod:`~evalprism.serve.error_shapes`), never a bare 500."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        if "json" not in (content_type or "").lower():  # FastAPI parses JSON only when the header says so
            got = f"'{content_type}'" if content_type else "no Content-Type"
            return _error(request, 415, f"send the body as JSON with 'Content-Type: application/json' (got {got})")
        errors = exc.errors()
        first: dict[str, Any] = dict(errors[0]) if errors else {"loc": (), "msg": "invalid request", "type": ""}
        if first.get("type") in ERROR_STATUS:  # the body checks of schemas.py: their message names the place
            return _error(request, ERROR_STATUS[first["type"]], first["msg"], param=first.get("ctx", {}).get("param"))
        loc = ".".join(str(part) for part in first.get("loc", ()) if part != "body" and not _branch_label(part))
        if first.get("type") == "json_invalid":
            return _error(
                request,
                400,
                f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'decode error')})",
            )
        message = f"{loc or 'body'}: {first.get('msg')}"
        if first.get("type") == "extra_forbidden":
            message = f"unknown field '{loc}'"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem(s))"
        return _error(request, 422, message, param=loc or None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:  # keeps e.g. Allow on a 405
        return _error(
            request,
            exc.status_code,
            str(exc.detail),
            param=getattr(exc, "param", None),
            code=getattr(exc, "code", None),
            headers=exc.headers,
        )

    @app.exception_handler(DecisionLogUnwritable)
    async def unlogged(request: Request, exc: DecisionLogUnwritable) -> JSONResponse:
        return _error(
            request,
            503,
            f"{exc}; the service refuses to route until it can, as every decision is logged "
            "(GET /health shows the log's state)",
            "server_error",
            code="decision_log_unwritable",
        )

    @app.exception_handler(ShuttingDown)
    async def shutting_down(request: Request, exc: ShuttingDown) -> JSONResponse:
        return _error(request, 503, str(exc), "server_error", code="shutting_down", headers=REFUSAL_HEADERS)

    @app.exception_handler(EvalprismError)
    async def refused(request: Request, exc: EvalprismError) -> JSONResponse:
        return _error(request, 422, str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return _error(request, 500, "internal error (logged on the server)", "server_error")
