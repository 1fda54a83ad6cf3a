"""The trial engine: for one model, T draws of every method's sample and every method's estimate
(seed 003's Table 2 protocol, issue 17), as :class:`Trials`.

Methods (:data:`~evalprism.stem.methods.METHODS`):

- ``paper``: the paper's rule (:mod:`~evalprism.stem.rule`) on a balanced STS subset
  (:mod:`~evalprism.stem.balanced`);
- ``stratified`` (A): the stratified estimate of the full-benchmark score (:mod:`~evalprism.stem.estimate`);
- ``irt`` (B): the IRT difference (GREG) estimator on a simple random sample, when the pool has a
  reference panel (``design="stratified"`` runs it on A's stratified draw instead; :mod:`~evalprism.stem.irt`);
- ``random``: plain random sampling placed by its weighted score; ``bayesian``: the interval
  posterior of Xiao et al. on the random draw (:mod:`~evalprism.stem.baselines`).

Each trial ``t`` draws, with ``numpy.random.default_rng([seed, t])``, first the balanced subset,
then one uniform random subset of the same size (random sampling, Bayesian and B use it), then A's
stratified sample, all from the items sorted by (benchmark, item_id) (the row order of the input
changes nothing). A trial is correct when the placed position equals the ground truth: the number
of family members whose full-benchmark reference score is below the model's own
(:func:`~evalprism.stem.target.target_of`). Which method's positions are :attr:`Trials.positions`
is :func:`~evalprism.stem.methods.choose_method`'s answer. Trial 0 of seed ``s`` is the one
localization of :func:`~evalprism.stem.locate.locate_model` with that seed: :func:`trial_run` keeps
its draws (:attr:`TrialRun.first`) for :mod:`~evalprism.stem.localization`.

Paired comparisons: every method runs on the same trials as random sampling, so its difference to
random sampling (accuracy, absolute position error) is a mean of per-trial differences, with the
normal 95% interval ``mean +- 1.96 sd / sqrt(trials)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.progress import progress_bar
from evalprism.stem.balanced import draw_subset, level_items, per_level
from evalprism.stem.baselines import bayesian_positions, interval_success, random_scores
from evalprism.stem.estimate import (
    Strata,
    allocate,
    build_strata,
    design_estimate,
    positions_of,
    score_confidence,
    stratified_draw,
)
from evalprism.stem.irt import difference_estimate
from evalprism.stem.methods import METHODS, Design, choose_method, resolve_design
from evalprism.stem.rule import Weighting, apply_rule
from evalprism.stem.target import NO_ROW, Target, usable_items

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool

Z95 = 1.959963984540054


def paired_difference(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Mean of ``x - y`` over paired trials and its normal 95% interval."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    mean = float(d.mean())
    half = Z95 * float(d.std(ddof=1)) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
    return mean, mean - half, mean + half


@dataclass
class Trials(SavedResult):
    """Positions placed by each method in each trial (one integer per trial: members the model is
    placed above, 0..n), the ground truth and the accuracies.

    ``positions``: the chosen ``method``'s; ``paper_positions``, ``stratified_positions``,
    ``irt_positions`` (None without a reference panel), ``random_positions``,
    ``bayesian_positions``: every method's. ``scores`` / ``standard_errors``: per score method
    (stratified, irt, random; percent) the estimate of the reference score per trial (random
    sampling has no standard error). ``confidences``: per method the confidence of each trial's
    interval (paper: its rule strength, 1 - the two McNemar p-values, not calibrated; A and B: the normal interval probability;
    bayesian: the posterior mass). Saved: trials.csv, summary.csv, run.json and report.html."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_LOCATE

    model: str
    family: str
    method: str
    positions: np.ndarray
    paper_positions: np.ndarray
    stratified_positions: np.ndarray
    irt_positions: np.ndarray | None
    random_positions: np.ndarray
    bayesian_positions: np.ndarray
    truth: int
    reference_score: float
    member_scores: np.ndarray
    scores: dict[str, np.ndarray]
    standard_errors: dict[str, np.ndarray]
    confidences: dict[str, np.ndarray]
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def confidence(self) -> np.ndarray:
        """The chosen method's confidence per trial."""
        return self.confidences[self.method]

    @property
    def methods(self) -> list[str]:
        """The methods that ran (irt only with a reference panel)."""
        return [m for m in METHODS if self.by_method().get(m) is not None]

    def by_method(self) -> dict[str, np.ndarray | None]:
        return {
            "paper": self.paper_positions,
            "stratified": self.stratified_positions,
            "irt": self.irt_positions,
            "random": self.random_positions,
            "bayesian": self.bayesian_positions,
        }

    def positions_of(self, method: str | None = None) -> np.ndarray:
        """A method's positions per trial (None or ``"chosen"``: the chosen method's)."""
        if method in (None, "chosen"):
            return self.positions
        pos = self.by_method().get(method)
        if pos is None:
            raise EvalprismError(f"method {method!r} did not run (methods here: {', '.join(self.methods)})")
        return pos

    def accuracy(self, method: str | None = None) -> float:
        """Share of trials placing the model at its true position (default: the chosen method)."""
        return float((self.positions_of(method) == self.truth).mean())

    def rmse(self, method: str) -> float:
        """Root mean squared error of a score method's estimate against the reference score (points)."""
        return float(np.sqrt(np.mean((self.scores[method] - self.reference_score) ** 2)))

    def coverage(self, method: str) -> float:
        """Share of trials whose nominal 95% interval (estimate +- 1.96 se) holds the reference score."""
        est, se = self.scores[method], self.standard_errors[method]
        return float((np.abs(est - self.reference_score) <= Z95 * se).mean())

    def summary(self) -> pd.DataFrame:
        """Per method: accuracy and mean absolute error with the paired 95% interval of their
        difference to random sampling, score RMSE and 95% coverage (score methods), modal position."""
        rows = []
        rand = self.random_positions
        for method in self.methods:
            pos = self.positions_of(method)
            counts = np.bincount(pos)
            hit, hit_r = pos == self.truth, rand == self.truth
            err, err_r = np.abs(pos - self.truth), np.abs(rand - self.truth)
            d_acc, lo_acc, hi_acc = paired_difference(hit, hit_r)
            d_err, lo_err, hi_err = paired_difference(err, err_r)
            rows.append(
                {
                    "model": self.model,
                    "method": method,
                    "chosen": method == self.method,
                    "trials": len(pos),
                    "true_position": self.truth,
                    "accuracy": float(hit.mean()),
                    "accuracy_vs_random": d_acc,
                    "accuracy_vs_random_low": lo_acc,
                    "accuracy_vs_random_high": hi_acc,
                    "mean_abs_error": float(err.mean()),
                    "mae_vs_random": d_err,
                    "mae_vs_random_low": lo_err,
                    "mae_vs_random_high": hi_err,
                    "score_rmse": self.rmse(method) if method in self.scores else np.nan,
                    "coverage_95": self.coverage(method) if method in self.standard_errors else np.nan,
                    "modal_position": int(counts.argmax()),
                    "modal_share": float(counts.max() / len(pos)),
                }
            )
        return pd.DataFrame(rows)

    def frame(self) -> pd.DataFrame:
        out = {
            "model": self.model,
            "trial": np.arange(len(self.positions)),
            "method": self.method,
            "position": self.positions,
        }
        for method in self.methods:
            out[method] = self.positions_of(method)
            if method in self.scores:
                out[f"{method}_score"] = self.scores[method]
            if method in self.standard_errors:
                out[f"{method}_se"] = self.standard_errors[method]
            # the paper's number is a test statistic, not a calibrated confidence (RULE_STRENGTH_NOTE)
            out[f"{method}_{'rule_strength' if method == 'paper' else 'confidence'}"] = self.confidences[method]
        out["truth"] = self.truth
        out["reference_score"] = self.reference_score
        return pd.DataFrame(out)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"trials": self.frame(), "summary": self.summary()}

    def report(self) -> Any:
        from evalprism.stem.report import trials_report

        return trials_report(self)


