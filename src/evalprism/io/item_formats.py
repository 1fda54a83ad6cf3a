"""Every item-level input evalprism reads, as the entries of one registry (:data:`FORMATS`).

An entry is a format: how it is recognised (``detect``, given a :class:`Source`) and how it is read.
It is read one of two ways, or both:

- ``codes``: the strict correctness codes 1 (right), 0 (wrong), -1 (no answer), one row per (model,
  benchmark, item_id), validated as :func:`~evalprism.io.correctness.encode_correctness` validates
  them (a :class:`Coded` part: the canonical table, the harness readers that read it, what the input
  is). STEM computes on these.
- ``scores``: scores in 0..1 with repeated rows as samples (a :class:`Scored` part), for a format
  whose values are not codes (partial credit, a judge's grade, responses scored against their
  references). An entry without it is read as its codes, -1 counted as 0
  (:func:`evalprism.io.items.read_items`).

The entries, in the order they are tried (the first that recognises the input reads it):

- a harness output directory: lm-evaluation-harness ``--log_samples`` output, inspect_ai logs, or
  both, read whole (:mod:`evalprism.io.lm_eval`, :mod:`evalprism.io.inspect_logs`);
- an inspect_ai log (``.eval``, or a ``.json`` that is one);
- an ECDF responses file (``question_id`` and no ``item_id``; scores only: runs by the ``by`` setting
  columns, answers extracted and scored exact/contains, :mod:`evalprism.io.responses`);
- a score table (``model, item_id, score[, benchmark][, prompt][, cost]``; any table held in memory);
- a wide model x item matrix (``.csv``/``.tsv``/``.parquet``: a ``model`` column, one column per item).

A new input format is one more entry here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.cells import cost_values, identifier_column, require_cluster, score_values
from evalprism.io.correctness import read_wide_matrix, to_canonical_correctness
from evalprism.io.harness_options import INSPECT, LM_EVAL, HarnessOptions
from evalprism.io.inspect_logs import inspect_paths, looks_like_inspect_json, read_inspect_logs
from evalprism.io.lm_eval import has_lm_eval_output, looks_like_results, read_lm_eval
from evalprism.io.record import ProvenanceBuilder
from evalprism.io.response_options import ResponseOptions
from evalprism.io.responses import is_responses_table, read_responses_items
from evalprism.io.tables import read_table, table_format

__all__ = ["FORMATS", "Coded", "Format", "ReadContext", "Scored", "Source", "detect_format"]


@dataclass
class Source:
    """One input: a path, or a table already in memory (``number``: its place among the inputs, which
    names a table that has no ``attrs["source"]``). A file's table is read once, when an entry's
    ``detect`` first looks at its columns."""

    given: str | Path | pd.DataFrame
    number: int = 1

    @property
    def path(self) -> Path | None:
        return None if isinstance(self.given, pd.DataFrame) else Path(self.given)

    @property
    def where(self) -> str:
        """The input as messages name it: the path as given, or the table's source."""
        if isinstance(self.given, pd.DataFrame):
            return str(self.given.attrs.get("source") or f"table {self.number}")
        return str(self.path)

    @cached_property
    def frame(self) -> pd.DataFrame:
        """The input as a table (:func:`~evalprism.io.tables.read_table` of a file)."""
        if isinstance(self.given, pd.DataFrame):
            return self.given.reset_index(drop=True)
        return read_table(self.given)

    def file(self) -> Path:
        """The input's path (an entry recognised from the path reads it)."""
        if self.path is None:
            raise TypeError(f"{self.where} is a table in memory, not a path")
        return self.path

    def require(self) -> None:
        """Refuse a path that is not there, before any reader looks at it."""
        if self.path is not None and not self.path.exists():
            raise EvalprismError(f"{self.path}: file not found")


