"""Locating an unknown model on the family from a balanced STS subset (seed 003, Key Design 3).

Balanced subset (step 2): the pool's TI levels ``k = 1..n+1`` (easy, the strict STS levels 2..n,
hard) each give ``m = items // (n+1)`` items drawn without replacement (a level with fewer items
gives all it has); only items the model has an answer row for are drawn, and with
``missing="exclude"`` only items it answered (score != -1). Trial ``t`` of seed ``s`` draws with
``numpy.random.default_rng([s, t])`` from the items sorted by (benchmark, item_id), so the draw does
not depend on the order of the input rows, and :func:`locate_model` with a seed is trial 0 of
:func:`~evalprism.stem.run_trials` with that seed.

Capability boundary (step 3), the rule chosen here (the seed only says "the lowest TI at which
accuracy begins to drop significantly"): member ``M_j`` answers exactly the subset items with
``TI <= j``. Against ``M_j`` the discordant items are ``b_j`` = items of levels above j the model
answers right and ``c_j`` = items of levels up to j it answers wrong. The model is placed above
``M_j`` when ``b_j > c_j`` (it beats ``M_j`` on the subset; ties count as not above). Because
``b_j - c_j`` falls as j grows, the members it is placed above are ``M_1..M_p``: the position is
``p`` (0 = below the smallest, n = above the largest), the capability boundary lies between TI
levels ``p`` and ``p+1``, the interval is (``M_p``, ``M_{p+1}``). Each side is tested with the exact
one-sided McNemar (sign) test on the discordant items, ``b ~ Binomial(b + c, 1/2)`` under "as
capable as the member": ``p_lower = P(X >= b_p)`` (evidence of being above ``M_p``) and
``p_upper = P(X <= b_{p+1})`` (evidence of being below ``M_{p+1}``). The paper calls
``1 - p_lower - p_upper`` (Bonferroni, floored at 0; an open end, p = 0 or n, contributes 0) the
interval's confidence; it is shown as the *rule strength* (:data:`RULE_STRENGTH_NOTE`), since it is a
test statistic and not a probability of being right (out of sample, values near 0.97 were right 39%
of the time).

``weighting="stratified"`` (an option, not in the paper): the balanced subset gives every TI level
the same weight, while the full-benchmark ground truth weighs each level by its size (on MMLU-Pro
half the items are hard for all of Llama-2). With this option each drawn item of level k counts
``N_k / m_k`` (pool items of the level over items drawn from it) in the decision ``b_j > c_j``, an
estimate of the comparison on the whole pool; the p-values stay the exact test on the drawn items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputTarget
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.stats.binomial import clopper_pearson, sign_test_pvalues
from evalprism.stats.irv import boundary_counts
from evalprism.stem.discriminability import reference_scores
from evalprism.stem.located import LocationResult
from evalprism.stem.pool import Pool

NO_ROW = -2  # outcome of a pool item the model has no row for
Weighting = Literal["balanced", "stratified"]


@dataclass(frozen=True)
class Target:
    """A model to locate, aligned to the pool's items: ``outcome`` per pool item (1, 0, -1, or -2
    when it has no row), its full-benchmark ``scores`` (percent per pool benchmark), weighted
    ``reference_score`` and ``truth`` = members with a lower reference score."""

    model: str
    outcome: np.ndarray
    scores: np.ndarray
    reference_score: float
    truth: int


def target_of(pool: Pool, correctness: pd.DataFrame | EncodedCorrectness, model: str | None = None) -> Target:
    """Align one model of ``correctness`` to ``pool`` and compute its ground-truth position."""
    enc = correctness if isinstance(correctness, EncodedCorrectness) else encode_correctness(correctness)
    names = enc.model_names.tolist()
    if model is None:
        if len(names) != 1:
            raise EvalprismError(f"{enc.source}: holds {len(names)} models ({', '.join(names[:20])}); choose one (model)",
                                 parameter="model")
        model = names[0]
    if model not in names:
        raise EvalprismError(f"{enc.source}: model '{model}' is not there (models: {', '.join(names[:20])}"
                             f"{', ...' if len(names) > 20 else ''})")
    own = enc.scores_of(model)
    keys = pd.MultiIndex.from_frame(enc.items[["benchmark", "item_id"]])
    where = keys.get_indexer(pd.MultiIndex.from_frame(pool.items[["benchmark", "item_id"]]))
    outcome = np.where(where >= 0, own[np.maximum(where, 0)], NO_ROW).astype(np.int8)
    has = outcome != NO_ROW
    nb = len(pool.benchmarks)
    answered = np.bincount(pool.bench_code, weights=has, minlength=nb)
    lacking = [b for b, k in zip(pool.benchmarks["benchmark"], answered, strict=True) if k == 0]
    if lacking:
        raise EvalprismError(f"{enc.source}: model '{model}' has no rows for benchmark{'s' if len(lacking) > 1 else ''} "
                             f"{', '.join(lacking)} of the pool; its full-pool score needs answers on at least one "
                             "item of every pool benchmark")
    if not (outcome[has] >= 0).any():
        raise EvalprismError(f"{enc.source}: model '{model}' answered none of the pool's items: all its "
                             f"{int(has.sum()):,} rows on them are -1 (no answer); there is nothing to locate it by "
                             "(was its run complete?)")
    right = np.bincount(pool.bench_code, weights=outcome == 1, minlength=nb)
    scores = 100.0 * right / answered
    ref = float(reference_scores(scores[:, None], pool.weights)[0])
    truth = int((pool.members["reference_score"].to_numpy() < ref).sum())
    return Target(model=model, outcome=outcome, scores=scores, reference_score=ref, truth=truth)


def usable_items(pool: Pool, target: Target) -> np.ndarray:
    """Which pool items the model can be scored on: those with a row, and under ``missing="exclude"``
    only those it answered (a -1 is outside the population there, wrong otherwise)."""
    usable = target.outcome != NO_ROW
    if pool.options.get("missing", "wrong") == "exclude":
        usable &= target.outcome != -1
    return usable


def level_items(pool: Pool, target: Target) -> list[np.ndarray]:
    """Pool item indices of each TI level 1..n+1 that the model can be scored on, in :attr:`Pool.item_order`."""
    in_pool = (pool.ti > 0) & usable_items(pool, target)
    order = pool.item_order
    order = order[in_pool[order]]
    ti = pool.ti[order]
    return [order[ti == k] for k in range(1, pool.n + 2)]


def per_level(items: int, levels: list[np.ndarray]) -> int:
    """Items drawn from each TI level."""
    m = items // len(levels)
    if m < 1:
        raise EvalprismError(f"items: {items} is fewer than the {len(levels)} TI levels of the pool; "
                             f"use at least {len(levels)}")
    return m


def draw_subset(levels: list[np.ndarray], m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One balanced subset: pool indices and their TI level (1-based)."""
    picks, labels = [], []
    for k, members in enumerate(levels, 1):
        take = members if len(members) <= m else members[rng.choice(len(members), m, replace=False)]
        picks.append(take)
        labels.append(np.full(len(take), k, dtype=np.int64))
    return np.concatenate(picks), np.concatenate(labels)


