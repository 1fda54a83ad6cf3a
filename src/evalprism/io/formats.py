"""Table formats by file name: the one rule that says what a table file is before anything reads it.

Kept apart from :mod:`evalprism.io.tables` (which needs pandas) so that a command can refuse a file of
no known format before pandas is imported (:mod:`evalprism.io.preflight`).
"""

from __future__ import annotations

from pathlib import Path

from evalprism.errors import EvalprismError

#: compressed variants of the text formats, read transparently by pandas
COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}


def table_format(path: str | Path) -> str:
    """Return the format name of ``path`` from its extension (ignoring compression)."""
    name = Path(path).name.lower()
    for comp in COMPRESSIONS:
        if name.endswith(comp):
            name = name[: -len(comp)]
            break
    suffix = Path(name).suffix
    if suffix not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise EvalprismError(f"{path}: unknown table format '{suffix or name}'; expected one of {known}")
    return FORMATS[suffix]
