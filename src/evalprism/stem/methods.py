"""The localization methods, each defined once: ``paper``, ``stratified``, ``irt``, ``random``,
``bayesian`` and ``adaptive`` (:data:`METHODS`).

Everything evalprism reads about a method is one :class:`Method` entry: its name and the words a
report uses for it, what it draws from a model that answered the whole pool (:data:`DrawKind`),
whether it estimates the reference score (and with a standard error), what its confidence is
called, whether it needs a reference panel and which options steer it, and its estimator: from
what it drew (:class:`Evidence`) to ONE typed :class:`Estimate` (position, score and standard error
where it has them, confidence; one row per trial). The trial engine
(:mod:`~evalprism.stem.trials`) runs every entry compared in trials on the same trials; a model
located from its own answers on part of the pool (:mod:`~evalprism.stem.subset`) is estimated by
the entry :func:`choose_method` picks, or ``adaptive`` for an adaptive plan.

- ``paper``: the paper's rule (:mod:`~evalprism.stem.rule`) on a balanced STS subset
  (:mod:`~evalprism.stem.balanced`); its confidence is a rule strength, not a probability;
- ``stratified`` (A): the stratified design estimate of the full-benchmark score
  (:mod:`~evalprism.stem.estimate`);
- ``irt`` (B): the IRT difference (GREG) estimator (:mod:`~evalprism.stem.irt`) with a reference
  panel, on the random sample (``design="random"``) or on A's stratified sample (``"stratified"``);
- ``random``: plain random sampling placed by its weighted score; ``bayesian``: the interval
  posterior of Xiao et al. on the random draw (:mod:`~evalprism.stem.baselines`);
- ``adaptive``: an adaptive plan's items, read by the calibrated IRT ability posterior
  (:mod:`~evalprism.stem.adaptive`); not compared in trials (its items depend on the answers).

One of ``paper``, ``stratified`` and ``irt`` places a model (the user-facing names,
:data:`~evalprism.vocabularies.LocateMethod`): ``auto`` chooses ``irt`` when the pool has a
reference panel of at least :data:`MIN_PANEL` models (the located model left out), else
``stratified`` (:func:`choose_method`).

Adding a method is one more entry here (and, if users may choose it, its name in
:data:`~evalprism.vocabularies.LocateMethod` or :data:`~evalprism.vocabularies.PlanMethod`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from evalprism.errors import EvalprismError
from evalprism.io.options import check_applies, check_choice
from evalprism.vocabularies import Design, LocateMethod, Weighting

if TYPE_CHECKING:
    from evalprism.stem.adaptive import AdaptiveReading
    from evalprism.stem.estimate import Sample, Strata
    from evalprism.stem.plan import Plan
    from evalprism.stem.pool import Pool
    from evalprism.stem.target import Target

# The estimators import what they compute with when they first run (the modules below this one):
# the pool's report reads this registry's labels, and building a pool needs none of scipy's
# statistics that the estimators use.

#: what a method draws from a model that answered the whole pool: the paper's balanced subset (the
#: same number of items from every TI level), a uniform random sample, A's stratified sample, or an
#: adaptive plan's items (picked from the model's answers stage by stage)
DrawKind = Literal["balanced", "random", "stratified", "adaptive plan"]
#: what a method's confidence is called wherever it is shown: the paper's number is a test
#: statistic (:data:`RULE_STRENGTH_NOTE`), the others a probability
ConfidenceName = Literal["confidence", "rule_strength"]
#: ``method="auto"`` uses the IRT estimator from this many reference-panel models on
MIN_PANEL = 10
#: what the paper's rule's number is, wherever it is shown: not a probability of being right
RULE_STRENGTH_NOTE = (
    "rule strength = 1 - the two one-sided exact McNemar p-values of the bounding members; a "
    "test statistic, not a probability of being right: measured out of sample, placements with "
    "a rule strength near 0.97 were right 39% of the time"
)


@dataclass(frozen=True)
class Evidence:
    """What a method estimates from: the model (``target``) aligned to the ``pool``, the ``sample``
    of the kind it draws (one row per trial), the population's ``strata`` (A's strata, the
    benchmarks' weights and sizes), and what steers an estimator: the TI ``levels`` the balanced
    subset was drawn from and the paper rule's ``weighting``; an adaptive ``plan`` (``progress``: a
    bar for its calibration)."""

    pool: Pool
    target: Target
    sample: Sample
    strata: Strata
    levels: list[np.ndarray] = field(default_factory=list)
    weighting: Weighting = "balanced"
    plan: Plan | None = None
    progress: bool = False

    @property
    def member_scores(self) -> np.ndarray:
        return self.pool.members["reference_score"].to_numpy(dtype=float)

    def answers(self) -> np.ndarray:
        """The model's answers on the sample, trials x items (1.0 right)."""
        return self.sample.answers(self.target.outcome)


