"""Repeated localization trials of every method side by side (seed 003's Table 2 protocol, issue 17).

Methods (:data:`~evalprism.stem.located.METHODS`):

- ``paper``: the paper's rule on a balanced STS subset (:mod:`evalprism.stem.locate`);
- ``stratified`` (A): the stratified estimate of the full-benchmark score (:mod:`evalprism.stem.estimate`);
- ``irt`` (B): the IRT difference (GREG) estimator on a simple random sample, when the pool has a
  reference panel (``design="stratified"`` runs it on A's stratified draw instead);
- ``random``: plain random sampling placed by its weighted score; ``bayesian``: the interval
  posterior of Xiao et al. on the random draw (:mod:`evalprism.stem.baselines`).

Each trial ``t`` draws, with ``numpy.random.default_rng([seed, t])``, first the balanced subset,
then one uniform random subset of the same size (random sampling, Bayesian and B use it), then A's
stratified sample, all from the items sorted by (benchmark, item_id) (the row order of the input
changes nothing). A trial is correct when the placed position equals the ground truth: the number
of family members whose full-benchmark reference score is below the model's own
(:func:`evalprism.stem.locate.target_of`). ``method="auto"`` chooses ``irt`` when the pool has a
reference panel of at least :data:`MIN_PANEL` models (the located model left out), else
``stratified``; the chosen method's positions are :attr:`Trials.positions`.

Paired comparisons: every method runs on the same trials as random sampling, so its difference to
random sampling (accuracy, absolute position error) is a mean of per-trial differences, with the
normal 95% interval ``mean +- 1.96 sd / sqrt(trials)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.options import check_applies
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.progress import progress_bar
from evalprism.stats.binomial import sign_test_pvalues
from evalprism.stats.irv import boundary_counts
from evalprism.stem.baselines import bayesian_positions, interval_success, random_scores
from evalprism.stem.estimate import (
    allocate,
    build_strata,
    design_estimate,
    positions_of,
    score_confidence,
    stratified_draw,
)
from evalprism.stem.locate import (
    NO_ROW,
    Target,
    Weighting,
    draw_subset,
    interval_confidence,
    level_items,
    level_weights,
    per_level,
    positions_from_counts,
    target_of,
    usable_items,
)
from evalprism.stem.located import METHODS, SCORE_METHODS, LocationResult
from evalprism.stem.pool import Pool

Method = Literal["auto", "paper", "stratified", "irt"]
Design = Literal["random", "stratified"]
#: ``method="auto"`` uses the IRT estimator from this many reference-panel models on
MIN_PANEL = 10
Z95 = 1.959963984540054


def choose_method(pool: Pool, model: str, method: str = "auto") -> str:
    """The method ``method`` resolves to for ``model`` (``auto``: irt with a panel of at least
    :data:`MIN_PANEL` models without ``model``, else stratified)."""
    if method not in ("auto", "paper", "stratified", "irt"):
        raise EvalprismError(f"method: expected auto, paper, stratified or irt, got {method!r}")
    if method == "auto":
        return "irt" if pool.panel_size(model) >= MIN_PANEL else "stratified"
    if method == "irt" and pool.panel is None:
        raise EvalprismError("method irt needs a reference panel: build the pool with other models' results on the "
                             "same items (`evalprism stem pool ... --panel OTHER_CORRECTNESS`)")
    return method


def resolve_design(pool: Pool, design: str | None) -> Design:
    """The IRT estimator's sample design: ``design`` (default ``random``); refused when given for a
    pool without a reference panel, where no IRT estimate is made and the design would change nothing."""
    check_applies("design", design, pool.panel is not None, "it chooses the IRT estimator's sample, and this pool "
                  "has no reference panel (build it with `stem pool --panel`)")
    design = design or "random"
    if design not in ("random", "stratified"):
        raise EvalprismError(f"design: expected 'random' or 'stratified', got {design!r}", parameter="design")
    return design  # type: ignore[return-value]


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
        return {"paper": self.paper_positions, "stratified": self.stratified_positions, "irt": self.irt_positions,
                "random": self.random_positions, "bayesian": self.bayesian_positions}

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
            rows.append({
                "model": self.model, "method": method, "chosen": method == self.method, "trials": len(pos),
                "true_position": self.truth, "accuracy": float(hit.mean()),
                "accuracy_vs_random": d_acc, "accuracy_vs_random_low": lo_acc, "accuracy_vs_random_high": hi_acc,
                "mean_abs_error": float(err.mean()),
                "mae_vs_random": d_err, "mae_vs_random_low": lo_err, "mae_vs_random_high": hi_err,
                "score_rmse": self.rmse(method) if method in self.scores else np.nan,
                "coverage_95": self.coverage(method) if method in self.standard_errors else np.nan,
                "modal_position": int(counts.argmax()), "modal_share": float(counts.max() / len(pos)),
            })
        return pd.DataFrame(rows)

    def frame(self) -> pd.DataFrame:
        out = {"model": self.model, "trial": np.arange(len(self.positions)), "method": self.method,
               "position": self.positions}
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
class Run:
    """Everything one model's trials computed; ``draws`` keeps trial 0's subsets (for a localization)."""

    trials: Trials
    levels: list[np.ndarray]
    per_level: int
    first: dict[str, Any]
    strata: Any
    alloc: np.ndarray


def _trials(pool: Pool, target: Target, items: int, trials: int, seed: int, progress: bool,
            weighting: Weighting = "balanced", method: str = "auto", design: Design | None = None) -> Run:
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

    # the paper's rule
    b, c = boundary_counts(right_levels, size)
    paper = positions_from_counts(*boundary_counts(right_levels, size, level_weights(levels, size, weighting)))
    p_above, p_below = sign_test_pvalues(b, c)
    paper_conf = interval_confidence(paper, p_above, p_below)[2]

    # random sampling and the Bayesian interval posterior on the random draw
    cand_right = right[candidates]
    rand_score = 100.0 * random_scores(pool.bench_code[candidates], cand_right, draws, pool.weights)
    rand = positions_of(rand_score, member_scores)
    # the interval likelihoods only of items some trial drew (1,000 x 100 of a million-item pool)
    drawn, local = np.unique(draws, return_inverse=True)
    bayes, mass = bayesian_positions(interval_success(pool.irv[candidates[drawn]]), cand_right[drawn],
                                     local.reshape(draws.shape))

    # A: stratified estimate (columns of `strat` are grouped by stratum, alloc[h] each)
    col_stratum = np.repeat(np.arange(len(alloc)), np.minimum(alloc, strata.size))
    y_strat = right[strat].astype(float)
    est, var = design_estimate(y_strat, col_stratum, strata.bench, strata.size, w, strata.bench_size, binary=True)
    a_score, a_se = 100.0 * est, 100.0 * np.sqrt(var)
    scores = {"stratified": a_score, "random": rand_score}
    ses = {"stratified": a_se}
    confidences = {"paper": paper_conf, "stratified": score_confidence(a_score, a_se, member_scores),
                   "bayesian": mass, "random": np.full(trials, np.nan)}
    irt_pos = None
    if pool.panel is not None:
        b_score, b_se, first["theta"] = _irt_estimates(pool, target, strata, draws, candidates, usable, strat,
                                                       col_stratum, right, design)
        scores["irt"], ses["irt"] = b_score, b_se
        confidences["irt"] = score_confidence(b_score, b_se, member_scores)
        irt_pos = positions_of(b_score, member_scores)
    stratified_pos = positions_of(a_score, member_scores)
    chosen_pos = {"paper": paper, "stratified": stratified_pos, "irt": irt_pos}[chosen]
    options = {"items": items, "per_level": m, "trials": trials, "seed": seed, "missing": pool.options.get("missing", "wrong"),
               "weighting": weighting, "method": chosen, "method_requested": method, "design": design,
               "strata": int(len(alloc)), "panel_models": pool.panel_size(target.model),
               "available": len(population)}
    result = Trials(
        model=target.model, family=pool.family, method=chosen, positions=np.asarray(chosen_pos, dtype=np.int64),
        paper_positions=paper.astype(np.int64), stratified_positions=stratified_pos.astype(np.int64),
        irt_positions=None if irt_pos is None else irt_pos.astype(np.int64), random_positions=rand.astype(np.int64),
        bayesian_positions=bayes.astype(np.int64), truth=target.truth, reference_score=target.reference_score,
        member_scores=member_scores, scores=scores, standard_errors=ses, confidences=confidences, options=options)
    return Run(trials=result, levels=levels, per_level=m, first=first, strata=strata, alloc=alloc)


def _irt_estimates(pool: Pool, target: Target, strata, draws: np.ndarray, candidates: np.ndarray, usable: np.ndarray,
                   strat: np.ndarray, col_stratum: np.ndarray, right: np.ndarray,
                   design: Design) -> tuple[np.ndarray, np.ndarray, float]:
    """B: the IRT difference estimator (percent) and its standard error per trial; trial 0's theta."""
    from evalprism.stem.irt import difference_estimate

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
    total, var, theta = difference_estimate(fit, picked, right[picked].astype(float), valid, group, group_bench,
                                            sizes, np.asarray(strata.weights), strata.bench_size, by_bench)
    return 100.0 * total, 100.0 * np.sqrt(var), float(theta[0])