@dataclass(frozen=True)
class ReadContext:
    """What a read is told and where it writes down what it did: the harness readers' options, the
    provenance being built, and per view: ``benchmark`` (codes: the benchmark of a table without that
    column), ``cluster`` (scores: the column grouping items) and ``responses`` (scores: how a
    responses file becomes runs)."""

    harness: HarnessOptions
    provenance: ProvenanceBuilder
    benchmark: str | None = None
    cluster: str | None = None
    responses: ResponseOptions = field(default_factory=ResponseOptions)
    #: the scores view: a harness's mean over epochs between 0 and 1 is an item's score
    graded: bool = False


@dataclass(frozen=True)
class Coded:
    """An input read as correctness codes: the canonical table (``model, benchmark, item_id, score``
    in {1, 0, -1}, other columns kept), the harness readers that read it, and what the input is (said
    when a harness option applies to none of it)."""

    table: pd.DataFrame
    readers: tuple[str, ...] = ()
    what: str = ""


@dataclass(frozen=True)
class Scored:
    """An input read as scores in 0..1: the item table (``run, benchmark, item_id, score[, cluster][,
    prompt]``) and how many scores were -1 (no answer), counted as 0."""

    table: pd.DataFrame
    no_answer: int = 0


@dataclass(frozen=True)
class Format:
    """One input format: its name, how it is recognised, how it is read as codes (None: it holds no
    codes) and as scores (None: as its codes, -1 counted as 0); ``reads_table``: recognising it reads
    the input as a table (a harness directory or log is recognised from its path)."""

    name: str
    detect: Callable[[Source], bool]
    codes: Callable[[Source, ReadContext], Coded] | None = None
    scores: Callable[[Source, ReadContext], Scored] | None = None
    reads_table: bool = True


# --- harness output --------------------------------------------------------------------------------


def _is_directory(source: Source) -> bool:
    return source.path is not None and source.path.is_dir()


def _is_inspect_log(source: Source) -> bool:
    path = source.path
    if path is None or path.is_dir():
        return False
    return path.suffix.lower() == ".eval" or (path.suffix.lower() == ".json" and looks_like_inspect_json(path))


def _harness_directory(source: Source, context: ReadContext) -> Coded:
    """Every lm-eval samples file and inspect log under the directory, read together (a directory
    mixing both is read whole, never half); JSON files that are neither are said to be ignored."""
    root = source.file()
    logs, ignored = inspect_paths(root)
    ignored = [f for f in ignored if not looks_like_results(f)]  # lm-eval results of any name: its reader says them
    frames = []
    lm_eval = has_lm_eval_output(root)
    if lm_eval:  # results without samples: an error unless inspect logs are read beside them (then a note)
        frames.append(read_lm_eval(root, context.harness, context.provenance, allow_empty=bool(logs)))
    if logs:
        frames.append(read_inspect_logs(logs, context.harness, context.provenance, context.graded))
    if not frames:
        raise EvalprismError(
            f"{root}: no lm-eval samples_<task>_<date>.jsonl files (run lm_eval with --log_samples) "
            "and no inspect_ai logs (.eval, .json)"
        )
    for f in ignored:
        context.provenance.choice(
            f"ignored {f.relative_to(root)}: neither an inspect_ai log nor an lm-eval results file"
        )
    table = _canonical(pd.concat([f for f in frames if len(f)] or frames, ignore_index=True), str(root))
    readers = (LM_EVAL,) * lm_eval + (INSPECT,) * bool(logs)
    return Coded(table, readers, f"{root} holds only {' and '.join(readers)}")


def _inspect_log(source: Source, context: ReadContext) -> Coded:
    path = source.file()
    table = _canonical(read_inspect_logs([path], context.harness, context.provenance, context.graded), str(path))
    return Coded(table, (INSPECT,), f"{path} is an inspect_ai log")


