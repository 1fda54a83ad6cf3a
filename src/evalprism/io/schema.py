"""Declarative table schemas: required columns, value kinds, and normalisation at the boundary.

A :class:`Schema` checks a DataFrame and returns a normalised copy (numbers as floats,
string lists parsed from JSON cells) or raises one :class:`EvalprismError` that names the
source file, the 1-based data row, the column and what was expected. Columns the schema does
not know are carried through untouched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError, shorten

Kind = Literal["str", "number", "str_list", "key"]

_EXPECTED = {
    "str": "a text value",
    "number": "a number",
    "str_list": "a list of strings (a JSON list in CSV, or a single string)",
    "key": "a non-empty identifier",
}


@dataclass(frozen=True)
class Column:
    """One column of a schema.

    ``kind`` is ``str`` (any text, may be empty), ``key`` (non-empty identifier, numbers are
    turned into their text form), ``number`` (finite float) or ``str_list``.
    ``nullable`` allows missing values (they stay ``None``/NaN). ``magnitude`` (numbers only): the
    largest absolute value that makes sense in the column; beyond it a value is refused.
    """

    name: str
    kind: Kind = "str"
    required: bool = True
    nullable: bool = False
    description: str = ""
    magnitude: float | None = None


@dataclass(frozen=True)
class Schema:
    """A named set of columns; ``one_of`` lists groups of which at least one must be present."""

    name: str
    columns: Sequence[Column]
    one_of: Sequence[Sequence[str]] = field(default_factory=tuple)

    def validate(self, df: pd.DataFrame, source: str | None = None) -> pd.DataFrame:
        """Check ``df`` and return a normalised copy; raise :class:`EvalprismError` on the first problem."""
        where = source or df.attrs.get("source") or f"{self.name} table"
        if len(df.columns) == 0 or len(df) == 0:
            raise EvalprismError(f"{where}: the {self.name} table is empty, expected at least one row")
        missing = [c.name for c in self.columns if c.required and c.name not in df.columns]
        if missing:
            have = ", ".join(map(str, df.columns[:20]))
            raise EvalprismError(
                f"{where}: missing required column{'s' if len(missing) > 1 else ''} "
                f"{', '.join(repr(m) for m in missing)} for a {self.name} table (columns present: {have})"
            )
        for group in self.one_of:
            if not any(g in df.columns for g in group):
                raise EvalprismError(
                    f"{where}: a {self.name} table needs one of the columns {', '.join(repr(g) for g in group)}"
                )
        out = df.copy()
        out.attrs = dict(df.attrs)
        for col in self.columns:
            if col.name in out.columns:
                out[col.name] = _normalise(out[col.name], col, where)
        return out


def _is_missing(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return value is pd.NA or value is pd.NaT


#: cell values that are structures, not scalars: JSON objects and lists as pandas reads them
NESTED = (dict, list, tuple, set, np.ndarray)


def describe_value(value: Any) -> str:
    """A cell value for a message: its repr, shortened, with 'a JSON object'/'a JSON list' in front of a
    structure (a nested value where a scalar belongs is the usual mistake, and a repr alone hides it)."""
    shown = shorten(repr(value.tolist() if isinstance(value, np.ndarray) else value), 60)
    if isinstance(value, dict):
        return f"a JSON object {shown}"
    if isinstance(value, NESTED):
        return f"a JSON list {shown}"
    return shown


def first_nested(series: pd.Series) -> int | None:
    """Row of the first cell holding a JSON object or list (None when every cell is a scalar); a type
    check pandas does in C first, so columns of plain values cost no Python loop."""
    if series.dtype != object or pd.api.types.infer_dtype(series, skipna=True) in _HOMOGENEOUS:
        return None
    for row, value in enumerate(series.tolist()):
        if isinstance(value, NESTED):
            return row
    return None


def require_scalars(series: pd.Series, column: str, expected: str, where: str) -> None:
    """Refuse a JSON object or list in a column of scalar values (ids, texts, scores) before it is
    hashed, compared or turned into text: one message naming the row and the column."""
    row = first_nested(series)
    if row is not None:
        raise EvalprismError(
            f"{where}: row {row + 1}, column '{column}': expected {expected}, got {describe_value(series.iat[row])}"
        )


def _fail(where: str, row: int, col: Column, value: Any) -> EvalprismError:
    return EvalprismError(
        f"{where}: row {row + 1}, column '{col.name}': expected {_EXPECTED[col.kind]}, got {describe_value(value)}"
    )


#: inferred dtypes whose values hash consistently with how they convert (no True == 1 mix-ups)
_HOMOGENEOUS = {"string", "integer", "floating", "boolean", "empty"}


def _normalise(series: pd.Series, col: Column, where: str) -> pd.Series:
    if col.kind in ("str", "key") and isinstance(series.dtype, pd.StringDtype):
        return _normalise_strings(series, col, where)
    if col.kind != "str_list" and pd.api.types.infer_dtype(series, skipna=True) in _HOMOGENEOUS:
        return _normalise_distinct(series, col, where)
    return _normalise_rows(series, col, where)


def _normalise_strings(series: pd.Series, col: Column, where: str) -> pd.Series:
    """A column already of pandas' string dtype (what pandas 3 reads from CSV, JSON and Parquet):
    the same checks and result as converting row by row, vectorised, and kept in the string dtype
    so that later factorizing stays fast (a million distinct prompts cost no Python loop)."""
    values = series.str.strip() if col.kind == "key" else series
    missing = series.isna().to_numpy()
    bad = (values == "").fillna(False).to_numpy(dtype=bool) if col.kind == "key" else np.zeros(len(series), bool)
    if not col.nullable:
        bad = bad | missing
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        if missing[row]:
            raise EvalprismError(
                f"{where}: row {row + 1}, column '{col.name}': missing value, expected {_EXPECTED[col.kind]}"
            )
        raise _fail(where, row, col, series.iat[row])
    return values


def first_rows(codes: np.ndarray, n_uniques: int) -> np.ndarray:
    """Row of the first occurrence of each code 0..n_uniques-1 (codes < 0, missing values, are
    skipped); used to name the first failing row when only distinct values are checked."""
    first = np.full(n_uniques, codes.size, dtype=np.int64)
    present = codes >= 0
    np.minimum.at(first, codes[present], np.flatnonzero(present))
    return first


def _normalise_distinct(series: pd.Series, col: Column, where: str) -> pd.Series:
    """Convert each distinct value once (a million battles name a few hundred models): the same
    results and the same first-failing row as the row-by-row loop, at the cost of one factorize."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    n = codes.size
    first = first_rows(codes, len(uniques))
    missing_rows = np.flatnonzero(codes < 0)
    first_missing = int(missing_rows[0]) if missing_rows.size else n
    converted: list[Any] = []
    for value, row in zip(uniques.tolist(), first.tolist(), strict=True):  # uniques are in order of first appearance
        if not col.nullable and first_missing < row:
            break
        converted.append(_convert(value, col, where, row))
    if missing_rows.size and not col.nullable:
        raise EvalprismError(
            f"{where}: row {first_missing + 1}, column '{col.name}': missing value, expected {_EXPECTED[col.kind]}"
        )
    if col.kind == "number":
        table = np.r_[np.asarray(converted, dtype=float), np.nan]
        return pd.Series(table[codes], index=series.index, name=series.name)
    table_obj = np.empty(len(converted) + 1, dtype=object)
    table_obj[: len(converted)] = converted
    table_obj[-1] = None
    return pd.Series(table_obj[codes], index=series.index, name=series.name, dtype=object)