def run_trials(pool: Pool, new_correctness: pd.DataFrame | EncodedCorrectness, items: int = 100, trials: int = 100,
               seed: int = 0, *, model: str | None = None, weighting: Weighting = "balanced", method: Method = "auto",
               design: Design | None = None, progress: bool = False) -> Trials:
    """``trials`` localizations of one model with ``items`` items each, by every method; ``method``
    chooses which one :attr:`Trials.positions` holds (see the module docstring)."""
    from evalprism.stem.subset import answered_whole_pool

    if trials < 1:
        raise EvalprismError(f"trials: expected at least 1, got {trials}")
    target = target_of(pool, new_correctness, model)
    if not answered_whole_pool(target):
        raise EvalprismError(f"model '{target.model}' answered {int((target.outcome != NO_ROW).sum()):,} of the "
                             f"{len(pool.items):,} pool items; trials compare samples with the full-pool truth and need "
                             "answers on the whole pool (locate it from its answers with locate_model)")
    return _trials(pool, target, items, trials, seed, progress, weighting, method, design).trials


def locate_models(pool: Pool, new_correctness: pd.DataFrame | EncodedCorrectness, models: list[str] | None = None, *,
                  items: int | None = None, trials: int = 100, seed: int = 0, weighting: Weighting | None = None,
                  method: Method = "auto", design: Design | None = None, plan: Any = None,
                  progress: bool = True) -> LocationResult:
    """Locate each of ``models`` (default: every model in ``new_correctness``).

    A model with answers on every pool item gets the validation view: one sample of ``items`` items
    (:func:`~evalprism.stem.locate_model`, by ``method``) and, when ``trials`` > 0, ``trials``
    repeated trials of every method against its full-pool truth. A model with answers on part of
    the pool, or any model when a ``plan`` (:class:`~evalprism.stem.plan.Plan`) is given, is located
    from those answers alone, its full-pool score estimated by the plan's design or, without a plan,
    as a simple random sample of the pool (:mod:`evalprism.stem.subset`); trials need the whole pool.

    ``items`` (default 100), ``weighting`` (default ``balanced``) and ``design`` steer the sample
    drawn from a whole-pool model; when no model is sampled (every one is located from its answers
    alone, a plan's items or part of the pool, and no trials run) giving any of them is refused,
    since it would change nothing."""
    from evalprism.stem.locate import locate_target
    from evalprism.stem.subset import answered_whole_pool, locate_subset

    enc = new_correctness if isinstance(new_correctness, EncodedCorrectness) else encode_correctness(new_correctness)
    names = models or enc.model_names.tolist()
    targets = [target_of(pool, enc, name) for name in names]
    wholes = [answered_whole_pool(target) for target in targets]
    sampled = any(whole and (plan is None or trials > 0) for whole in wholes)
    why = ("every model is located from its own answers alone (" + ("the plan's items" if plan is not None else
           "answers on part of the pool") + ") and no trials run, so no sample is drawn")
    for name, value in (("items", items), ("weighting", weighting), ("design", design)):
        check_applies(name, value, sampled, why)
    items = 100 if items is None else items
    weighting = weighting or "balanced"
    results = []
    notes: list[str] = []
    partial: list[tuple[str, int, str]] = []  # (model, items answered, design) of models that answered part of the pool
    for name, target, whole in zip(names, targets, wholes, strict=True):
        ran = _trials(pool, target, items, trials, seed, progress, weighting, method, design).trials \
            if trials > 0 and whole else None
        if plan is not None or not whole:
            loc = locate_subset(pool, target, plan=plan, method=method, design_note=notes, progress=progress)
            if not whole:
                partial.append((name, loc.options["answered"], loc.options["design"]))
        else:
            loc = locate_target(pool, target, items, seed, weighting, method=method, design=design)
            if items > loc.options["available"]:
                notes.append(more_items_than_answered(name, items, loc.options["available"], trials))
        results.append((loc, ran))
    options = {"family": pool.family, "members": pool.members["model"].tolist(), "items": items, "trials": trials,
               "seed": seed, "missing": pool.options.get("missing", "wrong"), "weighting": weighting,
               "method": method, "design": design or "random", "models": names,
               "panel_models": pool.panel_size(), "irt": pool.options.get("irt") if pool.panel is not None else None}
    if plan is not None:
        options["plan"] = {k: plan.options.get(k) for k in ("items", "seed", "method", "design", "strata")}
    notes += partial_answers_notes(partial, len(pool.items), trials)
    if notes:
        options["notes"] = notes
    return LocationResult(pool=pool, results=results, options=options)


