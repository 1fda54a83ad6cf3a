"""Separation in pairwise comparisons: which coefficients the battles cannot pin down.

A maximum-likelihood Bradley-Terry (or Rao-Kupper) fit has a finite optimum only when the directed
win graph (an edge u -> v when u beat v at least once; a tie counts both ways, since a tie bounds
both sides) is strongly connected (Zermelo 1929; Ford 1957). Otherwise some set of models has no
losses to the rest (complete or quasi-complete separation): the likelihood keeps rising as that
set moves away, and the optimiser stops at an arbitrary large coefficient (18.6 for a model that
wins everything) whose sandwich or bootstrap interval looks finite and is meaningless.

:func:`separation` finds the strongly connected components of that graph. The largest one with at
least two models is the identified core; its coefficients have a finite optimum relative to each
other. A model that reaches the core through wins (an ancestor in the graph of components) is
unbounded above; one the core reaches is unbounded below; one neither reaches nor is reached is
unbounded both ways. Without a core (every component a single model) no coefficient is identified:
models that never lose are unbounded above, models that never win below, the others both ways.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components


@dataclass(frozen=True)
class Separation:
    """Per model: ``unbounded_above`` / ``unbounded_below`` (its coefficient can grow / fall without
    bound relative to the identified core) and ``identified`` (neither)."""

    unbounded_above: np.ndarray
    unbounded_below: np.ndarray

    @property
    def identified(self) -> np.ndarray:
        return ~(self.unbounded_above | self.unbounded_below)


def separation(a: np.ndarray, b: np.ndarray, won_a: np.ndarray, won_b: np.ndarray, n_models: int) -> Separation:
    """Separation of ``n_models`` from aggregated battles: pair ``k`` is model ``a[k]`` against
    ``b[k]``; ``won_a[k]`` / ``won_b[k]`` are the weights of the outcomes that bound ``b[k]`` / ``a[k]``
    from above (wins, plus ties counted for both sides). Models in no battle count as identified
    (they have no coefficient to speak of)."""
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    beats_a, beats_b = np.asarray(won_a, float) > 0, np.asarray(won_b, float) > 0
    src = np.concatenate([a[beats_a], b[beats_b]])
    dst = np.concatenate([b[beats_a], a[beats_b]])
    graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(n_models, n_models)).tocsr()
    present = np.zeros(n_models, bool)
    present[a], present[b] = True, True
    _, comp = connected_components(graph, directed=True, connection="strong")
    sizes = np.bincount(comp[present], minlength=comp.max() + 1)
    above = np.zeros(n_models, bool)
    below = np.zeros(n_models, bool)
    if sizes.max() == present.sum():
        return Separation(above, below)
    core = int(np.argmax(sizes))  # the largest component (the lowest component id among equals)
    if sizes[core] >= 2:
        start = int(np.flatnonzero(comp == core)[0])
        reach_down = np.zeros(n_models, bool)
        reach_down[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
        reach_up = np.zeros(n_models, bool)
        reach_up[breadth_first_order(graph.T.tocsr(), start, directed=True, return_predecessors=False)] = True
        in_core = comp == core
        above = present & ~in_core & ~reach_down  # the core cannot bound it from above
        below = present & ~in_core & ~reach_up
    else:
        never_lost = np.bincount(dst, minlength=n_models) == 0
        never_won = np.bincount(src, minlength=n_models) == 0
        above = present & ~(never_won & ~never_lost)
        below = present & ~(never_lost & ~never_won)
    return Separation(above, below)