def _normalise_rows(series: pd.Series, col: Column, where: str) -> pd.Series:
    values = series.tolist()
    out: list[Any] = []
    for i, v in enumerate(values):
        if _is_missing(v):
            if not col.nullable:
                raise EvalprismError(
                    f"{where}: row {i + 1}, column '{col.name}': missing value, expected {_EXPECTED[col.kind]}"
                )
            out.append(None if col.kind != "number" else np.nan)
            continue
        out.append(_convert(v, col, where, i))
    if col.kind == "number":
        return pd.Series(np.asarray(out, dtype=float), index=series.index, name=series.name)
    return pd.Series(out, index=series.index, name=series.name, dtype=object)


def _convert(v: Any, col: Column, where: str, row: int) -> Any:
    if col.kind != "str_list" and isinstance(v, NESTED):  # never str() a structure into an id or a text
        raise _fail(where, row, col, v)
    if col.kind == "number":
        if isinstance(v, bool | np.bool_):
            return float(v)
        try:
            x = float(v)
        except (TypeError, ValueError):
            raise _fail(where, row, col, v) from None
        if not math.isfinite(x):
            raise _fail(where, row, col, v)
        if col.magnitude is not None and abs(x) > col.magnitude:
            raise EvalprismError(
                f"{where}: row {row + 1}, column '{col.name}': expected a number between "
                f"{-col.magnitude:g} and {col.magnitude:g}, got {describe_value(v)}"
            )
        return x
    if col.kind == "key":
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        text = str(v).strip()
        if not text:
            raise _fail(where, row, col, v)
        return text
    if col.kind == "str":
        return v if isinstance(v, str) else str(v)
    # str_list
    if isinstance(v, str):
        text = v.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError:
                raise _fail(where, row, col, v) from None
            v = parsed
        else:
            return [v]
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, list | tuple) and v and all(isinstance(x, str) for x in v):
        return list(v)
    raise _fail(where, row, col, v)
