"""The outermost middleware: a request id on every response, and every response counted and timed.

``x-request-id``: the client's own when it sent a usable one (up to 128 printable ASCII characters),
else a new random one; the handlers find it in ``request.state.request_id`` and write it to the
decision log, so that a response can be matched to its line. Outermost, so that the answers of the
auth and size guards carry it too. Two more facts of the request's arrival go to ``request.state``:
``arrived`` (its :func:`time.perf_counter`, which a shutdown compares with when it began,
:mod:`~evalprism.serve.drain`) and ``client_retry`` (an SDK's retry number,
:func:`~evalprism.serve.retries.client_retry_of`, counted in ``evalprism_client_retries_total``).
"""

from __future__ import annotations

import itertools
import re
import time
import uuid

from evalprism.serve.metrics import Metrics, endpoint_label
from evalprism.serve.retries import client_retry_of
from evalprism.serve.security import ASGIApp, Message, Receive, Scope, Send, header

_USABLE_ID = re.compile(rb"[\x21-\x7e]{1,128}")
#: new ids: 80 random bits drawn once per process, then a counter (32 hex digits, as a uuid4's hex):
#: unique across replicas without a system call for randomness on every request
_ID_PREFIX = uuid.uuid4().hex[:20]
_ID_COUNTER = itertools.count()


def request_id_of(scope: Scope) -> str:
    """The id of this request: the client's ``x-request-id`` if usable, else a new one."""
    sent = header(scope, b"x-request-id")
    if sent is not None and _USABLE_ID.fullmatch(sent):
        return sent.decode("ascii")
    return f"req_{_ID_PREFIX}{next(_ID_COUNTER) & 0xFFFFFFFFFFFF:012x}"


class Observe:
    """Sets ``x-request-id`` and feeds :class:`Metrics` (status and time to the last byte)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        start = time.perf_counter()
        retry = client_retry_of(scope)
        state = scope.setdefault("state", {})
        state["request_id"], state["arrived"], state["client_retry"] = request_id, start, retry
        if retry is not None:
            self.metrics.client_retries.labels(endpoint_label(scope["path"])).inc()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode("ascii"))]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self.metrics.observe_request(scope["path"], status, time.perf_counter() - start)
