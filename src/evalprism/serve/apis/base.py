"""What every API adapter provides (:class:`Api`), and the parts they share: the session key, the checks
of typed items, and the relay of a server-sent-event stream (the request bodies' base class,
:class:`~evalprism.serve.schemas.ApiRequest`, is with the other bodies).

An adapter reads its API's request into the normalized :class:`~evalprism.serve.conversation.Conversation`,
says where and how the upstream is called (:class:`Wire`), and reads the upstream's answer: the
candidate's name goes into ``model`` (the upstream's own id into ``evalprism.upstream_model``), the
usage is read as prompt and completion tokens (for the realised cost), and a Responses answer's id is
kept (``previous_response_id`` pins the upstream that issued it). A stream is read event by event by the
adapter's :class:`StreamWatcher`, which also says how a stream of its API ends.
"""

from __future__ import annotations

import json
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx
from pydantic_core import PydanticCustomError

from evalprism.serve.config import AffinityConfig
from evalprism.serve.conversation import ApiName, Conversation
from evalprism.serve.error_shapes import ErrorShape
from evalprism.serve.schemas import ApiRequest
from evalprism.serve.upstream import Relayed, Wire

#: usage as the realised cost reads it (:func:`evalprism.serve.config.realised_cost`)
Usage = dict[str, Any]


def session_of(headers: Mapping[str, str], settings: AffinityConfig, user: str | None) -> str | None:
    """The client's session id: the first of the config's session headers present, else (with
    ``user_field``) the body's user id."""
    for name in settings.session_headers:
        value = headers.get(name)
        if value:
            return value
    return f"user:{user}" if settings.user_field and user else None


@dataclass(frozen=True)
class Answered:
    """What the router reads of an upstream's answer (a body, or a whole stream)."""

    upstream_model: str | None = None
    response_id: str | None = None
    usage: Usage | None = None


def text_of(value: Any, types: frozenset[str | None]) -> tuple[str, ...]:
    """The text parts of a content value: a string is one part; of a list, the ``text`` of each part
    whose ``type`` is one of ``types``."""
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list):
        return tuple(p["text"] for p in value if _is_text(p, types))
    return ()


def _is_text(part: Any, types: frozenset[str | None]) -> bool:
    """Whether ``part`` is a text part of one of ``types`` (a part of any other shape is not)."""
    if not isinstance(part, dict):
        return False
    kind = part.get("type")
    return (kind is None or isinstance(kind, str)) and kind in types and isinstance(part.get("text"), str)


#: the JSON types of item fields, by the name a message uses for them, and their JSON schemas
KINDS: dict[str, tuple[type, ...]] = {"text": (str,), "object": (dict,), "list": (list,), "text or list": (str, list)}
_KIND_SCHEMAS: dict[str, dict[str, Any]] = {
    "text": {"type": "string"},
    "object": {"type": "object"},
    "list": {"type": "array"},
    "text or list": {"anyOf": [{"type": "string"}, {"type": "array"}]},
}


