"""Cost tables for routing: one row per model with a non-negative cost (any unit: dollars per query,
output tokens, ...). Extra columns (provider, sampling settings) are ignored. Two layouts are read:

- evalprism's own: columns ``model`` and ``cost`` (lmarena/p2l's ``route/example_config.yaml``
  flattened to CSV, ``model,cost,type,...``, is this layout);
- lmarena's arena-catalog price list (``data/scatterplot-data.json``, or a CSV of it): ``model_api_name``
  with ``input_token_price`` / ``output_token_price`` (or ``input_usd_per_1M`` / ``output_usd_per_1M``),
  USD per million tokens, numbers or numeric strings. Without a ``cost`` column the cost is the output
  price (P2L's README prices a query by its output tokens); ``cost_column`` picks another column. Rows
  without a price are left out (those models then have no cost).

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
from evalprism.io.tables import check_listed_once, read_table, row_location

COSTS_SCHEMA = Schema(
    name="costs",
    columns=(Column("model", "key"), Column("cost", "number", description="non-negative cost per query")),
)


class Costs(dict[str, float]):
    """Model -> cost, with the file it came from and each model's place in it (``line 3``)."""

    def __init__(
        self, costs: Mapping[str, float], source: str | None = None, locations: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(costs)
        self.source = source
        self.locations = dict(locations or {})
        self.column = "cost"  # the column the costs were read from
        self.unpriced = 0  # rows of a price list without a price (left out)


#: model name columns, in order of preference (arena-catalog names its models ``model_api_name``)
MODEL_COLUMNS = ("model", "model_api_name")
#: the cost column when none is named: evalprism's ``cost``, else arena-catalog's output price per 1M tokens
COST_COLUMNS = ("cost", "output_token_price", "output_usd_per_1M")


def read_costs(path: str | Path, cost_column: str | None = None) -> Costs:
    """Model -> cost from a table with a model column (``model`` or ``model_api_name``) and a cost
    column (``cost_column``, else ``cost``, else an arena-catalog output price; see the module
    docstring). Rows without a value in a price column (not in ``cost``) are left out."""
    raw = read_table(path)
    model_col = next((c for c in MODEL_COLUMNS if c in raw.columns), "model")
    cost_col = cost_column or next((c for c in COST_COLUMNS if c in raw.columns), "cost")
    if cost_column is not None and cost_column not in raw.columns:
        raise EvalprismError(
            f"{path}: no column '{cost_column}' (columns: {', '.join(map(str, raw.columns))})", parameter="cost_column"
        )
    priced = raw
    if cost_col != "cost" and cost_col in raw.columns:  # a price list: a model without a price has no cost
        present = raw[cost_col].map(lambda v: v is not None and str(v).strip() not in ("", "nan"))
        priced = raw[present.to_numpy(dtype=bool)]
    table = COSTS_SCHEMA.validate(priced.rename(columns={model_col: "model", cost_col: "cost"}), source=str(path))
    cost = table["cost"].to_numpy(dtype=float)
    positions = np.flatnonzero(raw.index.isin(priced.index))  # rows of the file, for messages
    bad = ~np.isfinite(cost) | (cost < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise EvalprismError(
            f"{path}: {row_location(raw, int(positions[row]))}, column '{cost_col}': expected a "
            f"non-negative number, got {cost[row]}"
        )
    check_listed_once(table["model"], str(path), lambda row: row_location(raw, int(positions[row])))
    names = table["model"].astype(str).tolist()
    costs = Costs(
        dict(zip(names, cost.tolist(), strict=True)),
        str(path),
        {m: row_location(raw, int(positions[row])) for row, m in enumerate(names)},
    )
    costs.column = cost_col
    costs.unpriced = len(raw) - len(priced)
    return costs


def cost_vector(costs: Mapping[str, float], models: Sequence[str]) -> np.ndarray:
    """The cost of each of ``models``, in their order, as floats. Every model needs a cost (it could
    not be routed to safely without one); entries for other models are ignored.

    When one is missing, a model of the costs that is not in ``models`` and whose name is close to a
    missing one is the likely cause (a misspelling): the message names its file, line and column."""
    missing = [m for m in models if m not in costs]
    if missing:
        raise EvalprismError(_missing_message(costs, models, missing))
    return np.array([float(costs[m]) for m in models])


def listed(names: Sequence[str], limit: int = 8) -> str:
    """``a, b, c`` for a few names; the first ``limit`` and "… and N more" for more."""
    names = list(names)
    shown = ", ".join(names[:limit])
    return shown + (f" … and {len(names) - limit} more" if len(names) > limit else "")


def _missing_message(costs: Mapping[str, float], models: Sequence[str], missing: list[str]) -> str:
    source = getattr(costs, "source", None)  # a Costs read from a file; else the costs parameter
    where = source or "costs"
    routed = set(models)
    unknown = [m for m in costs if m not in routed]
    for name in unknown:  # a near-miss spelling of a missing model: point at its line
        close = difflib.get_close_matches(name, missing, n=1)
        if close:
            place = getattr(costs, "locations", {}).get(name)
            column = f"{place + ', ' if place else ''}column 'model': " if source else ""
            extra = (
                f" ({len(missing) - 1} other model(s) have no cost either: {listed(missing[1:] if close[0] == missing[0] else [m for m in missing if m != close[0]])})"
                if len(missing) > 1
                else ""
            )
            return f"{where}: {column}'{name}' is not one of the models routed among; did you mean '{close[0]}'?{extra}"
    if len(missing) == len(models):
        others = f"; it prices {len(costs)} other model(s): {listed(list(costs), 5)}" if costs else ""
        return (
            f"{where}: no routed model has a cost: every one of the {len(models)} models the P2L model routes "
            f"among needs one: {listed(missing)}{others}"
        )
    return f"{where}: no cost for {len(missing)} of the {len(models)} models routed among: {listed(missing)}"


def costs_frame(costs: Mapping[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"model": list(costs), "cost": list(costs.values())})
