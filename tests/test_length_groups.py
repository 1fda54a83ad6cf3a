"""Length-bucketed batches (evalprism.embed.length_groups): the dynamic programme's split against
brute force over every partition of small batches, and the closed-form cases."""

from __future__ import annotations

import numpy as np
import pytest

from evalprism.embed.length_groups import length_groups


def _cost(groups: list[list[int]], lengths: list[int], call_cost: float) -> float:
    return sum(call_cost + len(g) * max(lengths[i] for i in g) for g in groups)


def _partitions(items: list[int]):
    """Every set partition of ``items`` (Bell numbers: 877 for seven items)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first], *part]
        for k in range(len(part)):
            yield [*part[:k], [first, *part[k]], *part[k + 1 :]]


@pytest.mark.parametrize("seed", range(12))
def test_split_is_as_cheap_as_the_best_partition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 60, size=rng.integers(1, 8)).tolist()
    call_cost = float(rng.choice([0.5, 4, 16, 64]))
    groups = length_groups(lengths, call_cost)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))  # every position exactly once
    best = min(_cost(p, lengths, call_cost) for p in _partitions(list(range(len(lengths)))))
    assert _cost([g.tolist() for g in groups], lengths, call_cost) == pytest.approx(best)


def test_closed_form_cases() -> None:
    assert [g.tolist() for g in length_groups([7] * 5)] == [[0, 1, 2, 3, 4]]  # no padding to save: one call
    # eight short and eight long prompts, interleaved: one call costs 16 + 16 * 100 = 1616 tokens,
    # two cost 2 * 16 + 8 * 1 + 8 * 100 = 840
    mixed = [1, 100] * 8
    assert [g.tolist() for g in length_groups(mixed, 16)] == [list(range(0, 16, 2)), list(range(1, 16, 2))]
    assert [g.tolist() for g in length_groups([3, 9], 0)] == [[0], [1]]  # calls are free: no padding at all
    assert length_groups([]) == []
