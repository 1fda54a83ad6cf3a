"""Anthropic Messages (``POST /v1/messages``): ``system``, messages of content blocks, tools, and streams of
named events from ``message_start`` to ``message_stop``.

Blocks are read by type: a user message's text blocks (images and documents beside them) are a human text
turn, each text block one part of it (Claude Code sends the human's words and its ``<system-reminder>``
blocks as separate blocks); a ``tool_result`` block is a tool result; an assistant's ``tool_use`` (and
``server_tool_use``, ``mcp_tool_use``) a tool call, its ``thinking`` reasoning. The upstream gets the
router's key for it as ``x-api-key`` and the client's ``anthropic-version`` and ``anthropic-beta``.

Message threads (``thread``: ``{"type": "create"}``, then ``{"type": "continue", "previous_message_id":
...}`` with only the new messages; the anthropic SDK's tool runner sends them since 2.x) are held by the
upstream that answered, so a continuation goes to the upstream that issued ``previous_message_id``, alone.
An id the router has not seen (another replica's, or from before a restart) is routed like any request;
the upstream that does not hold it answers ``thread_not_found``, passed back as it is, and the SDK replays
the whole history under a new thread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

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
from evalprism.serve.conversation import Conversation, Turn
from evalprism.serve.schemas import TEXT_SCHEMA, ApiRequest
from evalprism.serve.upstream import Wire

#: the version of the Messages API the upstream is called with when the client names none
DEFAULT_VERSION = "2023-06-01"
#: what a block of each type must hold (blocks of other types pass to the upstream as they are)
_BLOCK_KEYS = {
    "text": {"text": "text"},
    "image": {"source": "object"},
    "document": {"source": "object"},
    "tool_use": {"id": "text", "name": "text", "input": "object"},
    "tool_result": {"tool_use_id": "text"},
    "thinking": {"thinking": "text"},
    "redacted_thinking": {"data": "text"},
}
_TEXT: frozenset[str | None] = frozenset({"text"})
_CALLS = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})


def _content_schema(schema: dict[str, Any]) -> None:
    """A message's blocks as the published schema says them (:func:`check_items`' rules, by the same table)."""
    schema["anyOf"][1]["items"] = items_schema(_BLOCK_KEYS)


def _messages_schema(schema: dict[str, Any]) -> None:
    """The messages hold something to route on: a user message with text, or a tool's result with text."""
    text_block = {
        "type": "object",
        "required": ["type", "text"],
        "properties": {"type": {"const": "text"}, "text": TEXT_SCHEMA},
    }
    result = {
        "type": "object",
        "required": ["type", "tool_use_id", "content"],
        "properties": {"type": {"const": "tool_result"}, "content": TEXT_SCHEMA},
    }
    said = {"anyOf": [TEXT_SCHEMA, {"type": "array", "contains": {"anyOf": [text_block, result]}}]}
    schema["contains"] = {
        "type": "object",
        "required": ["role", "content"],
        "properties": {"role": {"const": "user"}, "content": said},
    }


