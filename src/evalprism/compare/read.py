"""Reading the runs to compare: every RUN is anything evalprism reads as item-level results.

A run is identified by its model name: an lm-eval directory, inspect log or correctness table
holding several models gives several runs. The result is one long table ``run, benchmark, item_id,
score`` (float in 0..1), plus the ``--cluster`` column when asked, and ``source`` (the file read).

An ECDF responses file (``question_id``, ``response``, ``references`` or ``score``, setting columns)
gives one run per configuration (:mod:`evalprism.compare.responses`).

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
from typing import TypeAlias

import numpy as np
import pandas as pd

from evalprism.compare.cells import identifier_column, require_cluster, score_values
from evalprism.compare.responses import ResponseOptions, is_responses_table, read_responses_runs
from evalprism.errors import EvalprismError
from evalprism.io.correctness import read_correctness
from evalprism.io.harness_options import INSPECT, HarnessOptions, ReadChoices
from evalprism.io.inspect_logs import looks_like_inspect_json
from evalprism.io.tables import read_table

Run: TypeAlias = str | Path | pd.DataFrame


def _is_score_table(path: Path) -> bool:
    if path.is_dir() or path.suffix.lower() == ".eval":
        return False
    return not (path.suffix.lower() == ".json" and looks_like_inspect_json(path))


def _read_score_table(df: pd.DataFrame, where: str, cluster: str | None) -> tuple[pd.DataFrame, int]:
    needed = ["model", "item_id", "score"]
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise EvalprismError(
            f"{where}: no column '{missing[0]}': expected a score table with columns model, item_id, "
            f"score[, benchmark] (columns: {', '.join(map(str, df.columns))})"
        )
    if len(df) == 0:
        raise EvalprismError(f"{where}: the table has no rows")
    run = identifier_column(df, "model", where)
    item = identifier_column(df, "item_id", where)
    bench = (
        identifier_column(df, "benchmark", where)
        if "benchmark" in df.columns
        else pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), categories=pd.Index(["all"], dtype=object))
    )
    scores, no_answer = score_values(df, where)
    out = pd.DataFrame({"run": run, "benchmark": bench, "item_id": item, "score": scores})
    if cluster is not None:
        require_cluster(df, cluster, where)
        out["cluster"] = identifier_column(df, cluster, where, "the item's cluster (--cluster)")
    return out, no_answer


def _split_names(runs: Sequence[Run], harness: HarnessOptions) -> tuple[dict[int, str], HarnessOptions]:
    """--model-name keys naming a RUN (as given, or its last component) -> run index; the rest stay
    for the lm-eval reader."""
    by_run: dict[int, str] = {}
    rest = {}
    for key, name in harness.model_name.items():
        hits = [
            i
            for i, r in enumerate(runs)
            if not isinstance(r, pd.DataFrame)
            and key.rstrip("/") in {str(r).rstrip("/"), Path(r).name, Path(r).resolve().as_posix()}
        ]
        if hits:
            for i in hits:
                by_run[i] = name
        else:
            rest[key] = name
    return by_run, dataclasses.replace(harness, model_name=rest)


def _read_table_run(
    df: pd.DataFrame, where: str, cluster: str | None, responses: ResponseOptions, notes: list[str]
) -> tuple[pd.DataFrame, int, bool]:
    """A table RUN: an ECDF responses file (questions) or a score table (items). Returns the run
    table, its no-answer count and whether it was a responses file."""
    if is_responses_table(df):
        table, more = read_responses_runs(df, where, responses, cluster)
        notes.extend(more)
        return table, 0, True
    table, no_answer = _read_score_table(df, where, cluster)
    return table, no_answer, False


def read_runs(
    runs: Sequence[Run],
    *,
    cluster: str | None = None,
    harness: HarnessOptions | None = None,
    choices: ReadChoices | None = None,
    prompts: bool = False,
    responses: ResponseOptions | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The long table of every run (see the module docstring) and notes on what was read. With
    ``prompts``, a ``prompt`` column too when an input has one: the item's text (a table's ``prompt``
    column, the harness readers' prompt text; missing for the inputs without it)."""
    responses = responses or ResponseOptions()
    read_responses = False
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
            table, no_answer, was = _read_table_run(source, where, cluster, responses, notes)
            read_responses |= was
        else:
            path = Path(run)
            where = str(path)
            if not path.exists():
                raise EvalprismError(f"{path}: file not found")
            df = read_table(path) if _is_score_table(path) else None
            if df is not None and ("item_id" in df.columns or "score" in df.columns or is_responses_table(df)):
                source = df
                table, no_answer, was = _read_table_run(df, where, cluster, responses, notes)
                read_responses |= was
            else:  # harness output, or a wide model x item matrix
                canonical = source = read_correctness(
                    path, harness=reader_options, choices=choices, check_harness=False
                )
                readers.extend(canonical.attrs.get("readers", []))
                if cluster is not None:
                    require_cluster(canonical, cluster, where)
                no_answer = int((canonical["score"] == -1).sum())
                table = pd.DataFrame(
                    {
                        "run": canonical["model"].astype(str).to_numpy(),
                        "benchmark": canonical["benchmark"].astype(str).to_numpy(),
                        "item_id": canonical["item_id"].astype(str).to_numpy(),
                        "score": canonical["score"].clip(lower=0).astype(float).to_numpy(),
                    }
                )
                if cluster is not None:
                    table["cluster"] = identifier_column(canonical, cluster, where, "the item's cluster (--cluster)")
                if reader_options.epochs == "all" and canonical.attrs.get("readers") == [INSPECT]:
                    # inspect's `<id>#<epoch>` items are samples of one item here, not items of their own
                    table["item_id"] = table["item_id"].str.replace(r"#\d+$", "", regex=True)
                    notes.append(
                        f"{where}: --epochs all: every epoch of a sample is one sample of its item (the "
                        "item's score is the mean over epochs, its within-item variance reported)"
                    )
        if not prompts:
            table = table.drop(columns="prompt", errors="ignore")
        elif "prompt" in source.columns and "prompt" not in table.columns:
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
                raise EvalprismError(
                    f"{where}: model '{model}' is also in {owner[model]}: two runs need two names "
                    f"(give them with model_name: {Path(owner[model]).name}=A, {Path(where).name}=B)",
                    parameter="model_name",
                )
            owner[model] = where
        table["source"] = where
        frames.append(table)
    reader_options.check_applies(readers, "no input is read by that reader")
    if responses.given() and not read_responses:
        raise EvalprismError(
            f"{', '.join(responses.given())}: applies to ECDF responses files (question_id, response, "
            "references or score) only, and no RUN is one",
            parameter="by",
        )
    return pd.concat(frames, ignore_index=True), notes
