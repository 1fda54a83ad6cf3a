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

Which outcome bounds which coefficient from which side differs between outcome models, and is read
from the registry (:attr:`~evalprism.stats.outcome_models.OutcomeModel.bounds`) by
:func:`model_separation`, the one entry the fits use. A model that is not shift invariant (``grk``)
has a fixed point, the fictitious "bad" model of coefficient 0: it is one more node of the graph and
the core is always its component (a model the core cannot reach is unbounded above even when the
component is the "bad" model alone, since coefficients are absolute there). In ``grk`` "both bad"
is a loss of both models to the "bad" one and bounds them from above only, so a model with only
losses and "both bad" outcomes is unbounded below.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

from evalprism.stats.outcome_models import GROUND, Side, get_outcome_model
from evalprism.vocabularies import OutcomeModelName


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
    present = np.zeros(n_models, bool)
    present[a], present[b] = True, True
    return _graph_separation(src, dst, present, n_models, anchor=None)


def model_separation(
    outcome_model: OutcomeModelName, a: np.ndarray, b: np.ndarray, weights: np.ndarray, n_models: int
) -> Separation:
    """Separation of ``n_models`` under ``outcome_model`` from aggregated battles: pair ``k`` is
    model ``a[k]`` against ``b[k]`` with outcome weights ``weights[k]`` (n, 4) as the outcome model uses them
    (:meth:`~evalprism.stats.outcome_models.OutcomeModel.weights`: ties dropped, halved or merged
    already). Each outcome with positive weight adds the edges its registry entry's ``bounds`` name;
    a model without shift invariance adds the "bad" model as node ``n_models``, the fixed point."""
    entry = get_outcome_model(outcome_model)
    a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
    weights = np.asarray(weights, float)
    ground = np.full(a.size, n_models, np.int64)
    side: dict[Side, np.ndarray] = {"a": a, "b": b, GROUND: ground}
    src: list[np.ndarray] = []
    dst: list[np.ndarray] = []
    for outcome, rules in entry.bounds.items():
        seen = weights[:, outcome] > 0
        for upper, lower in rules:
            src.append(side[upper][seen])
            dst.append(side[lower][seen])
    present = np.zeros(n_models, bool)  # a model whose battles the outcome model drops is in none of its edges
    present[a], present[b] = True, True
    anchor = None if entry.shift_invariant else n_models
    return _graph_separation(np.concatenate(src), np.concatenate(dst), present, n_models, anchor)


def _graph_separation(
    src: np.ndarray, dst: np.ndarray, present: np.ndarray, n_models: int, anchor: int | None
) -> Separation:
    """Separation from the edges ``src -> dst`` (src bounds dst from above) among ``n_models`` models
    (``present``: in some battle); ``anchor`` is the node of a fixed coefficient (the "bad" model,
    index ``n_models``), whose component is then the core whatever its size."""
    n_nodes = n_models + (anchor is not None)
    graph = coo_matrix((np.ones(src.size), (src, dst)), shape=(n_nodes, n_nodes)).tocsr()
    _, comp = connected_components(graph, directed=True, connection="strong")
    above = np.zeros(n_models, bool)
    below = np.zeros(n_models, bool)
    if anchor is None:
        sizes = np.bincount(comp[:n_models][present], minlength=comp.max() + 1)
        if sizes.max() == present.sum():
            return Separation(above, below)
        core = int(np.argmax(sizes))  # the largest component (the lowest component id among equals)
    else:
        core = int(comp[anchor])
    if anchor is not None or sizes[core] >= 2:
        start = anchor if anchor is not None else int(np.flatnonzero(comp == core)[0])
        reach_down = np.zeros(n_nodes, bool)
        reach_down[breadth_first_order(graph, start, directed=True, return_predecessors=False)] = True
        reach_up = np.zeros(n_nodes, bool)
        reach_up[breadth_first_order(graph.T.tocsr(), start, directed=True, return_predecessors=False)] = True
        in_core = (comp == core)[:n_models]
        above = present & ~in_core & ~reach_down[:n_models]  # the core cannot bound it from above
        below = present & ~in_core & ~reach_up[:n_models]
    else:
        never_lost = np.bincount(dst, minlength=n_models) == 0  # no anchor here: n_nodes == n_models
        never_won = np.bincount(src, minlength=n_models) == 0
        above = present & ~(never_won & ~never_lost)
        below = present & ~(never_lost & ~never_won)
    return Separation(above, below)
