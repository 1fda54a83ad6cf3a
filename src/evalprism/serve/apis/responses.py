"""OpenAI Responses (``POST /v1/responses``): ``input`` as a string or items, ``instructions``, tools,
``previous_response_id``, and streams of typed events ending with ``response.completed``.

Items are read by type: a user message is a human text turn (its ``input_text`` parts kept apart), a
``function_call`` (and every other ``*_call``) a tool call, a ``function_call_output`` (every
``*_output``) a tool result, ``reasoning`` the model's, ``instructions`` and system/developer messages the
instructions. ``previous_response_id`` names the answer the request continues: it is stored at the
upstream that issued it, which alone can continue it (:mod:`~evalprism.serve.affinity`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from evalprism.serve.apis.base import (
    Api,
    StreamWatcher,
    Usage,
    check_items,
    event_type,
    items_schema,
    json_object,
    session_of,
    text_of,
)
from evalprism.serve.config import AffinityConfig
from evalprism.serve.conversation import Conversation, Side, Turn
from evalprism.serve.schemas import TEXT_SCHEMA, ApiRequest
from evalprism.serve.upstream import Wire, bearer

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
#: what a message item must hold (its ``type`` may be left out)
_MESSAGE_KEYS = {"role": "text", "content": "text or list"}
#: what an item of each other type must hold (items of other types pass to the upstream as they are)
_ITEM_KEYS = {
    "function_call": {"call_id": "text", "name": "text", "arguments": "text"},
    "function_call_output": {"call_id": "text", "output": "text or list"},
    "custom_tool_call": {"call_id": "text", "name": "text", "input": "text"},
    "custom_tool_call_output": {"call_id": "text", "output": "text or list"},
}
_TEXT_PARTS: frozenset[str | None] = frozenset({"input_text", "output_text", "text"})
#: what a message's content part of each type must hold
_PART_KEYS = {"input_text": {"text": "text"}, "output_text": {"text": "text"}}
#: a message's content in the published schema: text, or typed parts
_CONTENT = {"content": {"anyOf": [{"type": "string"}, {"type": "array", "items": items_schema(_PART_KEYS)}]}}
#: items the model produced that are neither text nor a tool call
_MODEL_ITEMS = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request", "compaction"})
#: the events that carry the response object (its model, id and usage)
_RESPONSE_EVENTS = frozenset(
    {"response.created", "response.queued", "response.in_progress", "response.completed", "response.incomplete"}
)


def _item_type(item: dict[str, Any]) -> Any:
    return item.get("type", "message" if "role" in item else None)


def _input_schema(schema: dict[str, Any]) -> None:
    """``input`` as the published schema says it (:func:`check_items`' rules, by the same table), and
    with something to route on: text, or items of which a user message or a tool's output holds text."""
    text, items = schema["anyOf"]
    text.update(TEXT_SCHEMA)
    message = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"type": {"const": "message"}, "role": {"enum": list(_ROLES)}, **_CONTENT},
    }
    part = {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "input_text"}, "text": TEXT_SCHEMA},
    }
    said = {"anyOf": [TEXT_SCHEMA, {"type": "array", "contains": part}]}
    routable = [
        {
            "type": "object",
            "required": ["role", "content"],
            "properties": {"type": {"const": "message"}, "role": {"const": "user"}, "content": said},
        },
        {
            "required": ["type", "output"],
            "properties": {"type": {"const": "function_call_output"}, "output": TEXT_SCHEMA},
        },
    ]
    items.update(minItems=1, items=items_schema(_ITEM_KEYS, ("message", message)), contains={"anyOf": routable})


