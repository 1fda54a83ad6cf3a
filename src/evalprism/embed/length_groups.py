"""Length-bucketed batches: which prompts of one batch share an inference call.

Why: a padded batch costs its size times its longest prompt. On a CPU the encoder is compute-bound
per token (minilm in OpenVINO float32 on 2 AVX2 cores: about 0.27 ms of CPU per token at any batch
size from 4 up, with a fixed cost of about 4 ms of CPU per call; ``benchmarks/bench_serve.py``), so
a micro-batch of 16 prompts of 15 to 44 tokens spends a third of its time on padding. Sorting by
length and cutting the sorted list where it pays removes most of it. No library does this for a
single already-collected batch (Hugging Face's ``group_by_length`` samplers shuffle a dataset into
batches; here the batch is fixed by the request queue and only its split is free).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: the fixed cost of one inference call, in tokens of compute (4 ms / 0.27 ms per token, rounded)
CALL_COST_TOKENS = 16


def length_groups(lengths: Sequence[int], call_cost: float = CALL_COST_TOKENS) -> list[np.ndarray]:
    """Positions of ``lengths`` split into groups for padded inference, cheapest first.

    The cost of a group is ``call_cost + size * longest`` (tokens computed, padding included). The
    optimal split of any batch into groups is contiguous in length order (swapping a longer item
    into a shorter group never lowers its longest), so a dynamic programme over the sorted lengths
    finds it exactly in O(n^2). Each group's positions are in the caller's order within the group.
    """
    if len(lengths) == 0:
        return []
    order = np.argsort(np.asarray(lengths), kind="stable")
    sorted_lengths = np.asarray(lengths, dtype=float)[order]
    n = len(order)
    best = np.full(n + 1, np.inf)
    best[0] = 0.0
    cut = np.zeros(n + 1, dtype=int)
    for end in range(1, n + 1):  # best[end]: cheapest split of the `end` shortest items
        starts = np.arange(end)
        costs = best[:end] + call_cost + (end - starts) * sorted_lengths[end - 1]
        cut[end] = int(np.argmin(costs))
        best[end] = costs[cut[end]]
    groups, end = [], n
    while end > 0:
        groups.append(np.sort(order[cut[end] : end]))
        end = cut[end]
    return groups[::-1]
