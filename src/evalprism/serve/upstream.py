"""Forwarding requests to the candidates' upstreams, with failover (each API's path and key header:
:class:`Wire`, chat completions by default).

Each upstream has its own ``httpx.AsyncClient`` and so its own connection pool (keep-alive
connections, at most its config's ``max_connections``, a connect and a read timeout): one busy
upstream cannot starve the others of connections. Who is at fault decides what happens to an attempt;
each kind of failure is one subclass of :class:`UpstreamFailure` (as httpx's exceptions are), which
gives the attempt its ``outcome`` (:data:`AttemptOutcome`):

- *the upstream's failure* (``failed``: fail over to the next candidate, and count against its
  circuit, :mod:`~evalprism.serve.health`): it cannot be reached (:class:`UpstreamUnreachable`), times
  out (:class:`UpstreamTimeout`), answers 408, 409 or 5xx (:class:`UpstreamStatusError`), answers
  something that is not a JSON object (:class:`UpstreamInvalidBody`), or refuses the router's own
  configuration of it (:class:`UpstreamStatusError` too): 401 and 403 (the key in its ``api_key_env``
  is wrong or revoked), 402 (the account behind that key cannot pay), 404, 405 and 410 (a wrong
  ``base_url`` or ``upstream_model``; but a 404 whose error code says the request named something the
  upstream does not hold, :data:`REQUEST_NOT_FOUND_CODES`, is the client's), 407 (a proxy wants
  credentials) and 422 (it refuses a request
  that passed the router's own validation: its API differs from the one the router speaks). The
  attempt names the upstream and the status; the upstream's own text is left out, since an
  authentication error may quote part of the key;
- *rate limited* (``rate_limited``, 429, :class:`UpstreamRateLimited`): fail over, but no count (the
  upstream is refusing for now, not failing); when every attempt was rate-limited the outcome is a
  429 with the shortest ``Retry-After`` the upstreams gave, so that clients back off;
- *busy* (``busy``, :class:`UpstreamBusy`: no connection of the router's pool for that upstream fell
  free within ``pool_timeout_s``): the router's own limit, not the upstream's failure: fail over, no
  count; when every attempt was busy the outcome is a 503;
- *the client left* (``abandoned``, :class:`UpstreamAbandoned`): the attempt was cancelled while the
  upstream answered; no count;
- *the router starved* (``starved``, :class:`UpstreamStarved`): a timeout during which the router's own
  event loop lagged ``starvation_lag_s`` or more (:mod:`~evalprism.serve.loop_lag`): fail over, no count
  against the upstream (counted apart); when every attempt was busy or starved the outcome is a 503;
- *the client's request* (any other 4xx, e.g. 400 for a parameter value the upstream does not
  accept, a conversation longer than its context, a content-policy refusal, or 413): the upstream
  works and said no to this request, which another upstream would most likely refuse too; it is
  passed back to the client as it is, not retried, and counts as the upstream answering (``ok``).

Upstreams whose circuit is open, or half open with its one trial request in flight, are skipped
(``skipped``, :class:`UpstreamSkipped`); when every candidate is skipped, the first is tried anyway as
its circuit's trial (one at a time), and while that trial is in flight the request is answered 503.
For a stream, failover is possible until the first byte has been sent to the client; a failure after
that ends the stream with an error event, and the stream's outcome is reported to the circuit when it
ends.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar, Literal

import httpx

from evalprism.serve.config import ServeConfig
from evalprism.serve.decisions import elapsed_ms
from evalprism.serve.health import HealthBoard, Ticket
from evalprism.serve.loop_lag import LoopLag

_RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))
#: 4xx statuses that say the router's configuration of the upstream is wrong, not the client's request
#: (module docstring), with what each most likely means
UPSTREAM_FAULT_STATUS: dict[int, str] = {
    401: "it refused the router's API key for it (check the key in its api_key_env)",
    402: "payment required on the router's account with it",
    403: "it forbids the router's API key (check the key in its api_key_env and its permissions)",
    404: "no such endpoint or model there (check its base_url and upstream_model)",
    405: "that endpoint does not take POST (check its base_url)",
    407: "a proxy between the router and it wants credentials",
    410: "that endpoint or model is gone (check its base_url and upstream_model)",
    422: "it refused a request the router accepted (its API differs from OpenAI's chat completions)",
}

#: the ``error.details.error_code`` values with which an upstream's 404 says the request named something
#: it does not hold, which is the client's to handle (passed back, not failed over): Anthropic's
#: ``thread_not_found`` (a message thread held by another upstream, or lost; the anthropic SDK then
#: replays the whole history under a new thread)
REQUEST_NOT_FOUND_CODES = frozenset({"thread_not_found"})


async def names_what_is_not_held(response: httpx.Response) -> bool:
    """Whether ``response`` is a 404 saying the request named something the upstream does not hold
    (:data:`REQUEST_NOT_FOUND_CODES`; the body is read only for a 404)."""
    if response.status_code != 404:
        return False
    try:
        await response.aread()
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError, httpx.HTTPError):
        return False
    error = body.get("error") if isinstance(body, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    return isinstance(details, dict) and details.get("error_code") in REQUEST_NOT_FOUND_CODES


#: what became of one attempt at an upstream, declared once: ``ok`` (it answered, 2xx-4xx), ``failed``
#: (its fault: counted against its circuit and in ``evalprism_upstream_errors``), ``rate_limited`` (429),
#: ``busy`` (no free connection of the router's pool), ``abandoned`` (the client left first), ``skipped``
#: (its circuit admitted no request), ``starved`` (a timeout the router's own lag explains); also the
#: ``result`` label of ``evalprism_upstream_attempts``
AttemptOutcome = Literal["ok", "failed", "rate_limited", "busy", "abandoned", "skipped", "starved"]


class UpstreamFailure(Exception):
    """Why one attempt at an upstream gave no answer, and so the next candidate is tried; the message
    names the upstream and no secret. One subclass per kind (as httpx's exceptions), each with the
    attempt's ``outcome``; only ``failed`` counts against the upstream's circuit (:attr:`counts`)."""

    outcome: ClassVar[AttemptOutcome] = "failed"

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def counts(self) -> bool:
        """Whether the failure is the upstream's own, counted against its circuit."""
        return self.outcome == "failed"


class UpstreamTimeout(UpstreamFailure):
    """The upstream did not connect or answer within the timeouts."""

    def __init__(self, model: str) -> None:
        super().__init__(f"{model}: upstream timed out")


class UpstreamUnreachable(UpstreamFailure):
    """The upstream could not be reached (refused connection, DNS, TLS, a dropped connection)."""

    def __init__(self, model: str, error: Exception) -> None:
        super().__init__(f"{model}: upstream unreachable ({type(error).__name__})")


class UpstreamStatusError(UpstreamFailure):
    """The upstream answered a status that fails the attempt (408, 409, 5xx, or one of
    :data:`UPSTREAM_FAULT_STATUS`, named with what it most likely means); its own text is left out."""

    def __init__(self, model: str, status: int, retry_after: float | None = None) -> None:
        hint = UPSTREAM_FAULT_STATUS.get(status)
        super().__init__(f"{model}: upstream answered {status}" + (f": {hint}" if hint else ""), status, retry_after)


class UpstreamRateLimited(UpstreamStatusError):
    """The upstream answered 429: refusing for now, not failing (no count against its circuit)."""

    outcome = "rate_limited"

    def __init__(self, model: str, retry_after: float | None = None) -> None:
        super().__init__(model, 429, retry_after)


class UpstreamInvalidBody(UpstreamFailure):
    """The upstream answered a body that is not a JSON object."""

    def __init__(self, model: str, status: int, json_type: str | None = None) -> None:
        """``json_type``: the type of the JSON value it answered when that is not an object (None: not JSON)."""
        what = (
            f"{status} with a body that is not JSON" if json_type is None else f"a JSON {json_type}, expected an object"
        )
        super().__init__(f"{model}: upstream answered {what}", status)


class UpstreamBusy(UpstreamFailure):
    """No connection of the router's pool for the upstream fell free within ``pool_timeout_s``: the
    router's own limit, not the upstream's failure."""

    outcome = "busy"

    def __init__(self, model: str, limit: int, pool_timeout_s: float) -> None:
        super().__init__(
            f"{model}: busy: all {limit} connections of the router to this upstream "
            f"(its max_connections) stayed in use for {pool_timeout_s:g} s (pool_timeout_s)"
        )


class UpstreamStarved(UpstreamFailure):
    """The attempt timed out while the router's own event loop lagged ``lag_s`` (at least the config's
    ``starvation_lag_s``): the router was starved of CPU, so the timeout says nothing about the upstream."""

    outcome = "starved"

    def __init__(self, model: str, lag_s: float) -> None:
        super().__init__(
            f"{model}: timed out while the router's own event loop lagged {lag_s:.2f} s (the router was "
            "starved of CPU; not counted against the upstream)"
        )


class UpstreamSkipped(UpstreamFailure):
    """The upstream was not tried: its circuit is open, or half open with its one trial in flight."""

    outcome = "skipped"

    def __init__(self, model: str, why: str) -> None:
        super().__init__(f"{model}: skipped, {why}")


class UpstreamAbandoned(UpstreamFailure):
    """The client left (or the service stopped) while the upstream was answering: the attempt was
    cancelled, and the upstream did nothing wrong."""

    outcome = "abandoned"

    def __init__(self, model: str) -> None:
        super().__init__(f"{model}: abandoned: the client left before the upstream answered")


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """A ``Retry-After`` header in seconds (it is either seconds or an HTTP date); None if absent or unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(seconds, 0.0) if math.isfinite(seconds) else None


@dataclass(frozen=True)
class Attempt:
    """What happened when one candidate was tried (or skipped): its ``outcome``, the status it answered,
    why it failed (the :class:`UpstreamFailure`'s message) and the ``Retry-After`` it asked for."""

    model: str
    outcome: AttemptOutcome
    status: int | None = None
    error: str | None = None
    latency_ms: float | None = None
    retry_after: float | None = None

    @classmethod
    def failed(cls, model: str, failure: UpstreamFailure, latency_ms: float | None = None) -> Attempt:
        """The attempt that ended in ``failure`` (its kind is the attempt's outcome)."""
        return cls(model, failure.outcome, failure.status, str(failure), latency_ms, failure.retry_after)

    def record(self) -> dict[str, Any]:
        """The attempt as responses (``evalprism.attempts``) and the decision log show it."""
        return {
            "model": self.model,
            "status": self.status,
            "error": self.error,
            "latency_ms": self.latency_ms,
            "retry_after": self.retry_after,
            "skipped": self.outcome == "skipped",
            "busy": self.outcome == "busy",
            "starved": self.outcome == "starved",
        }


@dataclass
class Outcome:
    """The answer that goes back to the client and every attempt made to get it. ``body`` and
    ``stream`` are both None when no upstream answered: then ``status`` is 502, 429 when every
    attempt was rate-limited (``retry_after``: the shortest wait an upstream asked for), or 503 when
    every attempt found no free connection or every candidate was skipped. ``ticket``: a stream's
    circuit ticket, reported by :meth:`Upstreams.stream_ended` when the stream ends."""

    model: str | None
    status: int
    body: dict[str, Any] | None = None
    stream: httpx.Response | None = None
    attempts: list[Attempt] = field(default_factory=list)
    retry_after: float | None = None
    ticket: Ticket | None = None

    @property
    def failed_over(self) -> bool:
        return sum(a.outcome != "skipped" for a in self.attempts) > 1


@dataclass(frozen=True)
class Wire:
    """How an upstream is called for one request: the path after its ``base_url``, and the headers
    besides the content type (the upstream's key as its API takes it, and what the client sent for it)."""

    path: str
    headers: Callable[[str | None], dict[str, str]]


def bearer(key: str | None) -> dict[str, str]:
    """The upstream's key as OpenAI's APIs take it."""
    return {"authorization": f"Bearer {key}"} if key else {}


CHAT = Wire("/chat/completions", bearer)


class Upstreams:
    """The candidates' upstreams, each behind its own connection pool; ``lag``: the service's event-loop
    lag, which excuses a timeout it explains (none: every timeout counts)."""

    def __init__(
        self,
        config: ServeConfig,
        keys: Mapping[str, str | None],
        transport: httpx.AsyncBaseTransport | None = None,
        lag: LoopLag | None = None,
    ) -> None:
        self.config = config
        self.lag = lag
        self._keys = dict(keys)
        self.health = HealthBoard(config.models, config.breaker_failures, config.breaker_cooldown_s)
        timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s, pool=config.pool_timeout_s)
        self.clients = {
            name: httpx.AsyncClient(
                timeout=timeout,
                transport=transport,
                limits=httpx.Limits(
                    max_connections=upstream.max_connections,
                    max_keepalive_connections=min(upstream.max_connections, 64),
                ),
            )
            for name, upstream in config.models.items()
        }

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()

    def _request(self, model: str, body: dict[str, Any], wire: Wire = CHAT) -> httpx.Request:
        upstream = self.config.models[model]
        headers = {"content-type": "application/json", **wire.headers(self._keys.get(model))}
        payload = {**body, "model": upstream.upstream_model or model}
        return self.clients[model].build_request(
            "POST",
            f"{upstream.base_url}{wire.path}",
            headers=headers,
            content=json.dumps(payload).encode("utf-8"),
        )

    async def _attempt(self, model: str, body: dict[str, Any], stream: bool, wire: Wire = CHAT) -> Outcome:
        try:
            response = await self.clients[model].send(self._request(model, body, wire), stream=stream)
        except httpx.PoolTimeout:
            limit = self.config.models[model].max_connections
            raise UpstreamBusy(model, limit, self.config.pool_timeout_s) from None
        except httpx.TimeoutException:
            raise UpstreamTimeout(model) from None
        except httpx.HTTPError as exc:
            raise UpstreamUnreachable(model, exc) from None
        status = response.status_code
        if (status in _RETRYABLE_STATUS or status in UPSTREAM_FAULT_STATUS) and not await names_what_is_not_held(
            response
        ):
            await response.aclose()
            retry_after = retry_after_seconds(response.headers.get("retry-after"))
            if status == 429:
                raise UpstreamRateLimited(model, retry_after)
            raise UpstreamStatusError(model, status, retry_after)
        if stream and status < 400:
            return Outcome(model, status, stream=response)
        try:
            if stream:
                await response.aread()
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, httpx.HTTPError):
            raise UpstreamInvalidBody(model, status) from None
        finally:
            await response.aclose()
        if not isinstance(data, dict):
            raise UpstreamInvalidBody(model, status, type(data).__name__)
        return Outcome(model, status, body=data)

    def _skipped(self, model: str) -> Attempt:
        why = (
            "its circuit is half open and its one trial request is in flight"
            if self.health.blocked_by_trial(model)
            else f"its circuit is open after {self.config.breaker_failures} failures"
        )
        return Attempt.failed(model, UpstreamSkipped(model, why))

    async def _try(
        self,
        model: str,
        ticket: Ticket,
        body: dict[str, Any],
        stream: bool,
        attempts: list[Attempt],
        wire: Wire = CHAT,
    ) -> Outcome | None:
        """One attempt, recorded in ``attempts`` however it ends (an attempt abandoned because the client
        left too, before the cancellation goes on) and reported to the circuit; None when it failed."""
        start = time.perf_counter()
        try:
            outcome = await self._attempt(model, body, stream, wire)
        except UpstreamFailure as exc:
            failure = self._blame(model, exc, start)
            attempts.append(Attempt.failed(model, failure, elapsed_ms(start)))
            if failure.counts:
                self.health.failure(ticket, str(failure))
            else:
                self.health.release(ticket, starved=failure.outcome == "starved")
            return None
        except BaseException:  # cancelled: the client left (or the service stops) while the upstream answered
            attempts.append(Attempt.failed(model, UpstreamAbandoned(model), elapsed_ms(start)))
            self.health.release(ticket)
            raise
        attempts.append(Attempt(model, "ok", outcome.status, latency_ms=elapsed_ms(start)))
        outcome.attempts = attempts
        if outcome.stream is not None:
            outcome.ticket = ticket  # reported when the stream ends (stream_ended)
        else:
            self.health.success(ticket)
        return outcome

    def _blame(self, model: str, failure: UpstreamFailure, start: float) -> UpstreamFailure:
        """``failure``, unless it is a timeout the router's own event-loop lag explains (the lag reached
        ``starvation_lag_s`` since ``start``, a :func:`time.perf_counter` value): then the router starved."""
        if isinstance(failure, UpstreamTimeout) and self.lag is not None:
            lag = self.lag.worst_since(start)
            if lag >= self.config.starvation_lag_s:
                return UpstreamStarved(model, lag)
        return failure

    async def complete(
        self,
        order: list[str],
        body: dict[str, Any],
        stream: bool = False,
        attempts: list[Attempt] | None = None,
        wire: Wire = CHAT,
    ) -> Outcome:
        """Try the models of ``order`` in turn until one answers or ``max_attempts`` have been tried,
        skipping those whose circuit admits no request now (when that is every one, the first is tried
        as its circuit's one trial). Every attempt is appended to ``attempts`` as it starts. With
        ``stream`` the outcome holds the open upstream response: the caller relays and closes it, and
        reports how it ended to :meth:`stream_ended`."""
        attempts = [] if attempts is None else attempts
        force_first = not any(self.health.admits(m) for m in order)
        tried = 0
        for model in order:
            if tried >= self.config.max_attempts:
                break
            ticket = self.health.acquire(model, force=force_first and model == order[0])
            if ticket is None:
                attempts.append(self._skipped(model))
                continue
            tried += 1
            outcome = await self._try(model, ticket, body, stream, attempts, wire)
            if outcome is not None:
                return outcome
        return _no_answer(attempts)

    def stream_ended(self, outcome: Outcome, relayed: Relayed) -> AttemptOutcome:
        """Report a relayed stream's end to its upstream's circuit, once, and say what it says of the
        upstream: completed is a success (``ok``), broken a failure (``failed``) unless the break was a read
        timeout the router's own event-loop lag explains (``starved``: counted apart, its ``error`` says so),
        and a stream the client left says nothing about the upstream (``abandoned``)."""
        if outcome.ticket is None:
            return "abandoned"
        if relayed.end == "completed":
            self.health.success(outcome.ticket)
            return "ok"
        if relayed.end == "stream_broken":
            # the read timeout ran from the last line read: any lag since then may be why nothing came
            window = self.lag.clock() - self.config.timeout_s if self.lag is not None else 0.0
            since = window if relayed.last_read is None else min(window, relayed.last_read)
            lag = self.lag.worst_since(since) if self.lag is not None else 0.0
            if not (relayed.timed_out and lag >= self.config.starvation_lag_s):
                self.health.failure(outcome.ticket, f"{outcome.ticket.name}: {relayed.error}")
                return "failed"
            relayed.error = f"{relayed.error}; the router's own event loop lagged {lag:.2f} s: not counted against it"
            self.health.release(outcome.ticket, starved=True)
            return "starved"
        self.health.release(outcome.ticket)
        return "abandoned"


