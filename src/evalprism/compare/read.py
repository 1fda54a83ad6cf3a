"""Reading the runs to compare: every RUN is anything evalprism reads as item-level results.

A run is identified by its model name: an lm-eval directory, inspect log or correctness table
holding several models gives several runs. The result is one long table ``run, benchmark, item_id,
score`` (float in 0..1), plus the ``--cluster`` column when asked, and ``source`` (the file read).

Score tables (``model, item_id, score[, benchmark][, cluster columns]``) are read here rather than
by :func:`~evalprism.io.correctness.read_correctness` because comparisons accept what correctness
does not: scores anywhere in 0..1 (partial credit, a judge's grade) and several rows per
(model, benchmark, item_id) (several samples per item). -1 means no answer and counts as 0 (said in
the notes); anything else outside 0..1 is refused by file, row and column. Harness output and wide
matrices go through ``read_correctness`` with the harness options.

With ``--epochs all``, the epochs of an inspect_ai sample are samples of one item (inspect's reader
names them ``<id>#<epoch>``; here the suffix is dropped).

``--model-name KEY=NAME`` whose KEY is one of the RUN paths as given (or its last component) renames
that run's model (two runs of one model name, e.g. two lm-eval output directories of the same
checkpoint, are told apart this way); any other key is passed to the lm-eval reader.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.correctness import read_correctness
from evalprism.io.harness_options import INSPECT, HarnessOptions, ReadChoices
from evalprism.io.inspect_logs import looks_like_inspect_json
from evalprism.io.tables import read_table, row_location

Run = str | Path | pd.DataFrame

_TRUE_FALSE = {"true": 1.0, "false": 0.0}


def _is_score_table(path: Path) -> bool:
    if path.is_dir() or path.suffix.lower() == ".eval":
        return False
    return not (path.suffix.lower() == ".json" and looks_like_inspect_json(path))


def _scores(df: pd.DataFrame, where: str) -> tuple[np.ndarray, int]:
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
        raise EvalprismError(f"{where}: {row_location(df, r)}, column 'score': expected a score in 0..1 "
                             f"(1 right, 0 wrong, partial credit between; -1 no answer; true/false), got {series.iloc[r]!r}")
    values[no_answer] = 0.0
    return values, int(no_answer.sum())


def _keys(df: pd.DataFrame, col: str, where: str, expected: str = "a non-empty identifier") -> pd.Categorical:
    """An identifier column as stripped text (``3.0`` read as a float is ``3``), converted once per
    distinct value and kept as a categorical (integer codes: 5 million rows of a few thousand
    items are never materialised as strings); the first missing or empty value is reported by row."""
    codes, uniques = pd.factorize(df[col], use_na_sentinel=True)
    texts = np.array([_identifier(v) for v in uniques], dtype=object)
    bad = (codes < 0) | (texts == "")[np.maximum(codes, 0)] if len(texts) else codes < 0
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise EvalprismError(f"{where}: {row_location(df, r)}, column '{col}': missing value, expected {expected}")
    recode, distinct = pd.factorize(texts)  # `3` and `3.0` are one item
    return pd.Categorical.from_codes(recode[codes], categories=pd.Index(distinct, dtype=object))


def _read_score_table(df: pd.DataFrame, where: str, cluster: str | None) -> tuple[pd.DataFrame, int]:
    needed = ["model", "item_id", "score"]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise EvalprismError(f"{where}: no column '{missing[0]}': expected a score table with columns model, item_id, "
                             f"score[, benchmark] (columns: {', '.join(map(str, df.columns))})")
    if len(df) == 0:
        raise EvalprismError(f"{where}: the table has no rows")
    run = _keys(df, "model", where)
    item = _keys(df, "item_id", where)
    bench = _keys(df, "benchmark", where) if "benchmark" in df.columns else pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), categories=pd.Index(["all"], dtype=object))
    scores, no_answer = _scores(df, where)
    out = pd.DataFrame({"run": run, "benchmark": bench, "item_id": item, "score": scores})
    if cluster is not None:
        _require_cluster(df, cluster, where)
        out["cluster"] = _keys(df, cluster, where, "the item's cluster (--cluster)")
    return out, no_answer


def _identifier(value: object) -> str:
    """An item id as text; ``3.0`` read as a float is item ``3``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _require_cluster(df: pd.DataFrame, cluster: str, where: str) -> None:
    if cluster not in df.columns:
        raise EvalprismError(f"{where}: no column '{cluster}' for --cluster (columns: {', '.join(map(str, df.columns))})",
                             parameter="cluster")


