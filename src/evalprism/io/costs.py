"""Cost tables for routing: one row per model with a non-negative ``cost`` (any unit: dollars per
query, output tokens, ...). Extra columns (provider, sampling settings) are ignored.

:func:`read_costs` returns a :class:`Costs` mapping that remembers the file and line of every model,
so that :func:`cost_vector`, run once the models to route among are known, can point at the line
of a misspelled model instead of only saying which model has no cost. :func:`cost_vector` is the one
place a missing cost is found: the CLI, ``p2l.route_prompts`` and ``p2l.route`` all go through it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table, row_location

COSTS_SCHEMA = Schema(
    name="costs",
    columns=(Column("model", "key"), Column("cost", "number", description="non-negative cost per query")),
)


class Costs(dict[str, float]):
    """Model -> cost, with the file it came from and each model's place in it (``line 3``)."""

    def __init__(self, costs: Mapping[str, float], source: str | None = None,
                 locations: Mapping[str, str] | None = None) -> None:
        super().__init__(costs)
        self.source = source
        self.locations = dict(locations or {})


def read_costs(path: str | Path) -> Costs:
    """Model -> cost from a table with columns ``model`` and ``cost``."""
    raw = read_table(path)
    table = COSTS_SCHEMA.validate(raw, source=str(path))
    cost = table["cost"].to_numpy(dtype=float)
    bad = ~np.isfinite(cost) | (cost < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise EvalprismError(f"{path}: {row_location(raw, row)}, column 'cost': expected a non-negative number, "
                             f"got {cost[row]}")
    dup = table["model"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise EvalprismError(f"{path}: {row_location(raw, row)}: model '{table['model'].iat[row]}' is listed twice")
    names = table["model"].astype(str).tolist()
    return Costs(dict(zip(names, cost.tolist(), strict=True)), str(path),
                 {m: row_location(raw, row) for row, m in enumerate(names)})


def cost_vector(costs: Mapping[str, float], models: Sequence[str]) -> np.ndarray:
    """The cost of each of ``models``, in their order, as floats. Every model needs a cost (it could
    not be routed to safely without one); entries for other models are ignored.

    When one is missing, a model of the costs that is not in ``models`` is the likely cause (a
    misspelling): the message names its file, line and column and the closest model name."""
    missing = [m for m in models if m not in costs]
    if missing:
        raise EvalprismError(_missing_message(costs, models, missing))
    return np.array([float(costs[m]) for m in models])


def _missing_message(costs: Mapping[str, float], models: Sequence[str], missing: list[str]) -> str:
    source = getattr(costs, "source", None)  # a Costs read from a file; else the costs parameter
    where = source or "costs"
    shown = f"{', '.join(list(models)[:8])}{', ...' if len(models) > 8 else ''}"
    unknown = [m for m in costs if m not in set(models)]
    if unknown:
        name = unknown[0]
        place = getattr(costs, "locations", {}).get(name)
        close = difflib.get_close_matches(name, missing, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; models without a cost: {', '.join(missing[:6])}"
        column = f"{place + ', ' if place else ''}column 'model': " if source else ""
        return f"{where}: {column}'{name}' is not one of the models routed among ({shown}){hint}"
    return (f"{where}: no cost for {len(missing)} of the {len(models)} models routed among: {', '.join(missing[:6])}"
            + (" …" if len(missing) > 6 else ""))


def costs_frame(costs: Mapping[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"model": list(costs), "cost": list(costs.values())})