@dataclass(frozen=True)
class Estimate:
    """One method's answer on each of its samples (one per trial; a model located from its own
    answers: one): ``position`` (members it is placed above, int64) and the ``confidence`` of that
    interval (the paper's rule: its rule strength; random sampling: NaN, it gives none); a method
    that estimates the reference score has its ``score`` (percent) and, where it has one, its
    ``standard_error``; ``adaptive``: what the adaptive estimate rests on besides (its posterior and
    calibration; None for every other method)."""

    position: np.ndarray
    confidence: np.ndarray
    score: np.ndarray | None = None
    standard_error: np.ndarray | None = None
    adaptive: AdaptiveReading | None = None


@dataclass(frozen=True)
class Method:
    """One localization method (module docstring).

    - ``label``: what it is, in a report's words; ``short``: its name on an index page; ``colour``:
      its colour in the trial figures (methods compared in trials).
    - ``draws``: what it draws (:data:`DrawKind`); with ``follows_design`` the IRT estimator's
      sample design (``design``) chooses instead (:meth:`draw_for`).
    - ``estimates_score``: it estimates the reference score (and so has an RMSE);
      ``has_standard_error``: and its standard error (a 95% coverage).
    - ``confidence_name`` (:data:`ConfidenceName`) and ``confidence_note``: what its confidence is
      called and, for a number that is not a probability, what it is.
    - ``compared_in_trials``: run on every trial of :mod:`~evalprism.stem.trials`.
    - ``needs_panel``: what it needs a reference panel for (None: it needs none).
    - ``steered_by``: the options that change its sample or estimate (``weighting``, ``design``).
    - ``estimate``: from :class:`Evidence` to its :class:`Estimate`.
    """

    name: str
    label: str
    short: str
    draws: DrawKind
    estimates_score: bool
    has_standard_error: bool
    estimate: Callable[[Evidence], Estimate]
    confidence_name: ConfidenceName = "confidence"
    confidence_note: str | None = None
    compared_in_trials: bool = True
    needs_panel: str | None = None
    steered_by: tuple[str, ...] = ()
    follows_design: bool = False
    colour: str | None = None

    def draw_for(self, design: Design) -> DrawKind:
        """The sample it reads under the IRT estimator's ``design`` (its own, unless it follows the design)."""
        return design if self.follows_design else self.draws


def _placed(score: np.ndarray, se: np.ndarray | None, member_scores: np.ndarray) -> Estimate:
    """A score estimate (percent) placed above every member with a lower reference score; its
    confidence is the probability of that interval under N(score, se²) (NaN without a standard error)."""
    from evalprism.stem.estimate import positions_of, score_confidence

    confidence = np.full(len(score), np.nan) if se is None else score_confidence(score, se, member_scores)
    return Estimate(
        position=positions_of(score, member_scores).astype(np.int64),
        confidence=confidence,
        score=score,
        standard_error=se,
    )


