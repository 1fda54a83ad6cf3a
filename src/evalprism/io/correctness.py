"""Per-item correctness and model metadata: the canonical tables, validated.

Canonical correctness (long): ``model``, ``item_id``, ``score`` (1 right, 0 wrong, -1 no answer;
booleans and ``true``/``false`` accepted), optional ``benchmark`` (default: the file's stem, or
``"all"`` for an in-memory table). One row per (model, benchmark, item_id); unknown columns are kept.
A wide model x item matrix (a ``model`` column, else the first column, and one column per item, cells
1/0/-1, blank = not run) is the same table pivoted (:func:`read_wide_matrix`).

Model metadata: ``model``, ``params`` (billions, > 0), ``family``. A ``params_b`` or
``params_b_nominal`` column is accepted for ``params`` (the spelling of the shared real data).

Every input that holds correctness (these tables, lm-evaluation-harness ``--log_samples`` output,
inspect_ai logs, a directory mixing both) is read by :func:`evalprism.io.items.read_correctness`
(one registry of input formats: :mod:`evalprism.io.item_formats`).

:func:`encode_correctness` validates a long table into integer codes (a 10-million-row table is
factorized once, never looped over in Python): the form :mod:`evalprism.stem` computes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.formats import FORMATS
from evalprism.io.schema import Column, Schema, first_rows, require_scalars
from evalprism.io.scores import SCORE_EXPECTED, score_value
from evalprism.io.tables import check_listed_once, read_table

CORRECTNESS_SCHEMA = Schema(
    name="correctness",
    columns=(
        Column("model", "key"),
        Column("item_id", "key"),
        Column("score", "str", description="1 right, 0 wrong, -1 no answer"),
        Column("benchmark", "key", required=False),
    ),
)

MODELS_SCHEMA = Schema(
    name="model metadata",
    columns=(
        Column("model", "key"),
        Column("params", "number", nullable=True, description="parameters in billions"),
        Column("family", "key", required=False),
    ),
)

#: spellings accepted for the ``params`` column of model metadata
PARAMS_ALIASES = ("params_b", "params_b_nominal", "params_billions")


@dataclass(frozen=True)
class EncodedCorrectness:
    """A validated correctness table as integer codes.

    ``model_names[model_code[r]]`` is row r's model, ``items.iloc[item_code[r]]`` its
    (benchmark, item_id), ``score[r]`` in {1, 0, -1} (int8).
    """

    model_names: np.ndarray
    items: pd.DataFrame
    model_code: np.ndarray
    item_code: np.ndarray
    score: np.ndarray
    source: str

    def matrix(self, models: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Items x ``models`` score matrix (int8, -2 where a model has no row for an item) and a
        boolean mask of the items every one of ``models`` has."""
        index = {m: i for i, m in enumerate(self.model_names)}
        column = np.full(len(self.model_names), -1, dtype=np.int64)
        for j, m in enumerate(models):
            column[index[m]] = j
        keep = column[self.model_code] >= 0
        out = np.full((len(self.items), len(models)), -2, dtype=np.int8)
        out[self.item_code[keep], column[self.model_code[keep]]] = self.score[keep]
        return out, (out != -2).all(axis=1)

    def scores_of(self, model: str) -> np.ndarray:
        """One model's score per item code (-2 where it has no row)."""
        return self.matrix([model])[0][:, 0]


