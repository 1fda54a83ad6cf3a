"""Micro-batching: concurrent requests share one model call instead of queueing for one each.

A request puts its item on a queue and awaits a future. One worker task takes the first waiting
item and every item already waiting (up to ``max_batch``; with a positive ``window_s`` also those
the event loop queues in one more turn) and runs the batch function in a dedicated thread, so the
event loop keeps accepting and answering requests while the model runs (torch releases the GIL).
While a batch runs, the next one fills up: under load the batch size grows by itself. It never
waits on a clock for more items (a timed window idled the model while requests queued behind it,
and made a lone request wait the window). A batch function that takes a few milliseconds (a static
backbone's) runs inline in the event loop's thread: the hand-off to the worker thread and back cost
more CPU than the batch itself (bench_serve.py, static backbone, 32 clients: 1.50 -> 0.62 ms of
service CPU per request, 246 -> 661 requests/s, load average 12).

One item's failure never reaches another's request: when a batch raises, its items are run again
one at a time, so each gets its own result or its own error (a poisoned prompt costs its batch one
more pass; the innocent requests of that batch still get their answers).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


@dataclass
class BatchStats:
    batches: int = 0
    items: int = 0


class MicroBatcher(Generic[Item, Result]):
    """Run ``fn(items) -> results`` (same length, same order) on batches of concurrently submitted items."""

    def __init__(
        self,
        fn: Callable[[Sequence[Item]], Sequence[Result]],
        *,
        window_s: float = 0.004,
        max_batch: int = 64,
        inline: bool | None = None,
    ) -> None:
        self.fn = fn
        #: run ``fn`` in the event loop's own thread: for a batch function that takes a few milliseconds
        #: at most (a static backbone), where handing each batch to the worker thread and back cost more
        #: than the batch (default: ``fn.inline`` when ``fn`` says, else False)
        self.inline = bool(getattr(fn, "inline", False)) if inline is None else inline
        self.window_s = window_s
        self.max_batch = max_batch
        self.stats = BatchStats()
        #: called with each batch's size after it ran (the service's metrics)
        self.on_batch: Callable[[int], None] | None = None
        self._queue: asyncio.Queue[tuple[Item, asyncio.Future[Result]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        # one thread: the model is not run by two batches at once (torch parallelises inside a call)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalprism-batch")

    async def start(self) -> None:
        self._queue = asyncio.Queue()
        self._worker = asyncio.create_task(self._run(), name="evalprism-batcher")

    async def submit(self, item: Item) -> Result:
        """The result for ``item``, computed in some batch."""
        if self._queue is None or self._worker is None or self._worker.done():
            raise RuntimeError("the batcher is not running")
        future: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        await self._queue.put((item, future))
        return await future

    async def stop(self) -> None:
        """Finish every submitted item, then stop the worker and its thread."""
        if self._queue is not None and self._worker is not None:
            await self._queue.join()
            self._worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._worker
        self._executor.shutdown(wait=True)

    async def _collect(self) -> list[tuple[Item, asyncio.Future[Result]]]:
        """The next batch: the first waiting item and every item already queued behind it, plus those
        the event loop queues in one more turn (requests whose bodies it has already read), up to
        ``max_batch``. Never a timed wait: an item that finds the queue empty runs at once (batching
        off's latency at low load), and under load the queue fills while the previous batch runs."""
        assert self._queue is not None
        batch = [await self._queue.get()]
        self._drain(batch)
        if self.window_s > 0 and len(batch) < self.max_batch:
            await asyncio.sleep(0)
            self._drain(batch)
        return batch

    def _drain(self, batch: list[tuple[Item, asyncio.Future[Result]]]) -> None:
        assert self._queue is not None
        while len(batch) < self.max_batch:
            try:
                batch.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                return

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            batch = await self._collect()
            outcomes: list[tuple[Result | None, Exception | None]]
            try:
                outcomes = [(result, None) for result in await self._call([item for item, _ in batch])]
            except Exception as exc:
                outcomes = [(None, exc)] if len(batch) == 1 else [await self._one(item) for item, _ in batch]
            for (_, future), (result, error) in zip(batch, outcomes, strict=True):
                if future.done():  # the client went away
                    continue
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)  # type: ignore[arg-type]
            self.stats.batches += 1
            self.stats.items += len(batch)
            if self.on_batch is not None:
                self.on_batch(len(batch))
            for _ in batch:
                self._queue.task_done()

    async def _call(self, items: list[Item]) -> Sequence[Result]:
        """``fn(items)`` in the worker thread (or inline), checked to give one result per item."""
        if self.inline:
            results = self.fn(items)
        else:
            results = await asyncio.get_running_loop().run_in_executor(self._executor, self.fn, items)
        if len(results) != len(items):
            raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
        return results

    async def _one(self, item: Item) -> tuple[Result | None, Exception | None]:
        """``item`` run alone: its result, or the error it raised."""
        try:
            return (await self._call([item]))[0], None
        except Exception as exc:
            return None, exc
