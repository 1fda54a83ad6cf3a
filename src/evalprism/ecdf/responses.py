"""The responses table (DESIGN.md's contract): its schema, its setting columns, a configuration's label.

Owned here, apart from the analysis, because `evalprism compare` reads the same files as runs: one
schema and one rule for which columns may name a configuration serve both.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pandas as pd

from evalprism.errors import EvalprismError
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
