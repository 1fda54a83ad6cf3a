"""The one path of every forwarded request, whatever its API: read, place, forward with failover, answer.

:func:`forward` reads the request through its API's adapter (:mod:`evalprism.serve.apis`) into the
normalized conversation, extracts what the human wrote (:mod:`~evalprism.serve.extraction`), places it
(:mod:`~evalprism.serve.placement`: named, pinned, kept or routed), calls the upstreams in that order
(:class:`~evalprism.serve.upstream.Upstreams`, the API's path and key header), and answers with the
upstream's answer: ``model`` is the candidate's name (the upstream's own id in
``evalprism.upstream_model``), the decision in the extra field ``evalprism``. Every way a request ends
writes its decision-log line, and an answered conversation is remembered under its keys, on the model
that answered (:mod:`~evalprism.serve.affinity`).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from fastapi.responses import JSONResponse
from starlette.requests import Request
from starlette.responses import Response

from evalprism.serve.affinity import response_key
from evalprism.serve.apis import Api
from evalprism.serve.apis.base import Answered, relay_events
from evalprism.serve.config import realised_cost
from evalprism.serve.decisions import (
    AttemptRecord,
    ChatOutcome,
    DecisionLine,
    DecisionLogUnwritable,
    Endpoint,
    elapsed_ms,
)
from evalprism.serve.error_shapes import error_body
from evalprism.serve.placement import Placement, place
from evalprism.serve.retries import NO_RETRY, retry_field
from evalprism.serve.schemas import ApiRequest
from evalprism.serve.service import Service
from evalprism.serve.streaming import ClientLeft, RelayResponse, until_client_leaves
from evalprism.serve.upstream import Attempt, Outcome, Relayed

#: the status logged for a client that left before its response started (nginx's "client closed request")
CLIENT_LEFT_STATUS = 499


@dataclass
class Call:
    """One forwarded request from its placement to its answer, and what the response's ``evalprism``
    field and the request's decision-log line say of it: ``decided``: the decision (routed, decided,
    affinity, the routing fields when routed, prompt_sha256, routing_ms); ``attempts``: every upstream
    attempt, as made (:meth:`Upstreams.complete` appends them); ``model``: the upstream that answered;
    ``client_retry``: the SDK's retry number when the call is a retry (:mod:`~evalprism.serve.retries`)."""

    api: Api
    request_id: str
    stream: bool
    start: float
    placement: Placement
    decided: dict[str, Any]
    attempts: list[Attempt] = field(default_factory=list)
    model: str | None = None
    client_retry: int | None = None

    def annotation(self, answered: Answered | None = None) -> dict[str, Any]:
        """The response's ``evalprism`` field: the decision, the candidate that answered (and the
        upstream's own id for it, once read) and every attempt."""
        upstream = {} if answered is None else {"upstream_model": answered.upstream_model}
        return {**self.decided, "model": self.model, **upstream, "attempts": [a.record() for a in self.attempts]}

    def line(self, status: int, outcome: ChatOutcome, **ending: Any) -> DecisionLine:
        """The request's decision-log line: how it ended (``status``, ``outcome`` and the ``ending`` fields
        that apply: realised_cost, a stream's bytes_relayed and stream_error), its latency until now."""
        return DecisionLine(
            endpoint=self.api.path,  # type: ignore[arg-type]  # one of the Endpoint literals
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


async def forward(s: Service, api: Api, req: ApiRequest, request: Request) -> Response:
    """Place, forward with failover and answer ``req`` (of ``api``); streaming and not."""
    start = time.perf_counter()
    conversation = api.conversation(req, request.headers, s.config.affinity)
    reading = s.extraction.read(conversation)
    endpoint: Endpoint = api.path  # type: ignore[assignment]  # one of the Endpoint literals
    # the routing prompt is read by the placement; a refusal during the shutdown reads it for its line
    s.admit(request, endpoint, lambda: reading.routed_on(s.config.max_prompt_chars), stream=req.stream)
    placement = await place(s, api, req, conversation, reading)
    decided = {**placement.decided, "routing_ms": elapsed_ms(start)}
    call = Call(
        api, request.state.request_id, req.stream, start, placement, decided, client_retry=request.state.client_retry
    )
    s.metrics.placements.labels(decided.get("affinity", "named")).inc()
    work = s.upstreams.complete(
        placement.order, req.upstream_body(), stream=req.stream, attempts=call.attempts, wire=api.wire(request.headers)
    )
    try:  # a client that leaves while the upstream is answering is noticed at once, not after the answer
        outcome = await until_client_leaves(request.receive, work, lambda abandoned: _abandon(s, abandoned))
    except ClientLeft:
        return _client_left(s, call)
    s.metrics.observe_attempts(outcome.attempts)
    call.model = outcome.model
    headers = {"x-evalprism-model": outcome.model or ""}
    if outcome.stream is not None:
        _remember(s, call, None)
        return _relay(s, outcome, call, headers)
    if outcome.body is None:
        return _failed(s, outcome, call)
    return _answered(s, outcome, call, headers)


def _remember(s: Service, call: Call, response_id: str | None) -> None:
    """Keep the conversation on the model that answered it, under its keys (and the answer's id)."""
    if call.model is None or not s.config.affinity.enabled:
        return
    keys = call.placement.keys.remember
    if response_id is not None and call.placement.keys.answer_stored:
        keys = (*keys, response_key(response_id))
    s.affinity.remember(keys, call.placement.kept(call.model))


def _answered(s: Service, outcome: Outcome, call: Call, headers: dict[str, str]) -> JSONResponse:
    """An upstream answered (not streamed): its body and status, the candidate's name as its ``model``,
    the decision in ``evalprism`` and the realised cost where the config gives prices; logged as
    completed, or upstream_refused for a 4xx passed back."""
    assert outcome.body is not None and outcome.model is not None
    body = outcome.body
    answered = call.api.name_candidate(body, outcome.model) if outcome.status < 400 else None
    annotation = call.annotation(answered)
    cost = _realised_cost(s, outcome.model, answered.usage if answered is not None else body.get("usage"))
    if cost is not None:
        annotation["realised_cost"] = cost
    ended: ChatOutcome = "completed" if outcome.status < 400 else "upstream_refused"
    s.decisions.write(call.line(outcome.status, ended, realised_cost=cost))
    if answered is not None:
        _remember(s, call, answered.response_id)
    return JSONResponse({**body, "evalprism": annotation}, status_code=outcome.status, headers=headers)


async def _abandon(s: Service, outcome: Outcome) -> None:
    """An upstream answer that arrived as the client left: close its stream, free its circuit ticket."""
    if outcome.stream is not None:
        await outcome.stream.aclose()
        s.upstreams.stream_ended(outcome, Relayed())


def _client_left(s: Service, call: Call) -> Response:
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


#: the decision log's outcome of a request no upstream answered, by the status it got (else upstream_failed)
_NO_ANSWER: dict[int, ChatOutcome] = {429: "rate_limited", 503: "unavailable"}


def _failed(s: Service, outcome: Outcome, call: Call) -> JSONResponse:
    """No upstream answered: 429 with ``Retry-After`` when every attempt was rate-limited, 503 when
    none could be made now (every connection busy or the router starved, or every circuit open with its
    trial in flight), else 502 with ``x-should-retry: false`` (the router's own failover is exhausted: an
    SDK's retry would repeat it, :mod:`~evalprism.serve.retries`); the attempts are in the body's
    ``evalprism``, as in a successful answer, and the message names each upstream and why it failed. The
    body is in the API's error shape."""
    failures = "; ".join(a.error or "" for a in outcome.attempts)
    s.decisions.write(call.line(outcome.status, _NO_ANSWER.get(outcome.status, "upstream_failed")))
    headers: dict[str, str] = {}
    if outcome.status == 429:
        if outcome.retry_after is not None:
            headers["retry-after"] = str(math.ceil(outcome.retry_after))
        error = (f"every upstream attempt was rate-limited: {failures}", "rate_limit_error", "rate_limit_exceeded")
    elif outcome.status == 503:
        headers["retry-after"] = "1"
        error = (
            f"no upstream can take the request now, none failed: {failures}",
            "server_error",
            "upstream_unavailable",
        )
    else:
        headers.update(NO_RETRY)
        error = (f"every upstream attempt failed: {failures}", "upstream_error", "upstream_error")
    message, kind, code = error
    status, content = error_body(call.api.shape, outcome.status, message, kind, code=code)
    return JSONResponse({**content, "evalprism": call.annotation()}, status_code=status, headers=headers)


def _relay(s: Service, outcome: Outcome, call: Call, headers: dict[str, str]) -> RelayResponse:
    """Relay the upstream stream through its API's watcher; when it ends, however it ends, the circuit
    hears how (completed is a success, broken a failure, a client that left neither) and the decision is
    logged with how it ended (completed, stream_broken, cut, or client_left before any byte) and the
    bytes written to the client."""
    assert outcome.stream is not None and outcome.model is not None
    model = outcome.model
    relayed = Relayed()
    watcher = call.api.watcher(model, call.annotation(), lambda usage: _realised_cost(s, model, usage))

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
        if watcher.answered.response_id is not None:
            _remember(s, call, watcher.answered.response_id)
        line = call.line(
            status,
            end,
            bytes_relayed=written,
            stream_error=relayed.error,
            realised_cost=realised_cost(s.config.models[model], relayed.usage),
        )
        with contextlib.suppress(DecisionLogUnwritable):  # the stream has gone out; the line is kept for later
            s.decisions.write(line, answered=True)

    return RelayResponse(relay_events(outcome.stream, watcher, relayed), ended, headers=headers)