def partial_answers_notes(partial: list[tuple[str, int, str]], pool_items: int, trials: int) -> list[str]:
    """One note per design for the models that answered part of the pool (38 planned checkpoints make one
    line, not 38): how many answered how much, and that their full-pool scores are estimates."""
    notes = []
    for design in dict.fromkeys(d for _, _, d in partial):
        group = [(name, answered) for name, answered, d in partial if d == design]
        counts = sorted({answered for _, answered in group})
        answered = f"{counts[0]:,}" if len(counts) == 1 else f"{counts[0]:,}-{counts[-1]:,}"
        who, whose = (f"'{group[0][0]}' answered", "its full-pool score is") if len(group) == 1 else \
            (f"{len(group)} models answered", "their full-pool scores are")
        notes.append(f"{who} {answered} of the {pool_items:,} pool items: {whose} estimated under the "
                     f"design '{design}'; no truth to compare with"
                     + (" and no trials (they need answers on the whole pool)" if trials > 0 else ""))
    return notes


def more_items_than_answered(model: str, items: int, available: int, trials: int) -> str:
    """What happens when ``items`` exceeds the pool items a model can be scored on: every method
    draws all it can (a clamp, said once per model rather than refused: other models of the same
    run may have answered enough)."""
    text = (f"'{model}' can be scored on {available:,} pool items, fewer than the {items:,} asked (items): every "
            "method drew all it could, so the estimates are its full-benchmark score (standard error 0)")
    if trials > 1:
        text += " and the trials repeat one another"
    return text + f"; ask for fewer than {available:,} items to test a sample"


__all__ = ["METHODS", "SCORE_METHODS", "MIN_PANEL", "Trials", "choose_method", "locate_models", "paired_difference",
           "run_trials"]
