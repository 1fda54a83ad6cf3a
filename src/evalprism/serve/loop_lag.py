"""The service's own event-loop lag: how late it runs its callbacks, so that its starvation is not
blamed on an upstream.

An upstream attempt's timeout is a timer on the event loop, and so is the reading of the upstream's
answer. A service starved of CPU (other processes on its cores, hundreds of streams on two cores, a
long synchronous step) runs both late: an answer that arrived in time can sit unread in the socket
until a timer that fired seconds late calls it a timeout (issue 39: 24 s attempts under a 3 s timeout
opened a healthy upstream's circuit). The attempt alone cannot tell a slow upstream from a slow
router, so the router measures itself: :class:`LoopLag` sleeps ``interval_s`` again and again and
records how much later than asked it woke. An attempt that timed out while that lag reached the
config's ``starvation_lag_s`` is the router's starvation (:class:`~evalprism.serve.upstream.UpstreamStarved`):
it fails over like a failed attempt but counts nothing against the upstream's circuit, and is counted
apart instead (``/health``, ``evalprism_starved_attempts_total``). The price: while the router is
starved, a dead upstream's timeouts are excused too; it is tried again once the router recovers.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable

#: how often the loop's lag is sampled (a wake-up costs microseconds: ~20 a second cost nothing measurable)
INTERVAL_S = 0.05
#: the window /health reports the worst lag of
RECENT_S = 10.0


class LoopLag:
    """Samples the running event loop's lag every ``interval_s`` and keeps ``horizon_s`` of samples
    (at least as long as an attempt can last). ``observe`` gets each sample (the lag metric); ``clock``
    is the clock attempts are timed with."""

    def __init__(
        self,
        horizon_s: float,
        interval_s: float = INTERVAL_S,
        observe: Callable[[float], None] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.interval_s = interval_s
        self.observe = observe
        self.clock = clock
        self._samples: deque[tuple[float, float]] = deque(maxlen=max(1, math.ceil(horizon_s / interval_s)))
        self._due: float | None = None  # when the sleep in progress should end
        self._task: asyncio.Task[None] | None = None
        #: the loop measured (once started): a test starves it through this handle
        self.loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="evalprism-loop-lag")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            self._due = self.clock() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now = self.clock()
            lag = max(0.0, now - self._due)
            self._samples.append((now, lag))
            if self.observe is not None:
                self.observe(lag)

    def worst_since(self, start: float) -> float:
        """The largest lag from ``start`` (a ``clock`` value) until now, in seconds, counting how late
        the sampler's own wake-up is now: a timer that fires late fires in the same turn of the loop as
        the sampler's overdue wake-up, possibly before it. (A stall that ends after ``start`` began after
        it: nothing, an attempt included, starts while the loop stands still.)"""
        now = self.clock()
        worst = max(0.0, now - self._due) if self._due is not None else 0.0
        for when, lag in reversed(self._samples):
            if when < start:
                break
            worst = max(worst, lag)
        return worst

    def recent(self) -> float:
        """The largest lag of the last :data:`RECENT_S` seconds (what ``/health`` shows)."""
        return self.worst_since(self.clock() - RECENT_S)
