"""One model's placement on the family (:class:`Localization`), built from one sample.

Two builders, one per kind of method (:attr:`~evalprism.stem.methods.Method.estimates_score`):
:func:`paper_localization` from a balanced subset by the paper's rule
(:mod:`~evalprism.stem.rule`: discordant counts and sign tests against every member, the rule
strength), and :func:`score_localization` from an estimate of the full-pool reference score and its
standard error (A, B or the adaptive estimate: placed above every member with a lower reference
score, the confidence the probability of that interval under the estimate's normal distribution,
:func:`~evalprism.stem.estimate.bounding_cdf`). Both report the model's accuracy per TI level of the
items used with 95% Clopper-Pearson intervals (:func:`level_table`). Where the sample comes from
(trial 0 of :mod:`~evalprism.stem.trials`, or a model's own answers on part of the pool) is
:mod:`~evalprism.stem.locate_one`'s and :mod:`~evalprism.stem.subset`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from scipy.special import ndtr

from evalprism.io.outputs import OutputTarget
from evalprism.stats.binomial import clopper_pearson
from evalprism.stem.adaptive import AdaptiveReading
from evalprism.stem.confidence import PlanCalibration
from evalprism.stem.estimate import bounding_cdf, positions_of
from evalprism.stem.location_result import LocateSummary, LocationResult
from evalprism.stem.methods import METHODS
from evalprism.stem.options import LocateOptions
from evalprism.stem.resolution import Abstention, Resolution, abstention, ceiling_abstention, resolution
from evalprism.stem.rule import apply_rule
from evalprism.stem.trials import Sampling

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool
    from evalprism.stem.target import Target


@dataclass(frozen=True)
class Answered:
    """A model located from its own answers (a plan's items, or any part of the pool): the answers
    used (``items``) of the pool's items, how many it answered, the design its full-pool score is
    estimated under, the method that read them (and the one asked for), whether it answered the whole
    pool, what a -1 counts as, the reference panel's size without it, the pool items (``available``)
    and, for an adaptive plan, what the adaptive estimate rests on (:class:`AdaptiveReading`)."""

    items: int
    pool_items: int
    answered: int
    design: str
    method: str
    method_requested: str
    whole_pool: bool
    missing: str
    panel_models: int
    available: int
    adaptive: AdaptiveReading | None = None
    calibration: PlanCalibration | None = None


#: where a localization's items came from: one sample drawn from answers on the whole pool (trial 0 of
#: its trials), or the model's own answers
Draw = Sampling | Answered


@dataclass
class Localization:
    """Where one model sits on the family, from one balanced subset.

    ``position``: members it is placed above (0..n); ``lower``/``upper``: the bounding members
    (None at an open end); ``confidence`` of that interval (A and B: a calibrated probability; the
    paper's rule: its rule strength, :data:`~evalprism.stem.methods.RULE_STRENGTH_NOTE`, shown under that name); ``levels``: accuracy per TI level with
    95% Clopper-Pearson intervals; ``tests``: the discordant counts and p-values against every
    member; ``subset``: the items drawn; ``draw``: where they came from (:data:`Draw`). A score
    estimate (A, B, adaptive) also has its ``resolution`` (:class:`~evalprism.stem.resolution.Resolution`)
    and, when its 95% interval holds a member's reference score, its ``abstention``
    (:class:`~evalprism.stem.resolution.Abstention`: "cannot tell which side of X", what the outputs
    lead with; ``position`` stays the point placement that trials score). ``ceiling_bound``: at the
    2PL's ceiling (:mod:`~evalprism.stem.confidence`), the one-sided interval's "at or above" bound.
    """

    model: str
    family: str
    position: int
    lower: str | None
    upper: str | None
    confidence: float
    p_lower: float
    p_upper: float
    reference_score: float | None
    truth: int | None
    levels: pd.DataFrame
    tests: pd.DataFrame
    subset: pd.DataFrame
    draw: Draw
    method: str = "paper"
    estimate: float | None = None
    standard_error: float | None = None
    member_scores: np.ndarray | None = None
    resolution: Resolution | None = None
    abstention: Abstention | None = None
    ceiling_bound: float | None = None

    @property
    def nearest_member(self) -> tuple[str, float] | None:
        """The member whose reference score is closest to the estimate, and the distance (points);
        None for the paper's rule (it estimates no score)."""
        r = self.resolution
        return None if r is None else (r.nearest, r.gap)

    @property
    def confidence_name(self) -> str:
        """What :attr:`confidence` is called wherever it is shown (its method's
        :attr:`~evalprism.stem.methods.Method.confidence_name`): ``confidence`` for A and B (the
        normal probability of the interval, calibrated), ``rule_strength`` for the paper's rule."""
        return METHODS[self.method].confidence_name

    @property
    def weighting(self) -> str:
        """The paper rule's weighting of the TI levels (a model located from its own answers: the
        default, ``balanced``; that rule needs answers on the whole pool)."""
        return self.draw.weighting if isinstance(self.draw, Sampling) else "balanced"

    @property
    def part_answered(self) -> Answered | None:
        """How the model was read when it answered only part of the pool (else None)."""
        return self.draw if isinstance(self.draw, Answered) and not self.draw.whole_pool else None

    @property
    def adaptive(self) -> AdaptiveReading | None:
        """What an adaptive plan's estimate rests on (None for any other localization)."""
        return self.draw.adaptive if isinstance(self.draw, Answered) else None

    @property
    def interval(self) -> str:
        low = self.lower or "below the smallest member"
        high = self.upper or "above the largest member"
        if self.lower and self.upper:
            return f"between {low} and {high}"
        return high if self.lower else low

    def summary(self) -> dict[str, Any]:
        """The JSON-ready headline (``localization.json``)."""
        return {
            "model": self.model,
            "family": self.family,
            "position": self.position,
            "lower": self.lower,
            "upper": self.upper,
            "interval": self.interval,
            self.confidence_name: round(self.confidence, 6),
            **self._confidence_note(),
            "p_lower": round(self.p_lower, 6),
            "p_upper": round(self.p_upper, 6),
            "capability_boundary": {"last_level_solved": self.position, "first_level_beyond": self.position + 1},
            "items_used": len(self.subset),
            "method": self.method,
            "estimate": None if self.estimate is None else round(self.estimate, 4),
            "standard_error": None if self.standard_error is None else round(self.standard_error, 4),
            "nearest_member": None
            if self.nearest_member is None
            else {"model": self.nearest_member[0], "distance": round(self.nearest_member[1], 4)},
            **self._resolution_summary(),
            **({} if self.ceiling_bound is None else {"at_or_above": round(self.ceiling_bound, 4)}),
            **self._truth_or_design(),
            "accuracy_by_ti": {
                int(r.ti): None if pd.isna(r.accuracy) else round(float(r.accuracy), 4)
                for r in self.levels.itertuples()
            },
        }

    def _resolution_summary(self) -> dict[str, Any]:
        """The design's resolution and, when the interval holds a member, the abstention (a score
        estimate only; :mod:`~evalprism.stem.resolution`)."""
        if self.resolution is None:
            return {}
        r, a = self.resolution, self.abstention
        return {
            "resolution": {
                "distance": round(r.distance, 4),
                "nearest_member": r.nearest,
                "gap": round(r.gap, 4),
                "items_needed": r.needed,
                "more_items": r.more,
            },
            "abstains": a is not None,
            "abstention": None
            if a is None
            else {
                "interval": a.interval,
                "member": a.member,
                "lower": a.lower,
                "upper": a.upper,
                "straddled": list(a.straddled),
                "p_below": round(a.p_below, 6),
                "p_above": round(a.p_above, 6),
                "confidence": round(a.confidence, 6),
            },
        }

    def _confidence_note(self) -> dict[str, str]:
        """What the confidence is, when it is not a probability (the paper's rule strength)."""
        note = METHODS[self.method].confidence_note
        return {} if note is None else {f"{self.confidence_name}_note": note}

    def _truth_or_design(self) -> dict[str, Any]:
        """The full-pool truth when the model answered the whole pool; else how much of the pool it
        answered and under which design its full-pool score was estimated (no truth to compare with)."""
        out: dict[str, Any] = {}
        if isinstance(self.draw, Answered):
            out = {
                "pool_items": self.draw.pool_items,
                "answered": self.draw.answered,
                "design": self.draw.design,
                "estimate_of": "full-pool weighted score",
            }
        if self.truth is None or self.reference_score is None:
            return out
        return {
            **out,
            "reference_score": round(float(self.reference_score), 4),
            "true_position": self.truth,
            "correct": self.position == self.truth,
            **({} if self.abstention is None else {"abstention_holds_truth": self.abstention.holds(self.truth)}),
        }

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"levels": self.levels, "tests": self.tests, "subset": self.subset}

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write located.csv, levels.csv, tests.csv, subset.csv, localization.json, run.json and
        report.html: the output of ``evalprism stem locate`` for this one model (a
        :class:`~evalprism.stem.location_result.LocationResult` of one)."""
        return LocationResult(
            pool=None, results=[(self, None)], options=LocateOptions(model=(self.model,)), summary=self.locate_summary()
        ).save(out_dir)

    def locate_summary(self) -> LocateSummary:
        """What locating this one model decided, as a run of ``stem locate`` on it records it."""
        sampled = self.draw if isinstance(self.draw, Sampling) else None
        return LocateSummary(
            family=self.family,
            members=tuple(str(m) for m in self.tests["member"]),
            items=self.draw.items,
            trials=0,
            seed=None if sampled is None else sampled.seed,
            missing=self.draw.missing,
            weighting=self.weighting,
            method=self.draw.method_requested,
            design=self.draw.design,
            models=(self.model,),
            panel_models=self.draw.panel_models,
            irt=None,
        )


def level_table(level: np.ndarray, correct: np.ndarray, n: int, solved_by: list[str]) -> pd.DataFrame:
    """Accuracy on the items used per TI level 1..n+1 (``level``: each item's level; ``correct``:
    whether the model answered it right), with the 95% Clopper-Pearson interval; ``solved_by``
    describes each level."""
    size = np.bincount(level, minlength=n + 2)[1:]
    right = np.bincount(level, weights=correct, minlength=n + 2)[1:].astype(np.int64)
    lo, hi = clopper_pearson(right, size)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(size > 0, right / np.maximum(size, 1), np.nan)
    return pd.DataFrame(
        {
            "ti": np.arange(1, n + 2),
            "solved_by": solved_by,
            "items": size,
            "correct": right,
            "accuracy": acc,
            "ci_low": lo,
            "ci_high": hi,
        }
    )


def _subset_frame(pool: Pool, target: Target, idx: np.ndarray, level: np.ndarray, **extra: np.ndarray) -> pd.DataFrame:
    """The items used (subset.csv): benchmark, item_id, TI level, any ``extra`` column, the model's score."""
    return pd.DataFrame(
        {
            "benchmark": pool.items["benchmark"].to_numpy()[idx],
            "item_id": pool.items["item_id"].to_numpy()[idx],
            "ti": level,
            **extra,
            "score": target.outcome[idx].astype(np.int64),
        }
    )


def paper_localization(
    pool: Pool,
    target: Target,
    levels_all: list[np.ndarray],
    idx: np.ndarray,
    labels: np.ndarray,
    sampling: Sampling,
) -> Localization:
    """A localization by the paper's rule from the balanced subset ``idx`` (pool indices) with TI
    levels ``labels``, drawn from the pool's items of each level ``levels_all``."""
    n = pool.n
    names = pool.members["model"].tolist()
    levels = level_table(
        labels,
        target.outcome[idx] == 1,
        n,
        [", ".join(names[k - 1 :]) if k <= n else "(none)" for k in range(1, n + 2)],
    )
    rule = apply_rule(levels["correct"].to_numpy(), levels["items"].to_numpy(), levels_all, sampling.weighting)
    position = int(rule.position)
    tests = pd.DataFrame(
        {
            "member": names,
            "params": pool.members["params"].to_numpy(),
            "right_where_member_wrong": rule.b,
            "wrong_where_member_right": rule.c,
            "placed_above": np.arange(1, n + 1) <= position,
            "p_better": rule.p_above,
            "p_worse": rule.p_below,
        }
    )
    return Localization(
        model=target.model,
        family=pool.family,
        position=position,
        lower=names[position - 1] if position >= 1 else None,
        upper=names[position] if position < n else None,
        confidence=float(rule.strength),
        p_lower=float(rule.p_lower),
        p_upper=float(rule.p_upper),
        reference_score=target.reference_score,
        truth=target.truth,
        levels=levels,
        tests=tests,
        subset=_subset_frame(pool, target, idx, labels),
        draw=sampling,
    )


def score_localization(
    pool: Pool,
    target: Target,
    idx: np.ndarray,
    estimate: float,
    se: float,
    draw: Draw,
    method: str,
    ceiling: float | None = None,
) -> Localization:
    """A localization by a score estimate (A or B) from the items ``idx`` (pool indices): placed above
    every member with a lower reference score; the interval's probability under the estimate's
    normal distribution is its confidence. ``ceiling``: at the 2PL's ceiling, the one-sided bound
    the outputs lead with ("at or above", :func:`~evalprism.stem.resolution.ceiling_abstention`)."""
    n = pool.n
    names = pool.members["model"].tolist()
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    position = int(positions_of(np.array(estimate), mu))
    ranked = np.argsort(mu, kind="stable")
    lower = names[ranked[position - 1]] if position >= 1 else None
    upper = names[ranked[position]] if position < n else None
    below, up_to = bounding_cdf(np.array(estimate), np.array(se), mu)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (estimate - mu) / se if se > 0 else np.where(estimate > mu, np.inf, -np.inf)
    right = pool.members_right[idx]
    level = n - right + 1  # TI for monotone items; for anomalous ones: by how many members are right
    levels = level_table(
        level,
        target.outcome[idx] == 1,
        n,
        [f"{n + 1 - k} member{'s' if n + 1 - k != 1 else ''}" for k in range(1, n + 2)],
    )
    tests = pd.DataFrame(
        {
            "member": names,
            "params": pool.members["params"].to_numpy(),
            "reference_score": mu,
            "difference": estimate - mu,
            "z": z,
            "placed_above": mu < estimate,
            "p_better": 1 - ndtr(z),
            "p_worse": ndtr(z),
        }
    )
    return Localization(
        model=target.model,
        family=pool.family,
        position=position,
        lower=lower,
        upper=upper,
        confidence=float(up_to - below),
        p_lower=float(below),
        p_upper=float(1 - up_to),
        reference_score=target.reference_score,
        truth=target.truth,
        levels=levels,
        tests=tests,
        subset=_subset_frame(pool, target, idx, level, members_right=right),
        draw=draw,
        method=method,
        estimate=estimate,
        standard_error=se,
        member_scores=mu,
        resolution=resolution(estimate, se, len(idx), names, mu),
        abstention=abstention(estimate, se, names, mu)
        if ceiling is None
        else ceiling_abstention(estimate, se, ceiling, names, mu),
        ceiling_bound=ceiling,
    )
