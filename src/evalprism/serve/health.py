"""Passive health of the upstreams: a circuit breaker per upstream, fed by the answers of real requests.

No probe requests are sent. Each upstream counts its consecutive failures (unreachable, timed out,
5xx, a body that is not JSON, a stream that broke off); at ``threshold`` of them its circuit *opens*
for ``cooldown_s``: requests skip it while another candidate remains. After the cool-down it is
*half open*: the next request tries it, and one success closes the circuit, one failure opens it
for another cool-down. A 429 is the upstream refusing for now, not failing: it neither counts as a
failure nor resets the count. Hand-written rather than taken from a library (pybreaker, aiobreaker):
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


@dataclass(frozen=True)
class UpstreamState:
    """What ``/health`` reports for one upstream."""

    state: State
    consecutive_failures: int
    retry_in_s: float | None
    last_error: str | None


class HealthBoard:
    """The circuits of a set of upstreams (used from the event loop only)."""

    def __init__(self, names: Iterable[str], threshold: int, cooldown_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.clock = clock
        self._circuits = {name: _Circuit() for name in names}

    def state(self, name: str) -> State:
        circuit = self._circuits[name]
        if circuit.failures < self.threshold:
            return "closed"
        return "open" if self.clock() < circuit.open_until else "half_open"

    def available(self, name: str) -> bool:
        """Whether a request may try ``name`` now (closed or half open)."""
        return self.state(name) != "open"

    def success(self, name: str) -> None:
        circuit = self._circuits[name]
        circuit.failures = 0
        circuit.open_until = float("-inf")

    def failure(self, name: str, error: str) -> None:
        circuit = self._circuits[name]
        circuit.failures += 1
        circuit.last_error = error
        if circuit.failures >= self.threshold:
            circuit.open_until = self.clock() + self.cooldown_s

    def report(self) -> dict[str, UpstreamState]:
        now = self.clock()
        out = {}
        for name, circuit in self._circuits.items():
            state = self.state(name)
            out[name] = UpstreamState(state, circuit.failures,
                                      round(circuit.open_until - now, 3) if state == "open" else None,
                                      circuit.last_error)
        return out
