"""The router service: an OpenAI-compatible front for a set of candidate models, routed by P2L.

Endpoints (all but ``/health`` behind bearer auth when keys are configured):

- ``GET /health``; ``GET /v1/models`` (the router and the candidates);
- ``POST /v1/leaderboard``: per-prompt P2L coefficients, and the eq. (3) leaderboard of a list;
- ``POST /v1/route``: the routing decision for a conversation (Theorem 1, Algorithm 1);
- ``POST /v1/chat/completions``: routes, forwards to the chosen upstream (one failover), returns
  the upstream's answer with the decision in the extra field ``evalprism``; streaming and not.

P2L inference runs micro-batched in a worker thread (:mod:`~evalprism.serve.batcher`); every
routing decision is one line of the decision log (:mod:`~evalprism.serve.decisions`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from evalprism import __version__
from evalprism.errors import EvalprismError
from evalprism.p2l.aggregate import aggregate_leaderboards
from evalprism.p2l.model import P2LModel
from evalprism.p2l.routing import check_budget
from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.config import Secrets, ServeConfig
from evalprism.serve.decisions import DecisionLog, elapsed_ms, prompt_hash
from evalprism.serve.router import Decision, Job, RoutingCore
from evalprism.serve.schemas import (
    ChatCompletionRequest,
    Health,
    LeaderboardRequest,
    LeaderboardResponse,
    Messages,
    ModelCard,
    ModelList,
    PromptLeaderboard,
    RouteRequest,
    RouteResponse,
    routing_prompt,
)
from evalprism.serve.security import BearerAuth, BodyLimit
from evalprism.serve.upstream import Outcome, Upstreams, relay_events

log = logging.getLogger("evalprism.serve")
MAX_PROMPTS_PER_REQUEST = 1024


class RequestError(HTTPException):
    """A 4xx with a message for the client."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(status_code=status, detail=message)
        self.param = param


def _error(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": param, "code": status}},
                        status_code=status)


@dataclass
class Service:
    """Everything a request handler needs, built at startup."""

    config: ServeConfig
    core: RoutingCore
    batcher: MicroBatcher[Job, Decision]
    upstreams: Upstreams
    decisions: DecisionLog

    def prompt_of(self, messages: Messages, param: str = "messages") -> str:
        """The routing prompt of a conversation; 4xx when it has no user text or is too long."""
        prompt = routing_prompt(messages)
        if not prompt:
            raise RequestError(422, "no user message with text to route on", param)
        if len(prompt) > self.config.max_prompt_chars:
            raise RequestError(413, f"the user turns are {len(prompt)} characters, more than the limit of "
                                    f"{self.config.max_prompt_chars}", param)
        return prompt

    def budget_of(self, requested: float | None) -> float | None:
        """The request's budget (else the config's), checked before the batch it would fail."""
        budget = self.config.budget if requested is None else requested
        try:
            check_budget(budget, self.core.costs, self.core.candidates)
        except EvalprismError as exc:
            raise RequestError(422, str(exc), "budget") from None
        return budget

    def decision_fields(self, decision: Decision, budget: float | None) -> dict[str, Any]:
        return {"distribution": decision.probs, "budget": budget, "expected_winrate": decision.expected_winrate,
                "router_coef": decision.router_coef, "expected_cost": decision.expected_cost}


#: how a handler reaches the Service, which exists only once the app has started (see :func:`_lifespan`)
ServiceOf = Callable[[], Service]


def create_app(model: P2LModel, config: ServeConfig, secrets: Secrets, *, decision_log: str | Path,
               precision: str = "float32", transport: httpx.AsyncBaseTransport | None = None) -> FastAPI:
    """The service as an ASGI app (run it with uvicorn; :func:`evalprism.serve.run.serve` does).
    ``precision`` is what ``model`` was loaded with (reported by /health, with the backbone's runtime)."""
    core = RoutingCore(model, config)
    state: dict[str, Service] = {}
    app = FastAPI(title="evalprism P2L router", version=__version__,
                  lifespan=_lifespan(core, config, secrets, decision_log, transport, state),
                  description="Routes each prompt to the candidate model P2L ranks best for it under a cost budget "
                              "(Frick et al., Prompt-to-Leaderboard, Theorem 1 and Algorithm 1).")
    _install_error_handlers(app)

    def service() -> Service:
        return state["service"]

    _add_status_routes(app, service, core, model, config, precision)
    _add_leaderboard_route(app, service, model)
    _add_route_route(app, service, core)
    _add_chat_route(app, service, config)
    app.add_middleware(BearerAuth, keys=secrets.api_keys)
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)  # outermost: before auth reads anything
    return app


