"""How an ECDF responses file is read as item-level results (runs to compare, battles to train on),
declared once (:mod:`evalprism.io.options`). Importing this module imports neither numpy nor pandas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalprism.io.options import Options, option
from evalprism.vocabularies import ScoreRule

#: the scoring rules a responses file can be read under as item-level results (0/1 correctness)
RESPONSE_SCORES = ("exact", "contains")


@dataclass(frozen=True)
class ResponseOptions(Options):
    """How an ECDF responses file becomes runs: ``by`` the setting columns naming a run (default:
    ``model`` when the file has it), ``score`` the rule against references, ``extract`` the regex
    taking the answer out of each response, ``choices`` the column mapping answer labels to choice
    texts (multiple choice), all as in `ecdf`."""

    by: Sequence[str] = option(
        (), help="ECDF responses files: the setting columns that make a run (repeat; default: model)."
    )
    score: ScoreRule = option(
        "exact",
        help="ECDF responses files with references: exact (normalised, numbers as numbers) or contains; a "
        "'score' column in 0..1 is used as it is.",
    )
    extract: str | None = option(None, help="Regex taking the answer span out of each response (last match, group 1).")
    choices: str | None = option(None, help="Column mapping answer labels to choice texts.")

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
