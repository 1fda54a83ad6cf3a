"""Read a table from JSONL, CSV/TSV or Parquet, picking the format from the extension.

A ``.json`` or ``.jsonl`` text value with a lone UTF-16 surrogate (a ``\\ud83d`` escape without its other half,
which no string column holds) is read with U+FFFD in its place; ``attrs["mended"]`` names the rows.
Compressed variants (``.gz``, ``.bz2``, ``.xz``, ``.zst``) of the text formats are read
transparently by pandas. Text formats follow :mod:`evalprism.io.text`'s encoding rule (UTF-8, or a
byte-order mark). Every failure becomes one :class:`EvalprismError` naming the file (and, for a byte
that is not UTF-8 or a JSON Lines line that does not parse, the line and column).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.formats import table_format
from evalprism.io.text import (
    decode_error,
    input_file,
    json_lines,
    jsonl_error,
    mend_surrogates,
    open_text,
    text_encoding,
)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read ``path`` into a DataFrame; text columns stay strings (no type guessing on ids).

    The source file name is kept in ``df.attrs["source"]`` so later validation errors can
    name it.
    """
    path = Path(path)
    fmt = table_format(path)
    input_file(path)
    encoding = "utf-8" if fmt == "parquet" else text_encoding(path)
    try:
        if fmt == "jsonl" and _has_lone_surrogate_escape(path):
            df = _read_jsonl_records(path)  # pandas' JSON parser drops a lone surrogate without a word
        elif fmt == "jsonl":
            df = pd.read_json(path, lines=True, dtype=False, encoding=encoding)
        elif fmt == "json":
            df = _read_json_records(path)
        elif fmt in ("csv", "tsv"):
            _refuse_duplicate_names(_csv_header(path, fmt, encoding), path, "line 1 (the header)")
            df = pd.read_csv(
                path,
                sep="\t" if fmt == "tsv" else ",",
                dtype=str,
                keep_default_na=False,
                na_values=[""],
                encoding=encoding,
            )
        else:
            df = pd.read_parquet(path)
    except EvalprismError:
        raise
    except UnicodeDecodeError:
        raise decode_error(path, encoding) from None
    except pd.errors.EmptyDataError:
        raise EvalprismError(f"{path}: the file is empty, expected a header and at least one row") from None
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        located = jsonl_error(path) if fmt == "jsonl" else None  # pandas names a byte offset, not a line
        if located is not None:
            raise located from None
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise EvalprismError(f"{path}: cannot be read as {fmt}: {first_line}") from None
    except Exception as exc:  # pyarrow raises its own hierarchy for corrupt parquet
        raise EvalprismError(f"{path}: cannot be read as {fmt}: {type(exc).__name__}: {exc}") from None
    _refuse_duplicate_names([str(c) for c in df.columns], path, "the header")
    if fmt in ("csv", "tsv"):
        df = df.astype(object).where(df.notna(), None)
    df.attrs["source"] = str(path)
    df.attrs["format"] = fmt
    return df


def _csv_header(path: Path, fmt: str, encoding: str) -> list[str]:
    """The column names exactly as the first record of a CSV/TSV file spells them (pandas renames a
    repeated name to ``name.1`` before anyone can see it)."""
    raw = pd.read_csv(
        path,
        sep="\t" if fmt == "tsv" else ",",
        header=None,
        nrows=1,
        dtype=str,
        keep_default_na=False,
        encoding=encoding,
    )
    return [str(v) for v in raw.iloc[0].tolist()] if len(raw) else []


def _refuse_duplicate_names(names: list[str], path: Path, where: str) -> None:
    """One message for column names that appear more than once (which column would an analysis read?)."""
    repeated = [name for name, count in Counter(names).items() if count > 1]
    if repeated:
        name = repeated[0]
        positions = [str(i + 1) for i, n in enumerate(names) if n == name]
        raise EvalprismError(
            f"{path}: {where}: the column name '{name}' appears {len(positions)} times (columns "
            f"{', '.join(positions)}); expected each column name once: rename or drop the copies"
        )


def _read_json_records(path: Path) -> pd.DataFrame:
    """A ``.json`` file holding a list of row objects (or ``{"data": [...]}``)."""
    with open_text(path) as fh:
        data = json.load(fh)
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        data = data["data"]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise EvalprismError(f"{path}: expected a JSON list of row objects")
    return _records_frame(data)


#: the JSON escape of a lone UTF-16 surrogate: a high half without a low half after it, or a low half alone
_LONE_ESCAPE = re.compile(
    r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _has_lone_surrogate_escape(path: Path) -> bool:
    """Whether the text of ``path`` may hold the JSON escape of a lone surrogate (a pair split across
    two chunks counts: a false alarm only takes the slower exact reader)."""
    if path.suffix.lower() not in (".jsonl", ".ndjson", ".gz", ".bz2", ".xz"):
        return False  # .zst: pandas decompresses it, open_text cannot
    tail = ""
    with open_text(path) as fh:
        while chunk := fh.read(1 << 22):
            if _LONE_ESCAPE.search(tail + chunk):
                return True
            tail = chunk[-12:]
    return False


def _read_jsonl_records(path: Path) -> pd.DataFrame:
    """A JSON Lines file read line by line with :mod:`json`, which keeps a lone surrogate for
    :func:`_records_frame` to mend (pandas' parser drops it)."""
    rows = []
    for line_no, row in json_lines(path):
        if not isinstance(row, dict):
            raise EvalprismError(f"{path}: line {line_no}: expected a JSON object (one row per line)")
        rows.append(row)
    return _records_frame(rows)


def _records_frame(data: list[dict]) -> pd.DataFrame:
    """Row objects as a DataFrame. A text value with a lone UTF-16 surrogate (no string column holds
    one) gets U+FFFD in its place; ``attrs["mended"]`` maps each column to the 0-based rows mended."""
    try:
        return pd.DataFrame.from_records(data)
    except UnicodeEncodeError:
        pass
    mended: dict[str, list[int]] = {}
    for row, record in enumerate(data):
        for key, value in record.items():
            if isinstance(value, str) and (fixed := mend_surrogates(value)) is not value:
                record[key] = fixed
                mended.setdefault(str(key), []).append(row)
    df = pd.DataFrame.from_records(data)
    df.attrs["mended"] = mended
    return df


def check_listed_once(models: pd.Series, where: str, located: Callable[[int], str]) -> None:
    """Refuse a table that lists a model twice (costs, model metadata: one row per model), naming the
    repeat's row as ``located(row)`` says it (0-based ``row`` of ``models``)."""
    repeated = np.flatnonzero(models.duplicated().to_numpy())
    if len(repeated):
        row = int(repeated[0])
        raise EvalprismError(f"{where}: {located(row)}: model '{models.iat[row]}' is listed twice")


def row_location(table: pd.DataFrame, row: int) -> str:
    """Where 0-based data ``row`` of a table read by :func:`read_table` sits in its file: ``row N``
    as the schema messages say it, with the file's line for CSV/TSV (after the header; a quoted
    field spanning lines shifts it) and JSON Lines: ``row 2 (line 3)``."""
    fmt = table.attrs.get("format")
    line = {"csv": row + 2, "tsv": row + 2, "jsonl": row + 1}.get(str(fmt))
    return f"row {row + 1}" + (f" (line {line})" if line is not None else "")
