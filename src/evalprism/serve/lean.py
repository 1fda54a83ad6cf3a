"""The lean path: the hot endpoints answered without FastAPI's per-request machinery, with the same
validation, the same endpoint functions and the same answers.

For each request FastAPI matches the path against every route, runs its exception and exit-stack
middleware, solves the endpoint's dependency graph, reads and parses the body and wraps the validated
model for the call: with a static backbone (no transformer per request) that was most of the service's
CPU per request. :class:`LeanRoutes` sits innermost among the service's own middleware (after the
request id, the size limit and the auth, which still apply) and takes ``POST`` requests to the paths of
its table itself: it reads the body, decodes it (msgspec), validates it with the endpoint's own request
model, calls the endpoint's own function with the app's :class:`~evalprism.serve.app.Service` and turns
an exception into an answer with the app's own exception handlers.

What it cannot take as it is goes on to FastAPI, with the body it has read: a body not declared as
JSON (``Content-Type: application/json``), one that does not decode, and one the request model refuses.
So every refusal is FastAPI's own, word for word (400, 413, 415, 422 and their messages), and the
endpoints and their OpenAPI schema stay FastAPI's: the lean path only ever answers what FastAPI would
have answered the same.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from pydantic import BaseModel
from starlette.datastructures import State
from starlette.requests import Request
from starlette.responses import Response

from evalprism.serve.security import ASGIApp, Message, Receive, Scope, Send, header

#: an app's exception handlers (FastAPI's ``app.exception_handlers``): exception class -> handler
Handlers = Mapping[Any, Callable[[Request, Any], Response | Awaitable[Response]]]


@dataclass(frozen=True)
class LeanEndpoint:
    """One endpoint the lean path answers: its request model and its function, called as FastAPI calls
    it (``handler(body, request, service)``)."""

    model: type[BaseModel]
    handler: Callable[[Any, Request, Any], Awaitable[Response]]


def is_json(content_type: bytes | None) -> bool:
    """Whether a ``Content-Type`` declares plain JSON (``application/json``, parameters allowed); the
    other spellings FastAPI also parses (``+json`` subtypes) go its way."""
    if content_type is None:
        return False
    value = content_type.lower()
    return value.startswith(b"application/json") and value[16:17] in (b"", b";", b" ")


async def read_body(receive: Receive) -> bytes | None:
    """The whole request body; None when the client left before sending it all."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then whatever the connection says (a disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


class LeanRoutes:
    """ASGI middleware answering the ``POST`` endpoints of ``endpoints`` (path -> :class:`LeanEndpoint`)
    itself, as the module says; ``state``: the app's state (its ``service`` once started); ``handlers``:
    the app's exception handlers. ``answered``: how many requests it answered itself (the others went on
    to FastAPI)."""

    def __init__(self, app: ASGIApp, state: State, handlers: Handlers, endpoints: Mapping[str, LeanEndpoint]) -> None:
        self.app = app
        self.state = state
        self.handlers = handlers
        self.endpoints = dict(endpoints)
        self._decoder = msgspec.json.Decoder()
        self.answered = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self.endpoints.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if endpoint is None or not is_json(header(scope, b"content-type")):
            await self.app(scope, receive, send)
            return
        body = await read_body(receive)
        if body is None:  # the client left: nobody to answer
            return
        valid = self._validated(endpoint.model, body)
        if valid is None:  # FastAPI answers it, with its own words
            await self.app(scope, replay(body, receive), send)
            return
        self.answered += 1
        request = Request(scope, receive)
        try:
            response = await endpoint.handler(valid, request, self.state.service)
        except Exception as exc:
            response = await self._handled(request, exc)
        await response(scope, receive, send)

    def _validated(self, model: type[BaseModel], body: bytes) -> BaseModel | None:
        """``body`` as ``model`` validates it, or None when it does not: whatever goes wrong (not JSON, not
        UTF-8, nested too deep, refused by the model) is FastAPI's to answer, with its own words."""
        try:
            return model.model_validate(self._decoder.decode(body))
        except Exception:  # msgspec.DecodeError, UnicodeDecodeError, RecursionError, pydantic's ValidationError
            return None

    async def _handled(self, request: Request, exc: Exception) -> Response:
        """The app's answer to ``exc``: its handler for the nearest class (as Starlette looks one up)."""
        for cls in type(exc).__mro__:
            if cls in self.handlers:
                answer = self.handlers[cls](request, exc)
                return await answer if inspect.isawaitable(answer) else answer
        raise exc
