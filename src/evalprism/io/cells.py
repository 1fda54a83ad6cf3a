"""The cells of an item table, read once for every input format: scores in 0..1, identifiers, clusters.

A score table and an ECDF responses file are different layouts of the same cells
(:mod:`evalprism.io.item_formats`); these readers give both the same messages (file, row, column, what
was expected).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.tables import row_location

_TRUE_FALSE = {"true": 1.0, "false": 0.0}


def score_values(df: pd.DataFrame, where: str) -> tuple[np.ndarray, int]:
    """Scores as floats in 0..1 and how many were -1 (no answer, counted as 0). Text is converted
    once per distinct value (a 5-million-row table has few)."""
    series = df["score"]
    if series.dtype == bool:
        values = series.to_numpy(dtype=np.float64)
    elif pd.api.types.is_numeric_dtype(series.dtype):
        values = np.array(series, dtype=np.float64)
    else:
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        text = pd.Series(pd.Index(uniques).astype(str).str.strip().str.lower())
        table = pd.to_numeric(text.where(~text.isin(list(_TRUE_FALSE)), text.map(_TRUE_FALSE)), errors="coerce")
        values = np.append(table.to_numpy(dtype=np.float64), np.nan)[codes]  # code -1 (missing) -> NaN
    no_answer = values == -1
    bad = np.flatnonzero(np.isnan(values) | (((values < 0) | (values > 1)) & ~no_answer))
    if bad.size:
        r = int(bad[0])
        raise EvalprismError(
            f"{where}: {row_location(df, r)}, column 'score': expected a score in 0..1 "
            f"(1 right, 0 wrong, partial credit between; -1 no answer; true/false), got {series.iloc[r]!r}"
        )
    values[no_answer] = 0.0
    return values, int(no_answer.sum())


def cost_values(df: pd.DataFrame, where: str, column: str = "cost") -> np.ndarray:
    """A per-row cost (what answering the item cost, e.g. its tokens at the model's prices) as
    non-negative finite floats; the first other value is reported by row."""
    values = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        r = int(bad[0])
        raise EvalprismError(
            f"{where}: {row_location(df, r)}, column '{column}': expected a non-negative number (the cost of "
            f"answering the item), got {df[column].iloc[[r]].tolist()[0]!r}"
        )
    return values


def identifier_column(
    df: pd.DataFrame, col: str, where: str, expected: str = "a non-empty identifier"
) -> pd.Categorical:
    """An identifier column as stripped text (``3.0`` read as a float is ``3``), converted once per
    distinct value and kept as a categorical (integer codes: 5 million rows of a few thousand
    items are never materialised as strings); the first missing or empty value is reported by row."""
    codes, uniques = pd.factorize(df[col], use_na_sentinel=True)
    texts = np.array([identifier_text(v) for v in uniques], dtype=object)
    bad = (codes < 0) | (texts == "")[np.maximum(codes, 0)] if len(texts) else codes < 0
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise EvalprismError(f"{where}: {row_location(df, r)}, column '{col}': missing value, expected {expected}")
    recode, distinct = pd.factorize(texts)  # `3` and `3.0` are one item
    return pd.Categorical.from_codes(recode[codes], categories=pd.Index(distinct, dtype=object))


def identifier_text(value: object) -> str:
    """An item id as text; ``3.0`` read as a float is item ``3``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def require_cluster(df: pd.DataFrame, cluster: str, where: str) -> None:
    """The ``cluster`` column exists in this run's table."""
    if cluster not in df.columns:
        columns = ", ".join(f"'{c}'" for c in df.columns)  # quoted: a column named like an option stays as it is
        raise EvalprismError(
            f"{where}: no column '{cluster}' for cluster (columns: {columns})",
            parameter="cluster",
        )
