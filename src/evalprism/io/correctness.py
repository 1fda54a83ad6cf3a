"""Per-item correctness and model metadata: the canonical tables and adapters for what users have.

Canonical correctness (long): ``model``, ``item_id``, ``score`` (1 right, 0 wrong, -1 no answer;
booleans and ``true``/``false`` accepted), optional ``benchmark`` (default: the file's stem, or
``"all"`` for an in-memory table). One row per (model, benchmark, item_id); unknown columns are kept.

Model metadata: ``model``, ``params`` (billions, > 0), ``family``. A ``params_b`` or
``params_b_nominal`` column is accepted for ``params`` (the spelling of the shared real data).

Adapters (:func:`read_correctness` picks one from the path):

- a long table in any format :func:`~evalprism.io.tables.read_table` reads;
- a wide model x item matrix (``.csv``/``.tsv``/``.parquet``): a ``model`` column (else the first
  column) and one column per item, cells 1/0/-1, blank = not run;
- an lm-evaluation-harness ``--log_samples`` output directory (:func:`read_lm_eval`): one
  ``samples_<task>_<date>.jsonl`` per task in a directory per model; item key = task + doc_id +
  filter, the score taken from the metric column chosen by ``metric``;
- inspect_ai logs (:func:`read_inspect_logs`, ``.eval`` or ``.json``), read through inspect_ai's own
  log API (``pip install evalprism[inspect]``; imported lazily).

:func:`encode_correctness` validates a long table into integer codes (a 10-million-row table is
factorized once, never looped over in Python): the form :mod:`evalprism.stem` computes on.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.schema import Column, Schema, first_rows, require_scalars
from evalprism.io.tables import FORMATS, read_table, table_format
from evalprism.io.text import json_line_error, open_text, read_text

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
_SCORE_EXPECTED = "1 (right), 0 (wrong) or -1 (no answer), or true/false"
_SCORE_TEXT = {"1": 1, "0": 0, "-1": -1, "true": 1, "false": 0, "1.0": 1, "0.0": 0, "-1.0": -1}


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
        raise EvalprismError(f"{where}: row {row + 1}, column '{name}': expected a non-empty identifier, "
                             f"got {series.iloc[row]!r}")
    if isinstance(uniques, pd.Index) and uniques.dtype.kind == "f":  # 3.0 read as a float id -> "3"
        texts = pd.Index([str(int(v)) if float(v).is_integer() else str(v) for v in uniques])
    merged, names = pd.factorize(texts)  # "a" and " a" are one identifier
    return merged[codes].astype(np.int64), np.asarray(names, dtype=object)


def _score_codes(series: pd.Series, where: str) -> np.ndarray:
    """Scores as int8 in {1, 0, -1}; the first value outside that set is reported by row."""
    require_scalars(series, "score", _SCORE_EXPECTED, where)
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise EvalprismError(f"{where}: row {row + 1}, column 'score': missing value, expected 1, 0 or -1")
    table = np.empty(len(uniques), dtype=np.int8)
    first = first_rows(codes, len(uniques))
    for k, value in enumerate(list(uniques)):
        converted = _score_value(value)
        if converted is None:
            row = int(first[k])
            raise EvalprismError(f"{where}: row {row + 1}, column 'score': expected {_SCORE_EXPECTED}, "
                                 f"got {value!r}")
        table[k] = converted
    return table[codes]


def _score_value(value: Any) -> int | None:
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer | float | np.floating):
        return int(value) if float(value) in (1.0, 0.0, -1.0) else None
    return _SCORE_TEXT.get(str(value).strip().lower())


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
    items = pd.DataFrame({"benchmark": bench_names[key_uniques // len(item_names)],
                          "item_id": item_names[key_uniques % len(item_names)]})
    cell = model_code * len(items) + key_code
    counts = np.bincount(cell, minlength=len(model_names) * len(items))
    if (counts > 1).any():
        dup_cell = int(np.flatnonzero(counts > 1)[0])
        rows = np.flatnonzero(cell == dup_cell)[:2]
        it = items.iloc[dup_cell % len(items)]
        raise EvalprismError(f"{where}: rows {rows[0] + 1} and {rows[1] + 1} both score model "
                             f"'{model_names[dup_cell // len(items)]}' on item '{it['item_id']}' of benchmark "
                             f"'{it['benchmark']}': expected one row per (model, benchmark, item_id)")
    return EncodedCorrectness(model_names=model_names, items=items, model_code=model_code.astype(np.int64),
                              item_code=key_code.astype(np.int64), score=score, source=where)


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
        raise EvalprismError(f"{where}: row {row + 1}, column 'params': expected a positive number of parameters "
                             f"(billions), got {df['params'].iloc[row]!r}")
    dup = out["model"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise EvalprismError(f"{where}: row {row + 1}: model '{out['model'].iloc[row]}' is listed twice")
    out.attrs["source"] = where
    return out


# ---------------------------------------------------------------- adapters


def read_correctness(path: str | Path, *, benchmark: str | None = None, metric: str = "acc",
                     lm_eval_filter: str | None = None) -> pd.DataFrame:
    """Read correctness from a long table, a wide model x item matrix, an lm-eval ``--log_samples``
    directory or inspect_ai logs (``.eval``); return the canonical long table."""
    path = Path(path)
    if not path.exists():
        raise EvalprismError(f"{path}: file not found")
    if path.is_dir():
        if any(path.rglob("*.eval")) and not any(path.rglob("samples_*.jsonl")):
            return read_inspect_logs(sorted(path.rglob("*.eval")))
        return read_lm_eval(path, metric=metric, filter=lm_eval_filter)
    if path.suffix.lower() == ".eval":
        return read_inspect_logs([path])
    df = read_table(path)
    if "item_id" in df.columns or "score" in df.columns:  # a long table, possibly missing a column: say which
        return to_canonical_correctness(df, str(path), benchmark)
    if table_format(path) in ("csv", "tsv", "parquet"):
        return read_wide_matrix(df, str(path), benchmark)
    raise EvalprismError(f"{path}: expected a long correctness table (model, item_id, score) or a wide model x item "
                         "matrix (.csv/.tsv/.parquet)")


def read_wide_matrix(df: pd.DataFrame | str | Path, source: str | None = None, benchmark: str | None = None) -> pd.DataFrame:
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


_SAMPLE_FIELDS = {"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                  "doc_hash", "prompt_hash", "target_hash"}


def read_lm_eval(path: str | Path, *, metric: str = "acc", filter: str | None = None,
                 model: str | None = None) -> pd.DataFrame:
    """lm-evaluation-harness ``--log_samples`` output: ``path`` is one model's directory (holding
    ``samples_<task>_<date>.jsonl`` and ``results_<date>.json``) or a directory of such directories.

    Each sample line gives ``doc_id``, ``filter`` and one value per metric; the score is the
    ``metric`` value (0/1). Benchmark = task, item_id = doc_id. A task logged under several filters
    (e.g. gsm8k ``strict-match`` and ``flexible-extract``) needs ``filter`` to pick one, so that
    each (task, doc_id, filter) item is counted once. The model name comes from the results file
    (``model_name``, else ``pretrained=`` in ``model_args``), else the directory name.
    """
    root = Path(path)
    files = sorted(root.rglob("samples_*.jsonl"))
    if not files:
        raise EvalprismError(f"{root}: no lm-eval samples_<task>_<date>.jsonl files (run lm_eval with --log_samples)")
    frames = []
    for directory in sorted({f.parent for f in files}):
        name = model or _lm_eval_model_name(directory)
        latest: dict[str, Path] = {}
        for f in sorted(directory.glob("samples_*.jsonl")):  # the newest run of a task wins (dates sort)
            task = re.sub(r"_\d{4}-\d{2}-\d{2}T[\d\-.:]+$", "", f.stem[len("samples_"):])
            latest[task] = f
        for task, f in latest.items():
            frames.append(_lm_eval_task(f, task, name, metric, filter))
    table = pd.concat(frames, ignore_index=True)
    table.attrs["source"] = str(root)
    return to_canonical_correctness(table, str(root))


def _lm_eval_model_name(directory: Path) -> str:
    for results in sorted(directory.glob("results_*.json"), reverse=True):
        try:
            data = json.loads(read_text(results))
        except (EvalprismError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        if data.get("model_name"):
            return str(data["model_name"])
        args = str((data.get("config") or {}).get("model_args") or "")
        found = re.search(r"pretrained=([^,]+)", args)
        if found:
            return found.group(1)
    return directory.name


def _lm_eval_task(path: Path, task: str, model: str, metric: str, filter: str | None) -> pd.DataFrame:
    rows = []
    with open_text(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise json_line_error(path, line_no, exc) from None
            if not isinstance(rec, dict):
                raise EvalprismError(f"{path}: line {line_no}: expected an lm-eval samples object, got a JSON "
                                     f"{type(rec).__name__}")
            if "doc_id" not in rec:
                raise EvalprismError(f"{path}: line {line_no}: no 'doc_id' (expected an lm-eval samples line)")
            if metric not in rec:
                have = [k for k in rec if k not in _SAMPLE_FIELDS]
                raise EvalprismError(f"{path}: line {line_no}: no metric '{metric}' (metrics present: "
                                     f"{', '.join(have) or 'none'}); choose one (metric)", parameter="metric")
            rows.append((str(rec["doc_id"]), str(rec.get("filter", "none")), rec[metric]))
    table = pd.DataFrame(rows, columns=["item_id", "filter", "score"])
    filters = sorted(table["filter"].unique())
    if filter is not None:
        if filter not in filters:
            raise EvalprismError(f"{path}: task '{task}' has no filter '{filter}' (filters: {', '.join(filters)})")
        table = table[table["filter"] == filter]
    elif len(filters) > 1:
        raise EvalprismError(f"{path}: task '{task}' is scored under several filters ({', '.join(filters)}); "
                             "choose one (filter)", parameter="filter")
    table = table.assign(model=model, benchmark=task)
    table.attrs["source"] = str(path)
    return table


def inspect_scores_to_correctness(records: Iterable[dict[str, Any]], where: str = "inspect_ai logs") -> pd.DataFrame:
    """Rows (model, task, sample_id, epoch, value, error) from inspect_ai samples as the canonical
    table: value ``C``/``I`` (inspect's CORRECT/INCORRECT) or a 0/1 number or boolean; ``N``
    (NOANSWER), a sample error or no score -> -1; anything else (partial credit) is refused."""
    rows = []
    for r in records:
        value = r.get("value")
        if r.get("error") or value is None or (isinstance(value, str) and value.strip().upper() == "N"):
            score: Any = -1
        elif isinstance(value, str) and value.strip().upper() in ("C", "I"):
            score = 1 if value.strip().upper() == "C" else 0
        else:
            score = value
        rows.append({"model": r["model"], "benchmark": r["task"], "item_id": str(r["sample_id"]), "score": score,
                     "epoch": r.get("epoch", 1)})
    if not rows:
        raise EvalprismError(f"{where}: no scored samples")
    return to_canonical_correctness(pd.DataFrame(rows), where)


def read_inspect_logs(paths: Sequence[str | Path], *, scorer: str | None = None, epoch: int = 1) -> pd.DataFrame:
    """inspect_ai evaluation logs read with ``inspect_ai.log.read_eval_log``: model =
    ``log.eval.model``, benchmark = ``log.eval.task``, item_id = sample id; ``scorer`` picks one
    scorer when a log has several; ``epoch`` picks one epoch when samples were run several times."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise EvalprismError("reading inspect_ai logs needs the optional extra: pip install 'evalprism[inspect]'") from None
    records = []
    for path in paths:
        try:
            log = read_eval_log(str(path))
        except Exception as exc:  # inspect raises its own errors for unreadable logs
            raise EvalprismError(f"{path}: cannot be read as an inspect_ai log: {exc}") from None
        for sample in log.samples or []:
            if sample.epoch != epoch:
                continue
            scores = sample.scores or {}
            if scorer is None and len(scores) > 1:
                raise EvalprismError(f"{path}: samples have several scorers ({', '.join(scores)}); choose one with scorer=")
            chosen = scores.get(scorer) if scorer else next(iter(scores.values()), None)
            records.append({"model": log.eval.model, "task": log.eval.task, "sample_id": sample.id, "epoch": sample.epoch,
                            "value": None if chosen is None else chosen.value, "error": sample.error})
    return inspect_scores_to_correctness(records, ", ".join(map(str, paths)))
