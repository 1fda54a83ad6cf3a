"""What the fake upstreams (serve_harness.FakeUpstreams) answer, in each API's own shape: OpenAI Chat
Completions, OpenAI Responses and Anthropic Messages, plain and as server-sent events, with tool calls.

Each shape reads what a request says (the tool calls made so far, the tool results sent back since the
human's last message) and writes an answer as the real API does: the fields its official SDK reads,
its stream's events in order (Responses: ``response.created`` ... ``response.completed`` with sequence
numbers; Messages: ``event:`` lines from ``message_start`` to ``message_stop``), usage included.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

USAGE = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}


@dataclass(frozen=True)
class ToolCall:
    """A call the fake model makes: the first tool the request declares (else ``add``), numbered by
    the calls already in the conversation (``call_1``, ``call_2``, ...)."""

    call_id: str
    name: str
    arguments: str = '{"a": 2, "b": 3}'


def sse(data: dict[str, Any], event: str | None = None) -> str:
    return (f"event: {event}\n" if event else "") + f"data: {json.dumps(data)}\n\n"


class Shape:
    """One API as the fake speaks it."""

    name: ClassVar[str]

    def calls_made(self, body: dict[str, Any]) -> int:
        """Tool calls already in the conversation."""
        raise NotImplementedError

    def results_since_human(self, body: dict[str, Any]) -> int:
        """Tool results sent back since the human's last message."""
        raise NotImplementedError

    def answer(self, model: str, text: str, call: ToolCall | None, rid: str) -> dict[str, Any]:
        raise NotImplementedError

    def events(self, model: str, text: str, call: ToolCall | None, rid: str, body: dict[str, Any]) -> Iterator[str]:
        raise NotImplementedError

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}

    def next_call(self, body: dict[str, Any], rounds: int) -> ToolCall | None:
        """The tool call to answer with, while fewer than ``rounds`` results came back since the human spoke."""
        if self.results_since_human(body) >= rounds:
            return None
        tools = body.get("tools") or []
        first = tools[0] if tools else {}
        name = (first.get("function") or first).get("name", "add")
        return ToolCall(f"call_{self.calls_made(body) + 1}", name)


