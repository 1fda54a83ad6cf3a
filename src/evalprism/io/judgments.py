"""Relevance judgments: the table schema, label scales and binarization, and the TREC adapter.

A judgments table has one row per query-document pair: ``query_id``, ``query``, ``doc_id``, ``doc``
(``query_text``/``doc_text`` are accepted for ``query``/``doc``), a human label column and one or more
LLM label columns, graded or binary. :func:`prepare_judgments` validates it and binarizes every label
column with its own threshold:

- a column whose labels are all 0/1 is binary and used as is (relevant = 1);
- any other column is graded on the default scale 0-3 and relevant at >= 2, the TREC DL passage
  convention (NIST grades 2 "highly relevant" and 3 "perfectly relevant" count as relevant);
- ``scales={"col": (0, 5)}`` declares another integer scale, ``thresholds={"col": 4}`` another cut.

Refused with one message (file, row, column, what was expected): labels outside the declared scale or
not whole numbers, a label column with every label missing, a pair with an empty query or document
text, two rows of the same (query_id, doc_id) with different labels. Exact duplicate rows are dropped
(and said so in the notes). Missing single labels are allowed: that pair simply has no label from that
judge.

:func:`read_trec_judgments` builds the same table from TREC files: one qrels file per judge
(``qid Q0 docno rel``), a topics file (``qid<TAB>query``) and a passage file (``docno<TAB>text``),
joined on (query_id, doc_id).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table
from evalprism.io.text import open_text
from evalprism.io.trec_files import PASSAGES, QRELS, TOPICS, existing_trec_file, named_qrels
from evalprism.io.trec_files import judge_name as judge_name  # re-exported: the default judge name of a qrels file
from evalprism.keyed import content_order

JUDGMENTS_SCHEMA = Schema(
    "judgments",
    [
        Column("query_id", "key", description="query identifier"),
        Column("query", "str", description="query text"),
        Column("doc_id", "key", description="document (passage) identifier"),
        Column("doc", "str", description="document text"),
    ],
)

#: accepted alternative names of the text columns (the canonical name wins when both are present)
ALIASES = {"query": ("query_text",), "doc": ("doc_text", "passage", "text")}

DEFAULT_SCALE = (0, 3)
DEFAULT_GRADED_THRESHOLD = 2


@dataclass(frozen=True)
class LabelScale:
    """The integer labels ``low..high`` a column may hold and the cut ``threshold`` (relevant at >=)."""

    low: int
    high: int
    threshold: float

    def describe(self) -> str:
        return f"{self.low}-{self.high}, relevant at >= {self.threshold:g}"


@dataclass
class Judgments:
    """A validated judgments table and its binarized labels.

    ``table``: the rows (duplicates dropped, canonical text columns); ``labels[col]``: the raw labels
    as floats (NaN = missing); ``relevant[col]``: 1.0 / 0.0 / NaN; ``scales[col]``: the scale used.
    """

    table: pd.DataFrame
    human: str
    llm: list[str]
    labels: dict[str, np.ndarray]
    relevant: dict[str, np.ndarray]
    scales: dict[str, LabelScale]
    notes: list[str] = field(default_factory=list)

    def in_pair_order(self) -> tuple[Judgments, np.ndarray]:
        """These judgments with the pairs sorted by (query_id, doc_id), and the rows taken (pair ``i``
        was row ``rows[i]``). Embedding, reduction, HDBSCAN (its tie-breaks and cluster numbers) and
        every sum over pairs then see the same rows whatever the order of the input (:mod:`evalprism.keyed`)."""
        rows = content_order(self.table["query_id"], self.table["doc_id"])
        table = self.table.iloc[rows].reset_index(drop=True)
        table.attrs = dict(self.table.attrs)
        return replace(
            self,
            table=table,
            labels={c: v[rows] for c, v in self.labels.items()},
            relevant={c: v[rows] for c, v in self.relevant.items()},
        ), rows


def parse_scale(text: str) -> tuple[int, int]:
    """``"0-3"`` -> (0, 3)."""
    try:
        lo, hi = (int(p) for p in text.strip().split("-", 1))
    except ValueError:
        raise EvalprismError(f"label scale '{text}': expected LOW-HIGH with whole numbers, e.g. 0-3") from None
    if hi <= lo:
        raise EvalprismError(f"label scale '{text}': HIGH must be larger than LOW")
    return lo, hi


def _canonical_text_columns(df: pd.DataFrame) -> pd.DataFrame:
    renames = {}
    for canonical, aliases in ALIASES.items():
        if canonical in df.columns:
            continue
        for alias in aliases:
            if alias in df.columns:
                renames[alias] = canonical
                break
    if not renames:
        return df
    out = df.rename(columns=renames)
    out.attrs = dict(df.attrs)
    return out


def _label_scale(values: np.ndarray, col: str, scale: tuple[int, int] | None, threshold: float | None) -> LabelScale:
    present = values[~np.isnan(values)]
    if scale is None:
        binary = present.size > 0 and bool(np.all((present == 0) | (present == 1)))
        lo, hi = (0, 1) if binary else DEFAULT_SCALE
    else:
        lo, hi = scale
    if threshold is None:
        threshold = (
            1 if hi - lo == 1 else (DEFAULT_GRADED_THRESHOLD if (lo, hi) == DEFAULT_SCALE else math.ceil((lo + hi) / 2))
        )
    if not lo < threshold <= hi:
        raise EvalprismError(f"column '{col}': threshold {threshold:g} is outside its scale {lo}-{hi}")
    return LabelScale(lo, hi, float(threshold))


def prepare_judgments(
    table: pd.DataFrame,
    human: str,
    llm: Sequence[str],
    *,
    scales: Mapping[str, tuple[int, int] | str] | None = None,
    thresholds: Mapping[str, float | str] | None = None,
) -> Judgments:
    """Validate a judgments table and binarize its label columns (rules: the module docstring)."""
    where = table.attrs.get("source") or "judgments table"
    llm = list(dict.fromkeys(llm))
    declared, thr = _label_options(human, llm, scales, thresholds)
    label_cols = [human, *llm]
    df = _canonical_text_columns(table)
    missing = [c for c in label_cols if c not in df.columns]
    if missing:
        raise EvalprismError(
            f"{where}: missing label column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(repr(m) for m in missing)} (columns present: {', '.join(map(str, df.columns))})"
        )
    schema = Schema(
        JUDGMENTS_SCHEMA.name, [*JUDGMENTS_SCHEMA.columns, *(Column(c, "number", nullable=True) for c in label_cols)]
    )
    df = schema.validate(df.reset_index(drop=True), source=where)
    _check_texts(df, where)
    labels, used = _read_labels(df, label_cols, declared, thr, where)
    notes: list[str] = []
    keep = _drop_duplicates(df, labels, label_cols, where, notes)
    df = df.loc[keep].reset_index(drop=True)
    labels = {c: v[keep] for c, v in labels.items()}
    relevant = {c: np.where(np.isnan(v), np.nan, (v >= used[c].threshold).astype(float)) for c, v in labels.items()}
    for col in label_cols:
        n_missing = int(np.isnan(labels[col]).sum())
        if n_missing:
            notes.append(f"column '{col}': {n_missing} of {len(df)} pairs have no label (left out of its agreement)")
    return Judgments(table=df, human=human, llm=llm, labels=labels, relevant=relevant, scales=used, notes=notes)


def _label_options(
    human: str,
    llm: list[str],
    scales: Mapping[str, tuple[int, int] | str] | None,
    thresholds: Mapping[str, float | str] | None,
) -> tuple[dict[str, tuple[int, int]], dict[str, float]]:
    """The declared scales and thresholds per label column, checked against the label columns."""
    if not llm:
        raise EvalprismError("give at least one LLM label column (llm)", parameter="llm")
    if human in llm:
        raise EvalprismError(f"column '{human}' is both the human and an LLM label column")
    declared = {k: parse_scale(v) if isinstance(v, str) else (int(v[0]), int(v[1])) for k, v in (scales or {}).items()}
    thr: dict[str, float] = {}
    for k, v in (thresholds or {}).items():
        try:
            thr[k] = float(v)
        except ValueError:
            raise EvalprismError(f"threshold of column '{k}': expected a number, got '{v}'") from None
    label_cols = [human, *llm]
    for name in [*declared, *thr]:
        if name not in label_cols:
            raise EvalprismError(
                f"a scale or threshold is given for '{name}', which is not a label column "
                f"(label columns: {', '.join(label_cols)})"
            )
    return declared, thr


def _check_texts(df: pd.DataFrame, where: str) -> None:
    """Every pair has a query text and a document text."""
    for col in ("query", "doc"):
        text = df[col].astype("string").str.strip()
        empty = (text.isna() | (text == "")).to_numpy(dtype=bool)
        if empty.any():
            row = int(np.flatnonzero(empty)[0])
            raise EvalprismError(
                f"{where}: row {row + 1}, column '{col}': empty text, expected the {col} text "
                f"of pair ({df['query_id'].iat[row]}, {df['doc_id'].iat[row]}); "
                f"{int(empty.sum())} pair(s) have none"
            )


def _read_labels(
    df: pd.DataFrame,
    label_cols: list[str],
    declared: dict[str, tuple[int, int]],
    thr: dict[str, float],
    where: str,
) -> tuple[dict[str, np.ndarray], dict[str, LabelScale]]:
    """Each label column's values and scale (declared, or read off its values), every label within it."""
    labels: dict[str, np.ndarray] = {}
    used: dict[str, LabelScale] = {}
    for col in label_cols:
        values = df[col].to_numpy(dtype=float)
        if np.isnan(values).all():
            raise EvalprismError(f"{where}: column '{col}': every label is missing, expected at least one label")
        scale = _label_scale(values, col, declared.get(col), thr.get(col))
        bad = ~np.isnan(values) & ((values < scale.low) | (values > scale.high) | (values != np.round(values)))
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise EvalprismError(
                f"{where}: row {row + 1}, column '{col}': label {values[row]:g} is outside the declared scale "
                f"(whole numbers {scale.low}-{scale.high}); declare another for '{col}' (scales)",
                parameter="scales",
            )
        labels[col], used[col] = values, scale
    return labels, used