@dataclass
class TrialRun:
    """One model's trials (:class:`Trials`), the pool's items of each TI level it was scored on
    (``levels``, what the balanced subsets were drawn from) and trial 0's samples (``first``:
    ``balanced`` (indices, TI levels), ``random`` and ``stratified`` indices, and B's ``theta``
    when it ran), from which :mod:`~evalprism.stem.localization` builds the one localization."""

    trials: Trials
    levels: list[np.ndarray]
    first: dict[str, Any]


def trial_run(
    pool: Pool,
    target: Target,
    items: int,
    trials: int,
    seed: int,
    *,
    progress: bool = False,
    weighting: Weighting = "balanced",
    method: str = "auto",
    design: Design | None = None,
) -> TrialRun:
    """``trials`` trials of every method on ``items`` items each for an aligned model (module
    docstring); ``method`` chooses :attr:`Trials.positions`, ``design`` B's sample."""
    chosen = choose_method(pool, target.model, method)
    design = resolve_design(pool, design)
    levels = level_items(pool, target)
    m = per_level(items, levels)
    order = pool.item_order
    has_row = target.outcome != NO_ROW
    usable = usable_items(pool, target)
    candidates = order[has_row[order]]  # random sampling: every item with a row, in content order
    population = order[usable[order]]  # A and B: the items the model can be scored on
    size = np.array([min(len(lv), m) for lv in levels])
    if size.sum() == 0 or len(population) == 0:
        raise EvalprismError(f"model '{target.model}' has no answer on any pool item")
    strata = build_strata(population, pool.bench_code, pool.members_right, pool.weights, pool.n)
    alloc = allocate(items, strata.size, strata.share)
    strata_members = strata.members()
    draw_n = min(items, len(candidates))
    right_levels = np.zeros((trials, pool.n + 1), dtype=np.int64)
    draws = np.empty((trials, draw_n), dtype=np.int64)
    n_strat = int(np.minimum(alloc, strata.size).sum())
    strat = np.empty((trials, n_strat), dtype=np.int64)
    right = target.outcome == 1
    first: dict[str, Any] = {}
    with progress_bar(f"trials for {target.model}", trials, progress) as bar:
        for t in range(trials):
            rng = np.random.default_rng([seed, t])
            idx, labels = draw_subset(levels, m, rng)
            right_levels[t] = np.bincount(labels, weights=right[idx], minlength=pool.n + 2)[1:]
            draws[t] = rng.choice(len(candidates), draw_n, replace=False)
            strat[t] = stratified_draw(strata_members, alloc, rng)
            if t == 0:
                first = {"balanced": (idx, labels), "random": candidates[draws[0]], "stratified": strat[0].copy()}
            if t % 50 == 49:
                bar.update(50)
        bar.update(trials % 50)
    member_scores = pool.members["reference_score"].to_numpy(dtype=float)
    w = strata.weights

    rule = apply_rule(right_levels, size, levels, weighting)  # the paper's rule
    paper, paper_conf = rule.position, rule.strength

    # random sampling and the Bayesian interval posterior on the random draw
    cand_right = right[candidates]
    rand_score = 100.0 * random_scores(pool.bench_code[candidates], cand_right, draws, pool.weights)
    rand = positions_of(rand_score, member_scores)
    # the interval likelihoods only of items some trial drew (1,000 x 100 of a million-item pool)
    drawn, local = np.unique(draws, return_inverse=True)
    bayes, mass = bayesian_positions(
        interval_success(pool.irv[candidates[drawn]]), cand_right[drawn], local.reshape(draws.shape)
    )

    # A: stratified estimate (columns of `strat` are grouped by stratum, alloc[h] each)
    col_stratum = np.repeat(np.arange(len(alloc)), np.minimum(alloc, strata.size))
    y_strat = right[strat].astype(float)
    est, var = design_estimate(y_strat, col_stratum, strata.bench, strata.size, w, strata.bench_size, binary=True)
    a_score, a_se = 100.0 * est, 100.0 * np.sqrt(var)
    scores = {"stratified": a_score, "random": rand_score}
    ses = {"stratified": a_se}
    confidences = {
        "paper": paper_conf,
        "stratified": score_confidence(a_score, a_se, member_scores),
        "bayesian": mass,
        "random": np.full(trials, np.nan),
    }
    irt_pos = None
    if pool.panel is not None:
        b_score, b_se, first["theta"] = _irt_estimates(
            pool, target, strata, draws, candidates, usable, strat, col_stratum, right, design
        )
        scores["irt"], ses["irt"] = b_score, b_se
        confidences["irt"] = score_confidence(b_score, b_se, member_scores)
        irt_pos = positions_of(b_score, member_scores)
    stratified_pos = positions_of(a_score, member_scores)
    chosen_pos = {"paper": paper, "stratified": stratified_pos, "irt": irt_pos}[chosen]
    options = {
        "items": items,
        "per_level": m,
        "trials": trials,
        "seed": seed,
        "missing": pool.options.get("missing", "wrong"),
        "weighting": weighting,
        "method": chosen,
        "method_requested": method,
        "design": design,
        "strata": len(alloc),
        "panel_models": pool.panel_size(target.model),
        "available": len(population),
    }
    result = Trials(
        model=target.model,
        family=pool.family,
        method=chosen,
        positions=np.asarray(chosen_pos, dtype=np.int64),
        paper_positions=paper.astype(np.int64),
        stratified_positions=stratified_pos.astype(np.int64),
        irt_positions=None if irt_pos is None else irt_pos.astype(np.int64),
        random_positions=rand.astype(np.int64),
        bayesian_positions=bayes.astype(np.int64),
        truth=target.truth,
        reference_score=target.reference_score,
        member_scores=member_scores,
        scores=scores,
        standard_errors=ses,
        confidences=confidences,
        options=options,
    )
    return TrialRun(trials=result, levels=levels, first=first)


