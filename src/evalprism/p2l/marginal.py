"""Marginal leaderboards from battles: one BT / BT-tie / RK / grounded-RK fit with confidence intervals."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalprism.io.battles import outcome_codes, to_canonical_battles
from evalprism.io.outputs import OutputKind, OutputTarget, write_result_dir
from evalprism.progress import progress_bar, status
from evalprism.report import Report
from evalprism.stats.leaderboard import CiMethod, Leaderboard, fit_pairwise
from evalprism.stats.pairwise import PairModel, ignored_battles_note


@dataclass
class LeaderboardResult:
    """A fitted marginal leaderboard: ``leaderboard`` (rank, model, coef, lower, upper, rating,
    battles), the underlying :class:`Leaderboard` fit and the options used."""

    leaderboard: pd.DataFrame
    fit: Leaderboard
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def extra(self) -> float | None:
        return self.fit.extra

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"leaderboard": self.leaderboard}

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write ``leaderboard.csv``, ``run.json`` and ``report.html`` atomically."""
        run = {"options": self.options, "extra": self.extra}
        return write_result_dir(out_dir, OutputKind.P2L_FIT, self.frames(), run, build_report(self))


def fit_leaderboard(
    battles: pd.DataFrame,
    *,
    model: PairModel = "bt",
    ci: CiMethod = "sandwich",
    rounds: int = 100,
    seed: int = 0,
    progress: bool = True,
) -> LeaderboardResult:
    """Fit ``model`` to ``battles`` (any supported battles format) and rank the models.

    Confidence intervals are 95%: ``sandwich`` (robust, closed form) or ``bootstrap`` (``rounds``
    multinomial resamples of the aggregated counts, percentile intervals).
    """
    table = to_canonical_battles(battles)
    status(f"fitting {model} to {len(table)} battles", progress)
    note = ignored_battles_note(model, outcome_codes(table["winner"]),
                                table["p_b"].to_numpy(dtype=float) if "p_b" in table.columns else None)
    if note:
        status(note, progress)
    with progress_bar(f"bootstrap ({rounds} rounds)", rounds, progress and ci == "bootstrap") as bar:
        board = fit_pairwise(table, model, ci, rounds=rounds, seed=seed, on_step=bar.update)
    options = {"model": model, "ci": ci, "rounds": rounds if ci == "bootstrap" else None,
               "seed": seed, "n_battles": len(table), "nll": board.fit.nll}
    return LeaderboardResult(board.frame(), board, options)


def build_report(result: LeaderboardResult) -> Report:
    """The report of a marginal leaderboard (built with the other P2L reports)."""
    from evalprism.p2l.reports import leaderboard_report

    return leaderboard_report(result)