def _no_answer(attempts: list[Attempt]) -> Outcome:
    """The outcome when no upstream answered: 429 when every attempt made was rate-limited, 503 when
    none could be made (every candidate skipped) or every one was the router's own limit (busy, or
    starved), else 502."""
    made = [a for a in attempts if a.outcome != "skipped"]
    if made and all(a.outcome == "rate_limited" for a in made):
        waits = [a.retry_after for a in made if a.retry_after is not None]
        return Outcome(None, 429, attempts=attempts, retry_after=min(waits) if waits else None)
    if all(a.outcome in ("busy", "starved") for a in made):
        return Outcome(None, 503, attempts=attempts)
    return Outcome(None, 502, attempts=attempts)


StreamEnd = Literal["completed", "stream_broken", "cut"]


@dataclass
class Relayed:
    """How a relayed stream ended: ``completed`` (its API's last event, e.g. chat's ``[DONE]``, was
    relayed), ``stream_broken`` (the upstream failed or ended without that event), or ``cut`` (the client
    left or the service shut down before the end); the bytes written to the client (counted by the writer,
    :class:`~evalprism.serve.streaming.RelayResponse`, as each write returns), and the stream's ``usage``
    (:func:`evalprism.serve.apis.base.relay_events` relays and reads it)."""

    end: StreamEnd = "cut"
    bytes: int = 0
    usage: dict[str, Any] | None = None
    error: str | None = None
    timed_out: bool = False  # the break was a read timeout (which the router's own starvation may explain)
    last_read: float | None = None  # when the last line came (time.perf_counter): the read timeout's start
