"""Knowing when the client has left, so that the decision log tells what the client really got.

uvicorn drops what an app sends after the client disconnected without telling the app, so a response
written to a client that left looks delivered. Two places therefore watch the ASGI ``receive``
channel, which yields ``http.disconnect`` once the connection is gone (the request body has been read
by then, so nothing else arrives on it):

- :func:`until_client_leaves`: while the service waits on an upstream, a client that leaves (a
  client-side timeout, a closed tab) cancels the wait (:class:`ClientLeft`); the upstream call is
  abandoned and the request is logged as ``client_left``, not as the upstream's answer;
- :class:`RelayResponse`: a server-sent-event response that counts the bytes of each write that
  returned before the client left, stops relaying the moment it leaves (also while waiting on the
  upstream's next event) and calls its ``on_end`` once, however the stream ends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TypeVar, cast

from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

T = TypeVar("T")


class ClientLeft(Exception):
    """The client disconnected before the response started."""


async def wait_for_disconnect(receive: Receive) -> None:
    """Return once the client has disconnected (the request body must have been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def until_client_leaves(
    receive: Receive, work: Awaitable[T], abandon: Callable[[T], Awaitable[None]] | None = None
) -> T:
    """``work``'s result, unless the client disconnects first: then ``work`` is cancelled (a result it
    produced in the same instant is handed to ``abandon``, e.g. to close an open stream) and
    :class:`ClientLeft` is raised."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(wait_for_disconnect(receive))
    try:
        await asyncio.wait((task, gone), return_when=asyncio.FIRST_COMPLETED)
        if task.done() and not gone.done():
            return task.result()
        task.cancel()
        await asyncio.wait((task,))
        if not task.cancelled() and task.exception() is None and abandon is not None:
            await abandon(task.result())
        raise ClientLeft
    finally:
        gone.cancel()
        if not task.done():
            task.cancel()


class RelayResponse(StreamingResponse):
    """Server-sent events from ``chunks``, written while the client stays; ``on_end(written, left)``
    is called exactly once at the end with the bytes whose writes returned and whether the client
    left before the end. ``chunks`` is closed in any case (its own ``finally`` runs)."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        on_end: Callable[[int, bool], None],
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(chunks, media_type="text/event-stream", headers=headers)
        self.on_end = on_end

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks = cast(AsyncIterator[bytes], self.body_iterator)  # the iterator __init__ was given
        gone = asyncio.ensure_future(wait_for_disconnect(receive))
        written, left = 0, False
        try:
            await asyncio.sleep(0)  # lets the watcher see a disconnect that is already there
            if gone.done():
                left = True
                return
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            while True:
                following = asyncio.ensure_future(anext(chunks))
                await asyncio.wait((following, gone), return_when=asyncio.FIRST_COMPLETED)
                if gone.done():  # left while the next event was awaited or made: it is not written
                    following.cancel()
                    await asyncio.wait((following,))
                    left = True
                    return
                try:
                    chunk = following.result()
                except StopAsyncIteration:
                    break
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                written += len(chunk)
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:  # a server that reports the closed connection on write (uvicorn's ClientDisconnected)
            left = True
        finally:
            gone.cancel()
            with contextlib.suppress(Exception):
                await chunks.aclose()  # type: ignore[attr-defined]
            self.on_end(written, left)
