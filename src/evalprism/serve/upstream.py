"""Forwarding chat completions to the candidates' OpenAI-compatible upstreams, with failover.

One pooled ``httpx.AsyncClient`` serves every upstream (keep-alive connections, a connect and a
read timeout). An attempt *fails* when the upstream cannot be reached, times out, answers 408, 409,
429 or 5xx, or answers something that is not JSON; then the next candidate of the routing decision's
failover order is tried, until one answers or ``max_attempts`` upstreams have been tried. Upstreams
whose circuit is open (:mod:`~evalprism.serve.health`) are skipped while another candidate remains.
Any other 4xx is the client's request being refused: it is passed back as it is, not retried. When
every attempt was rate-limited (429), the outcome is a 429 with the shortest ``Retry-After`` the
upstreams gave, so that clients back off. For a stream, failover is possible until the first byte has
been sent to the client; a failure after that ends the stream with an error event.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any, Literal

import httpx

from evalprism.serve.config import ServeConfig
from evalprism.serve.decisions import elapsed_ms
from evalprism.serve.health import HealthBoard

_RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class UpstreamFailure(Exception):
    """One attempt failed in a way that warrants the next model; the message names no secret."""

    def __init__(self, message: str, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


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


@dataclass
class Attempt:
    """What happened when one candidate was tried (or skipped: its circuit was open)."""

    model: str
    status: int | None = None
    error: str | None = None
    latency_ms: float | None = None
    retry_after: float | None = None
    skipped: bool = False


@dataclass
class Outcome:
    """The answer that goes back to the client and every attempt made to get it. ``body`` and
    ``stream`` are both None when no upstream answered: then ``status`` is 502, or 429 when every
    attempt was rate-limited (``retry_after``: the shortest wait an upstream asked for)."""

    model: str | None
    status: int
    body: dict[str, Any] | None = None
    stream: httpx.Response | None = None
    attempts: list[Attempt] = field(default_factory=list)
    retry_after: float | None = None

    @property
    def failed_over(self) -> bool:
        return sum(not a.skipped for a in self.attempts) > 1


class Upstreams:
    """The candidates' upstreams behind one connection pool."""

    def __init__(self, config: ServeConfig, keys: Mapping[str, str | None],
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._keys = dict(keys)
        self.health = HealthBoard(config.models, config.breaker_failures, config.breaker_cooldown_s)
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=256, max_keepalive_connections=64),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    def _request(self, model: str, body: dict[str, Any]) -> httpx.Request:
        upstream = self.config.models[model]
        headers = {"content-type": "application/json"}
        key = self._keys.get(model)
        if key:
            headers["authorization"] = f"Bearer {key}"
        payload = {**body, "model": upstream.upstream_model or model}
        return self.client.build_request("POST", f"{upstream.base_url}/chat/completions", headers=headers,
                                         content=json.dumps(payload).encode("utf-8"))

    async def _attempt(self, model: str, body: dict[str, Any], stream: bool) -> Outcome:
        try:
            response = await self.client.send(self._request(model, body), stream=stream)
        except httpx.TimeoutException:
            raise UpstreamFailure(f"{model}: upstream timed out") from None
        except httpx.HTTPError as exc:
            raise UpstreamFailure(f"{model}: upstream unreachable ({type(exc).__name__})") from None
        if response.status_code in _RETRYABLE_STATUS:
            await response.aclose()
            raise UpstreamFailure(f"{model}: upstream answered {response.status_code}", response.status_code,
                                  retry_after_seconds(response.headers.get("retry-after")))
        if stream and response.status_code < 400:
            return Outcome(model, response.status_code, stream=response, attempts=[Attempt(model, response.status_code)])
        try:
            if stream:
                await response.aread()
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, httpx.HTTPError):
            raise UpstreamFailure(f"{model}: upstream answered {response.status_code} with a body that is not JSON",
                                  response.status_code) from None
        finally:
            await response.aclose()
        if not isinstance(data, dict):
            raise UpstreamFailure(f"{model}: upstream answered a JSON {type(data).__name__}, expected an object",
                                  response.status_code)
        return Outcome(model, response.status_code, body=data, attempts=[Attempt(model, response.status_code)])

    async def complete(self, order: list[str], body: dict[str, Any], stream: bool = False) -> Outcome:
        """Try the models of ``order`` in turn until one answers or ``max_attempts`` have been tried,
        skipping those whose circuit is open (unless none other is left: then the first is tried).
        With ``stream`` the outcome holds the open upstream response (the caller relays and closes it)."""
        usable = [m for m in order if self.health.available(m)] or order[:1]
        attempts: list[Attempt] = []
        tried = 0
        for model in order:
            if tried >= self.config.max_attempts:
                break
            if model not in usable:
                attempts.append(Attempt(model, error=f"{model}: skipped, its circuit is open after "
                                                    f"{self.config.breaker_failures} failures", skipped=True))
                continue
            tried += 1
            start = time.perf_counter()
            try:
                outcome = await self._attempt(model, body, stream)
            except UpstreamFailure as exc:
                attempts.append(Attempt(model, exc.status, str(exc), elapsed_ms(start), exc.retry_after))
                if exc.status != 429:  # rate limiting is not an outage
                    self.health.failure(model, str(exc))
                continue
            self.health.success(model)
            outcome.attempts[-1].latency_ms = elapsed_ms(start)
            outcome.attempts = attempts + outcome.attempts
            return outcome
        made = [a for a in attempts if not a.skipped]
        if made and all(a.status == 429 for a in made):
            waits = [a.retry_after for a in made if a.retry_after is not None]
            return Outcome(None, 429, attempts=attempts, retry_after=min(waits) if waits else None)
        return Outcome(None, 502, attempts=attempts)


