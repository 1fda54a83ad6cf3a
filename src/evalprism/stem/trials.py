"""The trial engine: for one model, T draws of every method's sample and every method's estimate
(seed 003's Table 2 protocol, issue 17), as :class:`Trials`.

The methods are the entries of :data:`~evalprism.stem.methods.METHODS` compared in trials (the
paper's rule, A, B with a reference panel, random sampling and the Bayesian interval posterior):
each declares what it draws, and the engine hands it that sample of every trial
(:class:`~evalprism.stem.methods.Evidence`) and keeps its one typed
:class:`~evalprism.stem.methods.Estimate`.

Each trial ``t`` draws, with ``numpy.random.default_rng([seed, t])``, first the balanced subset,
then one uniform random subset of the same size (random sampling, Bayesian and B use it), then A's
stratified sample (B's with ``design="stratified"``), all from the items sorted by (benchmark,
item_id) (the row order of the input changes nothing). A trial is correct when the placed position
equals the ground truth: the number of family members whose full-benchmark reference score is below
the model's own (:func:`~evalprism.stem.target.target_of`). Which method's positions are
:attr:`Trials.positions` is :func:`~evalprism.stem.methods.choose_method`'s answer. Trial 0 of seed
``s`` is the one localization of :func:`~evalprism.stem.locate_one.locate_model` with that seed:
:func:`trial_run` keeps every draw (:attr:`TrialRun.samples`) for
:mod:`~evalprism.stem.placement`.

Paired comparisons: every method runs on the same trials as random sampling, so its difference to
random sampling (accuracy, absolute position error) is a mean of per-trial differences, with the
normal 95% interval ``mean +- 1.96 sd / sqrt(trials)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.progress import progress_bar
from evalprism.stem.balanced import draw_subset, level_items, per_level
from evalprism.stem.estimate import Sample, Strata, allocate, build_strata, stratified_draw
from evalprism.stem.methods import (
    BASELINE,
    METHODS,
    TRIAL_METHODS,
    DrawKind,
    Estimate,
    Evidence,
    choose_method,
    resolve_design,
    runs_on,
)
from evalprism.stem.options import LocateOptions
from evalprism.stem.rule import Weighting
from evalprism.stem.target import NO_ROW, Target, usable_items
from evalprism.vocabularies import Design, LocateMethod, Missing

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool

Z95 = 1.959963984540054


def paired_difference(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Mean of ``x - y`` over paired trials and its normal 95% interval."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    mean = float(d.mean())
    half = Z95 * float(d.std(ddof=1)) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
    return mean, mean - half, mean + half


@dataclass(frozen=True)
class Sampling:
    """How one model's sample of a trial is drawn, as resolved: the items asked for and the items
    of each TI level of the balanced subset (``per_level``), the seed, what a -1 counts as, the
    paper rule's weighting, the chosen ``method`` (and the one asked for), the IRT estimator's
    sample design, A's strata, the reference panel's size without the model, and the pool items the
    model can be scored on (``available``). The same for every trial of a run, and for the one
    localization of its trial 0."""

    items: int
    per_level: int
    seed: int
    missing: Missing
    weighting: Weighting
    method: str
    method_requested: LocateMethod
    design: Design
    strata: int
    panel_models: int
    available: int


@dataclass(frozen=True)
class TrialsSummary:
    """What a run of trials counted and how it sampled: the number of trials and the resolved
    :class:`Sampling` (the same for every trial)."""

    trials: int
    sampling: Sampling


@dataclass
class Trials(SavedResult):
    """Every method's answer in each trial (:attr:`estimates`: method -> its
    :class:`~evalprism.stem.methods.Estimate`, one row per trial, in
    :data:`~evalprism.stem.methods.METHODS`' order; irt only with a reference panel), the ground
    truth and the accuracies.

    A position is the members the model is placed above (0..n); a score, the estimate of the
    reference score (percent; stratified, irt, random), with its standard error where the method
    has one (stratified, irt); a confidence, that of the trial's interval (paper: its rule strength,
    1 - the two McNemar p-values, not calibrated; A and B: the normal interval probability;
    bayesian: the posterior mass; random: none). :attr:`positions` and :attr:`confidence` are the
    chosen ``method``'s. ``options``: what the trials were asked for (the model, items, trials,
    seed, method, design, weighting); ``sampling``: how each trial's sample was drawn, as resolved
    (:class:`Sampling`). Saved: trials.csv, summary.csv, run.json and report.html."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_LOCATE

    model: str
    family: str
    method: str
    estimates: dict[str, Estimate]
    truth: int
    reference_score: float
    member_scores: np.ndarray
    options: LocateOptions
    sampling: Sampling

    @property
    def n_trials(self) -> int:
        """The number of trials run."""
        return len(self.positions)

    def findings(self) -> list[str]:
        """The headline: how often each method placed the model at its true position."""
        from evalprism.stem.report import trials_finding

        return [trials_finding(self)]

    @property
    def summary(self) -> TrialsSummary:
        """How many trials ran and how each drew its sample."""
        return TrialsSummary(trials=self.n_trials, sampling=self.sampling)

    @property
    def positions(self) -> np.ndarray:
        """The chosen method's position per trial."""
        return self.estimates[self.method].position

    @property
    def confidence(self) -> np.ndarray:
        """The chosen method's confidence per trial."""
        return self.estimates[self.method].confidence

    @property
    def methods(self) -> list[str]:
        """The methods that ran (irt only with a reference panel)."""
        return list(self.estimates)

    @property
    def score_methods(self) -> list[str]:
        """The methods that estimate the reference score, those that need no reference panel first
        (the order localization.json lists their RMSEs in)."""
        return sorted(
            (m for m in self.estimates if self.estimates[m].score is not None),
            key=lambda m: METHODS[m].needs_panel is not None,
        )

    @property
    def error_methods(self) -> list[str]:
        """The methods with a standard error (and so a 95% coverage), in :attr:`score_methods`' order."""
        return [m for m in self.score_methods if self.estimates[m].standard_error is not None]

    def estimate_of(self, method: str) -> Estimate:
        """A method's estimates (refused, naming the methods that ran, when it did not run)."""
        if method not in self.estimates:
            raise EvalprismError(f"method {method!r} did not run (methods here: {', '.join(self.methods)})")
        return self.estimates[method]

    def positions_of(self, method: str | None = None) -> np.ndarray:
        """A method's positions per trial (None or ``"chosen"``: the chosen method's)."""
        if method in (None, "chosen"):
            return self.positions
        return self.estimate_of(str(method)).position

    def accuracy(self, method: str | None = None) -> float:
        """Share of trials placing the model at its true position (default: the chosen method)."""
        return float((self.positions_of(method) == self.truth).mean())

    def rmse(self, method: str) -> float:
        """Root mean squared error of a score method's estimate against the reference score (points)."""
        score = self.estimate_of(method).score
        if score is None:
            raise EvalprismError(f"method {method!r} estimates no score")
        return float(np.sqrt(np.mean((score - self.reference_score) ** 2)))

    def coverage(self, method: str) -> float:
        """Share of trials whose nominal 95% interval (estimate +- 1.96 se) holds the reference score."""
        est = self.estimate_of(method)
        if est.score is None or est.standard_error is None:
            raise EvalprismError(f"method {method!r} has no standard error")
        return float((np.abs(est.score - self.reference_score) <= Z95 * est.standard_error).mean())

    def by_method(self) -> pd.DataFrame:
        """Per method: accuracy and mean absolute error with the paired 95% interval of their
        difference to random sampling, score RMSE and 95% coverage (score methods), modal position."""
        rows = []
        rand = self.positions_of(BASELINE.name)
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
                    "score_rmse": self.rmse(method) if method in self.score_methods else np.nan,
                    "coverage_95": self.coverage(method) if method in self.error_methods else np.nan,
                    "modal_position": int(counts.argmax()),
                    "modal_share": float(counts.max() / len(pos)),
                }
            )
        return pd.DataFrame(rows)

    def frame(self) -> pd.DataFrame:
        out: dict[str, Any] = {
            "model": self.model,
            "trial": np.arange(len(self.positions)),
            "method": self.method,
            "position": self.positions,
        }
        for method, est in self.estimates.items():
            out[method] = est.position
            if est.score is not None:
                out[f"{method}_score"] = est.score
            if est.standard_error is not None:
                out[f"{method}_se"] = est.standard_error
            # the paper's number is a test statistic, not a calibrated confidence (RULE_STRENGTH_NOTE)
            out[f"{method}_{METHODS[method].confidence_name}"] = est.confidence
        out["truth"] = self.truth
        out["reference_score"] = self.reference_score
        return pd.DataFrame(out)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"trials": self.frame(), "summary": self.by_method()}

    def report(self) -> Any:
        from evalprism.stem.report import trials_report

        return trials_report(self)


