"""The one item-level reader: every input evalprism reads as per-item results, as one typed value.

An input is any entry of :data:`~evalprism.io.item_formats.FORMATS` (score tables, wide model x item
matrices, lm-eval ``--log_samples`` directories, inspect_ai logs, directories mixing both harnesses,
ECDF responses files). It is read in one of two views of the same read:

- :func:`read_items` (`compare`, `p2l` from graded logs): :class:`Items`, one long table ``run,
  benchmark, item_id, score`` (float in 0..1; -1, no answer, counted as 0 and said; repeated rows are
  samples of an item), plus the ``cluster`` column when asked, ``prompt`` (the item's text, where the
  input has it) when asked, ``cost`` (what answering the item cost, where a score table has a ``cost``
  column) when asked, and ``source`` (the input each row came from). A run is identified by
  its model name: an lm-eval directory, inspect log or table holding several models gives several
  runs; an ECDF responses file gives one run per configuration of its ``by`` columns.
- :func:`read_correctness` (`stem`): :class:`Correctness`, the strict codes 1/0/-1 with one row per
  (model, benchmark, item_id), what :func:`~evalprism.io.correctness.encode_correctness` validates.
  A responses file holds no such codes and is not read in this view.

Both carry a typed :class:`~evalprism.io.record.Provenance`: the files read, the readers that ran,
every choice they made (metric, filter, scorer, epochs, the layout read, files ignored, partial runs)
and what reading changed or left out.

``model_name`` keys (:class:`~evalprism.io.harness_options.HarnessOptions`) that name one of the
inputs as given (or its last component) rename that run's model in :func:`read_items` (two runs of
one model name, e.g. two lm-eval output directories of the same checkpoint, are told apart this
way); any other key is passed to the lm-eval reader. With ``epochs="all"``, the epochs of an
inspect_ai sample are samples of one item there (inspect's reader names them ``<id>#<epoch>``; the
suffix is dropped).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.cells import identifier_column, require_cluster
from evalprism.io.harness_options import INSPECT, HarnessOptions
from evalprism.io.item_formats import (
    FORMATS,
    RESPONSES,
    Coded,
    ReadContext,
    Scored,
    Source,
    detect_format,
    is_table,
)
from evalprism.io.record import Provenance, ProvenanceBuilder
from evalprism.io.response_options import ResponseOptions

__all__ = ["Correctness", "Input", "Items", "read_correctness", "read_items"]

#: one input: a path (file or directory) or a table already in memory
Input: TypeAlias = str | Path | pd.DataFrame

#: the formats that hold correctness codes, in the registry's order
_CODED = tuple(f for f in FORMATS if f.codes is not None)


@dataclass(frozen=True)
class Items:
    """Item-level results of one or more inputs (see the module docstring): ``table`` the long table,
    ``provenance`` what reading read, chose and changed."""

    table: pd.DataFrame
    provenance: Provenance

    def runs(self) -> list[str]:
        """The runs in input order."""
        return [str(r) for r in pd.unique(self.table["run"])]


@dataclass(frozen=True)
class Correctness:
    """A correctness input in the strict view: ``table`` the canonical long table (``model, benchmark,
    item_id, score`` in {1, 0, -1}, other columns kept), ``provenance`` what reading read and chose
    (its ``readers``: the harness readers that read it)."""

    table: pd.DataFrame
    provenance: Provenance


def read_correctness(
    path: Input,
    *,
    benchmark: str | None = None,
    harness: HarnessOptions | None = None,
    check_harness: bool = True,
) -> Correctness:
    """Read correctness codes from any coded entry of the registry (a long table, a wide model x item
    matrix, an lm-eval ``--log_samples`` directory, inspect_ai logs, a directory holding both).
    ``benchmark``: the benchmark of a table without that column (default: the file's stem);
    ``harness``: per-task metric and filter, model names, inspect scorer and epochs. An option of
    ``harness`` for a reader that did not run is refused (``check_harness=False``: the caller checks,
    over several inputs read with the same options, from the provenance's ``readers``)."""
    harness = harness or HarnessOptions()
    source = Source(path)
    source.require()
    table_input = is_table(source)
    if check_harness and table_input:  # refused before the table is read
        harness.check_applies([], f"{source.where} is a table (its scores are read as they are)")
    provenance = ProvenanceBuilder()
    context = ReadContext(harness, provenance, benchmark=benchmark)
    found = detect_format(source, _CODED)
    assert found.codes is not None
    coded = found.codes(source, context)
    _record_input(source, found.name, coded.readers, provenance)
    if check_harness and not table_input:
        harness.check_applies(coded.readers, coded.what)
    return Correctness(coded.table, provenance.build())


def read_items(
    inputs: Sequence[Input],
    *,
    cluster: str | None = None,
    harness: HarnessOptions | None = None,
    responses: ResponseOptions | None = None,
    prompts: bool = False,
    costs: bool = False,
) -> Items:
    """The item-level results of every input (see the module docstring). ``cluster``: the column
    grouping items (every input must have it); ``harness``: how harness output is read;
    ``responses``: how ECDF responses files become runs; ``prompts``: keep each item's text
    (``prompt``) where an input has it; ``costs``: keep each row's ``cost`` where an input has one.
    Options given for a reader that read none of the inputs are
    refused."""
    responses = responses or ResponseOptions()
    renames, reader_options = _split_names(inputs, harness or HarnessOptions())
    provenance = ProvenanceBuilder()
    context = ReadContext(reader_options, provenance, cluster=cluster, responses=responses, graded=True)
    frames: list[pd.DataFrame] = []
    owner: dict[str, str] = {}
    for i, given in enumerate(inputs):
        source = Source(given, i + 1)
        source.require()
        read = _scores_of(source, context)
        unasked = [column for column, asked in (("prompt", prompts), ("cost", costs)) if not asked]
        table = read.table.drop(columns=unasked, errors="ignore")
        if i in renames:
            models = table["run"].unique()
            table["run"] = renames[i] if len(models) == 1 else renames[i] + ":" + table["run"].astype(str)
        if read.no_answer:
            provenance.note(f"{source.where}: {read.no_answer:,} answer(s) scored -1 (no answer) counted as 0 (wrong)")
        _claim_runs(table, source.where, owner)
        table["source"] = source.where
        frames.append(table)
    reader_options.check_applies(provenance.readers, "no input is read by that reader")
    if responses.given() and RESPONSES.name not in provenance.readers:
        raise EvalprismError(
            f"{', '.join(responses.given())}: applies to ECDF responses files (question_id, response, "
            "references or score) only, and no RUN is one",
            parameter="by",
        )
    return Items(pd.concat(frames, ignore_index=True), provenance.build())


def _record_input(source: Source, name: str, readers: tuple[str, ...], provenance: ProvenanceBuilder) -> None:
    """The input's own file (a table's; a harness reader names the files it read) and its readers:
    the harness readers that read it, else its format's name."""
    if source.path is not None and not readers:
        provenance.file(source.path)
    for reader in readers or (name,):
        provenance.reader(reader)


def _scores_of(source: Source, context: ReadContext) -> Scored:
    """``source`` read as scores in 0..1: its format's own scores, else its codes with -1 counted as 0."""
    found = detect_format(source)
    if found.scores is not None:
        read = found.scores(source, context)
        _record_input(source, found.name, (), context.provenance)
        return read
    assert found.codes is not None
    coded = found.codes(source, context)
    _record_input(source, found.name, coded.readers, context.provenance)
    return _scores_from_codes(coded, source.where, context)


def _scores_from_codes(coded: Coded, where: str, context: ReadContext) -> Scored:
    """A coded input as scores: no answer (-1) counts as 0; with ``epochs="all"``, the epochs of an
    inspect_ai sample (``<id>#<epoch>``) are samples of one item."""
    canonical, cluster = coded.table, context.cluster
    if cluster is not None:
        require_cluster(canonical, cluster, where)
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
    if context.harness.epochs == "all" and coded.readers == (INSPECT,):
        # inspect's `<id>#<epoch>` items are samples of one item here, not items of their own
        table["item_id"] = table["item_id"].str.replace(r"#\d+$", "", regex=True)
        context.provenance.note(
            f"{where}: --epochs all: every epoch of a sample is one sample of its item (the "
            "item's score is the mean over epochs, its within-item variance reported)"
        )
    if "prompt" in canonical.columns:
        table["prompt"] = canonical["prompt"].to_numpy(dtype=object)
    return Scored(table, int((canonical["score"] == -1).sum()))


def _claim_runs(table: pd.DataFrame, where: str, owner: dict[str, str]) -> None:
    """Every run name comes from one input: two inputs naming the same model need two names."""
    for model in table["run"].unique():
        if model in owner and owner[model] != where:
            raise EvalprismError(
                f"{where}: model '{model}' is also in {owner[model]}: two runs need two names "
                f"(give them with model_name: {Path(owner[model]).name}=A, {Path(where).name}=B)",
                parameter="model_name",
            )
        owner[model] = where


def _split_names(inputs: Sequence[Input], harness: HarnessOptions) -> tuple[dict[int, str], HarnessOptions]:
    """``model_name`` keys naming an input (as given, or its last component) -> input index; the rest
    stay for the lm-eval reader."""
    by_input: dict[int, str] = {}
    rest = {}
    for key, name in harness.model_name.items():
        hits = [
            i
            for i, r in enumerate(inputs)
            if not isinstance(r, pd.DataFrame)
            and key.rstrip("/") in {str(r).rstrip("/"), Path(r).name, Path(r).resolve().as_posix()}
        ]
        if hits:
            for i in hits:
                by_input[i] = name
        else:
            rest[key] = name
    return by_input, dataclasses.replace(harness, model_name=rest)