def _drop_duplicates(
    df: pd.DataFrame, labels: dict[str, np.ndarray], cols: list[str], where: str, notes: list[str]
) -> np.ndarray:
    """Rows to keep: the first of each (query_id, doc_id); refuse duplicates whose labels differ."""
    dup = df.duplicated(["query_id", "doc_id"], keep=False).to_numpy()
    keep = ~df.duplicated(["query_id", "doc_id"], keep="first").to_numpy()
    if not dup.any():
        return keep
    key = pd.MultiIndex.from_frame(df[["query_id", "doc_id"]])
    codes = pd.factorize(key)[0]
    first = np.full(codes.max() + 1, -1)
    order = np.arange(len(df))
    first[codes[::-1]] = order[::-1]  # first row of every pair
    for col in cols:
        v = labels[col]
        ref = v[first[codes]]
        differ = ~((v == ref) | (np.isnan(v) & np.isnan(ref)))
        if differ.any():
            row = int(np.flatnonzero(differ)[0])
            other = int(first[codes[row]])
            raise EvalprismError(
                f"{where}: rows {other + 1} and {row + 1} are the same pair (query_id {df['query_id'].iat[row]}, "
                f"doc_id {df['doc_id'].iat[row]}) with different labels in column '{col}' "
                f"({_fmt(v[other])} vs {_fmt(v[row])}); expected one label per pair"
            )
    notes.append(f"{int((~keep).sum())} exact duplicate row(s) of the same (query_id, doc_id) were dropped")
    return keep