def items_schema(
    required: Mapping[str, Mapping[str, str]], special: tuple[str, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The JSON schema of the items :func:`check_items` accepts with the same ``required`` table: one
    branch per type it names, one for any other type, and a ``special`` (type name, schema) checked
    beyond the table (a Responses message, whose ``type`` may be left out), so that the published
    schema says what the check does."""
    branches = [
        {
            "type": "object",
            "required": ["type", *keys],
            "properties": {"type": {"const": kind}, **{key: _KIND_SCHEMAS[k] for key, k in keys.items()}},
        }
        for kind, keys in required.items()
    ]
    named = [*required, *([special[0]] if special is not None else [])]
    other = {"type": "string", "not": {"enum": named}}
    branches.append({"type": "object", "required": ["type"], "properties": {"type": other}})
    return {"anyOf": [*branches, *([special[1]] if special is not None else [])]}


def check_items(
    items: list[Any],
    required: Mapping[str, Mapping[str, str]],
    what: str,
    kind_of: Callable[[dict[str, Any]], Any] = lambda item: item.get("type"),
) -> None:
    """Each of ``items`` must be an object with a type (``kind_of``: its ``type``), and one of a type in
    ``required`` must hold those keys with values of the named kinds (:data:`KINDS`); items of other
    types pass (the upstream judges them). ``what`` names an item in the message ("item", "block")."""
    for i, item in enumerate(items):
        kind = kind_of(item) if isinstance(item, dict) else None
        if not isinstance(kind, str):
            got = "is not an object" if not isinstance(item, dict) else "has no 'type'"
            raise PydanticCustomError("invalid_item", "{what} {i} {got}", {"what": what, "i": i, "got": got})
        for key, expected in required.get(kind, {}).items():
            if not isinstance(item.get(key), KINDS[expected]):
                got = "is missing" if key not in item else f"is {type(item[key]).__name__}"
                raise PydanticCustomError(
                    "invalid_item",
                    "{what} {i} ({kind}): '{key}' {got}, expected {expected}",
                    {"what": what, "i": i, "kind": kind, "key": key, "got": got, "expected": expected},
                )


_TYPE_FIELD = re.compile(r'"type"\s*:\s*"([^"]+)"')


def event_type(event: str | None, payload: str) -> str | None:
    """An event's type: its ``event:`` line, else the first ``type`` of its JSON (an event's own type
    comes first in the streams of the Responses and Messages APIs)."""
    if event:
        return event
    found = _TYPE_FIELD.search(payload, 0, 80)
    return found.group(1) if found else None


def json_object(payload: str) -> dict[str, Any] | None:
    """The JSON object of an event's payload, or None if it is not one."""
    try:
        value = json.loads(payload)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


#: a chat chunk's top-level ``model`` (no other key of a chunk is called model, and any text holding
#: ``"model"`` is an escaped JSON string, so the first match is the chunk's own)
MODEL_FIELD = re.compile(r'"model"\s*:\s*"(?:[^"\\]|\\.)*"')


@dataclass
class StreamWatcher(ABC):
    """Reads one relayed stream of an API, event by event: rewrites an event where the router has
    something to say in it (:meth:`data`), and records how the stream went. ``annotation``: the
    ``evalprism`` field for the stream's first event; ``cost_of``: the realised cost of a usage."""

    candidate: str
    annotation: dict[str, Any]
    cost_of: Callable[[Usage], float | None] | None = None
    started: bool = False  # the first event has been annotated
    done: bool = False
    failure: str | None = None  # the upstream said in the stream that it failed
    answered: Answered = field(default_factory=Answered)
    #: why a stream that ends without its API's last event is broken
    unfinished: ClassVar[str]

    @abstractmethod
    def data(self, event: str | None, payload: str) -> str | None:
        """The payload of one ``data:`` line (``event``: the ``event:`` line before it, if any), or
        None to relay it as it is."""

    @abstractmethod
    def error_event(self, message: str) -> str:
        """The event that ends a stream the upstream broke off, in the API's own shape."""

    def priced(self, extra: dict[str, Any], usage: Usage | None) -> dict[str, Any]:
        """``extra`` with the realised cost of ``usage`` (recorded as the stream's usage)."""
        if usage is not None:
            self.answered = Answered(self.answered.upstream_model, self.answered.response_id, usage)
            cost = self.cost_of(usage) if self.cost_of is not None else None
            if cost is not None:
                return {**extra, "realised_cost": cost}
        return extra

    def first(self, upstream_model: Any, response_id: Any = None) -> dict[str, Any]:
        """The ``evalprism`` field of the stream's first event: the annotation and the upstream's own id."""
        model = upstream_model if isinstance(upstream_model, str) else None
        rid = response_id if isinstance(response_id, str) else None
        self.started = True
        self.answered = Answered(model, rid, self.answered.usage)
        return {**self.annotation, "upstream_model": model}


async def relay_events(response: httpx.Response, watcher: StreamWatcher, relayed: Relayed) -> AsyncIterator[bytes]:
    """The upstream's server-sent events, line by line, each ``data:`` line as ``watcher`` rewrites it;
    a failure mid-stream becomes a final error event of the API. How the stream ends is written to
    ``relayed`` (until then it says ``cut``): completed when the API's last event came, else broken."""
    event = None
    relayed.last_read = time.perf_counter()  # the headers were read
    try:
        async for line in response.aiter_lines():
            relayed.last_read = time.perf_counter()
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                replaced = watcher.data(event, line[5:].strip())
                if replaced is not None:
                    line = "data: " + replaced
            elif not line:
                event = None
            yield (line + "\n").encode("utf-8")
        if watcher.failure is not None:
            relayed.end, relayed.error = "stream_broken", watcher.failure
        elif watcher.done:
            relayed.end = "completed"
        else:
            relayed.end, relayed.error = "stream_broken", watcher.unfinished
    except httpx.HTTPError as exc:
        relayed.end, relayed.error = "stream_broken", f"upstream stream broke off ({type(exc).__name__})"
        relayed.timed_out = isinstance(exc, httpx.TimeoutException)
        yield watcher.error_event(relayed.error).encode("utf-8")
    finally:
        relayed.usage = watcher.answered.usage
        await response.aclose()


class Api(ABC):
    """One API the router serves: its endpoint, request model, error shape, and how it reads its
    requests and its upstreams' answers. The adapter's docstring is its endpoint's description in the
    published schema."""

    name: ClassVar[ApiName]
    path: ClassVar[str]  # the router's endpoint
    shape: ClassVar[ErrorShape]
    request: ClassVar[type[ApiRequest]]
    #: the request field that holds the conversation (named by its errors)
    param: ClassVar[str]
    #: what the upstream answers, and one event of its stream (the published schema says them)
    answers: ClassVar[str]
    events: ClassVar[str]
    #: whether a later request can continue an answer by its id (``previous_response_id``,
    #: ``thread.previous_message_id``)
    continues_by_id: ClassVar[bool] = False
    #: the watcher of one relayed stream of this API
    watching: ClassVar[type[StreamWatcher]]

    @abstractmethod
    def conversation(self, req: Any, headers: Mapping[str, str], settings: AffinityConfig) -> Conversation:
        """The request's normalized conversation (``headers``: the request's, lower-case names)."""

    @abstractmethod
    def wire(self, headers: Mapping[str, str]) -> Wire:
        """How this request's upstream is called."""

    @staticmethod
    @abstractmethod
    def usage(value: Any) -> Usage | None:
        """An answer's ``usage`` as prompt and completion tokens (None: it has none)."""

    def read_answer(self, body: dict[str, Any]) -> Answered:
        """What the router reads of an upstream's answer body: its model, its id where a later request
        can continue it, and its usage."""
        model, rid = body.get("model"), body.get("id") if self.continues_by_id else None
        return Answered(
            model if isinstance(model, str) else None,
            rid if isinstance(rid, str) else None,
            self.usage(body.get("usage")),
        )

    def watcher(
        self, candidate: str, annotation: dict[str, Any], cost_of: Callable[[Usage], float | None]
    ) -> StreamWatcher:
        """A watcher of one relayed stream of this API, answered by ``candidate``."""
        return self.watching(candidate, annotation, cost_of)

    def name_candidate(self, body: dict[str, Any], candidate: str) -> Answered:
        """Put ``candidate`` in an answer's ``model``; what the router reads of the answer."""
        answered = self.read_answer(body)
        body["model"] = candidate
        return answered
