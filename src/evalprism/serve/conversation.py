"""One normalized conversation per request, whatever API it came through.

Each API's adapter (:mod:`evalprism.serve.apis`) reads its request into a :class:`Conversation`: the API's
name and the turns in order, each with its side (``user``, ``assistant``, ``system``) and kind (``text``,
``tool_call``, ``tool_result``, ``reasoning``, ``other``). Everything the router decides about a request
reads this value, never the API's own shape: the routing prompt (:mod:`~evalprism.serve.extraction`:
what the human wrote), whether the request continues a conversation the router has seen, and whether it
is in the middle of a tool exchange (:mod:`~evalprism.serve.affinity`).

A text turn keeps its text parts apart (a message's content string, or each of its text parts or
blocks), so that extraction can drop a harness's injected part (a compaction summary, a
``<system-reminder>`` block) and keep the human's part of the same message. A tool call's parts are its
name and arguments, a tool result's its output's text; both carry the call's id as ``ref``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

#: the APIs the router speaks: Chat Completions, Responses (OpenAI) and Messages (Anthropic)
ApiName = Literal["chat", "responses", "messages"]
API_NAMES: tuple[ApiName, ...] = ("chat", "responses", "messages")
#: who produced a turn: the client's user side (the human, the harness, tool results), the model, or
#: the system/developer instructions
Side = Literal["user", "assistant", "system"]
TurnKind = Literal["text", "tool_call", "tool_result", "reasoning", "other"]
#: how a request names the stored answer it continues: OpenAI Responses' ``previous_response_id``,
#: Anthropic message threads' ``thread.previous_message_id``
ContinuesBy = Literal["previous_response_id", "previous_message_id"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn of a conversation (a message, or one item or block of one)."""

    side: Side
    kind: TurnKind
    parts: tuple[str, ...] = ()
    ref: str = ""  # a tool call's or result's call id

    @property
    def text(self) -> str:
        """The turn's text parts joined by newlines (as a message's text parts are read for routing)."""
        return "\n".join(self.parts)


#: the kinds a conversation's identity is made of: its instructions may be rewritten by the harness
#: between requests (a date, a git status) and reasoning may be dropped or redacted by the client, so
#: neither is part of the hash that recognises a continuing conversation
_IDENTITY_KINDS = frozenset({"text", "tool_call", "tool_result", "other"})


@dataclass(frozen=True)
class Conversation:
    """A request's conversation, as the router reads it: ``continues`` (the field and id of a stored
    answer this request continues, held by the upstream that issued it: a Responses
    ``previous_response_id``, a Messages thread's ``previous_message_id``), ``session`` (the client's
    session id, from a header or the body, when the config says to read one), ``answer_stored`` (whether
    this request's answer is stored upstream, so a later request can continue it by its id: a Responses
    request unless ``store`` is false, a Messages request that creates or continues a thread)."""

    api: ApiName
    turns: tuple[Turn, ...]
    continues: tuple[ContinuesBy, str] | None = None
    session: str | None = None
    answer_stored: bool = False

    def identity(self) -> tuple[str | None, str]:
        """Hashes that recognise a continuing conversation from the history the client sends with each
        request: (the prefix before the last run of assistant turns, or None when there is none; the
        whole conversation). A request's prefix is what the previous request of the conversation sent
        (its answer is that last run of assistant turns), so the previous request's whole hash is this
        one's prefix hash."""
        start = self._last_assistant_run()
        digest = hashlib.sha256(self.api.encode())
        prefix, hashed = None, 0
        for i, turn in enumerate(self.turns):
            if i == start and hashed:  # a prefix of nothing continues nothing
                prefix = digest.hexdigest()
            if turn.kind in _IDENTITY_KINDS and turn.side != "system":
                hashed += 1
                digest.update(f"\x1d{turn.side}\x1c{turn.kind}\x1c{turn.ref}".encode())
                for part in turn.parts:
                    digest.update(b"\x1e" + part.encode())
        return prefix, digest.hexdigest()

    def _last_assistant_run(self) -> int | None:
        """The index of the first turn of the last run of assistant turns (None: no assistant turn).
        Turns the client sends without the model (its instructions) do not end a run."""
        start = None
        for i in range(len(self.turns) - 1, -1, -1):
            side = self.turns[i].side
            if side == "assistant":
                start = i
            elif side == "user" and start is not None:
                break
        return start

    def in_tool_exchange(self, last_human: int | None) -> bool:
        """Whether the request is in the middle of a tool call/result exchange: a tool result the client
        sends back comes after the last turn the human wrote (``last_human``, from extraction)."""
        after = self.turns if last_human is None else self.turns[last_human + 1 :]
        return any(t.kind == "tool_result" and t.side == "user" for t in after)