def level_weights(levels: list[np.ndarray], size: np.ndarray, weighting: Weighting) -> np.ndarray | None:
    """Weight of a drawn item per level: None (balanced) or pool items / drawn items (stratified)."""
    if weighting == "balanced":
        return None
    if weighting != "stratified":
        raise EvalprismError(f"weighting: expected 'balanced' or 'stratified', got {weighting!r}")
    pool_size = np.array([len(lv) for lv in levels], dtype=float)
    return np.where(size > 0, pool_size / np.maximum(size, 1), 0.0)


def positions_from_counts(b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Members the model beats on the subset (``b_j > c_j``)."""
    return (b > c).sum(axis=-1)


def interval_confidence(position: np.ndarray, p_above: np.ndarray, p_below: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``p_lower`` (above M_p), ``p_upper`` (below M_{p+1}) and the Bonferroni confidence."""
    position = np.asarray(position)
    n = p_above.shape[-1]
    lower_idx = np.clip(position - 1, 0, n - 1)[..., None]
    upper_idx = np.clip(position, 0, n - 1)[..., None]
    p_lower = np.where(position >= 1, np.take_along_axis(p_above, lower_idx, -1)[..., 0], 0.0)
    p_upper = np.where(position <= n - 1, np.take_along_axis(p_below, upper_idx, -1)[..., 0], 0.0)
    return p_lower, p_upper, np.clip(1.0 - p_lower - p_upper, 0.0, 1.0)


#: what the paper's rule's number is, wherever it is shown: not a probability of being right
RULE_STRENGTH_NOTE = ("rule strength = 1 - the two one-sided exact McNemar p-values of the bounding members; a "
                      "test statistic, not a probability of being right: measured out of sample, placements with "
                      "a rule strength near 0.97 were right 39% of the time")


@dataclass
class Localization:
    """Where one model sits on the family, from one balanced subset.

    ``position``: members it is placed above (0..n); ``lower``/``upper``: the bounding members
    (None at an open end); ``confidence`` of that interval (A and B: a calibrated probability; the
    paper's rule: its rule strength, :data:`RULE_STRENGTH_NOTE`, shown under that name); ``levels``: accuracy per TI level with
    95% Clopper-Pearson intervals; ``tests``: the discordant counts and p-values against every
    member; ``subset``: the items drawn.
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
    options: dict[str, Any] = field(default_factory=dict)
    method: str = "paper"
    estimate: float | None = None
    standard_error: float | None = None
    member_scores: np.ndarray | None = None

    @property
    def nearest_member(self) -> tuple[str, float] | None:
        """The member whose reference score is closest to the estimate, and the distance (points);
        None for the paper's rule (it estimates no score)."""
        if self.estimate is None or self.member_scores is None:
            return None
        gaps = np.abs(np.asarray(self.member_scores) - self.estimate)
        j = int(gaps.argmin())
        return str(self.tests["member"].iloc[j]), float(gaps[j])

    @property
    def too_close(self) -> bool:
        """True when the estimate lies within one standard error of a member's reference score: no
        100-item method can place the model reliably against that member."""
        near = self.nearest_member
        return near is not None and self.standard_error is not None and near[1] < self.standard_error

    @property
    def confidence_name(self) -> str:
        """What :attr:`confidence` is called wherever it is shown: ``confidence`` for A and B (the
        normal probability of the interval, calibrated), ``rule_strength`` for the paper's rule."""
        return "rule_strength" if self.method == "paper" else "confidence"

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
            "model": self.model, "family": self.family, "position": self.position, "lower": self.lower,
            "upper": self.upper, "interval": self.interval, self.confidence_name: round(self.confidence, 6),
            **({"rule_strength_note": RULE_STRENGTH_NOTE} if self.method == "paper" else {}),
            "p_lower": round(self.p_lower, 6), "p_upper": round(self.p_upper, 6),
            "capability_boundary": {"last_level_solved": self.position, "first_level_beyond": self.position + 1},
            "items_used": int(len(self.subset)),
            "method": self.method,
            "estimate": None if self.estimate is None else round(self.estimate, 4),
            "standard_error": None if self.standard_error is None else round(self.standard_error, 4),
            "nearest_member": None if self.nearest_member is None else
            {"model": self.nearest_member[0], "distance": round(self.nearest_member[1], 4),
             "within_one_se": self.too_close},
            **self._truth_or_design(),
            "accuracy_by_ti": {int(r.ti): None if pd.isna(r.accuracy) else round(float(r.accuracy), 4)
                               for r in self.levels.itertuples()},
        }

    def _truth_or_design(self) -> dict[str, Any]:
        """The full-pool truth when the model answered the whole pool; else how much of the pool it
        answered and under which design its full-pool score was estimated (no truth to compare with)."""
        out: dict[str, Any] = {}
        if "whole_pool" in self.options:
            out = {"pool_items": self.options["pool_items"], "answered": self.options["answered"],
                   "design": self.options["design"], "estimate_of": "full-pool weighted score"}
        if self.truth is None:
            return out
        return {**out, "reference_score": round(float(self.reference_score), 4), "true_position": self.truth,
                "correct": self.position == self.truth}

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"levels": self.levels, "tests": self.tests, "subset": self.subset}

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write levels.csv, tests.csv, subset.csv, localization.json, run.json and report.html: the
        output of ``evalprism stem locate`` for this one model."""
        return LocationResult(pool=None, results=[(self, None)], options=self.options).save(out_dir)


def _localization(pool: Pool, target: Target, levels_all: list[np.ndarray], idx: np.ndarray, labels: np.ndarray,
                  options: dict[str, Any]) -> Localization:
    n = pool.n
    correct = target.outcome[idx] == 1
    size = np.bincount(labels, minlength=n + 2)[1:]
    right = np.bincount(labels, weights=correct, minlength=n + 2)[1:].astype(np.int64)
    b, c = boundary_counts(right, size)
    position = int(positions_from_counts(*boundary_counts(right, size, level_weights(levels_all, size,
                                                                                     options["weighting"]))))
    p_above, p_below = sign_test_pvalues(b, c)
    p_lower, p_upper, conf = interval_confidence(np.array(position), p_above, p_below)
    names = pool.members["model"].tolist()
    lo, hi = clopper_pearson(right, size)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(size > 0, right / np.maximum(size, 1), np.nan)
    levels = pd.DataFrame({
        "ti": np.arange(1, n + 2),
        "solved_by": [", ".join(names[k - 1:]) if k <= n else "(none)" for k in range(1, n + 2)],
        "items": size, "correct": right, "accuracy": acc, "ci_low": lo, "ci_high": hi,
    })
    tests = pd.DataFrame({
        "member": names, "params": pool.members["params"].to_numpy(), "right_where_member_wrong": b,
        "wrong_where_member_right": c, "placed_above": np.arange(1, n + 1) <= position, "p_better": p_above,
        "p_worse": p_below,
    })
    subset = pd.DataFrame({"benchmark": pool.items["benchmark"].to_numpy()[idx],
                           "item_id": pool.items["item_id"].to_numpy()[idx], "ti": labels,
                           "score": target.outcome[idx].astype(np.int64)})
    return Localization(
        model=target.model, family=pool.family, position=position,
        lower=names[position - 1] if position >= 1 else None, upper=names[position] if position < n else None,
        confidence=float(conf), p_lower=float(p_lower), p_upper=float(p_upper),
        reference_score=target.reference_score, truth=target.truth, levels=levels, tests=tests, subset=subset,
        options=options,
    )


def locate_model(pool: Pool, new_correctness: pd.DataFrame | EncodedCorrectness, items: int = 100, seed: int = 0, *,
                 model: str | None = None, weighting: Weighting = "balanced", method: str = "auto",
                 design: str | None = None, plan: Any = None) -> Localization:
    """Locate one model (``model``, or the only model in ``new_correctness``) on the pool's family.

    Answers on every pool item: from one sample of ``items`` items by ``method`` (auto | paper |
    stratified | irt: see :mod:`evalprism.stem.evaluate`), trial 0 of
    :func:`~evalprism.stem.run_trials` with the same seed. Answers on part of the pool, or a
    ``plan`` (:class:`~evalprism.stem.plan.Plan`): from those answers alone, an estimate of the
    full-pool score (:mod:`evalprism.stem.subset`)."""
    from evalprism.stem.subset import answered_whole_pool, locate_subset

    target = target_of(pool, new_correctness, model)
    if plan is not None or not answered_whole_pool(target):
        return locate_subset(pool, target, plan=plan, method=method)
    return locate_target(pool, target, items, seed, weighting, method=method, design=design)


def locate_target(pool: Pool, target: Target, items: int = 100, seed: int = 0, weighting: Weighting = "balanced", *,
                  method: str = "auto", design: str | None = None) -> Localization:
    """:func:`locate_model` for an aligned :class:`Target` (trial 0 of seed ``seed``)."""
    from evalprism.stem.evaluate import _trials

    run = _trials(pool, target, items, 1, seed, False, weighting, method, design)  # checks design
    design = design or "random"
    trials = run.trials
    options = {"items": items, "per_level": run.per_level, "seed": seed, "missing": pool.options.get("missing", "wrong"),
               "weighting": weighting, "method": trials.method, "method_requested": method, "design": design,
               "strata": trials.options["strata"], "panel_models": trials.options["panel_models"],
               "available": trials.options["available"]}
    if trials.method == "paper":
        idx, labels = run.first["balanced"]
        if len(idx) == 0:
            raise EvalprismError(f"model '{target.model}' has no answer on any pool item")
        loc = _localization(pool, target, run.levels, idx, labels, options)
        return loc
    idx = run.first["stratified"] if trials.method == "stratified" or design == "stratified" else run.first["random"]
    return _score_localization(pool, target, idx, float(trials.scores[trials.method][0]),
                               float(trials.standard_errors[trials.method][0]), options, trials.method)


def _score_localization(pool: Pool, target: Target, idx: np.ndarray, estimate: float, se: float,
                        options: dict[str, Any], method: str) -> Localization:
    """A localization by a score estimate (A or B): placed above every member with a lower reference
    score; the interval's probability under the estimate's normal distribution is its confidence."""
    from scipy.special import ndtr

    from evalprism.stem.estimate import positions_of, score_confidence

    n = pool.n
    names = pool.members["model"].tolist()
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    position = int(positions_of(np.array(estimate), mu))
    ranked = np.argsort(mu, kind="stable")
    lower = names[ranked[position - 1]] if position >= 1 else None
    upper = names[ranked[position]] if position < n else None
    sorted_mu = np.concatenate([[-np.inf], mu[ranked], [np.inf]])
    with np.errstate(divide="ignore", invalid="ignore"):
        p_lower = float(ndtr((sorted_mu[position] - estimate) / se)) if se > 0 else 0.0
        p_upper = float(1 - ndtr((sorted_mu[position + 1] - estimate) / se)) if se > 0 else 0.0
        z = (estimate - mu) / se if se > 0 else np.where(estimate > mu, np.inf, -np.inf)
    conf = float(score_confidence(np.array(estimate), np.array(se), mu))
    right = pool.members_right[idx]
    level = n - right + 1  # TI for monotone items; for anomalous ones: by how many members are right
    correct = target.outcome[idx] == 1
    size = np.bincount(level, minlength=n + 2)[1:]
    hits = np.bincount(level, weights=correct, minlength=n + 2)[1:].astype(np.int64)
    lo, hi = clopper_pearson(hits, size)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(size > 0, hits / np.maximum(size, 1), np.nan)
    levels = pd.DataFrame({
        "ti": np.arange(1, n + 2),
        "solved_by": [f"{n + 1 - k} member{'s' if n + 1 - k != 1 else ''}" for k in range(1, n + 2)],
        "items": size, "correct": hits, "accuracy": acc, "ci_low": lo, "ci_high": hi,
    })
    tests = pd.DataFrame({
        "member": names, "params": pool.members["params"].to_numpy(), "reference_score": mu,
        "difference": estimate - mu, "z": z, "placed_above": mu < estimate,
        "p_better": 1 - ndtr(z), "p_worse": ndtr(z),
    })
    subset = pd.DataFrame({"benchmark": pool.items["benchmark"].to_numpy()[idx],
                           "item_id": pool.items["item_id"].to_numpy()[idx], "ti": level,
                           "members_right": right, "score": target.outcome[idx].astype(np.int64)})
    return Localization(
        model=target.model, family=pool.family, position=position, lower=lower, upper=upper, confidence=conf,
        p_lower=p_lower, p_upper=p_upper, reference_score=target.reference_score, truth=target.truth,
        levels=levels, tests=tests, subset=subset, options=options, method=method, estimate=estimate,
        standard_error=se, member_scores=mu,
    )
