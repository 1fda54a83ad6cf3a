"""Graceful shutdown: on SIGTERM the service stops accepting, answers what it accepted, and refuses
what arrives later with a 503 and ``Retry-After``: every request gets an answer, every decision a line.

uvicorn's own shutdown closes the listening sockets and then, at once, every connection that is
between two requests: a keep-alive client whose next request was on its way on such a connection
lost it unanswered (issue 39: 55 requests under load, ``ReadError`` at the client, no decision-log
line). :class:`DrainingServer` shuts down in this order instead:

1. it marks the service draining (:class:`Drain`): every response from then on says
   ``Connection: close`` (:class:`CloseWhileDraining`), and a routing or chat request that arrives on
   an open connection is refused by its handler before anything is routed or paid for: 503,
   ``Retry-After: 1``, error code ``shutting_down``, and its decision-log line (outcome
   ``shutting_down``); requests that arrived earlier are answered as usual, streams included;
2. it stops accepting: each listening socket's queue of connections is shrunk to nothing, the
   connections already queued there (complete, their requests maybe sent: under load, or when the
   service was starved, there can be hundreds) are accepted and so answered, and then the listening
   sockets close. A new connection is then refused by the operating system before the client has sent
   anything (the SDKs retry a connection error; behind a load balancer the retry reaches another
   replica);
3. it closes each open connection once it has stood idle for the config's ``shutdown_linger_s`` (default
   :data:`LINGER_S`; a connection answering
   a request closes after that answer, which says ``Connection: close``); then uvicorn's shutdown waits
   for what is still in flight (up to its ``timeout_graceful_shutdown``) and stops the app.

Whether a connection is idle is read from uvicorn's HTTP protocol objects (``server_state.connections``
and each one's ``cycle``, as uvicorn's own shutdown reads them), pinned by the service's SIGTERM test.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import uvicorn

from evalprism.serve.decisions import ChatOutcome, DecisionLine, Endpoint, elapsed_ms, prompt_hash
from evalprism.serve.retries import retry_field
from evalprism.serve.security import ASGIApp, Message, Receive, Scope, Send

#: how long an open connection may stand idle after the shutdown began before it is closed
LINGER_S = 1.0
#: how often the shutdown looks at the open connections
_POLL_S = 0.05
#: how long the shutdown waits for the event loop to accept the connections queued on a listening socket
_ACCEPT_WAIT_S = 2.0
#: the headers of a refusal: when to retry (elsewhere, most likely), and that this connection ends
REFUSAL_HEADERS = {"retry-after": "1", "connection": "close"}
SHUTTING_DOWN: ChatOutcome = "shutting_down"


class Drain:
    """When the service began to shut down (``since``, a ``clock`` value; None while it serves)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.clock = clock
        self.since: float | None = None

    def begin(self) -> None:
        if self.since is None:
            self.since = self.clock()

    def refuses(self, arrived: float) -> bool:
        """Whether a request that arrived at ``arrived`` (a ``clock`` value) is refused: it came after
        the shutdown began."""
        return self.since is not None and arrived >= self.since


class ShuttingDown(Exception):
    """A request that arrived after the shutdown began (answered 503 with :data:`REFUSAL_HEADERS`)."""

    def __init__(self) -> None:
        super().__init__("the service is shutting down and takes no new requests; retry (another replica)")


def refusal_line(endpoint: Endpoint, state: Any, prompt: str, **fields: Any) -> DecisionLine:
    """The decision-log line of a request refused because it arrived during the shutdown (``state``:
    the request's ``request.state``; ``fields``: the endpoint's own, e.g. a chat's ``stream``)."""
    return DecisionLine(
        endpoint=endpoint,
        request_id=state.request_id,
        **retry_field(state.client_retry),
        prompt_sha256=prompt_hash(prompt),
        **fields,
        status=503,
        outcome=SHUTTING_DOWN,
        latency_ms=elapsed_ms(state.arrived),
    )


class CloseWhileDraining:
    """ASGI middleware: while the service shuts down, every response ends its connection
    (``Connection: close``: uvicorn closes it once the response is sent)."""

    def __init__(self, app: ASGIApp, drain: Drain) -> None:
        self.app = app
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.drain.since is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def closing(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        await self.app(scope, receive, closing)


class DrainingServer(uvicorn.Server):
    """uvicorn's server, shutting down as the module says (``drain``: the app's :class:`Drain`)."""

    def __init__(self, config: uvicorn.Config, drain: Drain, linger_s: float = LINGER_S) -> None:
        super().__init__(config)
        self.drain = drain
        self.linger_s = linger_s

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.drain.begin()  # first: whatever arrives from now on is refused
        listeners = list(sockets or []) or [sock for server in self.servers for sock in server.sockets or ()]
        await accept_the_queued(listeners)
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        await self._close_idle_connections()
        await super().shutdown(sockets=sockets)

    async def _close_idle_connections(self) -> None:
        """Close each open connection once it has stood idle for ``linger_s`` (since the shutdown began or
        its last request, whichever is later); stop looking after ``timeout_graceful_shutdown``."""
        start = time.monotonic()
        deadline = start + (self.config.timeout_graceful_shutdown or 30.0)
        last: dict[Any, tuple[Any, float]] = {}  # connection -> (its request cycle, when it was last busy)
        while self.server_state.connections and not self.force_exit and time.monotonic() < deadline:
            now = time.monotonic()
            for connection in list(self.server_state.connections):
                cycle = getattr(connection, "cycle", None)
                busy = cycle is not None and not getattr(cycle, "response_complete", True)
                seen_cycle, busy_at = last.get(connection, (cycle, start))
                if busy or cycle is not seen_cycle:
                    busy_at = now
                last[connection] = (cycle, busy_at)
                if not busy and now - busy_at >= self.linger_s:
                    connection.shutdown()
            await asyncio.sleep(_POLL_S)


def queued_connections(sock: socket.socket) -> int | None:
    """How many complete connections wait in the listening socket's accept queue (Linux: ``TCP_INFO``'s
    ``tcpi_unacked`` of a listening socket); None where that cannot be read."""
    if not sys.platform.startswith("linux") or not hasattr(socket, "TCP_INFO"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    except OSError:
        return None
    return int(struct.unpack_from("I", info, 24)[0]) if len(info) >= 28 else None


async def accept_the_queued(listeners: list[Any]) -> None:
    """Shrink each listening socket's queue to nothing (few more connections complete: the others' SYNs
    go unanswered until the socket closes, then are refused), and let the event loop accept the
    connections already queued: closing a listening socket resets them, requests and all."""
    for sock in listeners:
        try:
            with socket.socket(fileno=os.dup(sock.fileno())) as same:  # listen() again sets the queue's length
                same.listen(0)
        except OSError:
            continue
    deadline = time.monotonic() + _ACCEPT_WAIT_S
    await asyncio.sleep(0)  # one turn of the loop: its accept handler runs
    while any((queued_connections(sock) or 0) > 0 for sock in listeners) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