def _canonical(rows: pd.DataFrame, where: str) -> pd.DataFrame:
    """Harness rows as the canonical table, validated as correctness codes; a graded read's means over
    epochs (strictly between 0 and 1) are validated as a right answer and then put back (the rows keep
    their order), so every other check of the codes still runs on them."""
    score = pd.to_numeric(rows["score"], errors="coerce") if len(rows) else rows.get("score")
    means = None if score is None else ((score > 0) & (score < 1)).to_numpy()
    if means is None or not means.any():
        return to_canonical_correctness(rows, where)
    table = to_canonical_correctness(rows.assign(score=np.where(means, 1, rows["score"])), where)
    table["score"] = np.where(means, score.to_numpy(dtype=float), table["score"].to_numpy(dtype=float))
    return table


# --- tables ----------------------------------------------------------------------------------------


def _table_coded(table: pd.DataFrame, source: Source) -> Coded:
    return Coded(table, (), f"{source.where} is a table (its scores are read as they are)")


def _is_score_table(source: Source) -> bool:
    """A long table (``item_id`` or ``score``, possibly missing another column: its reader says which);
    a table held in memory is read as one whatever it holds."""
    columns = source.frame.columns
    return source.path is None or "item_id" in columns or "score" in columns


def _score_table_codes(source: Source, context: ReadContext) -> Coded:
    return _table_coded(to_canonical_correctness(source.frame, source.where, context.benchmark), source)


def _score_table_scores(source: Source, context: ReadContext) -> Scored:
    """Scores anywhere in 0..1 (partial credit, a judge's grade) and several rows per (model,
    benchmark, item_id) (samples); -1 means no answer and counts as 0; anything else outside 0..1 is
    refused by file, row and column. Benchmark ``all`` when the table has none."""
    df, where = source.frame, source.where
    missing = [c for c in ("model", "item_id", "score") if c not in df.columns]
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
    if context.cluster is not None:
        require_cluster(df, context.cluster, where)
        out["cluster"] = identifier_column(df, context.cluster, where, "the item's cluster (--cluster)")
    if "prompt" in df.columns:
        out["prompt"] = df["prompt"].to_numpy(dtype=object)
    if "cost" in df.columns:
        out["cost"] = cost_values(df, where)
    return Scored(out, no_answer)


def _is_wide_matrix(source: Source) -> bool:
    return source.path is not None and table_format(source.path) in ("csv", "tsv", "parquet")


def _wide_matrix_codes(source: Source, context: ReadContext) -> Coded:
    return _table_coded(read_wide_matrix(source.frame, source.where, context.benchmark), source)


def _responses_scores(source: Source, context: ReadContext) -> Scored:
    table = read_responses_items(source.frame, source.where, context.responses, context.cluster, context.provenance)
    return Scored(table)


def _detect_responses(source: Source) -> bool:
    return is_responses_table(source.frame)


#: the ECDF responses file's entry (its options, ``by`` ``score`` ``extract`` ``choices``, apply to it alone)
RESPONSES = Format("ECDF responses file", _detect_responses, scores=_responses_scores)

#: every item-level input format, in the order they are tried
FORMATS: tuple[Format, ...] = (
    Format("harness output directory", _is_directory, codes=_harness_directory, reads_table=False),
    Format("inspect_ai log", _is_inspect_log, codes=_inspect_log, reads_table=False),
    RESPONSES,
    Format("score table", _is_score_table, codes=_score_table_codes, scores=_score_table_scores),
    Format("wide model x item matrix", _is_wide_matrix, codes=_wide_matrix_codes),
)


def is_table(source: Source) -> bool:
    """Whether ``source`` is read as a table (no entry recognises it from its path)."""
    return not any(f.detect(source) for f in FORMATS if not f.reads_table)


def detect_format(source: Source, formats: tuple[Format, ...] = FORMATS) -> Format:
    """The first of ``formats`` that recognises ``source``, else one message saying what was expected."""
    for candidate in formats:
        if candidate.detect(source):
            return candidate
    raise EvalprismError(
        f"{source.where}: expected a long correctness table (model, item_id, score) or a wide model x "
        "item matrix (.csv/.tsv/.parquet)"
    )