class Chat(Shape):
    name = "chat"

    def calls_made(self, body: dict[str, Any]) -> int:
        return sum(len(m.get("tool_calls") or []) for m in body["messages"] if m["role"] == "assistant")

    def results_since_human(self, body: dict[str, Any]) -> int:
        count = 0
        for message in reversed(body["messages"]):
            if message["role"] == "user":
                break
            count += message["role"] == "tool"
        return count

    def answer(self, model: str, text: str, call: ToolCall | None, rid: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
        if call is not None:
            function = {"name": call.name, "arguments": call.arguments}
            message |= {"content": None, "tool_calls": [{"id": call.call_id, "type": "function", "function": function}]}
        finish = "stop" if call is None else "tool_calls"
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": USAGE,
        }

    def events(self, model: str, text: str, call: ToolCall | None, rid: str, body: dict[str, Any]) -> Iterator[str]:
        base = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": model}
        words = text.split(" ")
        for i, word in enumerate(words):
            finish = "stop" if i == len(words) - 1 else None  # on the last content chunk, as some providers send it
            delta = {"content": word if i == 0 else " " + word}
            yield sse({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            yield sse({**base, "choices": [], "usage": USAGE})
        yield "data: [DONE]\n\n"


class Responses(Shape):
    name = "responses"

    @staticmethod
    def _items(body: dict[str, Any]) -> list[dict[str, Any]]:
        given = body.get("input")
        return [{"role": "user", "content": given}] if isinstance(given, str) else list(given or [])

    def calls_made(self, body: dict[str, Any]) -> int:
        return sum(item.get("type") == "function_call" for item in self._items(body))

    def results_since_human(self, body: dict[str, Any]) -> int:
        count = 0
        for item in reversed(self._items(body)):
            if item.get("role") == "user":
                break
            count += item.get("type") == "function_call_output"
        return count

    def _output(self, text: str, call: ToolCall | None) -> dict[str, Any]:
        if call is not None:
            return {
                "type": "function_call",
                "id": f"fc_{call.call_id}",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        return {"type": "message", "id": "msg_fake", "status": "completed", "role": "assistant", "content": [part]}

    def answer(self, model: str, text: str, call: ToolCall | None, rid: str, done: bool = True) -> dict[str, Any]:
        usage = {
            "input_tokens": USAGE["prompt_tokens"],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": USAGE["completion_tokens"],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": USAGE["total_tokens"],
        }
        return {
            "id": rid,
            "object": "response",
            "created_at": 0,
            "status": "completed" if done else "in_progress",
            "model": model,
            "output": [self._output(text, call)] if done else [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "error": None,
            "incomplete_details": None,
            "usage": usage if done else None,
        }

    def events(self, model: str, text: str, call: ToolCall | None, rid: str, body: dict[str, Any]) -> Iterator[str]:
        item = self._output(text, call)
        steps: list[dict[str, Any]] = [
            {"type": "response.created", "response": self.answer(model, text, call, rid, done=False)},
            {"type": "response.in_progress", "response": self.answer(model, text, call, rid, done=False)},
        ]
        opened = {**item, "status": "in_progress"} | ({"arguments": ""} if call else {"content": []})
        steps.append({"type": "response.output_item.added", "output_index": 0, "item": opened})
        if call is not None:
            steps.append(
                {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": 0}
                | {"arguments": call.arguments}
            )
        else:
            where = {"item_id": item["id"], "output_index": 0, "content_index": 0}
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            steps.append({"type": "response.content_part.added", **where, "part": part})
            for i, word in enumerate(text.split(" ")):
                steps.append(
                    {"type": "response.output_text.delta", **where, "delta": word if i == 0 else " " + word}
                    | {"logprobs": []}
                )
            steps.append({"type": "response.output_text.done", **where, "text": text, "logprobs": []})
            steps.append({"type": "response.content_part.done", **where, "part": {**part, "text": text}})
        steps.append({"type": "response.output_item.done", "output_index": 0, "item": item})
        steps.append({"type": "response.completed", "response": self.answer(model, text, call, rid)})
        for n, step in enumerate(steps):
            yield sse({**step, "sequence_number": n}, step["type"])


class Messages(Shape):
    name = "messages"

    def calls_made(self, body: dict[str, Any]) -> int:
        return sum(
            isinstance(m["content"], list) and sum(b.get("type") == "tool_use" for b in m["content"])
            for m in body["messages"]
            if m["role"] == "assistant"
        )

    @staticmethod
    def _results(message: dict[str, Any]) -> int:
        content = message["content"]
        return 0 if isinstance(content, str) else sum(b.get("type") == "tool_result" for b in content)

    def results_since_human(self, body: dict[str, Any]) -> int:
        count = 0
        for message in reversed(body["messages"]):
            if message["role"] == "user":
                if not self._results(message):
                    break
                count += self._results(message)
        return count

    def _content(self, text: str, call: ToolCall | None) -> dict[str, Any]:
        if call is not None:
            return {"type": "tool_use", "id": call.call_id, "name": call.name, "input": json.loads(call.arguments)}
        return {"type": "text", "text": text}

    def answer(self, model: str, text: str, call: ToolCall | None, rid: str) -> dict[str, Any]:
        return {
            "id": rid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [self._content(text, call)],
            "stop_reason": "tool_use" if call else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": USAGE["prompt_tokens"], "output_tokens": USAGE["completion_tokens"]},
        }

    def events(self, model: str, text: str, call: ToolCall | None, rid: str, body: dict[str, Any]) -> Iterator[str]:
        start = {**self.answer(model, text, call, rid), "content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": USAGE["prompt_tokens"], "output_tokens": 1}
        yield sse({"type": "message_start", "message": start}, "message_start")
        block = self._content(text, call)
        opened = {**block, "input": {}} if call else {**block, "text": ""}
        yield sse({"type": "content_block_start", "index": 0, "content_block": opened}, "content_block_start")
        yield sse({"type": "ping"}, "ping")
        if call is not None:
            delta = {"type": "input_json_delta", "partial_json": call.arguments}
            yield sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        for i, word in enumerate(text.split(" ") if call is None else []):
            delta = {"type": "text_delta", "text": word if i == 0 else " " + word}
            yield sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        yield sse({"type": "content_block_stop", "index": 0}, "content_block_stop")
        stop = {"stop_reason": "tool_use" if call else "end_turn", "stop_sequence": None}
        usage = {"output_tokens": USAGE["completion_tokens"]}
        yield sse({"type": "message_delta", "delta": stop, "usage": usage}, "message_delta")
        yield sse({"type": "message_stop"}, "message_stop")

    def error(self, status: int, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}

    def reply(self, text: str, call: ToolCall | None) -> dict[str, Any]:
        """The answer as the assistant message a thread holds after it."""
        return {"role": "assistant", "content": [self._content(text, call)]}

    @staticmethod
    def thread_not_found(previous: str) -> dict[str, Any]:
        """A continuation of a thread this upstream does not hold, as the anthropic SDK reads it (the
        ``error.details.error_code`` makes it replay the whole history under a new thread)."""
        error = {"type": "not_found_error", "message": f"thread with message {previous!r} not found"}
        return {"type": "error", "error": {**error, "details": {"error_code": "thread_not_found"}}}


SHAPES: dict[str, Shape] = {shape.name: shape for shape in (Chat(), Responses(), Messages())}
#: the path of each API after an upstream's base URL
PATHS = {"chat": "chat/completions", "responses": "responses", "messages": "messages"}