def _factorize_keys(series: pd.Series, name: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Codes and stripped text uniques of an identifier column; the first missing or empty value
    is reported by row. Only distinct values are converted (one factorize over all rows)."""
    require_scalars(series, name, "a non-empty identifier", where)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise EvalprismError(f"{where}: row {row + 1}, column '{name}': missing value, expected a non-empty identifier")
    texts = pd.Index(uniques).astype(str).str.strip()
    empty = np.flatnonzero(texts == "")
    if empty.size:
        row = int(first_rows(codes, len(uniques))[empty].min())
        raise EvalprismError(
            f"{where}: row {row + 1}, column '{name}': expected a non-empty identifier, got {series.iloc[row]!r}"
        )
    if isinstance(uniques, pd.Index) and uniques.dtype.kind == "f":  # 3.0 read as a float id -> "3"
        texts = pd.Index([str(int(v)) if float(v).is_integer() else str(v) for v in uniques])
    merged, names = pd.factorize(texts)  # "a" and " a" are one identifier
    return merged[codes].astype(np.int64), np.asarray(names, dtype=object)


def _score_codes(series: pd.Series, where: str) -> np.ndarray:
    """Scores as int8 in {1, 0, -1}; the first value outside that set is reported by row."""
    require_scalars(series, "score", SCORE_EXPECTED, where)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise EvalprismError(f"{where}: row {row + 1}, column 'score': missing value, expected 1, 0 or -1")
    table = np.empty(len(uniques), dtype=np.int8)
    first = first_rows(codes, len(uniques))
    for k, value in enumerate(list(uniques)):
        converted = score_value(value)
        if converted is None:
            row = int(first[k])
            raise EvalprismError(f"{where}: row {row + 1}, column 'score': expected {SCORE_EXPECTED}, got {value!r}")
        table[k] = converted
    return table[codes]


def encode_correctness(df: pd.DataFrame, source: str | None = None, benchmark: str | None = None) -> EncodedCorrectness:
    """Validate a long correctness table and turn it into codes.

    Raises :class:`EvalprismError` for a missing column, an empty identifier, a score outside
    {1, 0, -1, true, false}, or a duplicate (model, benchmark, item_id) row (naming both rows).
    ``benchmark`` names the benchmark when the table has no ``benchmark`` column.
    """
    where = source or df.attrs.get("source") or "correctness table"
    CORRECTNESS_SCHEMA.validate(df.head(1), where)  # columns present, table not empty (rows: below, vectorised)
    model_code, model_names = _factorize_keys(df["model"], "model", where)
    item_code, item_names = _factorize_keys(df["item_id"], "item_id", where)
    if "benchmark" in df.columns:
        bench_code, bench_names = _factorize_keys(df["benchmark"], "benchmark", where)
    else:
        bench_code = np.zeros(len(df), dtype=np.int64)
        bench_names = np.array([benchmark or _default_benchmark(where)], dtype=object)
    score = _score_codes(df["score"], where)
    pair = bench_code * len(item_names) + item_code
    key_code, key_uniques = pd.factorize(pair)
    items = pd.DataFrame(
        {"benchmark": bench_names[key_uniques // len(item_names)], "item_id": item_names[key_uniques % len(item_names)]}
    )
    cell = model_code * len(items) + key_code
    counts = np.bincount(cell, minlength=len(model_names) * len(items))
    if (counts > 1).any():
        dup_cell = int(np.flatnonzero(counts > 1)[0])
        rows = np.flatnonzero(cell == dup_cell)[:2]
        it = items.iloc[dup_cell % len(items)]
        raise EvalprismError(
            f"{where}: rows {rows[0] + 1} and {rows[1] + 1} both score model "
            f"'{model_names[dup_cell // len(items)]}' on item '{it['item_id']}' of benchmark "
            f"'{it['benchmark']}': expected one row per (model, benchmark, item_id)"
        )
    return EncodedCorrectness(
        model_names=model_names,
        items=items,
        model_code=model_code.astype(np.int64),
        item_code=key_code.astype(np.int64),
        score=score,
        source=where,
    )


def _default_benchmark(where: str) -> str:
    stem = Path(where).name
    for suffix in (".gz", ".bz2", ".xz", ".zst", *FORMATS):
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    return stem if stem and "table" not in stem else "all"


def to_canonical_correctness(df: pd.DataFrame, source: str | None = None, benchmark: str | None = None) -> pd.DataFrame:
    """The canonical long table (model, benchmark, item_id, score as int) after validation, other
    columns kept."""
    enc = encode_correctness(df, source, benchmark)
    out = df.copy()
    out["model"] = enc.model_names[enc.model_code]
    out["benchmark"] = enc.items["benchmark"].to_numpy()[enc.item_code]
    out["item_id"] = enc.items["item_id"].to_numpy()[enc.item_code]
    out["score"] = enc.score.astype(np.int64)
    front = ["model", "benchmark", "item_id", "score"]
    out = out[front + [c for c in out.columns if c not in front]]
    out.attrs = dict(df.attrs)
    return out


def read_models(path: str | Path | pd.DataFrame, source: str | None = None) -> pd.DataFrame:
    """Model metadata (model, params, family) validated; ``params`` may be missing here (the family
    check names the row of a family member without it)."""
    df = read_table(path) if not isinstance(path, pd.DataFrame) else path
    where = source or df.attrs.get("source") or "model metadata"
    if "params" not in df.columns:
        alias = next((a for a in PARAMS_ALIASES if a in df.columns), None)
        if alias is not None:
            df = df.rename(columns={alias: "params"})
    out = MODELS_SCHEMA.validate(df, where)
    if (out["params"].dropna() <= 0).any():
        row = int(np.flatnonzero((out["params"] <= 0).to_numpy())[0])
        raise EvalprismError(
            f"{where}: row {row + 1}, column 'params': expected a positive number of parameters "
            f"(billions), got {df['params'].iloc[row]!r}"
        )
    check_listed_once(out["model"], where, lambda row: f"row {row + 1}")
    out.attrs["source"] = where
    return out


def read_wide_matrix(
    df: pd.DataFrame | str | Path, source: str | None = None, benchmark: str | None = None
) -> pd.DataFrame:
    """A model x item matrix (one row per model, one column per item; blank = not run) as the
    canonical long table."""
    if not isinstance(df, pd.DataFrame):
        source = source or str(df)
        df = read_table(df)
    where = source or df.attrs.get("source") or "correctness matrix"
    model_col = "model" if "model" in df.columns else df.columns[0]
    if len(df.columns) < 2:
        raise EvalprismError(f"{where}: a model x item matrix needs a model column and at least one item column")
    long = df.melt(id_vars=[model_col], var_name="item_id", value_name="score").rename(columns={model_col: "model"})
    long = long[long["score"].notna()].reset_index(drop=True)
    return to_canonical_correctness(long, where, benchmark or _default_benchmark(where))
