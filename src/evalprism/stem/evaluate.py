"""Repeated localization trials of STEM beside the two baselines (seed 003, Table 2 protocol).

Each trial ``t`` draws, with ``numpy.random.default_rng([seed, t])``, one balanced STS subset
(STEM, :mod:`evalprism.stem.locate`) and then one uniform random subset of the same size that both
baselines use (:mod:`evalprism.stem.baselines`), both from the items sorted by (benchmark, item_id)
(the row order of the input changes nothing). A trial is correct when the placed position equals
the ground truth: the number of family members whose full-benchmark reference score is below the
model's own (:func:`evalprism.stem.locate.target_of`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.progress import progress_bar
from evalprism.stats.binomial import sign_test_pvalues
from evalprism.stats.irv import boundary_counts
from evalprism.stem.baselines import bayesian_positions, interval_success, random_positions
from evalprism.stem.locate import (
    NO_ROW,
    Target,
    draw_subset,
    interval_confidence,
    item_order,
    Weighting,
    level_items,
    level_weights,
    locate_target,
    per_level,
    positions_from_counts,
    target_of,
)
from evalprism.stem.located import METHODS, LocationResult
from evalprism.stem.pool import Pool

@dataclass
class Trials(SavedResult):
    """Positions placed by each method in each trial (one integer per trial: members the model is
    placed above, 0..n), the ground truth and the accuracies. Saved: trials.csv, summary.csv,
    run.json and report.html."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_LOCATE

    model: str
    family: str
    positions: np.ndarray
    random_positions: np.ndarray
    bayesian_positions: np.ndarray
    truth: int
    reference_score: float
    confidence: np.ndarray
    bayesian_mass: np.ndarray
    options: dict[str, Any] = field(default_factory=dict)

    def accuracy(self, method: str = "stem") -> float:
        """Share of trials placing the model at its true position."""
        return float((self.by_method()[method] == self.truth).mean())

    def by_method(self) -> dict[str, np.ndarray]:
        return dict(zip(METHODS, (self.positions, self.random_positions, self.bayesian_positions)))

    def summary(self) -> pd.DataFrame:
        """Per method: accuracy, mean absolute error in members, the most frequent position."""
        rows = []
        for method, pos in self.by_method().items():
            counts = np.bincount(pos)
            rows.append({"model": self.model, "method": method, "trials": len(pos), "true_position": self.truth,
                         "accuracy": float((pos == self.truth).mean()),
                         "mean_abs_error": float(np.abs(pos - self.truth).mean()),
                         "modal_position": int(counts.argmax()), "modal_share": float(counts.max() / len(pos))})
        return pd.DataFrame(rows)

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame({"model": self.model, "trial": np.arange(len(self.positions)), "stem": self.positions,
                             "stem_confidence": self.confidence, "random": self.random_positions,
                             "bayesian": self.bayesian_positions, "bayesian_mass": self.bayesian_mass,
                             "truth": self.truth})

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"trials": self.frame(), "summary": self.summary()}

    def report(self) -> Any:
        from evalprism.stem.report import trials_report

        return trials_report(self)


def _trials(pool: Pool, target: Target, items: int, trials: int, seed: int, progress: bool,
            weighting: Weighting = "balanced") -> Trials:
    levels = level_items(pool, target)
    m = per_level(items, levels)
    order = item_order(pool)
    candidates = order[(target.outcome != NO_ROW)[order]]  # drawn from in content order, as the levels
    size = np.array([min(len(lv), m) for lv in levels])
    if size.sum() == 0:
        raise EvalprismError(f"model '{target.model}' has no answer on any pool item")
    draw_n = min(items, len(candidates))
    right_levels = np.zeros((trials, pool.n + 1), dtype=np.int64)
    draws = np.empty((trials, draw_n), dtype=np.int64)
    right = target.outcome == 1
    with progress_bar(f"trials for {target.model}", trials, progress) as bar:
        for t in range(trials):
            rng = np.random.default_rng([seed, t])
            idx, labels = draw_subset(levels, m, rng)
            right_levels[t] = np.bincount(labels, weights=right[idx], minlength=pool.n + 2)[1:]
            draws[t] = rng.choice(len(candidates), draw_n, replace=False)
            if t % 50 == 49:
                bar.update(50)
        bar.update(trials % 50)
    b, c = boundary_counts(right_levels, size)
    stem = positions_from_counts(*boundary_counts(right_levels, size, level_weights(levels, size, weighting)))
    p_above, p_below = sign_test_pvalues(b, c)
    confidence = interval_confidence(stem, p_above, p_below)[2]
    cand_right = right[candidates]
    rand = random_positions(pool.bench_code[candidates], cand_right, draws, pool.weights,
                            pool.members["reference_score"].to_numpy())
    bayes, mass = bayesian_positions(interval_success(pool.irv[candidates]), cand_right, draws)
    options = {"items": items, "per_level": m, "trials": trials, "seed": seed,
               "missing": pool.options.get("missing", "wrong"), "weighting": weighting}
    return Trials(model=target.model, family=pool.family, positions=stem.astype(np.int64),
                  random_positions=rand.astype(np.int64), bayesian_positions=bayes.astype(np.int64), truth=target.truth,
                  reference_score=target.reference_score, confidence=confidence, bayesian_mass=mass, options=options)


def run_trials(pool: Pool, new_correctness: pd.DataFrame | EncodedCorrectness, items: int = 100, trials: int = 100,
             seed: int = 0, *, model: str | None = None, weighting: Weighting = "balanced",
             progress: bool = False) -> Trials:
    """``trials`` localizations of one model with ``items`` items each, by STEM and both baselines."""
    if trials < 1:
        raise EvalprismError(f"trials: expected at least 1, got {trials}")
    return _trials(pool, target_of(pool, new_correctness, model), items, trials, seed, progress, weighting)


def locate_models(pool: Pool, new_correctness: pd.DataFrame | EncodedCorrectness, models: list[str] | None = None, *,
                  items: int = 100, trials: int = 100, seed: int = 0, weighting: Weighting = "balanced",
                  progress: bool = True) -> LocationResult:
    """Locate each of ``models`` (default: every model in ``new_correctness``) with one balanced
    subset (:func:`~evalprism.stem.locate_model`) and, when ``trials`` > 0, ``trials`` repeated
    trials against both baselines."""
    enc = new_correctness if isinstance(new_correctness, EncodedCorrectness) else encode_correctness(new_correctness)
    names = models or enc.model_names.tolist()
    results = []
    for name in names:
        target = target_of(pool, enc, name)
        ran = _trials(pool, target, items, trials, seed, progress, weighting) if trials > 0 else None
        results.append((locate_target(pool, target, items, seed, weighting), ran))
    options = {"family": pool.family, "members": pool.members["model"].tolist(), "items": items, "trials": trials,
               "seed": seed, "missing": pool.options.get("missing", "wrong"), "weighting": weighting, "models": names}
    return LocationResult(pool=pool, results=results, options=options)