class ResponsesRequest(ApiRequest):
    """OpenAI Responses request (see :class:`~evalprism.serve.schemas.ApiRequest` for ``model`` and
    ``budget``); parameters not declared here pass to the upstream."""

    input: str | list[dict[str, Any]] = Field(json_schema_extra=_input_schema)
    instructions: str | None = None
    previous_response_id: str | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    user: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None

    @field_validator("input")
    @classmethod
    def _items(cls, value: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        if isinstance(value, list):
            check_items(value, {**_ITEM_KEYS, "message": _MESSAGE_KEYS}, "item", _item_type)
            for i, item in enumerate(value):
                if _item_type(item) != "message":
                    continue
                if item["role"] not in _ROLES:
                    raise PydanticCustomError(
                        "invalid_item",
                        "item {i} (message): role {role} is not one of user, assistant, system, developer",
                        {"i": i, "role": json.dumps(item["role"])},
                    )
                if isinstance(item["content"], list):
                    check_items(item["content"], _PART_KEYS, f"item {i} (message): part")
        return value


def turn_of(item: dict[str, Any]) -> Turn:
    """One input item as a turn."""
    kind = _item_type(item)
    ref = str(item.get("call_id") or item.get("id") or "")
    if kind == "message":
        side: Side = _ROLES[item["role"]]  # type: ignore[assignment]
        return Turn(side, "text", text_of(item["content"], _TEXT_PARTS))
    if kind in ("function_call", "custom_tool_call"):
        return Turn("assistant", "tool_call", (item["name"], item.get("arguments", item.get("input", ""))), ref)
    if kind.endswith("_output"):
        return Turn("user", "tool_result", ("\n".join(text_of(item.get("output"), _TEXT_PARTS)),), ref)
    if kind.endswith("_call"):
        return Turn("assistant", "tool_call", (kind,), ref)
    if kind == "reasoning":
        return Turn("assistant", "reasoning")
    return Turn("assistant" if kind in _MODEL_ITEMS else "user", "other", (kind,), ref)


def _usage(value: Any) -> Usage | None:
    """A Responses usage as prompt and completion tokens."""
    if not isinstance(value, dict):
        return None
    return {"prompt_tokens": value.get("input_tokens"), "completion_tokens": value.get("output_tokens")}


class ResponsesWatcher(StreamWatcher):
    """A Responses stream: the response object in its lifecycle events (created ... completed), the
    text and calls in delta events between; ``response.failed`` or ``error`` is the upstream's failure."""

    unfinished = "the upstream ended the stream without response.completed"

    def data(self, event: str | None, payload: str) -> str | None:
        kind = event_type(event, payload)
        if kind in ("response.failed", "error"):
            self.failure = _failure(json_object(payload) or {})
            return None
        if kind not in _RESPONSE_EVENTS:
            return None
        value = json_object(payload)
        response = value.get("response") if value is not None else None
        if value is None or not isinstance(response, dict):
            return None
        extra = self.first(response.get("model"), response.get("id")) if not self.started else {}
        if kind in ("response.completed", "response.incomplete"):
            self.done = True
            extra = self.priced(extra, _usage(response.get("usage")))
        response["model"] = self.candidate
        if extra:
            value["evalprism"] = extra
        return json.dumps(value)

    def error_event(self, message: str) -> str:
        error = {"type": "error", "code": "upstream_error", "message": message, "param": None}
        return "event: error\ndata: " + json.dumps(error) + "\n\n"


def _failure(value: dict[str, Any]) -> str:
    """Why the upstream says a streamed response failed (a ``response.failed`` or ``error`` event)."""
    error = (value.get("response") or {}).get("error") if "response" in value else value
    message = error.get("message") if isinstance(error, dict) else None
    return f"the upstream's stream reported a failure ({message or 'no message'})"


class ResponsesApi(Api):
    """OpenAI Responses, to the candidates whose upstream serves it (``previous_response_id``: the
    upstream that issued that response); as chat otherwise."""

    name = "responses"
    path = "/v1/responses"
    watching = ResponsesWatcher
    shape = "openai"
    request = ResponsesRequest
    param = "input"
    answers = "response"
    events = "a Responses stream event as JSON (response.created with `evalprism`)"
    continues_by_id = True
    _wire: ClassVar[Wire] = Wire("/responses", bearer)

    def conversation(self, req: ResponsesRequest, headers: Mapping[str, str], settings: AffinityConfig) -> Conversation:
        turns = [Turn("system", "text", (req.instructions,))] if req.instructions is not None else []
        if isinstance(req.input, str):
            turns.append(Turn("user", "text", (req.input,)))
        else:
            turns += [turn_of(item) for item in req.input]
        session = session_of(headers, settings, req.user_id())
        previous = req.previous_response_id
        return Conversation(
            "responses",
            tuple(turns),
            None if previous is None else ("previous_response_id", previous),
            session,
            answer_stored=req.store is not False,
        )

    def wire(self, headers: Mapping[str, str]) -> Wire:
        return self._wire

    usage = staticmethod(_usage)
