"""Conversations keep their model: a bounded store of which candidate each conversation is on.

Tool results, reasoning items and provider caches belong to the model that made the call, so a
conversation is routed once, on its first request, and later requests stay on the model that answered
it. A request continues a conversation the router has seen when one of its keys (:func:`keys_of`) is
in the store, looked up in this order:

- ``previous_response_id`` (Responses API) or ``previous_message_id`` (a Messages thread, the anthropic
  SDK's tool runner since 2.x): the answer it continues, stored at the upstream that issued it, so that
  upstream alone can answer (the key is the answer's id, remembered when the answer passed through, for
  a request whose answer the upstream stores: :attr:`Conversation.answer_stored`);
- ``session``: the client's session id (a header the config names, e.g. Codex's ``session_id`` or
  Claude Code's ``x-claude-code-session-id``, or with ``user_field`` the body's ``user`` /
  ``metadata.user_id``);
- ``history``: what every client sends anyway, the whole conversation with each request. The hash of
  the request's prefix before its last run of assistant turns is the hash of the whole conversation the
  previous request sent (:meth:`~evalprism.serve.conversation.Conversation.identity`).

The store is in memory and bounded (``max_entries``, least recently used first out, and ``ttl_s``
since an entry was last used): one service's memory, not shared between replicas (the README says
what several replicas need). ``cachetools`` is not a dependency of evalprism (nor installed beside it),
so the store is an ``OrderedDict`` with the same two bounds, used from the event loop only.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal, get_args

from evalprism.serve.conversation import ContinuesBy, Conversation

#: how a continuing conversation was recognised (the decision log's ``continued_by``)
ContinuedBy = Literal["previous_response_id", "previous_message_id", "session", "history"]
#: the ways that pin the one upstream holding the answer continued (no other can answer)
PINNED_BY_ID: frozenset[ContinuedBy] = frozenset(get_args(ContinuesBy))
#: why a conversation the router knew left its model (the decision log's ``move_reason``,
#: :mod:`evalprism.serve.placement`)
MoveReason = Literal["unavailable", "over_budget", "gain"]
#: how a routed request's candidate was placed (the decision log's ``affinity``)
Affinity = Literal["routed", "sticky"]


@dataclass(frozen=True)
class Kept:
    """What the store keeps of a conversation: the candidate that answered its last request, the
    failover order it was routed with (the other candidates, best first), and the budget it ran under."""

    model: str
    fallbacks: tuple[str, ...] = ()
    budget: float | None = None


@dataclass(frozen=True)
class ConversationKeys:
    """The store's keys of one request: ``lookup``, those that find the conversation it continues (in
    the order they are tried), and ``remember``, those its answer is kept under (with ``answer_stored``,
    the answer's own id is added once the answer is seen, :func:`response_key`)."""

    lookup: tuple[tuple[ContinuedBy, str], ...]
    remember: tuple[str, ...]
    answer_stored: bool = False


def response_key(response_id: str) -> str:
    return f"response:{response_id}"


def keys_of(conversation: Conversation) -> ConversationKeys:
    """The keys of ``conversation``'s request (each namespaced by the API: a conversation is one API's)."""
    api = conversation.api
    prefix, whole = conversation.identity()
    lookup: list[tuple[ContinuedBy, str]] = []
    remember = [f"history:{whole}"]
    if conversation.continues is not None:
        how, answer_id = conversation.continues
        lookup.append((how, response_key(answer_id)))
    if conversation.session is not None:
        session = f"session:{api}:{conversation.session}"
        lookup.append(("session", session))
        remember.append(session)
    if prefix is not None:
        lookup.append(("history", f"history:{prefix}"))
    return ConversationKeys(tuple(lookup), tuple(remember), conversation.answer_stored)


class AffinityStore:
    """Conversation key -> :class:`Kept`, at most ``max_entries`` of them, each forgotten ``ttl_s``
    seconds after it was last stored or found (``clock``: seconds, monotonic)."""

    def __init__(self, max_entries: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self.clock = clock
        self._entries: OrderedDict[str, tuple[float, Kept]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def find(self, lookup: Iterable[tuple[ContinuedBy, str]]) -> tuple[ContinuedBy, Kept] | None:
        """The first key of ``lookup`` the store holds, and what it keeps (refreshed: used again now)."""
        now = self.clock()
        for how, key in lookup:
            found = self._entries.get(key)
            if found is None:
                continue
            if found[0] <= now:
                del self._entries[key]
                continue
            self._entries[key] = (now + self.ttl_s, found[1])
            self._entries.move_to_end(key)
            return how, found[1]
        return None

    def remember(self, keys: Iterable[str], kept: Kept) -> None:
        """Keep ``kept`` under each of ``keys``; the least recently used entries go beyond ``max_entries``
        (expired ones first: they are the least recently used)."""
        expires = self.clock() + self.ttl_s
        for key in keys:
            self._entries[key] = (expires, kept)
            self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