StreamEnd = Literal["completed", "stream_broken", "cut"]


@dataclass
class Relayed:
    """How a relayed stream ended: ``completed`` (the upstream's ``[DONE]`` was relayed), ``stream_broken``
    (the upstream failed or ended without ``[DONE]``), or ``cut`` (the client left or the service shut
    down before the end); the bytes sent to the client, and the ``usage`` of the last chunk holding one."""

    end: StreamEnd = "cut"
    bytes: int = 0
    usage: dict[str, Any] | None = None
    error: str | None = None


async def relay_events(response: httpx.Response, annotate: dict[str, Any], relayed: Relayed,
                       cost_of: Callable[[Any], float | None] | None = None) -> AsyncIterator[bytes]:
    """The upstream's server-sent events, line by line, with ``annotate`` added as the field
    ``evalprism`` of the first data chunk and the realised cost (``cost_of(usage)``) to the chunk that
    carries the usage; a failure mid-stream becomes a final error event. How the stream ends is written
    to ``relayed`` (until then it says ``cut``)."""
    first = True
    done = False
    try:
        async for line in response.aiter_lines():
            data = line[5:].strip() if line.startswith("data:") else None
            if data == "[DONE]":
                done = True
            elif data and (first or '"usage"' in data):
                try:
                    chunk = json.loads(data)
                except json.JSONDecodeError:
                    chunk = None
                if isinstance(chunk, dict):
                    extra = dict(annotate) if first else {}
                    first = False
                    if isinstance(chunk.get("usage"), dict):
                        relayed.usage = chunk["usage"]
                        cost = cost_of(relayed.usage) if cost_of is not None else None
                        if cost is not None:
                            extra["realised_cost"] = cost
                    if extra:
                        chunk["evalprism"] = extra
                        line = "data: " + json.dumps(chunk)
            out = (line + "\n").encode("utf-8")
            relayed.bytes += len(out)
            yield out
        if done:
            relayed.end = "completed"
        else:
            relayed.end, relayed.error = "stream_broken", "the upstream ended the stream without [DONE]"
    except httpx.HTTPError as exc:
        relayed.end, relayed.error = "stream_broken", f"upstream stream broke off ({type(exc).__name__})"
        error = {"error": {"message": relayed.error, "type": "upstream_error", "param": None, "code": None}}
        out = ("data: " + json.dumps(error) + "\n\n").encode("utf-8")
        relayed.bytes += len(out)
        yield out
    finally:
        await response.aclose()