def _from_fractions(estimate: np.ndarray, variance: np.ndarray, evidence: Evidence) -> Estimate:
    """A design estimator's answer (fractions and their variance) in percent, placed."""
    return _placed(100.0 * estimate, 100.0 * np.sqrt(variance), evidence.member_scores)


def _paper_rule(evidence: Evidence) -> Estimate:
    """The paper's rule on each trial's balanced subset (items right per TI level)."""
    from evalprism.stem.rule import apply_rule

    n = evidence.pool.n
    labels = np.asarray(evidence.sample.group)
    trials = evidence.sample.picked.shape[0]
    flat = (labels[None, :] + (n + 2) * np.arange(trials)[:, None]).ravel()
    right = np.bincount(flat, weights=evidence.answers().ravel(), minlength=trials * (n + 2))
    right_levels = right.reshape(trials, n + 2)[:, 1:].astype(np.int64)
    size = np.bincount(labels, minlength=n + 2)[1:]
    rule = apply_rule(right_levels, size, evidence.levels, evidence.weighting)
    return Estimate(position=np.asarray(rule.position).astype(np.int64), confidence=rule.strength)


def _stratified(evidence: Evidence) -> Estimate:
    """A: the design estimate of the full-pool weighted score from the sample's groups."""
    from evalprism.stem.estimate import design_estimate

    s, strata = evidence.sample, evidence.strata
    est, var = design_estimate(
        evidence.answers(),
        s.group,
        np.asarray(s.group_bench),
        s.group_size,
        strata.weights,
        strata.bench_size,
        valid=s.valid,
        binary=True,
    )
    return _from_fractions(est, var, evidence)


def _irt(evidence: Evidence) -> Estimate:
    """B: the IRT difference (GREG) estimate, the 2PL fitted on the reference panel without the model."""
    from evalprism.stem.irt import difference_estimate

    pool, s, strata = evidence.pool, evidence.sample, evidence.strata
    by_bench = [strata.items[pool.bench_code[strata.items] == b] for b in range(len(strata.weights))]
    total, var, _theta = difference_estimate(
        pool.irt_fit(exclude=evidence.target.model),
        s.picked,
        evidence.answers(),
        np.ones(s.picked.shape, dtype=bool) if s.valid is None else s.valid,
        s.group,
        np.asarray(s.group_bench),
        s.group_size,
        np.asarray(strata.weights),
        strata.bench_size,
        by_bench,
    )
    return _from_fractions(total, var, evidence)


def _random(evidence: Evidence) -> Estimate:
    """Random sampling: the weighted score of the draw (no standard error, no confidence)."""
    from evalprism.stem.baselines import random_scores

    right = evidence.target.outcome == 1
    score = 100.0 * random_scores(evidence.pool.bench_code, right, evidence.sample.picked, evidence.pool.weights)
    return _placed(score, None, evidence.member_scores)


def _bayesian(evidence: Evidence) -> Estimate:
    """The interval posterior's MAP interval and its mass (the likelihoods only of items some trial drew)."""
    from evalprism.stem.baselines import bayesian_positions, interval_success

    picked = evidence.sample.picked
    drawn, local = np.unique(picked, return_inverse=True)
    right = evidence.target.outcome == 1
    position, mass = bayesian_positions(
        interval_success(evidence.pool.irv[drawn]), right[drawn], local.reshape(picked.shape)
    )
    return Estimate(position=position.astype(np.int64), confidence=mass)


def _adaptive(evidence: Evidence) -> Estimate:
    """The calibrated IRT ability posterior's estimate of the full-pool score from the plan's items."""
    from evalprism.stem.adaptive import adaptive_estimate

    if evidence.plan is None:
        raise EvalprismError("method adaptive reads an adaptive plan's items: give the plan")
    score, se, info = adaptive_estimate(
        evidence.pool, evidence.target, evidence.plan, evidence.sample.picked[0], progress=evidence.progress
    )
    # in the design estimators' units (fractions and a variance), converted to percent as theirs are
    placed = _from_fractions(np.array([score / 100]), np.array([(se / 100) ** 2]), evidence)
    return Estimate(
        position=placed.position,
        confidence=placed.confidence,
        score=placed.score,
        standard_error=placed.standard_error,
        adaptive=info,
    )


