"""Passive health of the upstreams: a circuit breaker per upstream, fed by the answers of real requests.

No probe requests are sent. Each upstream counts its consecutive failures (unreachable, timed out,
5xx, a refusal of the router's own configuration such as a 401 or 404, a body that is not JSON, a
stream that broke off); at ``threshold`` of them its circuit *opens* for ``cooldown_s``: requests skip
it while another candidate remains. After the cool-down it is *half open*: exactly one request at a
time is admitted as the *trial*; the others skip it (as if open) until the trial ends. A trial that
succeeds closes the circuit, one that fails opens it for another cool-down, and one whose outcome says
nothing about the upstream (the client left first) frees the slot for the next request. A 429 is the
upstream refusing for now, not failing: it neither counts as a failure nor resets the count; nor
does a timeout the router's own starvation explains (:mod:`~evalprism.serve.loop_lag`), which is
counted apart (``starved_attempts``).

Every attempt holds a :class:`Ticket` from :meth:`HealthBoard.acquire` and reports its outcome with
it exactly once (:meth:`~HealthBoard.success`, :meth:`~HealthBoard.failure` or
:meth:`~HealthBoard.release`); a stream reports when it ends, not when its headers arrive. Hand-written rather than taken from a library (pybreaker, aiobreaker):
the breaker is a few counters read on the event loop, while those libraries wrap the call itself and
would not let the router choose the next candidate instead of raising.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half_open"]


@dataclass
class _Circuit:
    failures: int = 0  # consecutive
    open_until: float = float("-inf")
    last_error: str | None = None
    trial: bool = False  # a half-open (or forced) trial request is in flight
    starved: int = 0  # attempts whose timeout the router's own starvation explained (never reset)


@dataclass
class Ticket:
    """Permission for one attempt on ``name``; ``trial``: it is the one request a circuit that is not
    closed admits at a time. Its outcome is reported once; later reports are ignored."""

    name: str
    trial: bool = False
    done: bool = False


@dataclass(frozen=True)
class UpstreamState:
    """What ``/health`` reports for one upstream."""

    state: State
    consecutive_failures: int
    retry_in_s: float | None
    last_error: str | None
    starved_attempts: int


class HealthBoard:
    """The circuits of a set of upstreams (used from the event loop only)."""

    def __init__(
        self, names: Iterable[str], threshold: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._circuits = {name: _Circuit() for name in names}

    def state(self, name: str) -> State:
        circuit = self._circuits[name]
        if circuit.failures < self.threshold:
            return "closed"
        return "open" if self.clock() < circuit.open_until else "half_open"

    def admits(self, name: str) -> bool:
        """Whether :meth:`acquire` (without ``force``) would give a ticket for ``name`` now."""
        state = self.state(name)
        return state == "closed" or (state == "half_open" and not self._circuits[name].trial)

    def acquire(self, name: str, force: bool = False) -> Ticket | None:
        """A ticket to try ``name`` now, or None: always while closed; while half open only as the one
        trial (None while a trial is in flight); while open only with ``force`` (the request has no
        other candidate), and then also as the one trial."""
        circuit = self._circuits[name]
        state = self.state(name)
        if state == "closed":
            return Ticket(name)
        if circuit.trial or (state == "open" and not force):
            return None
        circuit.trial = True
        return Ticket(name, trial=True)

    def blocked_by_trial(self, name: str) -> bool:
        """Whether ``name`` is refused only because its trial request is in flight."""
        return self._circuits[name].trial and self.state(name) != "closed"

    def _end(self, ticket: Ticket) -> bool:
        if ticket.done:
            return False
        ticket.done = True
        if ticket.trial:
            self._circuits[ticket.name].trial = False
        return True

    def success(self, ticket: Ticket) -> None:
        if self._end(ticket):
            circuit = self._circuits[ticket.name]
            circuit.failures = 0
            circuit.open_until = float("-inf")

    def failure(self, ticket: Ticket, error: str) -> None:
        if self._end(ticket):
            circuit = self._circuits[ticket.name]
            circuit.failures += 1
            circuit.last_error = error
            if circuit.failures >= self.threshold:
                circuit.open_until = self.clock() + self.cooldown_s

    def release(self, ticket: Ticket, starved: bool = False) -> None:
        """The attempt ended without saying anything about the upstream (a 429, the client left, no
        free connection, ``starved``: a timeout the router's own starvation explains, counted apart): the
        count stays as it is, and a trial's slot is free again."""
        if self._end(ticket) and starved:
            self._circuits[ticket.name].starved += 1

    def report(self) -> dict[str, UpstreamState]:
        now = self.clock()
        out = {}
        for name, circuit in self._circuits.items():
            state = self.state(name)
            out[name] = UpstreamState(
                state,
                circuit.failures,
                round(circuit.open_until - now, 3) if state == "open" else None,
                circuit.last_error,
                circuit.starved,
            )
        return out
