"""Forwarding chat completions to the candidates' OpenAI-compatible upstreams, with one failover.

One pooled ``httpx.AsyncClient`` serves every upstream (keep-alive connections, a connect and a
read timeout). An attempt *fails* when the upstream cannot be reached, times out, answers 429 or
5xx, or answers something that is not JSON; then the request is retried once on the next model of
the routing decision's failover order. Any other 4xx is the client's request being refused: it is
passed back as it is, not retried. For a stream, failover is possible until the first byte has
been sent to the client; a failure after that ends the stream with an error event.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from evalprism.serve.config import ServeConfig

_RETRYABLE_STATUS = frozenset({408, 409, 429}) | frozenset(range(500, 600))


class UpstreamFailure(Exception):
    """One attempt failed in a way that warrants the next model; the message names no secret."""


@dataclass
class Attempt:
    """What happened when one candidate was tried."""

    model: str
    status: int | None = None
    error: str | None = None


@dataclass
class Outcome:
    """The answer that goes back to the client and every attempt made to get it."""

    model: str | None
    status: int
    body: dict[str, Any] | None = None
    stream: httpx.Response | None = None
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def failed_over(self) -> bool:
        return len(self.attempts) > 1


class Upstreams:
    """The candidates' upstreams behind one connection pool."""

    def __init__(self, config: ServeConfig, keys: Mapping[str, str | None],
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._keys = dict(keys)
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
            raise UpstreamFailure(f"{model}: upstream answered {response.status_code}")
        if stream and response.status_code < 400:
            return Outcome(model, response.status_code, stream=response, attempts=[Attempt(model, response.status_code)])
        try:
            if stream:
                await response.aread()
            data = response.json()
        except (json.JSONDecodeError, UnicodeDecodeError, httpx.HTTPError):
            raise UpstreamFailure(f"{model}: upstream answered {response.status_code} with a body that is not JSON") from None
        finally:
            await response.aclose()
        if not isinstance(data, dict):
            raise UpstreamFailure(f"{model}: upstream answered a JSON {type(data).__name__}, expected an object")
        return Outcome(model, response.status_code, body=data, attempts=[Attempt(model, response.status_code)])

    async def complete(self, order: list[str], body: dict[str, Any], stream: bool = False) -> Outcome:
        """Try ``order[0]``, and on failure ``order[1]`` (one retry). With ``stream`` the outcome holds
        the open upstream response (the caller relays and closes it)."""
        attempts: list[Attempt] = []
        for model in order[:2]:
            try:
                outcome = await self._attempt(model, body, stream)
            except UpstreamFailure as exc:
                attempts.append(Attempt(model, error=str(exc)))
                continue
            outcome.attempts = attempts + outcome.attempts
            return outcome
        return Outcome(None, 502, attempts=attempts)


async def relay_events(response: httpx.Response, annotate: dict[str, Any]) -> AsyncIterator[bytes]:
    """The upstream's server-sent events, line by line, with ``annotate`` added as the field
    ``evalprism`` of the first data chunk; a failure mid-stream becomes a final error event."""
    first = True
    try:
        async for line in response.aiter_lines():
            if first and line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    chunk = json.loads(line[5:])
                except json.JSONDecodeError:
                    chunk = None
                if isinstance(chunk, dict):
                    chunk["evalprism"] = annotate
                    line = "data: " + json.dumps(chunk)
                    first = False
            yield (line + "\n").encode("utf-8")
    except httpx.HTTPError as exc:
        error = {"error": {"message": f"upstream stream broke off ({type(exc).__name__})", "type": "upstream_error"}}
        yield ("data: " + json.dumps(error) + "\n\n").encode("utf-8")
    finally:
        await response.aclose()
