"""Marginal leaderboards from battles: one BT / BT-tie / RK / grounded-RK fit with confidence intervals.

:func:`fit_leaderboard` is the one public step from a battles table (any supported format) to a
leaderboard: it canonicalises and indexes the table and aggregates the battles to pair counts;
:meth:`Leaderboard.from_counts` fits those with the numeric kernels of :mod:`evalprism.stats.pairwise`
(maximum likelihood, 95% intervals); models the battles do not identify (separation) are reported
as such.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np
import pandas as pd

from evalprism.io.battles import BattlesInput
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.p2l.options import FitOptions
from evalprism.p2l.prepared import prepare_battle_arrays
from evalprism.progress import progress_bar, status, warn
from evalprism.report import Report
from evalprism.stats.outcome_models import OutcomeModelName, get_outcome_model
from evalprism.stats.pairwise import (
    CiMethod,
    PairCounts,
    PairwiseFit,
    battles_per_model,
    coef_intervals,
    elo_ratings,
    fit_counts,
    outcome_weights,
)
from evalprism.stats.separation import Separation, model_separation

#: bootstrap rounds when ``ci='bootstrap'`` and none are given
DEFAULT_ROUNDS = 100


@dataclass(frozen=True)
class Leaderboard:
    """Fitted coefficients per model with 95% intervals (NaN when ``ci`` was None); ``identified``
    (per model, None when not checked) is set by :meth:`pinned`, whose coefficients are all finite."""

    names: list[str]
    coefs: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    battles: np.ndarray
    fit: PairwiseFit
    ci: str | None
    identified: np.ndarray | None = None

    @classmethod
    def from_counts(
        cls,
        pairs: PairCounts,
        outcome_model: OutcomeModelName = "bt",
        ci: CiMethod | None = "sandwich",
        *,
        names: list[str] | None = None,
        rounds: int = 100,
        seed: int = 0,
        on_step: Callable[[int], None] | None = None,
    ) -> Leaderboard:
        """Fit ``outcome_model`` to aggregated battles by maximum likelihood, with 95% intervals ``ci``
        (:func:`~evalprism.stats.pairwise.coef_intervals`). ``names`` labels the models (default:
        their indices)."""
        names = names or [str(i) for i in range(pairs.n_models)]
        fit = fit_counts(pairs, outcome_model, names=names)
        lower, upper = coef_intervals(pairs, fit, ci, rounds=rounds, seed=seed, on_step=on_step)
        return cls(list(names), fit.coefs, lower, upper, battles_per_model(pairs), fit, ci)

    def pinned(self, pairs: PairCounts) -> Leaderboard:
        """This leaderboard with every coefficient the battles ``pairs`` do not identify pinned to a
        finite value (:func:`pin_coefficients`) and ``identified`` set: a P2L head's warm start and
        baseline, which must not start from an optimiser's arbitrary −31 (or +18) for a coefficient
        whose maximum-likelihood value is infinite."""
        sep = pair_separation(pairs, self.outcome_model)
        coefs = pin_coefficients(self.coefs, sep, get_outcome_model(self.outcome_model).shift_invariant)
        return replace(self, coefs=coefs, identified=sep.identified.copy())

    @property
    def outcome_model(self) -> OutcomeModelName:
        return self.fit.outcome_model

    @property
    def extra(self) -> float | None:
        """The reported tie parameter (η for ``rk``, λ for ``grk``), None without one."""
        return self.fit.extra

    def frame(self) -> pd.DataFrame:
        """Columns rank, model, coef, lower, upper, rating, battles (and identified, when checked:
        False marks a pinned coefficient); best model first."""
        columns = {
            "model": self.names,
            "coef": self.coefs,
            "lower": self.lower,
            "upper": self.upper,
            "rating": elo_ratings(self.coefs),
            "battles": self.battles,
        }
        if self.identified is not None:
            columns["identified"] = self.identified
        board = (
            pd.DataFrame(columns)
            .sort_values(["coef", "model"], ascending=[False, True], kind="stable")
            .reset_index(drop=True)
        )
        board.insert(0, "rank", np.arange(1, len(board) + 1))
        return board


@dataclass(frozen=True)
class FitSummary:
    """What one marginal fit counted and decided: the battles fitted, the bootstrap rounds run (None
    without bootstrap intervals), the fit's negative log-likelihood, the reported tie parameter (η for
    ``rk``, λ for ``grk``; None without one) and, when the battles do not identify every model, the
    sentence naming them (:func:`not_identified_note`)."""

    n_battles: int
    rounds: int | None
    nll: float
    extra: float | None
    not_identified: str | None = None


@dataclass
class LeaderboardResult(SavedResult):
    """A fitted marginal leaderboard: ``leaderboard`` (rank, model, coef, lower, upper, rating,
    battles), the underlying :class:`Leaderboard` fit, the options it ran with, what it counted and
    decided (:class:`FitSummary`) and what the readers chose."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_FIT

    leaderboard: pd.DataFrame
    fit: Leaderboard
    options: FitOptions
    summary: FitSummary
    provenance: Provenance = field(default_factory=Provenance)

    @property
    def extra(self) -> float | None:
        return self.fit.extra

    def findings(self) -> list[str]:
        """The fit's headline: the leader, and how many model pairs the battles cannot order."""
        from evalprism.p2l.reports import leaderboard_index_line

        return [leaderboard_index_line(self)]

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"leaderboard": self.leaderboard}

    def report(self) -> Report:
        return build_report(self)