@dataclass(frozen=True)
class Population:
    """What one model's trials draw from: the pool's items of each TI level it can be scored on
    (``levels``, the balanced subset's population, ``per_level`` drawn from each), the items it has
    a row for in content order (``candidates``, random sampling's), A's ``strata`` over the items it
    can be scored on and their allocation ``alloc``, and which pool items those are (``usable``)."""

    levels: list[np.ndarray]
    per_level: int
    candidates: np.ndarray
    usable: np.ndarray
    strata: Strata
    alloc: np.ndarray


def population_of(pool: Pool, target: Target, items: int) -> Population:
    """The populations every method of a trial draws ``items`` items from (refused when the model
    answered no pool item)."""
    levels = level_items(pool, target)
    m = per_level(items, levels)
    order = pool.item_order
    usable = usable_items(pool, target)
    candidates = order[(target.outcome != NO_ROW)[order]]  # random sampling: every item with a row
    population = order[usable[order]]  # A and B: the items the model can be scored on
    if sum(min(len(lv), m) for lv in levels) == 0 or len(population) == 0:
        raise EvalprismError(f"model '{target.model}' has no answer on any pool item")
    strata = build_strata(population, pool.bench_code, pool.members_right, pool.weights, pool.n)
    alloc = allocate(items, strata.size, strata.share)
    return Population(levels=levels, per_level=m, candidates=candidates, usable=usable, strata=strata, alloc=alloc)


