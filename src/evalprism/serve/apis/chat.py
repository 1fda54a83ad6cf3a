"""OpenAI Chat Completions (``POST /v1/chat/completions``): messages, tool calls, ``[DONE]``-ended streams.

The request model is :class:`~evalprism.serve.schemas.ChatCompletionRequest` (the service's first API,
with the other bodies). A user message is a human text turn (its text parts kept apart), a ``tool`` or
``function`` message a tool result, each of an assistant's ``tool_calls`` a tool call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from evalprism.serve.apis.base import (
    MODEL_FIELD,
    Api,
    StreamWatcher,
    Usage,
    json_object,
    session_of,
    text_of,
)
from evalprism.serve.config import AffinityConfig
from evalprism.serve.conversation import Conversation, Turn
from evalprism.serve.extraction import DEFAULT_EXTRACTION
from evalprism.serve.schemas import ChatCompletionRequest, ChatMessage
from evalprism.serve.upstream import CHAT, Wire

#: content parts whose text is read (as :func:`evalprism.io.battles.content_text` reads them)
TEXT_PARTS: frozenset[str | None] = frozenset({None, "text", "input_text"})
_SIDES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}


def turns_of(message: ChatMessage) -> list[Turn]:
    """A chat message as turns: a user, system or assistant message's text (an assistant's only when it
    has some or calls nothing), each tool call of an assistant, a tool result."""
    if message.role in ("tool", "function"):
        ref = message.tool_call_id if message.role == "tool" else message.name
        return [Turn("user", "tool_result", ("\n".join(text_of(message.content, TEXT_PARTS)),), ref or "")]
    parts = text_of(message.content, TEXT_PARTS)
    if message.role != "assistant":
        return [Turn(_SIDES[message.role], "text", parts)]  # type: ignore[arg-type]
    calls = [c.get("function") or {} for c in message.tool_calls or []]
    ids = [str(c.get("id", "")) for c in message.tool_calls or []]
    if message.function_call is not None:
        calls.append(message.function_call)
        ids.append("")
    turns = [Turn("assistant", "text", parts)] if parts or not calls else []
    for call, ref in zip(calls, ids, strict=True):
        turns.append(Turn("assistant", "tool_call", (str(call.get("name", "")), str(call.get("arguments", ""))), ref))
    return turns


def chat_conversation(messages: list[ChatMessage], session: str | None = None) -> Conversation:
    return Conversation("chat", tuple(t for m in messages for t in turns_of(m)), session=session)


def routing_prompt(messages: list[ChatMessage]) -> str:
    """The text P2L scores for a chat conversation with the default extraction: its user turns' human
    text, as in training (FastChat's convention), the ends stripped; of two turns or more a
    :class:`~evalprism.io.battles.Conversation`, which keeps the turns apart for a released lmarena
    checkpoint (each its own user message, as lmarena's router sends every user message's content to
    its P2L endpoint)."""
    return DEFAULT_EXTRACTION.read(chat_conversation(messages)).prompt


class ChatWatcher(StreamWatcher):
    """A chat stream: chunks until ``data: [DONE]``; every chunk names the model; usage in a chunk."""

    unfinished = "the upstream ended the stream without [DONE]"

    def data(self, event: str | None, payload: str) -> str | None:
        if payload == "[DONE]":
            self.done = True
            return None
        first = not self.started
        if not first and '"usage"' not in payload:
            return MODEL_FIELD.sub(f'"model": {json.dumps(self.candidate)}', payload, count=1)
        chunk = json_object(payload)
        if chunk is None:
            return None
        extra = self.priced(self.first(chunk.get("model")) if first else {}, ChatApi.usage(chunk.get("usage")))
        if extra:
            chunk["evalprism"] = extra
        if "model" in chunk:
            chunk["model"] = self.candidate
        return json.dumps(chunk)

    def error_event(self, message: str) -> str:
        return (
            "data: "
            + json.dumps({"error": {"message": message, "type": "upstream_error", "param": None, "code": None}})
            + "\n\n"
        )


class ChatApi(Api):
    """OpenAI Chat Completions: placed (routed, kept or named), forwarded with failover; the upstream's
    answer with the decision; streaming and not. Every way it ends writes the request's decision-log line."""

    name = "chat"
    path = "/v1/chat/completions"
    watching = ChatWatcher
    shape = "openai"
    request = ChatCompletionRequest
    param = "messages"
    answers = "chat completion"
    events = "a chat.completion.chunk as JSON (the first with `evalprism`), or [DONE]"

    def conversation(
        self, req: ChatCompletionRequest, headers: Mapping[str, str], settings: AffinityConfig
    ) -> Conversation:
        return chat_conversation(req.messages, session_of(headers, settings, req.user_id()))

    def wire(self, headers: Mapping[str, str]) -> Wire:
        return CHAT

    @staticmethod
    def usage(value: Any) -> Usage | None:
        return value if isinstance(value, dict) else None