def _split_names(runs: Sequence[Run], harness: HarnessOptions) -> tuple[dict[int, str], HarnessOptions]:
    """--model-name keys naming a RUN (as given, or its last component) -> run index; the rest stay
    for the lm-eval reader."""
    by_run: dict[int, str] = {}
    rest = {}
    for key, name in harness.model_names.items():
        hits = [i for i, r in enumerate(runs) if not isinstance(r, pd.DataFrame)
                and key.rstrip("/") in {str(r).rstrip("/"), Path(r).name, Path(r).resolve().as_posix()}]
        if hits:
            for i in hits:
                by_run[i] = name
        else:
            rest[key] = name
    return by_run, dataclasses.replace(harness, model_names=rest)


def read_runs(runs: Sequence[Run], *, cluster: str | None = None, harness: HarnessOptions | None = None,
              choices: ReadChoices | None = None, prompts: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """The long table of every run (see the module docstring) and notes on what was read. With
    ``prompts``, a ``prompt`` column too when an input has one: the item's text (a table's ``prompt``
    column, the harness readers' prompt text; missing for the inputs without it)."""
    harness = harness or HarnessOptions()
    choices = choices if choices is not None else ReadChoices()
    renames, reader_options = _split_names(runs, harness)
    frames: list[pd.DataFrame] = []
    notes: list[str] = []
    readers: list[str] = []
    owner: dict[str, str] = {}
    for i, run in enumerate(runs):
        if isinstance(run, pd.DataFrame):
            where = str(run.attrs.get("source") or f"table {i + 1}")
            source = run.reset_index(drop=True)
            table, no_answer = _read_score_table(source, where, cluster)
        else:
            path = Path(run)
            where = str(path)
            if not path.exists():
                raise EvalprismError(f"{path}: file not found")
            df = read_table(path) if _is_score_table(path) else None
            if df is not None and ("item_id" in df.columns or "score" in df.columns):
                source = df
                table, no_answer = _read_score_table(df, where, cluster)
            else:  # harness output, or a wide model x item matrix
                canonical = source = read_correctness(path, harness=reader_options, choices=choices,
                                                      check_harness=False)
                readers.extend(canonical.attrs.get("readers", []))
                if cluster is not None:
                    _require_cluster(canonical, cluster, where)
                no_answer = int((canonical["score"] == -1).sum())
                table = pd.DataFrame({"run": canonical["model"].astype(str).to_numpy(),
                                      "benchmark": canonical["benchmark"].astype(str).to_numpy(),
                                      "item_id": canonical["item_id"].astype(str).to_numpy(),
                                      "score": canonical["score"].clip(lower=0).astype(float).to_numpy()})
                if cluster is not None:
                    table["cluster"] = _keys(canonical, cluster, where, "the item's cluster (--cluster)")
                if reader_options.epochs == "all" and canonical.attrs.get("readers") == [INSPECT]:
                    # inspect's `<id>#<epoch>` items are samples of one item here, not items of their own
                    table["item_id"] = table["item_id"].str.replace(r"#\d+$", "", regex=True)
                    notes.append(f"{where}: --epochs all: every epoch of a sample is one sample of its item (the "
                                 "item's score is the mean over epochs, its within-item variance reported)")
        if prompts and "prompt" in source.columns:
            table["prompt"] = source["prompt"].to_numpy(dtype=object)
        if i in renames:
            models = table["run"].unique()
            if len(models) == 1:
                table["run"] = renames[i]
            else:
                table["run"] = renames[i] + ":" + table["run"].astype(str)
        if no_answer:
            notes.append(f"{where}: {no_answer:,} answer(s) scored -1 (no answer) counted as 0 (wrong)")
        for model in table["run"].unique():
            if model in owner and owner[model] != where:
                raise EvalprismError(f"{where}: model '{model}' is also in {owner[model]}: two runs need two names "
                                     f"(e.g. --model-name {Path(owner[model]).name}=A --model-name {Path(where).name}=B)",
                                     parameter="model_name")
            owner[model] = where
        table["source"] = where
        frames.append(table)
    reader_options.check_applies(readers, "no input is read by that reader")
    return pd.concat(frames, ignore_index=True), notes