def _lifespan(core: RoutingCore, config: ServeConfig, secrets: Secrets, decision_log: str | Path,
              transport: httpx.AsyncBaseTransport | None,
              state: dict[str, Service]) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Start-up and shutdown: the micro-batcher (warmed up), the upstream clients and the decision
    log make the :class:`Service` in ``state``; shutdown stops and closes them."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher: MicroBatcher[Job, Decision] = MicroBatcher(
            core, window_s=config.batch_window_ms / 1e3, max_batch=config.max_batch)
        await batcher.start()
        await batcher.submit(Job("warm-up", route=False))  # first-call costs (allocations, JIT) before traffic
        batcher.stats.batches = batcher.stats.items = 0
        # The heap now holds millions of long-lived objects (torch, transformers, the encoder); a full
        # collection under load would walk them all (a 340 ms pause every ~2,000 requests, measured).
        # Freezing moves them out of the collector's reach; what requests allocate is still collected.
        gc.collect()
        gc.freeze()
        service = Service(config, core, batcher, Upstreams(config, secrets.upstream_keys, transport),
                          DecisionLog(decision_log))
        state["service"] = service
        try:
            yield
        finally:  # uvicorn's graceful shutdown (SIGTERM/SIGINT): in-flight requests have finished
            await batcher.stop()
            await service.upstreams.aclose()
            service.decisions.close()

    return lifespan


def _add_status_routes(app: FastAPI, service: ServiceOf, core: RoutingCore, model: P2LModel, config: ServeConfig,
                       precision: str) -> None:
    """``GET /health`` and ``GET /v1/models``."""

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        s = service()
        return Health(models=len(core.candidates), precision=precision, runtime=model.backbone.runtime,
                      batches=s.batcher.stats.batches, prompts=s.batcher.stats.items, decisions=s.decisions.count)

    @app.get("/v1/models", response_model=ModelList)
    async def models() -> ModelList:
        cards = [ModelCard(id=config.router_name, owned_by="evalprism")]
        cards += [ModelCard(id=name, owned_by="upstream", cost=up.cost) for name, up in config.models.items()]
        return ModelList(data=cards)


def _add_leaderboard_route(app: FastAPI, service: ServiceOf, model: P2LModel) -> None:
    """``POST /v1/leaderboard``: per-prompt coefficients, and the aggregate leaderboard of a list."""

    @app.post("/v1/leaderboard", response_model=LeaderboardResponse)
    async def leaderboard(req: LeaderboardRequest) -> LeaderboardResponse:
        s = service()
        if (req.prompt is None) == (req.messages is None):
            raise RequestError(422, "give exactly one of 'prompt' and 'messages'")
        prompts, many = _leaderboard_prompts(s, req)
        decisions = await asyncio.gather(*(s.batcher.submit(Job(p, route=False)) for p in prompts))
        coefs = np.stack([d.coefs for d in decisions])
        aggregate = await asyncio.to_thread(aggregate_leaderboards, coefs, None, req.aggregate) if many else None
        order = np.argsort(-(aggregate if aggregate is not None else coefs[0]), kind="stable")
        return LeaderboardResponse(
            models=model.models, loss=model.loss, ranking=[model.models[i] for i in order],
            leaderboards=[PromptLeaderboard(prompt_sha256=prompt_hash(p), coefs=d.coefs.tolist(), extra=d.extra)
                          for p, d in zip(prompts, decisions, strict=True)],
            aggregate=None if aggregate is None else aggregate.tolist())


def _add_route_route(app: FastAPI, service: ServiceOf, core: RoutingCore) -> None:
    """``POST /v1/route``: the routing decision for a conversation, logged."""

    @app.post("/v1/route", response_model=RouteResponse)
    async def route_endpoint(req: RouteRequest) -> Response:
        start = time.perf_counter()
        s = service()
        prompt = s.prompt_of(req.messages)
        budget = s.budget_of(req.budget)
        decision = await s.batcher.submit(Job(prompt, budget))
        digest = prompt_hash(prompt)
        s.decisions.write({"endpoint": "/v1/route", "prompt_sha256": digest, "chosen": decision.chosen,
                           **s.decision_fields(decision, budget), "latency_ms": elapsed_ms(start)})
        body = RouteResponse(
            model=decision.chosen, distribution=decision.probs, expected_winrate=decision.expected_winrate,
            router_coef=decision.router_coef, expected_cost=decision.expected_cost, budget=budget,
            coefs={name: float(decision.coefs[j]) for name, j in zip(core.candidates, core.columns, strict=True)},
            prompt_sha256=digest)
        # the hot path: serialise the model once ourselves instead of FastAPI's re-validation + jsonable_encoder
        return Response(body.model_dump_json(), media_type="application/json")


