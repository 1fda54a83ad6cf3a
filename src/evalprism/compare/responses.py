"""An ECDF responses file as runs to compare: each configuration (the ``--by`` columns) is a run.

The file is the one `evalprism ecdf` reads (``question_id``, ``response``, ``references`` or a
``score``, setting columns; :mod:`evalprism.ecdf.responses`). Here a question is an item and each
response one sample of it, so several responses per question and configuration (temperature
sampling) give the item's mean score and its within-item variance, and one response (greedy) a 0/1
item: exact McNemar applies. Responses pooled from several sources under one configuration stay
valid here, unlike in the ECDF distribution test: the unit of the paired test is the question, and
each question's mean over its pooled responses is one number per run.

Scores: a ``score`` column in 0..1 as it is (the user's score wins over references, as in `ecdf`);
else the responses are scored against their references by the lexical rules of
:mod:`evalprism.ecdf.scoring` (``exact`` by default, numbers compared as numbers; ``contains``), after
``--extract`` and ``--choices`` (a label such as ``C`` mapped to its choice text). Cosine similarity (eq. 3) is a closeness, not a correctness: its differences are not
"points", so it is refused here with the way out. Rows without a response value are left out and
counted, as `ecdf` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from evalprism.compare.cells import identifier_column, require_cluster, score_values
from evalprism.ecdf.prepare import read_answers
from evalprism.ecdf.responses import RESPONSES_SCHEMA, check_setting_columns, configuration_label
from evalprism.ecdf.scoring import score_answers
from evalprism.errors import EvalprismError
from evalprism.vocabularies import ScoreRule

#: the scoring rules a responses file can be compared under (0/1 correctness)
RESPONSE_SCORES = ("exact", "contains")


@dataclass(frozen=True)
class ResponseOptions:
    """How an ECDF responses file becomes runs: ``by`` the setting columns naming a run (default:
    ``model`` when the file has it), ``score`` the rule against references, ``extract`` the regex
    taking the answer out of each response, ``choices`` the column mapping answer labels to choice
    texts (multiple choice), all as in `ecdf`."""

    by: tuple[str, ...] = ()
    score: ScoreRule = "exact"
    extract: str | None = None
    choices: str | None = None

    def given(self) -> list[str]:
        """The options the user set (each applies to responses files only)."""
        return [
            name
            for name, set_ in (
                ("--by", bool(self.by)),
                ("--score", self.score != "exact"),
                ("--extract", self.extract is not None),
                ("--choices", self.choices is not None),
            )
            if set_
        ]


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


def _lexical(df: pd.DataFrame, where: str, options: ResponseOptions, notes: list[str]) -> np.ndarray:
    if options.score not in RESPONSE_SCORES:
        raise EvalprismError(
            f"{where}: score {options.score}: a comparison needs a correctness value per response; "
            f"cosine similarity is a closeness, its differences are not points: use score "
            f"{' or '.join(RESPONSE_SCORES)}, or give a 'score' column in 0..1",
            parameter="score",
        )
    answers = read_answers(df, where, options.extract, options.choices, notes)
    return score_answers(answers, options.score, notes, where)


def read_responses_runs(
    table: pd.DataFrame, where: str, options: ResponseOptions, cluster: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """The long run table (``run, benchmark, item_id, score[, cluster][, prompt]``) of a responses file,
    and notes; ``prompt`` (the question's text, for `p2l train` from logs) when the file has that column."""
    df = RESPONSES_SCHEMA.validate(table)
    df = df.assign(_row=np.arange(1, len(df) + 1))  # 1-based source rows, for messages after rows are left out
    notes: list[str] = []
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
    if "response" in df.columns and "score" not in df.columns:
        empty = df["response"].isna().to_numpy()
        if empty.any():
            notes.append(f"{where}: {int(empty.sum()):,} rows with no response value were left out")
            df = df[~empty].reset_index(drop=True)
    if "score" in df.columns:
        scores, no_answer = score_values(df, where)
        if no_answer:
            notes.append(f"{where}: {no_answer:,} response(s) scored -1 (no answer) counted as 0 (wrong)")
    else:
        scores = _lexical(df, where, options, notes)
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
    notes.append(
        f"{where}: an ECDF responses file: runs by {', '.join(by)} ({out['run'].nunique()}), questions as items, "
        + (
            "each response one sample of its question (the within-question variance is reported)"
            if several > 1
            else "one response per question and run"
        )
    )
    return out, notes
