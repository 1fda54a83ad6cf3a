"""Micro-batching: concurrent requests share one model call instead of queueing for one each.

A request puts its item on a queue and awaits a future. One worker task takes the first waiting
item, keeps collecting for at most ``window_s`` or until ``max_batch`` items, and runs the batch
function in a dedicated thread, so the event loop keeps accepting and answering requests while the
model runs (torch releases the GIL). While a batch runs, the next one fills up: under load the batch
size grows by itself, and an idle service adds at most ``window_s`` of latency.
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

    def __init__(self, fn: Callable[[Sequence[Item]], Sequence[Result]], *, window_s: float = 0.004,
                 max_batch: int = 64) -> None:
        self.fn = fn
        self.window_s = window_s
        self.max_batch = max_batch
        self.stats = BatchStats()
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
        assert self._queue is not None
        batch = [await self._queue.get()]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.window_s
        while len(batch) < self.max_batch:
            try:  # take what is already waiting without yielding, then wait out the window
                batch.append(self._queue.get_nowait())
                continue
            except asyncio.QueueEmpty:
                pass
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            try:
                batch.append(await asyncio.wait_for(self._queue.get(), remaining))
            except TimeoutError:
                break
        return batch

    async def _run(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._collect()
            items = [item for item, _ in batch]
            try:
                results = await loop.run_in_executor(self._executor, self.fn, items)
                if len(results) != len(items):
                    raise RuntimeError(f"batch function returned {len(results)} results for {len(items)} items")
            except Exception as exc:  # noqa: BLE001 - every waiting request gets the error, the worker goes on
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
            else:
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():  # the client may have gone away
                        future.set_result(result)
            self.stats.batches += 1
            self.stats.items += len(batch)
            for _ in batch:
                self._queue.task_done()