def fit_provenance(table: pd.DataFrame) -> Provenance:
    """What the readers chose for the battles of a marginal fit: the lines they left on the canonical
    table (``attrs["choices"]``)."""
    return Provenance(choices=tuple(table.attrs.get("choices", [])))


def fit_leaderboard(
    battles: pd.DataFrame | BattlesInput, options: FitOptions | None = None, *, progress: bool = True
) -> LeaderboardResult:
    """Fit ``options.outcome_model`` to ``battles`` (any supported battles format) and rank the models.

    Confidence intervals are 95%: ``sandwich`` (robust, closed form), ``bootstrap`` (``rounds``
    multinomial resamples of the aggregated counts, default 100, percentile intervals; ``rounds`` is
    refused with another ``ci``) or None (none). The
    ``leaderboard`` frame has the columns rank, model, coef, lower, upper, rating, battles,
    identified; ``fit`` is the :class:`Leaderboard` of the full fit.
    """
    o = options or FitOptions()
    outcome_model, ci, seed = o.outcome_model, o.ci, o.seed
    rounds = DEFAULT_ROUNDS if o.rounds is None else o.rounds
    prepared = prepare_battle_arrays(battles, prompts=False)  # a marginal fit reads no prompt; sums in count order
    table, arrays = prepared.table, prepared.arrays
    status(f"fitting {outcome_model} to {len(table)} battles", progress)
    note = prepared.ignored_note(outcome_model)
    if note:
        status(note, progress)
    pairs = PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(arrays.names), p_b=arrays.p_b)
    with progress_bar(f"bootstrap ({rounds} rounds)", rounds, progress and ci == "bootstrap") as bar:
        board = Leaderboard.from_counts(
            pairs, outcome_model, ci, names=arrays.names, rounds=rounds, seed=seed, on_step=bar.update
        )
        sep = pair_separation(pairs, outcome_model)
        core = None
        if not sep.identified.all() and sep.identified.sum() >= 2 and get_outcome_model(outcome_model).shift_invariant:
            # the limit of the maximum-likelihood fit for the identified models is their own fit (taken
            # for shift-invariant models only, as before); the full fit's intervals there are spoilt by
            # the diverging coefficients
            core = Leaderboard.from_counts(
                restrict_pairs(pairs, sep.identified),
                outcome_model,
                ci,
                names=[n for n, ok in zip(arrays.names, sep.identified, strict=True) if ok],
                rounds=rounds,
                seed=seed,
            )
    frame = leaderboard_frame(board, sep, core)
    not_identified = None if sep.identified.all() else not_identified_note(frame)
    if not_identified is not None:
        warn(not_identified)
    summary = FitSummary(len(table), rounds if ci == "bootstrap" else None, board.fit.nll, board.extra, not_identified)
    return LeaderboardResult(frame, board, o, summary, fit_provenance(table))


def pair_separation(pairs: PairCounts, outcome_model: OutcomeModelName) -> Separation:
    """:func:`~evalprism.stats.separation.model_separation` of the outcomes ``outcome_model`` uses (which
    outcome bounds which coefficient from which side is the registry's ``bounds``); soft labels count
    as fractional wins."""
    return model_separation(
        outcome_model, pairs.a, pairs.b, outcome_weights(outcome_model, pairs.counts), pairs.n_models
    )