def _fmt(x: float) -> str:
    return "missing" if np.isnan(x) else f"{x:g}"


# --------------------------------------------------------------------------------------- TREC adapter


def _read_tsv_two_columns(path: Path, what: str) -> dict[str, str]:
    """``key<TAB>text`` lines -> {key: text}; a key repeated with a different text is refused."""
    existing_trec_file(path, what)
    out: dict[str, str] = {}
    with open_text(path, newline="") as fh:
        for i, row in enumerate(csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE), start=1):
            if not row or not "".join(row).strip():
                continue
            if len(row) < 2:
                raise EvalprismError(f"{path}: line {i}: expected 'id<TAB>text' ({what}), got {row[0][:60]!r}")
            key, text = row[0].strip(), "\t".join(row[1:]).strip()
            if key in out and out[key] != text:
                raise EvalprismError(f"{path}: line {i}: id {key} appears again with a different text")
            out[key] = text
    if not out:
        raise EvalprismError(f"{path}: no lines, expected 'id<TAB>text' ({what})")
    return out


def read_qrels(path: str | Path) -> pd.DataFrame:
    """A TREC qrels file ``qid Q0 docno rel`` -> DataFrame(query_id, doc_id, label)."""
    path = Path(path)
    existing_trec_file(path, QRELS)
    rows: list[tuple[str, str, float]] = []
    with open_text(path) as fh:
        for i, line in enumerate(fh, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4:
                raise EvalprismError(
                    f"{path}: line {i}: expected 'qid Q0 docno rel' (4 fields), got {line.strip()[:60]!r}"
                )
            try:
                rel = float(parts[3])
            except ValueError:
                raise EvalprismError(f"{path}: line {i}: relevance '{parts[3]}' is not a number") from None
            rows.append((parts[0], parts[2], rel))
    if not rows:
        raise EvalprismError(f"{path}: no lines, expected 'qid Q0 docno rel'")
    qrels = pd.DataFrame(rows, columns=["query_id", "doc_id", "label"])
    dup = qrels.duplicated(["query_id", "doc_id"], keep=False)
    if dup.any():
        conflict = qrels[dup].groupby(["query_id", "doc_id"])["label"].nunique()
        conflict = conflict[conflict > 1]
        if len(conflict):
            qid, doc = conflict.index[0]
            raise EvalprismError(
                f"{path}: pair (qid {qid}, docno {doc}) is judged more than once with different "
                f"labels; expected one label per pair and judge"
            )
        qrels = qrels.drop_duplicates(["query_id", "doc_id"])
    return qrels


def read_judgments_input(
    judgments: str | Path | None,
    qrels: Sequence[str | Path | tuple[str, str | Path]] | None = None,
    topics: str | Path | None = None,
    passages: str | Path | None = None,
) -> pd.DataFrame:
    """What `evalprism judges` reads: a judgments table, or the TREC layout (one qrels file per judge,
    a topics file and a passage file, :func:`read_trec_judgments`); never both, never half of the TREC
    layout."""
    if qrels:
        if judgments is not None or topics is None or passages is None:
            raise EvalprismError(
                "the TREC layout takes one qrels file per judge, a topics file and a passage file, and no "
                "judgments table (`evalprism judges --qrels NAME=PATH --qrels ... --topics TOPICS --passages "
                "PASSAGES --out DIR`)"
            )
        return read_trec_judgments(qrels, topics, passages)
    if judgments is None:
        raise EvalprismError(
            "give a judgments table (`evalprism judges JUDGMENTS --out DIR`), or the TREC layout "
            "(`evalprism judges --qrels NAME=PATH --qrels ... --topics TOPICS --passages PASSAGES --out DIR`)"
        )
    return read_table(judgments)


def read_trec_judgments(
    qrels: Sequence[str | Path | tuple[str, str | Path]],
    topics: str | Path,
    passages: str | Path,
) -> pd.DataFrame:
    """One judgments table from one qrels file per judge, a topics file and a passage file.

    ``qrels`` items are paths (judge = file name without extensions) or ``(judge, path)`` pairs
    (the CLI's ``NAME=PATH``). Pairs are the union over the qrels files, joined on (query_id, doc_id);
    a judge that did not judge a pair leaves its label missing. Every pair needs a query text and a
    passage text.
    """
    if not qrels:
        raise EvalprismError("give at least two qrels files (the human judge and one LLM judge)")
    named = [named_qrels(item) for item in qrels]
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise EvalprismError(
            f"qrels files give the judge names {names}: every judge needs its own name (use NAME=PATH)"
        )
    table: pd.DataFrame | None = None
    for name, path in named:
        q = read_qrels(path).rename(columns={"label": name})
        table = q if table is None else table.merge(q, on=["query_id", "doc_id"], how="outer", sort=False)
    assert table is not None
    topics_path, passages_path = Path(topics), Path(passages)
    topic_text = _read_tsv_two_columns(topics_path, TOPICS)
    doc_text = _read_tsv_two_columns(passages_path, PASSAGES)
    table = table.sort_values(["query_id", "doc_id"], kind="stable").reset_index(drop=True)
    table.insert(1, "query", table["query_id"].map(topic_text))
    table.insert(3, "doc", table["doc_id"].map(doc_text))
    for col, path, what in (("query", topics_path, "query_id"), ("doc", passages_path, "doc_id")):
        lacking = table[col].isna().to_numpy()
        if lacking.any():
            ids = pd.unique(table.loc[lacking, what])
            raise EvalprismError(
                f"{path}: no text for {what} {ids[0]} ({len(ids)} id(s) of the qrels are missing from this file)"
            )
    table.attrs["source"] = ", ".join(str(p) for _, p in named)
    return table