#: every method, in the order the outputs list them (trials.csv's columns, the reports' legends)
METHODS: dict[str, Method] = {
    entry.name: entry
    for entry in (
        Method(
            "paper",
            label="STEM paper rule",
            short="paper rule",
            draws="balanced",
            estimates_score=False,
            has_standard_error=False,
            estimate=_paper_rule,
            confidence_name="rule_strength",
            confidence_note=RULE_STRENGTH_NOTE,
            steered_by=("weighting",),
            colour="#2ca02c",
        ),
        Method(
            "stratified",
            label="A: stratified (benchmark x members right)",
            short="A (stratified)",
            draws="stratified",
            estimates_score=True,
            has_standard_error=True,
            estimate=_stratified,
            colour="#9467bd",
        ),
        Method(
            "irt",
            label="B: random sample + IRT difference",
            short="B (IRT)",
            draws="random",
            estimates_score=True,
            has_standard_error=True,
            estimate=_irt,
            needs_panel="the IRT estimator",
            steered_by=("design",),
            follows_design=True,
            colour="#d62728",
        ),
        Method(
            "random",
            label="random sampling",
            short="random sampling",
            draws="random",
            estimates_score=True,
            has_standard_error=False,
            estimate=_random,
            colour="#1f77b4",
        ),
        Method(
            "bayesian",
            label="Bayesian interval posterior",
            short="Bayesian",
            draws="random",
            estimates_score=False,
            has_standard_error=False,
            estimate=_bayesian,
            colour="#ff7f0e",
        ),
        Method(
            "adaptive",
            label="adaptive plan: IRT ability posterior, calibrated on the panel",
            short="adaptive",
            draws="adaptive plan",
            estimates_score=True,
            has_standard_error=True,
            estimate=_adaptive,
            compared_in_trials=False,
            needs_panel="later stages are picked with its 2PL",
        ),
    )
}
#: the methods every trial runs (irt only with a reference panel), in :data:`METHODS`' order
TRIAL_METHODS: tuple[Method, ...] = tuple(m for m in METHODS.values() if m.compared_in_trials)
#: the method every other one is compared with on the same trials (the paired differences)
BASELINE = METHODS["random"]


def get_method(name: str) -> Method:
    """The registry entry of ``name``; an unknown name is refused with the known ones."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise EvalprismError(f"unknown method '{name}': expected one of {', '.join(METHODS)}") from None


def runs_on(method: Method, pool: Pool) -> bool:
    """Whether ``method`` can run on ``pool`` (one that needs a reference panel only where it has one)."""
    return method.needs_panel is None or pool.panel is not None


def choose_method(pool: Pool, model: str | None, method: str = "auto") -> str:
    """The method ``method`` resolves to for ``model`` (``auto``: irt with a panel of at least
    :data:`MIN_PANEL` models without ``model``, else stratified; ``model`` None: a model outside
    the panel)."""
    check_choice("method", method, LocateMethod)
    if method == "auto":
        return "irt" if pool.panel_size(model) >= MIN_PANEL else "stratified"
    if not runs_on(METHODS[method], pool):
        raise EvalprismError(
            f"method {method} needs a reference panel: build the pool with other models' results on the "
            "same items (`evalprism stem pool ... --panel OTHER_CORRECTNESS`)"
        )
    return method


def resolve_design(pool: Pool, design: str | None) -> Design:
    """The IRT estimator's sample design: ``design`` (default ``random``); refused when given for a
    pool without a reference panel, where no IRT estimate is made and the design would change nothing."""
    check_applies(
        "design",
        design,
        pool.panel is not None,
        "it chooses the IRT estimator's sample, and this pool "
        "has no reference panel (build it with `stem pool --panel`)",
    )
    chosen: Design = check_choice("design", design or "random", Design)
    return chosen
