"""The router service's parts that need no model or server: micro-batch isolation, the circuit
breaker, Retry-After, the request-body checks and the decision log's JSON (tests/test_serve.py
covers the whole service over HTTP)."""

from __future__ import annotations

import asyncio
import json

from evalprism.serve.batcher import MicroBatcher


def test_one_failing_item_fails_only_its_own_request() -> None:
    """16 concurrent items, one of which makes the batch function raise (as the tokenizer did on a
    lone surrogate): the 15 others get their results, in every round, and batches really were shared."""
    calls: list[int] = []

    def reciprocal(items: list[int]) -> list[float]:
        calls.append(len(items))
        return [1 / x for x in items]

    async def rounds() -> list[list[object]]:
        batcher: MicroBatcher[int, float] = MicroBatcher(reciprocal, window_s=0.05, max_batch=16)
        await batcher.start()
        out = []
        for _ in range(5):
            out.append(await asyncio.gather(*(batcher.submit(0 if i == 9 else i + 1) for i in range(16)),
                                            return_exceptions=True))
        await batcher.stop()
        return out

    for results in asyncio.run(rounds()):
        assert isinstance(results[9], ZeroDivisionError)
        assert [r for i, r in enumerate(results) if i != 9] == [1 / (i + 1) for i in range(16) if i != 9]
    assert max(calls) > 1  # the poisoned item really shared batches with innocent ones