def pin_coefficients(coefs: np.ndarray, sep: Separation, shift_invariant: bool) -> np.ndarray:
    """Finite stand-ins for the coefficients ``sep`` says are not identified, the rule for every warm
    start: one unbounded below takes the lowest identified coefficient, one unbounded above the
    highest (the nearest value the data support: in the limit of the fit it is below, or above,
    all of them); one unbounded both ways takes the identified models' mean (``shift_invariant``
    models) or 0, the fictitious "bad" model's coefficient (``grk``). Without an identified model
    every coefficient is pinned to 0. Identified coefficients are returned unchanged."""
    coefs = np.asarray(coefs, dtype=float).copy()
    ok = sep.identified
    if ok.all():
        return coefs
    if not ok.any():
        return np.zeros_like(coefs)
    up, down = sep.unbounded_above & ~sep.unbounded_below, sep.unbounded_below & ~sep.unbounded_above
    coefs[down] = coefs[ok].min()
    coefs[up] = coefs[ok].max()
    coefs[sep.unbounded_above & sep.unbounded_below] = float(coefs[ok].mean()) if shift_invariant else 0.0
    return coefs


def restrict_pairs(pairs: PairCounts, keep: np.ndarray) -> PairCounts:
    """The pairs between models in ``keep``, renumbered among them."""
    new = np.cumsum(keep) - 1
    inside = keep[pairs.a] & keep[pairs.b]
    cross = None if pairs.soft_cross is None else pairs.soft_cross[inside]
    return PairCounts(new[pairs.a[inside]], new[pairs.b[inside]], pairs.counts[inside], int(keep.sum()), cross)


def leaderboard_frame(board: Leaderboard, sep: Separation, core: Leaderboard | None) -> pd.DataFrame:
    """Columns rank, model, coef, lower, upper, rating, battles, identified; best model first.

    A model the battles do not identify gets its maximum-likelihood coefficient: +inf when it
    never loses to the identified models (interval [NaN, +inf]: no finite bound was computed), -inf
    when it never wins ([-inf, NaN]), NaN when it is unbounded both ways ([-inf, +inf]). The
    identified models get the coefficients and intervals of their own fit (``core``), which is
    the limit of the full fit for them."""
    coef, lower, upper = board.coefs.copy(), board.lower.copy(), board.upper.copy()
    ok = sep.identified
    if core is not None:
        coef[ok], lower[ok], upper[ok] = core.coefs, core.lower, core.upper
    up, down = sep.unbounded_above & ~sep.unbounded_below, sep.unbounded_below & ~sep.unbounded_above
    both = sep.unbounded_above & sep.unbounded_below
    coef[up], lower[up], upper[up] = np.inf, np.nan, np.inf
    coef[down], lower[down], upper[down] = -np.inf, -np.inf, np.nan
    coef[both], lower[both], upper[both] = np.nan, -np.inf, np.inf
    with np.errstate(invalid="ignore"):
        rating = elo_ratings(coef)
    frame = pd.DataFrame(
        {
            "model": board.names,
            "coef": coef,
            "lower": lower,
            "upper": upper,
            "rating": rating,
            "battles": board.battles,
            "identified": ok,
        }
    )
    frame = frame.sort_values(
        ["coef", "model"], ascending=[False, True], kind="stable", na_position="last"
    ).reset_index(drop=True)
    frame.insert(0, "rank", np.arange(1, len(frame) + 1))
    return frame


def not_identified_note(frame: pd.DataFrame) -> str:
    """One sentence naming the models whose coefficients the battles do not identify, and why."""
    groups = [
        ("never lost to the others (coefficient +inf)", np.isposinf(frame["coef"])),
        ("never won against the others (coefficient -inf)", np.isneginf(frame["coef"])),
        ("neither lost to nor won against the identified models (coefficient undetermined)", frame["coef"].isna()),
    ]
    parts = [f"{', '.join(frame.loc[mask, 'model'])} {why}" for why, mask in groups if mask.any()]
    return (
        "not identified (separation): " + "; ".join(parts) + ". Their coefficients have no finite "
        "maximum-likelihood value and no finite 95% interval; add battles they lose (or win) to rank them."
    )


def build_report(result: LeaderboardResult) -> Report:
    """The report of a marginal leaderboard (built with the other P2L reports)."""
    from evalprism.p2l.reports import leaderboard_report

    return leaderboard_report(result)
