"""Write subsets of a table's rows in the format the table was read from (``evalprism p2l split``).

A split of a user's file should be that file cut in two, not a re-encoding of it: JSON Lines lines and
the objects of a ``.json`` list are copied verbatim (nested values, key order, integers that a column
with nulls would turn into floats: all as they were); CSV / TSV (read as strings) and Parquet are
written back by pandas. A compressed input is written uncompressed in its format; a table that did not
come from a file (or whose rows no longer match its file) is written as JSON Lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.io.formats import table_format
from evalprism.io.text import mend_surrogates, open_text

#: the file extension written for each input format
EXTENSIONS = {"jsonl": ".jsonl", "json": ".json", "csv": ".csv", "tsv": ".tsv", "parquet": ".parquet"}


def subset_format(table: pd.DataFrame) -> str:
    """The format the subsets of ``table`` are written in: its file's (``attrs['format']``), else jsonl."""
    fmt = str(table.attrs.get("format") or "jsonl")
    return fmt if fmt in EXTENSIONS else "jsonl"


def write_row_subsets(
    table: pd.DataFrame, parts: Mapping[str, np.ndarray], directory: Path, *, verbatim: bool = True
) -> dict[str, str]:
    """Write each of ``parts`` (name -> row positions of ``table``, in file order) to
    ``directory/<name><ext>``; returns name -> file name written. ``verbatim=False``: the rows are not
    its file's own (battles made from graded scores) and are written out, never copied from the file."""
    fmt = subset_format(table)
    records = _source_records(table, fmt) if verbatim else None
    if records is None and fmt in ("jsonl", "json"):
        fmt = "jsonl"
    written = {}
    for name, rows in parts.items():
        rows = np.sort(np.asarray(rows, dtype=np.int64))
        path = directory / f"{name}{EXTENSIONS[fmt]}"
        if records is not None and fmt == "jsonl":
            path.write_text("".join(records[i] + "\n" for i in rows), encoding="utf-8")
        elif records is not None and fmt == "json":
            path.write_text("[\n" + ",\n".join(records[i] for i in rows) + "\n]\n", encoding="utf-8")
        elif fmt in ("csv", "tsv"):
            table.iloc[rows].to_csv(path, index=False, sep="\t" if fmt == "tsv" else ",")
        elif fmt == "parquet":
            table.iloc[rows].reset_index(drop=True).to_parquet(path, index=False)
        else:
            table.iloc[rows].to_json(path, orient="records", lines=True, force_ascii=False)
        written[name] = path.name
    return written


def _source_records(table: pd.DataFrame, fmt: str) -> list[str] | None:
    """The rows of ``table``'s JSON Lines or JSON file as JSON texts, one per row (None when the table
    has no such file, or its rows do not match the file's one for one)."""
    source = table.attrs.get("source")
    if fmt not in ("jsonl", "json") or not source or not Path(source).is_file():
        return None
    try:
        if table_format(source) != fmt:
            return None
        with open_text(source) as fh:
            text = fh.read()
    except Exception:
        return None
    if fmt == "jsonl":
        # split on '\n' only: str.splitlines would also cut at U+2028, which JSON allows inside strings
        records = [line.rstrip("\r") for line in text.split("\n") if line.strip()]
    else:
        data = json.loads(text)
        data = data["data"] if isinstance(data, dict) else data
        records = [_dumps(r) for r in data]
    return records if len(records) == len(table) else None


def _dumps(record: object) -> str:
    """``record`` as JSON text, non-ASCII characters as they are; a record holding a lone UTF-16
    surrogate (no UTF-8 file can hold one) keeps it as the ``\\ud83d`` escape it was read from."""
    text = json.dumps(record, ensure_ascii=False)
    return text if mend_surrogates(text) is text else json.dumps(record)