def draw_samples(
    pool: Pool, target: Target, population: Population, items: int, trials: int, seed: int, progress: bool = False
) -> dict[DrawKind, Sample]:
    """Every trial's three draws (module docstring), as one :class:`~evalprism.stem.estimate.Sample`
    per kind: the balanced subset (groups: TI levels), the uniform random sample (groups:
    benchmarks) and A's stratified sample (groups: strata, grouped by stratum)."""
    levels, m, strata, alloc = population.levels, population.per_level, population.strata, population.alloc
    candidates = population.candidates
    level_drawn = np.array([min(len(lv), m) for lv in levels])
    strata_members = strata.members()
    draw_n = min(items, len(candidates))
    balanced = np.empty((trials, int(level_drawn.sum())), dtype=np.int64)
    draws = np.empty((trials, draw_n), dtype=np.int64)
    stratified = np.empty((trials, int(np.minimum(alloc, strata.size).sum())), dtype=np.int64)
    with progress_bar(f"trials for {target.model}", trials, progress) as bar:
        for t in range(trials):
            rng = np.random.default_rng([seed, t])
            balanced[t] = draw_subset(levels, m, rng)[0]
            draws[t] = rng.choice(len(candidates), draw_n, replace=False)
            stratified[t] = stratified_draw(strata_members, alloc, rng)
            if t % 50 == 49:
                bar.update(50)
        bar.update(trials % 50)
    picked = candidates[draws]
    return {
        "balanced": Sample(
            picked=balanced,
            group=np.repeat(np.arange(1, len(levels) + 1), level_drawn),  # the TI level of each drawn item
            group_size=np.array([len(lv) for lv in levels], dtype=float),
        ),
        "random": Sample(
            picked=picked,
            group=pool.bench_code[picked],
            group_size=strata.bench_size,
            group_bench=np.arange(len(strata.weights)),
            valid=population.usable[picked],  # under missing="exclude" a drawn -1 is outside the population
        ),
        "stratified": Sample(
            picked=stratified,
            group=np.repeat(np.arange(len(alloc)), np.minimum(alloc, strata.size)),
            group_size=strata.size.astype(float),
            group_bench=strata.bench,
        ),
    }


@dataclass
class TrialRun:
    """One model's trials (:class:`Trials`), the pool's items of each TI level it was scored on
    (``levels``, what the balanced subsets were drawn from) and every trial's draws (``samples``),
    from whose trial 0 :mod:`~evalprism.stem.placement` builds the one localization."""

    trials: Trials
    levels: list[np.ndarray]
    samples: dict[DrawKind, Sample]

    def first(self, kind: DrawKind) -> np.ndarray:
        """Trial 0's items of the draw ``kind`` (pool indices)."""
        return self.samples[kind].picked[0]


def trial_run(
    pool: Pool,
    target: Target,
    items: int,
    trials: int,
    seed: int,
    *,
    progress: bool = False,
    weighting: Weighting = "balanced",
    method: LocateMethod = "auto",
    design: Design | None = None,
) -> TrialRun:
    """``trials`` trials of every method on ``items`` items each for an aligned model (module
    docstring); ``method`` chooses :attr:`Trials.positions`, ``design`` B's sample."""
    if target.truth is None or target.reference_score is None:
        raise EvalprismError(
            f"model '{target.model}': trials compare samples with the full-pool truth, which it has not"
        )
    chosen = choose_method(pool, target.model, method)
    resolved = resolve_design(pool, design)
    population = population_of(pool, target, items)
    samples = draw_samples(pool, target, population, items, trials, seed, progress)
    estimates = {
        entry.name: entry.estimate(
            Evidence(
                pool,
                target,
                samples[entry.draw_for(resolved)],
                population.strata,
                levels=population.levels,
                weighting=weighting,
            )
        )
        for entry in TRIAL_METHODS
        if runs_on(entry, pool)
    }
    sampling = Sampling(
        items=items,
        per_level=population.per_level,
        seed=seed,
        missing=pool.missing,
        weighting=weighting,
        method=chosen,
        method_requested=method,
        design=resolved,
        strata=len(population.alloc),
        panel_models=pool.panel_size(target.model),
        available=len(population.strata.items),
    )
    asked = LocateOptions(
        model=(target.model,), items=items, trials=trials, seed=seed, method=method, design=design, weighting=weighting
    )
    result = Trials(
        model=target.model,
        family=pool.family,
        method=chosen,
        estimates=estimates,
        truth=target.truth,
        reference_score=target.reference_score,
        member_scores=pool.members["reference_score"].to_numpy(dtype=float),
        options=asked,
        sampling=sampling,
    )
    return TrialRun(trials=result, levels=population.levels, samples=samples)
