"""The service's guards: bearer-token auth, a request-size limit, and no open service off loopback.

Both guards are plain ASGI middleware rather than FastAPI dependencies, so that they cover every
route, including the ``/openapi.json`` and ``/docs`` routes FastAPI adds by itself, and so that an
oversized body is refused before anything reads it.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from starlette.exceptions import HTTPException

from evalprism.errors import EvalprismError
from evalprism.serve.error_shapes import error_body, shape_of

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

OPEN_PATHS = frozenset({"/health"})


def header(scope: Scope, name: bytes) -> bytes | None:
    """The value of request header ``name`` (lower case; the first if repeated), without building a
    dict of every header on each request."""
    for key, value in scope.get("headers") or ():
        if key == name:
            return value
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, api_keys: Sequence[str]) -> None:
    """Refuse to serve on a non-loopback address without bearer tokens configured."""
    if not api_keys and not is_loopback(host):
        raise EvalprismError(
            f"refusing to listen on {host} without API keys: anyone who can reach it could spend "
            "the upstreams' budget. Set api_keys_env in the config (environment variables "
            "holding accepted bearer tokens), or listen on 127.0.0.1"
        )


async def send_error(
    send: Send,
    scope: Scope,
    status: int,
    message: str,
    kind: str,
    headers: Sequence[tuple[bytes, bytes]] = (),
    code: str | None = None,
) -> None:
    """An error body in the shape the clients of the request's path read (:mod:`~evalprism.serve.error_shapes`)."""
    status, content = error_body(shape_of(scope["path"]), status, message, kind, code=code)
    body = json.dumps(content).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """401 unless the request carries ``Authorization: Bearer <one of the keys>`` or, as Anthropic's
    clients send it, ``x-api-key: <one of the keys>`` (paths in ``OPEN_PATHS`` excepted). Tokens are
    compared in constant time. No keys: everything is open."""

    def __init__(self, app: ASGIApp, keys: Sequence[str]) -> None:
        self.app = app
        self.keys = [k.encode("utf-8") for k in keys]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.keys or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        token = token.strip() if scheme.lower() == b"bearer" else headers.get(b"x-api-key", b"").strip()
        # compare against every key (no early exit), so timing says nothing about which one is near
        matches = [hmac.compare_digest(token, key) for key in self.keys]
        if token and any(matches):
            await self.app(scope, receive, send)
            return
        await send_error(
            send,
            scope,
            401,
            "missing or invalid API key (Authorization: Bearer <key>, or x-api-key: <key>)",
            "authentication_error",
            headers=[(b"www-authenticate", b"Bearer")],
            code="invalid_api_key",
        )


class _TooLarge(HTTPException):
    """Raised while the body is read; an HTTPException so that FastAPI answers it as a 413 too
    (it turns any other exception during body parsing into a 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(status_code=413, detail=message)


class BodyLimit:
    """413 for a request body over ``max_bytes``: from its Content-Length when given, else counted
    as the body arrives (chunked uploads)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        message = f"request body larger than {self.max_bytes} bytes"
        length = header(scope, b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await send_error(send, scope, 413, message, "invalid_request_error")
            return
        received = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal received
            event = await receive()
            if event["type"] == "http.request":
                received += len(event.get("body", b""))
                if received > self.max_bytes:
                    raise _TooLarge(message)
            return event

        async def tracking_send(event: Message) -> None:
            nonlocal started
            if event["type"] == "http.response.start":
                started = True
            await send(event)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _TooLarge:
            if not started:
                await send_error(send, scope, 413, message, "invalid_request_error")
