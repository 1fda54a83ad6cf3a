"""Marginal leaderboards from battles: one BT / BT-tie / RK / grounded-RK fit with confidence intervals."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from evalprism.io.battles import OUTCOMES_INDEX, to_canonical_battles
from evalprism.io.outputs import atomic_output_dir
from evalprism.progress import progress_bar, status
from evalprism.report import Report
from evalprism.stats.pairwise import (
    PairCounts,
    PairModel,
    bootstrap_coefs,
    elo_ratings,
    fit_pairwise,
    sandwich_cov,
)

CiMethod = Literal["sandwich", "bootstrap"]
Z95 = 1.959963984540054


@dataclass
class LeaderboardResult:
    """A fitted marginal leaderboard: ``leaderboard`` (model, coef, lower, upper, rating, battles),
    the fit itself and the options used."""

    leaderboard: pd.DataFrame
    extra: float | None
    options: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"leaderboard": self.leaderboard}

    def save(self, out_dir: str | Path) -> Path:
        """Write ``leaderboard.csv``, ``run.json`` and ``report.html`` atomically."""
        with atomic_output_dir(out_dir) as tmp:
            self.leaderboard.to_csv(tmp / "leaderboard.csv", index=False)
            run = {"options": self.options, "extra": self.extra}
            (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str) + "\n", encoding="utf-8")
            build_report(self).write(tmp / "report.html")
        return Path(out_dir)


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
    names = sorted(set(table["model_a"]) | set(table["model_b"]))
    index = {m: i for i, m in enumerate(names)}
    a = table["model_a"].map(index).to_numpy()
    b = table["model_b"].map(index).to_numpy()
    outcome = table["winner"].map(OUTCOMES_INDEX).to_numpy()
    p_b = table["p_b"].to_numpy(dtype=float) if "p_b" in table.columns else None
    pairs = PairCounts.from_battles(a, b, outcome, len(names), p_b=p_b)
    status(f"fitting {model} to {len(table)} battles ({pairs.a.size} model pairs, {len(names)} models)", progress)
    fit = fit_pairwise(pairs, model, names=names)
    if ci == "sandwich":
        se = np.sqrt(np.clip(np.diag(sandwich_cov(fit, pairs))[: len(names)], 0, None))
        lower, upper = fit.coefs - Z95 * se, fit.coefs + Z95 * se
    else:
        with progress_bar(f"bootstrap ({rounds} rounds)", rounds, progress) as bar:
            boot = bootstrap_coefs(pairs, model, rounds=rounds, seed=seed, on_step=bar.update)
        lower, upper = np.percentile(boot, [2.5, 97.5], axis=0)
    played = np.bincount(np.concatenate([a, b]), minlength=len(names))
    board = pd.DataFrame({
        "model": names, "coef": fit.coefs, "lower": lower, "upper": upper,
        "rating": elo_ratings(fit.coefs), "battles": played,
    }).sort_values(["coef", "model"], ascending=[False, True], kind="stable").reset_index(drop=True)
    board.insert(0, "rank", np.arange(1, len(board) + 1))
    return LeaderboardResult(board, fit.extra, {"model": model, "ci": ci, "rounds": rounds if ci == "bootstrap" else None,
                                                "seed": seed, "n_battles": len(table), "nll": fit.nll})


def build_report(result: LeaderboardResult) -> Report:
    board = result.leaderboard
    o = result.options
    report = Report(title="Marginal leaderboard",
                    subtitle=f"{o['model']} fit to {o['n_battles']} battles; 95% intervals by {o['ci']}")
    top = board.iloc[0]
    overlapping = board[(board["upper"] >= top["lower"]) & (board.index > 0)]
    report.summary(
        f"{len(board)} models; {top['model']} leads with rating {top['rating']:.0f}.",
        f"{len(overlapping)} other model(s) have intervals overlapping the leader's: these battles cannot separate them."
        if len(overlapping) else "The leader's interval overlaps no other model's.",
    )
    shown = board.iloc[::-1]
    fig = go.Figure(go.Scatter(
        x=shown["coef"], y=shown["model"], mode="markers",
        error_x={"type": "data", "symmetric": False, "array": shown["upper"] - shown["coef"],
                 "arrayminus": shown["coef"] - shown["lower"]},
        hovertemplate="%{y}<br>coefficient %{x:.3f}<extra></extra>",
    ))
    fig.update_layout(height=max(320, 22 * len(board) + 120), template="plotly_white", xaxis_title="coefficient",
                      margin={"l": 200, "r": 20, "t": 20, "b": 50}, yaxis={"type": "category"})
    report.figure(fig, "Coefficients with 95% intervals",
                  "One row per model, best on top. Two models whose intervals overlap are not reliably ordered by "
                  "these battles. One unit of coefficient is 400/ln(10) ≈ 174 rating points.")
    report.table(board, "Leaderboard", "coef: fitted coefficient; rating: 1000 + 400/ln(10) × coef.")
    report.details.update(o)
    return report
