"""A closed-loop HTTP/1.1 load generator light enough to share two cores with the service it measures.

Why not httpx (or aiohttp) here: the load generator runs on the same two cores as the service,
so every millisecond of CPU it spends per request is taken from the service under test. httpx's
AsyncClient spends about 2.2 ms of CPU per POST on this machine (measured with getrusage over
2,000 requests), nearly half of what the router's own HTTP handling; at 500 requests/s that is half a
core. This client writes pre-encoded requests on keep-alive connections and parses responses
with httptools (the C parser uvicorn uses, already installed with the service), about 0.05 ms
per request. ``Load.client_cpu_ms`` reports what it did spend, so the table can say so.

Each of ``clients`` connections sends its next request as soon as its last one is answered
(closed loop: by Little's law the mean latency is clients / throughput). Streaming (chunked)
responses are read to their end, so their latency includes the whole stream.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

import httptools
import numpy as np


@dataclass
class Load:
    """What one closed-loop run measured."""

    seconds: float
    latencies_ms: np.ndarray
    errors: int
    client_cpu_ms: float  # CPU the load generator spent per request

    @property
    def throughput(self) -> float:
        return self.latencies_ms.size / self.seconds

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))


class _Connection(asyncio.Protocol):
    """One keep-alive connection; ``send`` returns a future of the response's status code."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[int] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._finish(exc)

    def on_message_complete(self) -> None:  # httptools callback: the whole response (all chunks) is in
        self._finish(self.parser.get_status_code())

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish(exc or ConnectionError("the server closed the connection"))

    def _finish(self, outcome: int | BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            if isinstance(outcome, BaseException):
                waiter.set_exception(outcome)
            else:
                waiter.set_result(outcome)

    def send(self, request: bytes) -> asyncio.Future[int]:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter


def encode_post(host: str, port: int, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> bytes:
    """One HTTP/1.1 POST with a JSON body, as bytes on the wire."""
    data = json.dumps(body).encode("utf-8")
    lines = [
        f"POST {path} HTTP/1.1",
        f"host: {host}:{port}",
        "content-type: application/json",
        f"content-length: {len(data)}",
        *(f"{k}: {v}" for k, v in (headers or {}).items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + data


async def closed_loop(
    host: str,
    port: int,
    path: str,
    bodies: list[dict[str, Any]],
    clients: int,
    timeout_s: float = 60.0,
    expected: list[int] | None = None,
) -> Load:
    """POST every body in ``bodies`` to ``path`` from ``clients`` concurrent connections; an error is
    an answer other than ``expected`` (one status per body; default 200 for all)."""
    loop = asyncio.get_running_loop()
    statuses = expected if expected is not None else [200] * len(bodies)
    pending = [
        (encode_post(host, port, path, body), status)
        for body, status in zip(reversed(bodies), reversed(statuses), strict=True)
    ]
    latencies: list[float] = []
    errors = 0

    async def client() -> None:
        nonlocal errors
        connection: _Connection | None = None
        while pending:
            request, want = pending.pop()
            start = time.perf_counter()
            try:
                if connection is None:
                    _, connection = await loop.create_connection(_Connection, host, port)
                ok = await asyncio.wait_for(connection.send(request), timeout_s) == want
            except (OSError, TimeoutError, httptools.HttpParserError):
                ok = False
                if connection is not None and connection.transport is not None:
                    connection.transport.close()
                connection = None  # reconnect for the next request
            latencies.append((time.perf_counter() - start) * 1e3)
            errors += not ok
        if connection is not None and connection.transport is not None:
            connection.transport.close()

    cpu_before = time.thread_time()  # this thread's CPU only (a fake upstream may run in another)
    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    seconds = time.perf_counter() - start
    cpu_ms = (time.thread_time() - cpu_before) * 1e3 / max(len(bodies), 1)
    return Load(seconds, np.array(latencies), errors, cpu_ms)