def _add_chat_route(app: FastAPI, service: ServiceOf, config: ServeConfig) -> None:
    """``POST /v1/chat/completions``: route (or take the named candidate), forward with one failover,
    return the upstream's answer with the decision; streaming and not."""

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatCompletionRequest) -> JSONResponse | StreamingResponse:
        start = time.perf_counter()
        s = service()
        prompt = s.prompt_of(req.messages)
        record: dict[str, Any] = {"endpoint": "/v1/chat/completions", "prompt_sha256": prompt_hash(prompt),
                                  "stream": req.stream}
        if req.model in (None, config.router_name):
            budget = s.budget_of(req.budget)
            decision = await s.batcher.submit(Job(prompt, budget))
            order = [decision.chosen, *decision.fallbacks]
            annotation = {"routed": True, "decided": decision.chosen, **s.decision_fields(decision, budget)}
        elif req.model in config.models:  # the client named a candidate: no routing, and no substitute
            order = [req.model]
            annotation = {"routed": False, "decided": req.model}
        else:
            raise RequestError(404, f"model {req.model!r} is not served here: use {config.router_name!r} (routed) "
                                    f"or one of {', '.join(config.models)}", "model")
        annotation["prompt_sha256"] = record["prompt_sha256"]
        annotation["routing_ms"] = elapsed_ms(start)
        outcome = await s.upstreams.complete(order, req.upstream_body(), stream=req.stream)
        annotation["model"] = outcome.model
        annotation["attempts"] = [vars(a) for a in outcome.attempts]
        record.update(annotation)
        headers = {"x-evalprism-model": outcome.model or ""}
        if outcome.stream is not None:
            return StreamingResponse(_logged_stream(s, outcome, annotation, record, start),
                                     media_type="text/event-stream", headers=headers)
        record.update({"status": outcome.status, "latency_ms": elapsed_ms(start)})
        s.decisions.write(record)
        if outcome.body is None:
            failures = "; ".join(a.error or "" for a in outcome.attempts)
            return _error(502, f"every upstream attempt failed: {failures}", "upstream_error")
        return JSONResponse({**outcome.body, "evalprism": annotation}, status_code=outcome.status, headers=headers)


async def _logged_stream(s: Service, outcome: Outcome, annotation: dict[str, Any], record: dict[str, Any],
                         start: float) -> AsyncIterator[bytes]:
    """Relay the upstream stream; the decision is logged when it ends, however it ends."""
    assert outcome.stream is not None
    try:
        async for chunk in relay_events(outcome.stream, annotation):
            yield chunk
    finally:
        s.decisions.write({**record, "status": outcome.status, "latency_ms": elapsed_ms(start)})


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
            raise RequestError(413, f"{where}: {len(text)} characters, more than the limit of "
                                    f"{s.config.max_prompt_chars}", where)
    return texts, many


def _install_error_handlers(app: FastAPI) -> None:
    """Every error is an OpenAI-style ``{"error": {...}}`` with a 4xx, never a bare 500."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        content_type = request.headers.get("content-type")
        if "json" not in (content_type or "").lower():  # FastAPI parses JSON only when the header says so
            got = f"'{content_type}'" if content_type else "no Content-Type"
            return _error(415, f"send the body as JSON with 'Content-Type: application/json' (got {got})")
        errors = exc.errors()
        first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": ""}
        loc = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
        if first.get("type") == "json_invalid":
            return _error(400, f"the request body is not valid JSON ({first.get('ctx', {}).get('error', 'decode error')})")
        message = f"{loc or 'body'}: {first.get('msg')}"
        if first.get("type") == "extra_forbidden":
            message = f"unknown field '{loc}'"
        if len(errors) > 1:
            message += f" (and {len(errors) - 1} more problem(s))"
        return _error(422, message, param=loc or None)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail), param=getattr(exc, "param", None))

    @app.exception_handler(EvalprismError)
    async def refused(request: Request, exc: EvalprismError) -> JSONResponse:
        return _error(422, str(exc))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return _error(500, "internal error (logged on the server)", "server_error")
