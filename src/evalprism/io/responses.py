"""The responses table (DESIGN.md's contract): its schema, its setting columns, a configuration's
label, and the table read as item-level results.

`evalprism ecdf` clusters the responses of each setting; `evalprism compare` and `p2l` read the same
file as items (:func:`read_responses_items`): each configuration (the ``by`` columns) is a run, a
question is an item and each response one sample of it, so several responses per question and
configuration (temperature sampling) give the item's mean score and its within-item variance, and one
response (greedy) a 0/1 item: exact McNemar applies. Responses pooled from several sources under one
configuration stay valid there, unlike in the ECDF distribution test: the unit of the paired test is
the question, and each question's mean over its pooled responses is one number per run.

Scores as items: a ``score`` column in 0..1 as it is (the user's score wins over references, as in
`ecdf`); else the responses are scored against their references by the lexical rules of
:mod:`evalprism.io.lexical` (``exact`` by default, numbers compared as numbers; ``contains``), after
``extract`` and ``choices`` (a label such as ``C`` mapped to its choice text;
:mod:`evalprism.io.answers`). Cosine similarity (eq. 3) is a closeness, not a correctness: its
differences are not "points", so it is refused there with the way out. Rows without a response value
are left out and counted, as `ecdf` does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.answers import read_answers
from evalprism.io.cells import identifier_column, require_cluster, score_values
from evalprism.io.lexical import score_answers
from evalprism.io.record import ProvenanceBuilder
from evalprism.io.response_options import RESPONSE_SCORES, ResponseOptions
from evalprism.io.schema import Column, Schema

#: the largest score magnitude accepted in a responses table's ``score`` column. A quality scale
#: (a 0-1 similarity, 0-100 percent, a reward model's logit) never nears it; a value beyond it is a unit
#: or parsing mistake, and near 1e308 means and W1 distances overflow to inf and every ECDF falls into
#: one cluster without a word.
SCORE_MAGNITUDE = 1e12

RESPONSES_SCHEMA = Schema(
    name="responses",
    columns=(
        Column("question_id", "key", description="question identifier"),
        Column("response", "str", required=False, nullable=True, description="one response text"),
        Column("references", "str_list", required=False, description="reference answers (list or JSON list)"),
        Column(
            "score",
            "number",
            required=False,
            magnitude=SCORE_MAGNITUDE,
            description="a precomputed quality value per response",
        ),
    ),
    one_of=(("references", "score"),),
)

#: columns with a meaning of their own in a responses table: never a setting (``--by``) column
CANONICAL_COLUMNS = ("question_id", "response", "references", "score", "group")


def check_setting_columns(df: pd.DataFrame, where: str, by: Sequence[str]) -> None:
    """Every ``--by`` column exists and is not one of the canonical columns."""
    for col in by:
        if col not in df.columns:
            raise EvalprismError(
                f"{where}: by column '{col}' not found (columns: {', '.join(map(str, df.columns))})", parameter="by"
            )
        if col in CANONICAL_COLUMNS:
            raise EvalprismError(f"by '{col}': a setting column cannot be one of the canonical columns", parameter="by")


def configuration_label(values: Sequence[object], by: Sequence[str]) -> str:
    """A configuration's name from its setting values: ``model=a · temperature=0.7`` (``all`` with no
    setting column)."""
    if not by:
        return "all"
    return " · ".join(f"{c}={v}" for c, v in zip(by, values, strict=True))


def _label_parts(label: str) -> frozenset[str]:
    return frozenset(p.strip() for p in re.split(r"[·,]", label) if p.strip())


def same_configuration(label: str, wanted: str) -> bool:
    """Whether ``wanted`` names the configuration ``label``: the same ``column=value`` parts in any
    order, separated by ``,`` or ``·`` (``temperature=0.0, model=gpt-4``)."""
    return _label_parts(label) == _label_parts(wanted)


def is_responses_table(df: pd.DataFrame) -> bool:
    """A table in the responses layout: questions, not items."""
    return "question_id" in df.columns and "item_id" not in df.columns


def _run_names(df: pd.DataFrame, by: Sequence[str]) -> pd.Categorical:
    """Each row's run: the value of the one ``by`` column, or the configuration label of several."""
    keys = df[list(by)].astype(str)
    if len(by) == 1:
        return pd.Categorical(keys.iloc[:, 0].str.strip())
    labels = [configuration_label(row, by) for row in keys.itertuples(index=False)]
    return pd.Categorical(labels)


