"""Cost tables for routing: one row per model with a non-negative ``cost`` (any unit: dollars per
query, output tokens, ...). Extra columns (provider, sampling settings) are ignored."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table

COSTS_SCHEMA = Schema(
    name="costs",
    columns=(Column("model", "key"), Column("cost", "number", description="non-negative cost per query")),
)


def read_costs(path: str | Path) -> dict[str, float]:
    """Model -> cost from a table with columns ``model`` and ``cost``."""
    table = COSTS_SCHEMA.validate(read_table(path), source=str(path))
    cost = table["cost"].to_numpy(dtype=float)
    bad = ~np.isfinite(cost) | (cost < 0)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise EvalprismError(f"{path}: row {row + 1}, column 'cost': expected a non-negative number, got {cost[row]}")
    dup = table["model"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise EvalprismError(f"{path}: row {row + 1}: model '{table['model'].iat[row]}' is listed twice")
    return dict(zip(table["model"].astype(str), cost.tolist(), strict=True))


def costs_frame(costs: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({"model": list(costs), "cost": list(costs.values())})
