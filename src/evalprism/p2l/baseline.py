"""The marginal leaderboard a P2L model was trained from, as one object: its coefficients and its tie
parameter together.

The head starts at this leaderboard and evaluation compares P2L with it, so both need the two parts
together: a model directory keeps the table in ``marginal.csv`` (model, coef and, from training,
the ``identified`` flags) and the tie parameter in ``config.json``'s ``marginal`` entry, in its raw
form (the one the likelihood takes: :class:`~evalprism.stats.outcome_models.TieParameter`), beside
the reported value users read. A directory written before that entry existed recorded only the
reported value, as ``training.marginal_extra``; it is read from there (:meth:`MarginalBaseline.from_config`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.options import check_choice
from evalprism.stats.outcome_models import NUMPY_OPS, get_outcome_model
from evalprism.vocabularies import OutcomeModelName

if TYPE_CHECKING:
    from evalprism.p2l.marginal import Leaderboard

MARGINAL_FILE = "marginal.csv"
#: config.json's entry for the marginal leaderboard (its tie parameter; the table is MARGINAL_FILE)
CONFIG_ENTRY = "marginal"


@dataclass(frozen=True)
class MarginalBaseline:
    """The marginal leaderboard of ``outcome_model``: ``table`` (columns model, coef, and others kept as
    written) and ``tie``, its raw tie parameter (None for an outcome model without one)."""

    outcome_model: OutcomeModelName
    table: pd.DataFrame = field(repr=False)
    tie: float | None = None

    def __post_init__(self) -> None:
        if (self.tie is None) != (get_outcome_model(self.outcome_model).extra is None):
            raise ValueError(f"outcome model {self.outcome_model!r}: the marginal's tie parameter is {self.tie!r}")

    @classmethod
    def from_leaderboard(cls, board: Leaderboard) -> MarginalBaseline:
        """The baseline of a marginal fit (its raw tie parameter is the fit's last parameter)."""
        has_tie = get_outcome_model(board.outcome_model).extra is not None
        return cls(board.outcome_model, board.frame(), float(board.fit.params[-1]) if has_tie else None)

    @classmethod
    def from_reported(
        cls, outcome_model: OutcomeModelName, table: pd.DataFrame, extra: float | None
    ) -> MarginalBaseline:
        """The baseline from its table and the *reported* tie parameter (η for rk, λ for grk)."""
        entry = get_outcome_model(outcome_model).extra
        return cls(
            outcome_model, table, None if entry is None or extra is None else float(entry.unreport(float(extra)))
        )

    def coefs(self, models: Sequence[str]) -> np.ndarray:
        """The coefficients of ``models``, in that order."""
        return self.table.set_index("model").loc[list(models), "coef"].to_numpy(dtype=np.float64)

    @property
    def extra(self) -> float | None:
        """The reported tie parameter (η for rk, λ for grk), None without one."""
        entry = get_outcome_model(self.outcome_model).extra
        return None if entry is None or self.tie is None else float(entry.report(NUMPY_OPS, self.tie))

    def config_entry(self) -> dict[str, Any]:
        """What ``config.json`` records of it beside ``marginal.csv``."""
        return {"file": MARGINAL_FILE, "tie_raw": self.tie, "extra": self.extra}

    def save(self, directory: Path) -> dict[str, Any]:
        """Write ``marginal.csv`` into ``directory``; returns the config entry (:meth:`config_entry`)."""
        self.table.to_csv(directory / MARGINAL_FILE, index=False)
        return self.config_entry()

    @classmethod
    def from_config(cls, table: pd.DataFrame, config: dict[str, Any]) -> MarginalBaseline:
        """The baseline of a model directory from its ``marginal.csv`` table and ``config.json``: the tie
        parameter from the ``marginal`` entry, or, in a directory written before it existed, from the
        reported ``training.marginal_extra``. An outcome model with a tie parameter and none recorded is refused
        (the message names config.json; the caller names the directory)."""
        outcome_model: OutcomeModelName = check_choice("outcome_model", config.get("outcome_model"), OutcomeModelName)
        needs_tie = get_outcome_model(outcome_model).extra is not None
        entry = config.get(CONFIG_ENTRY)
        if isinstance(entry, dict):
            tie = entry.get("tie_raw")
            if needs_tie and not _finite(tie):
                raise EvalprismError(
                    f"config.json: 'marginal' must hold the finite 'tie_raw' of outcome model '{outcome_model}'"
                )
            return cls(outcome_model, table, float(tie) if needs_tie and tie is not None else None)
        training = config.get("training")
        extra = training.get("marginal_extra") if isinstance(training, dict) else None
        if needs_tie and not _finite(extra):
            raise EvalprismError(
                f"config.json records no tie parameter of the marginal leaderboard (outcome model '{outcome_model}')"
            )
        return cls.from_reported(outcome_model, table, extra)


def _finite(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and bool(np.isfinite(value))