class AnthropicMessage(BaseModel):
    """One message: a role and its content, a string or blocks (kept as sent, extra keys included)."""

    model_config = ConfigDict(extra="allow", strict=True)

    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]] = Field(json_schema_extra=_content_schema)

    @field_validator("content")
    @classmethod
    def _blocks(cls, value: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
        if isinstance(value, list):
            check_items(value, _BLOCK_KEYS, "block")
        return value


class MessagesRequest(ApiRequest):
    """Anthropic Messages request (see :class:`~evalprism.serve.schemas.ApiRequest` for ``model`` and
    ``budget``); parameters not declared here pass to the upstream."""

    max_tokens: Annotated[int, BeforeValidator(_whole)] = Field(ge=1)
    messages: list[AnthropicMessage] = Field(min_length=1, json_schema_extra=_messages_schema)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    thread: dict[str, Any] | None = None

    def user_id(self) -> str | None:
        user = (self.metadata or {}).get("user_id")
        return user if isinstance(user, str) else None

    def continued_message(self) -> str | None:
        """The ``previous_message_id`` of a thread this request continues (None: it continues none)."""
        thread = self.thread or {}
        previous = thread.get("previous_message_id") if thread.get("type") == "continue" else None
        return previous if isinstance(previous, str) else None


def turns_of(message: AnthropicMessage) -> list[Turn]:
    """A message as turns: a user's consecutive non-result blocks make one text turn (the text blocks
    its parts); each tool result, tool call, text or thinking block of the assistant its own turn."""
    if isinstance(message.content, str):
        return [Turn(message.role, "text", (message.content,))]
    if message.role == "assistant":
        return [_assistant_turn(block) for block in message.content]
    turns: list[Turn] = []
    group: list[dict[str, Any]] = []
    for block in [*message.content, None]:
        if block is None or block["type"] == "tool_result":
            if group:
                turns.append(Turn("user", "text", text_of(group, _TEXT)))
                group = []
            if block is not None:
                turns.append(
                    Turn(
                        "user", "tool_result", ("\n".join(text_of(block.get("content"), _TEXT)),), block["tool_use_id"]
                    )
                )
        else:
            group.append(block)
    return turns


def _assistant_turn(block: dict[str, Any]) -> Turn:
    kind = block["type"]
    if kind == "text":
        return Turn("assistant", "text", (block["text"],))
    if kind in _CALLS:
        arguments = json.dumps(block.get("input"), sort_keys=True)
        return Turn("assistant", "tool_call", (str(block.get("name", "")), arguments), str(block.get("id", "")))
    if kind in ("thinking", "redacted_thinking"):
        return Turn("assistant", "reasoning")
    ref = str(block.get("tool_use_id", ""))
    return Turn("assistant", "tool_result" if kind.endswith("_tool_result") else "other", (kind,), ref)


def _whole(value: Any) -> Any:
    """A whole number sent as a float (``1.0``: JSON does not tell them apart) as the integer it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _usage(value: Any, prompt: int | None = None) -> Usage | None:
    """A Messages usage as prompt and completion tokens (cache writes and reads are prompt tokens);
    ``prompt``: the prompt tokens already known (a stream's, from ``message_start``)."""
    if not isinstance(value, dict):
        return None
    if prompt is None:
        counts = [value.get(k) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")]
        prompt = sum(c for c in counts if isinstance(c, int)) if isinstance(counts[0], int) else None
    return {"prompt_tokens": prompt, "completion_tokens": value.get("output_tokens")}


class MessagesWatcher(StreamWatcher):
    """A Messages stream: ``message_start`` carries the message (model, id, prompt tokens),
    ``message_delta`` the output tokens, ``message_stop`` ends it; ``error`` is the upstream's failure."""

    unfinished = "the upstream ended the stream without message_stop"
    prompt_tokens: int | None = None

    def data(self, event: str | None, payload: str) -> str | None:
        kind = event_type(event, payload)
        if kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = (json_object(payload) or {}).get("error")
            message = error.get("message") if isinstance(error, dict) else None
            self.failure = f"the upstream's stream reported a failure ({message or 'no message'})"
        elif kind in ("message_start", "message_delta"):
            value = json_object(payload)
            if value is not None:
                return json.dumps(self._annotated(kind, value))
        return None

    def _annotated(self, kind: str, value: dict[str, Any]) -> dict[str, Any]:
        message = value.get("message")
        if kind == "message_start" and isinstance(message, dict):
            extra = self.first(message.get("model"), message.get("id"))
            self.prompt_tokens = (_usage(message.get("usage")) or {}).get("prompt_tokens")
            message["model"] = self.candidate
        else:
            extra = self.priced({}, _usage(value.get("usage"), self.prompt_tokens))
        if extra:
            value["evalprism"] = extra
        return value

    def error_event(self, message: str) -> str:
        error = {"type": "error", "error": {"type": "api_error", "message": message}}
        return "event: error\ndata: " + json.dumps(error) + "\n\n"


class MessagesApi(Api):
    """Anthropic Messages (``x-api-key`` or bearer auth), to the candidates whose upstream serves it;
    errors in Anthropic's shape; as chat otherwise."""

    name = "messages"
    path = "/v1/messages"
    watching = MessagesWatcher
    shape = "anthropic"
    request = MessagesRequest
    param = "messages"
    answers = "message"
    events = "a Messages stream event as JSON (message_start with `evalprism`)"
    continues_by_id = True

    def conversation(self, req: MessagesRequest, headers: Mapping[str, str], settings: AffinityConfig) -> Conversation:
        turns = [Turn("system", "text", text_of(req.system, _TEXT))] if req.system is not None else []
        turns += [t for m in req.messages for t in turns_of(m)]
        previous = req.continued_message()
        return Conversation(
            "messages",
            tuple(turns),
            None if previous is None else ("previous_message_id", previous),
            session_of(headers, settings, req.user_id()),
            answer_stored=req.thread is not None,
        )

    def wire(self, headers: Mapping[str, str]) -> Wire:
        sent = {"anthropic-version": headers.get("anthropic-version") or DEFAULT_VERSION}
        if headers.get("anthropic-beta"):
            sent["anthropic-beta"] = headers["anthropic-beta"]

        def with_key(key: str | None) -> dict[str, str]:
            return {**sent, "x-api-key": key} if key else sent

        return Wire("/messages", with_key)

    usage = staticmethod(_usage)