def _lexical(df: pd.DataFrame, where: str, options: ResponseOptions, provenance: ProvenanceBuilder) -> np.ndarray:
    if options.score not in RESPONSE_SCORES:
        raise EvalprismError(
            f"{where}: score {options.score}: a comparison needs a correctness value per response; "
            f"cosine similarity is a closeness, its differences are not points: use score "
            f"{' or '.join(RESPONSE_SCORES)}, or give a 'score' column in 0..1",
            parameter="score",
        )
    answers = read_answers(df, where, options.extract, options.choices)
    for note in answers.notes:
        provenance.note(note)
    scored = score_answers(answers, options.score, where)
    for note in scored.notes:
        provenance.note(note)
    return scored.values


def _by_columns(df: pd.DataFrame, where: str, options: ResponseOptions) -> list[str]:
    """The columns naming a run (``model`` by default), checked: present, not canonical, no missing value."""
    by = list(options.by)
    if not by:
        if "model" not in df.columns:
            columns = ", ".join(f"'{c}'" for c in df.columns)  # quoted: a column named like an option stays as it is
            raise EvalprismError(
                f"{where}: an ECDF responses file (question_id, response, ...): name the columns that "
                f"make a run with by (e.g. model and temperature; columns: {columns})",
                parameter="by",
            )
        by = ["model"]
    check_setting_columns(df, where, by)
    missing_setting = df[by].isna().any(axis=1).to_numpy()
    if missing_setting.any():
        r = int(np.flatnonzero(missing_setting)[0])
        col = next(c for c in by if pd.isna(df[c].iloc[r]))
        raise EvalprismError(
            f"{where}: row {r + 1}, column '{col}': missing value, expected the run's {col}", parameter="by"
        )
    return by


def _scores(df: pd.DataFrame, where: str, options: ResponseOptions, provenance: ProvenanceBuilder) -> np.ndarray:
    """Each response's score in 0..1: the ``score`` column (-1 no answer counted as 0, said), else the
    lexical rule against the references."""
    if "score" not in df.columns:
        return _lexical(df, where, options, provenance)
    scores, no_answer = score_values(df, where)
    if no_answer:
        provenance.note(f"{where}: {no_answer:,} response(s) scored -1 (no answer) counted as 0 (wrong)")
    return scores


def read_responses_items(
    table: pd.DataFrame, where: str, options: ResponseOptions, cluster: str | None, provenance: ProvenanceBuilder
) -> pd.DataFrame:
    """The long item table (``run, benchmark, item_id, score[, cluster][, prompt]``) of a responses
    file, what reading it left out and how it was read noted in ``provenance``; ``prompt`` (the
    question's text, for `p2l train` from logs) when the file has that column."""
    df = RESPONSES_SCHEMA.validate(table)
    df = df.assign(_row=np.arange(1, len(df) + 1))  # 1-based source rows, for messages after rows are left out
    by = _by_columns(df, where, options)
    if "response" in df.columns and "score" not in df.columns:
        empty = df["response"].isna().to_numpy()
        if empty.any():
            provenance.note(f"{where}: {int(empty.sum()):,} rows with no response value were left out")
            df = df[~empty].reset_index(drop=True)
    scores = _scores(df, where, options, provenance)
    bench = (
        identifier_column(df, "benchmark", where)
        if "benchmark" in df.columns
        else pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), categories=pd.Index(["all"], dtype=object))
    )
    out = pd.DataFrame(
        {
            "run": _run_names(df, by),
            "benchmark": bench,
            "item_id": identifier_column(df, "question_id", where),
            "score": scores,
        }
    )
    if cluster is not None:
        require_cluster(df, cluster, where)
        out["cluster"] = identifier_column(df, cluster, where, "the item's cluster (--cluster)")
    if "prompt" in df.columns:  # rows may have been left out above: carried here, aligned
        out["prompt"] = df["prompt"].to_numpy(dtype=object)
    several = int(out.groupby(["run", "item_id"], observed=True).size().max())
    provenance.note(
        f"{where}: an ECDF responses file: runs by {', '.join(by)} ({out['run'].nunique()}), questions as items, "
        + (
            "each response one sample of its question (the within-question variance is reported)"
            if several > 1
            else "one response per question and run"
        )
    )
    return out