def _irt_estimates(
    pool: Pool,
    target: Target,
    strata: Strata,
    draws: np.ndarray,
    candidates: np.ndarray,
    usable: np.ndarray,
    strat: np.ndarray,
    col_stratum: np.ndarray,
    right: np.ndarray,
    design: Design,
) -> tuple[np.ndarray, np.ndarray, float]:
    """B: the IRT difference estimator (percent) and its standard error per trial; trial 0's theta."""
    fit = pool.irt_fit(exclude=target.model)
    nb = len(strata.weights)
    if design == "random":
        picked = candidates[draws]
        valid = usable[picked]  # under missing="exclude" a drawn -1 is outside the population
        group = pool.bench_code[picked]
        sizes, group_bench = strata.bench_size, np.arange(nb)
    else:
        picked = strat
        valid = np.ones(strat.shape, dtype=bool)
        group = np.broadcast_to(col_stratum, strat.shape)
        sizes, group_bench = strata.size.astype(float), strata.bench
    by_bench = [strata.items[pool.bench_code[strata.items] == b] for b in range(nb)]
    total, var, theta = difference_estimate(
        fit,
        picked,
        right[picked].astype(float),
        valid,
        group,
        group_bench,
        sizes,
        np.asarray(strata.weights),
        strata.bench_size,
        by_bench,
    )
    return 100.0 * total, 100.0 * np.sqrt(var), float(theta[0])
