"""Adaptive (multi-stage) plans: place a new model from fewer items (issue 26, part 3).

Anchors: computerized adaptive testing with the 2PL (item selection by Fisher information at the
current ability), as fluid benchmarking (Hofmann et al. 2025) and metabench apply it to LLM
benchmarks; tinyBenchmarks' IRT estimate of the full-benchmark score.

Design (``stem plan --method adaptive``, then ``stem plan --stage K --plan PREV --answers FILE``):

- **Stage 1**: the stratified plan of :mod:`evalprism.stem.plan` (A's design) with ``items`` items.
- **Stage k >= 2**: the posterior of the model's ability ``theta`` under the reference panel's 2PL
  (:mod:`evalprism.stem.irt`; prior N(0, 1) as in :func:`~evalprism.stem.irt.theta_map`, on the grid
  :data:`GRID`) given every answer so far; each pool item not yet planned gets its expected Fisher
  information ``E_post[a_i^2 P_i(theta) (1 - P_i(theta))]``; the stage's ``k`` items are drawn
  uniformly from the :data:`EXPOSURE` x ``k`` most informative ones with
  ``numpy.random.default_rng([seed, stage])`` (exposure control, as CAT practice does: the plan stays
  random, and two models of similar ability do not get identical items).

Estimator (the IRT ability posterior, eq. below): the full-pool weighted score ``sum_b w_b S_b`` is

    T(theta) = sum_b w_b (1 / N_b) [ sum_{i in S, b} y_i + sum_{i in b, not in S} P_i(theta) ]

(answered items exactly, the rest by the 2PL), estimated by its posterior mean; its variance is the
posterior variance of ``T(theta)`` plus the Bernoulli variance of the unanswered items' answers
(the full-pool score is the realized answers, :func:`score_posterior`). Why not a design-based estimator (A, B): items chosen by information have no known
inclusion probabilities; and where they do (a stage-2 stratified draw with Neyman allocation on
the 2PL's predicted residual spread), B's standard error on ZeroEval fell only from 4.71 to 4.37
points at 50 items (prototype, 8 models x 10 seeds), not enough to reach random sampling of 100
items. The posterior places better (0.83-0.92 of placements right at 50 adaptive items against
0.75-0.92 for random sampling of 100, three ZeroEval families and MMLU-Pro), but its variance alone
is overconfident: it assumes the 2PL holds exactly, and the 95% interval covered the full-pool score
in only 38-78% of runs.

**Calibration** (:func:`calibrate`): every reference-panel model with answers on every pool item is
run through the same plan by leave-one-out (the 2PL refitted without it, the plan's stage-1 items,
its own adaptive stages of the same sizes, :data:`CALIBRATION_RUNS` runs each). Three rules, in order
(:class:`Calibration`):

- **Correction**: the posterior mean is shrunk toward the middle of the panel (the N(0, 1) prior
  and the few items pull every ability toward it: on GSM8K, +4.2 points for checkpoints below 80%,
  -3.0 above 95%), so a located model's error is predictable from its estimate. The panel's runs give
  the least-squares line ``error = a + b estimate``; the located model's estimate is its posterior
  mean less ``a + b mean`` (clipped to 0-100%). On the planted ceiling world of
  tests/test_stem_confidence.py this raised placement at 25 + 25 items from 0.72 to 0.86 and brought
  the 0.5-0.8 confidence bin from 0.64 stated / 0.52 right to 0.66 / 0.72 (issue 42).
- **Extra variance**: the residuals' mean square beyond the mean posterior variance,
  ``extra = max(0, mean(resid^2) - mean(var))``, is added to the posterior variance.
- **Conformal factor**: the standard error is multiplied by ``max(1, q / 1.96)``, ``q`` the
  split-conformal 95% quantile (:func:`conformal_quantile`) of the panel's ``|resid| / sqrt(var +
  extra)``: the residuals are heavy-tailed (a few models the 2PL fits worse), and an added variance
  alone covered 0.92-0.93 once the correction removed the bias that had widened it.

Coverage then holds for models exchangeable with the panel's (measured: docs/stem_adaptive_study.md);
a model the 2PL fits worse than the panel models (contaminated, another kind of model) can still fall
outside. The stage-1 items, a probability
sample, give a design-based estimate (B) with no model assumption; it is reported beside the
adaptive one, with a note when the two disagree by more than 1.96 of its standard errors.

**Reuse** (issue 42, item 3): nearly all of a calibration's time is the panel models' leave-one-out
2PL fits (8.3 of 9.1 s CPU on a 44-model, 1,000-item panel; the plan runs on them take the rest),
and those depend on the pool and its panel alone, not on the plan. A later stage's plan therefore
stores them (:class:`PanelFits`, ``calibration.npz`` beside ``plan.csv``) with a fingerprint of
what they were fitted on (:func:`panel_fingerprint`: the reference panel's answers and names, what a
-1 counts as, the item-response model and evalprism's version); ``stem locate --plan`` and the next
stage read them (:func:`use_stored_fits`) and compute only the plan runs, giving the same numbers to
the last digit. Fits stored for another pool or panel are not used: they are computed again, and
the output says so.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from evalprism import __version__
from evalprism.errors import EvalprismError
from evalprism.progress import progress_bar
from evalprism.stats.pairwise import Z95
from evalprism.stem.estimate import pool_strata
from evalprism.stem.irt import PRIOR_THETA_VAR, IRTFit

if TYPE_CHECKING:
    from evalprism.stem.plan import Plan
    from evalprism.stem.pool import Pool
    from evalprism.stem.target import Target

#: the coverage the adaptive calibration's conformal factor targets
CALIBRATION_LEVEL = 0.95
#: the ability grid of the posterior (the panel's abilities lie within +-4 under the N(0, 1) prior)
GRID = np.linspace(-8.0, 8.0, 321)
#: a stage of k items draws them from the EXPOSURE x k most informative items
EXPOSURE = 3
#: runs of the plan per panel model in the calibration
CALIBRATION_RUNS = 2
#: fewest panel models with answers on every pool item the calibration needs
MIN_CALIBRATION_MODELS = 10


def ability_posterior(fit: IRTFit, idx: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Posterior weights of ``theta`` over :data:`GRID` given answers ``y`` (1/0) on pool items ``idx``."""
    p = fit.probability(GRID, idx)  # grid x items
    with np.errstate(divide="ignore"):
        log_lik = np.where(y[None, :] > 0, np.log(p), np.log1p(-p)).sum(axis=1)
    log_post = log_lik - GRID**2 / (2 * PRIOR_THETA_VAR)
    w = np.exp(log_post - log_post.max())
    return w / w.sum()


def expected_information(fit: IRTFit, posterior: np.ndarray) -> np.ndarray:
    """``E_post[a_i^2 P_i (1 - P_i)]`` per pool item: the 2PL's Fisher information about theta,
    averaged over the current posterior (a point estimate would pick items for one theta only)."""
    keep = posterior > 1e-12 * posterior.max()  # grid points with any mass: the rest add nothing
    p = fit.probability(GRID[keep])
    return fit.a**2 * (posterior[keep] @ (p * (1.0 - p)))


def pick_informative(
    fit: IRTFit, posterior: np.ndarray, planned: np.ndarray, k: int, rng: np.random.Generator
) -> np.ndarray:
    """``k`` pool items not in ``planned``, drawn uniformly from the ``EXPOSURE * k`` most informative."""
    info = expected_information(fit, posterior)
    info[planned] = -np.inf
    free = int(np.isfinite(info).sum())
    k = min(k, free)
    top = np.argsort(-info, kind="stable")[: min(int(np.ceil(EXPOSURE * k)), free)]
    return np.sort(rng.choice(top, k, replace=False))


@dataclass(frozen=True)
class ScoreWeights:
    """Per pool item, its weight in the full-pool score ``w_b / N_b`` (sums to 1 over the pool)."""

    per_item: np.ndarray

    @classmethod
    def of(cls, pool: Pool) -> ScoreWeights:
        strata = pool_strata(pool)
        per_bench = np.asarray(strata.weights) / np.maximum(strata.bench_size, 1.0)
        return cls(per_item=per_bench[pool.bench_code])


def score_posterior(
    fit: IRTFit, weights: ScoreWeights, idx: np.ndarray, y: np.ndarray, posterior: np.ndarray
) -> tuple[float, float]:
    """Posterior predictive mean and variance of the full-pool score (fractions; module docstring):
    answered items count their answers, every other item its 2PL probability. The variance is that of
    ``T(theta)`` over the posterior plus the Bernoulli variance of the unanswered items' own answers,
    ``E_post[sum_i w_i^2 P_i (1 - P_i)]``: the full-pool score is the realized answers, not their
    expectation (on a pool of 1,000 items that term alone is about 1.4 points)."""
    keep = posterior > 1e-12 * posterior.max()
    w = weights.per_item.copy()
    known = float(w[idx] @ y)
    w[idx] = 0.0
    p = fit.probability(GRID[keep])
    curve = known + p @ w
    post = posterior[keep]
    mean = float(post @ curve)
    bernoulli = float(post @ ((p * (1.0 - p)) @ (w * w)))
    return mean, float(post @ (curve - mean) ** 2) + bernoulli


def run_plan(fit: IRTFit, y_pool: np.ndarray, stage1: np.ndarray, sizes: list[int], seed: int) -> np.ndarray:
    """The items an adaptive plan picks for a model whose answers on every pool item are ``y_pool``:
    ``stage1``, then each later stage of ``sizes`` picked from its answers so far (what the
    ``stem plan --stage`` loop does, in one call; used by the calibration and by studies)."""
    planned = np.asarray(stage1, dtype=np.int64)
    for stage, k in enumerate(sizes, 2):
        post = ability_posterior(fit, planned, y_pool[planned])
        new = pick_informative(fit, post, planned, k, np.random.default_rng([seed, stage]))
        planned = np.concatenate([planned, new])
    return planned


@dataclass(frozen=True)
class PanelRuns:
    """The plan run on reference-panel models by leave-one-out: per model (``names``) and run, the
    adaptive estimate's error against the model's full-pool score and its posterior variance, and
    each model's full-pool score (``truths``; all fractions)."""

    names: list[str]
    errors: np.ndarray  # models x runs (fractions)
    variances: np.ndarray
    truths: np.ndarray  # models (fractions)

    def calibration(self, keep: np.ndarray | list[int] | None = None) -> Calibration:
        """:class:`Calibration` from the runs of the models ``keep`` (default every model)."""
        rows = np.arange(len(self.names)) if keep is None else np.asarray(keep)
        estimates = self.truths[rows, None] + self.errors[rows]
        return Calibration.of(self.errors[rows], self.variances[rows], estimates)


def conformal_quantile(scores: np.ndarray, level: float) -> float:
    """The split-conformal ``level`` quantile of ``scores``: the ``ceil(level (k + 1))``-th smallest of
    the ``k`` (a new exchangeable score is at most it with probability >= ``level``); the largest when
    ``k`` is too small for that."""
    ranked = np.sort(np.asarray(scores, dtype=float))
    rank = int(np.ceil(level * (len(ranked) + 1)))
    return float(ranked[min(rank, len(ranked)) - 1])


@dataclass(frozen=True)
class Calibration:
    """The leave-one-out calibration of the adaptive estimate on the reference panel (module
    docstring): the panel's linear regression of error on estimate (``intercept``, ``slope``), the
    variance its residuals have beyond the posterior's (``extra_variance``) and the split-conformal
    factor that makes the 95% interval cover the residuals (``factor`` >= 1); the panel's ``rmse``,
    ``bias`` and mean posterior sd of the uncorrected estimate (all fractions)."""

    extra_variance: float
    models: int
    rmse: float
    mean_posterior_sd: float
    bias: float
    intercept: float
    slope: float
    factor: float

    @classmethod
    def of(cls, errors: np.ndarray, variances: np.ndarray, estimates: np.ndarray) -> Calibration:
        """From every run of every model given: ``error = intercept + slope estimate`` by least squares
        (no correction when the estimates do not vary), ``extra = max(0, mean(resid^2) - mean(var))``,
        ``factor = max(1, q / 1.96)`` with ``q`` the conformal 95% quantile of ``|resid| / sqrt(var + extra)``."""
        err, var = np.ravel(errors).astype(float), np.ravel(variances).astype(float)
        est = np.ravel(estimates).astype(float)
        slope, intercept = np.polyfit(est, err, 1) if np.ptp(est) > 0 else (0.0, float(err.mean()))
        resid = err - (intercept + slope * est)
        extra = max(0.0, float(np.mean(resid**2) - np.mean(var)))
        z = np.abs(resid) / np.sqrt(var + extra)
        return cls(
            extra_variance=extra,
            models=len(err),
            rmse=float(np.sqrt(np.mean(err**2))),
            mean_posterior_sd=float(np.sqrt(np.mean(var))),
            bias=float(err.mean()),
            intercept=float(intercept),
            slope=float(slope),
            factor=max(1.0, conformal_quantile(z, CALIBRATION_LEVEL) / Z95),
        )

    def corrected(self, mean: float) -> float:
        """The posterior mean less the error the panel's regression predicts for it (fractions, kept
        within 0-1)."""
        return float(np.clip(mean - (self.intercept + self.slope * mean), 0.0, 1.0))

    def standard_error(self, variance: float) -> float:
        """The calibrated standard error of a corrected estimate whose posterior variance is ``variance``."""
        return float(self.factor * np.sqrt(variance + self.extra_variance))

    def summary(self) -> CalibrationSummary:
        """The calibration as the output reports it (points, rounded)."""
        return CalibrationSummary(
            models=self.models,
            runs_per_model=CALIBRATION_RUNS,
            panel_rmse=round(100 * self.rmse, 4),
            panel_bias=round(100 * self.bias, 4),
            mean_posterior_se=round(100 * self.mean_posterior_sd, 4),
            extra_se=round(100 * float(np.sqrt(self.extra_variance)), 4),
            slope=round(self.slope, 4),
            factor=round(self.factor, 4),
        )


@dataclass(frozen=True)
class CalibrationSummary:
    """The calibration as reported: panel models run through the plan, runs each, their RMSE and bias
    (points), the mean posterior standard error, the standard error added in quadrature, the slope of
    the panel's error on its estimate (the correction) and the conformal factor."""

    models: int
    runs_per_model: int
    panel_rmse: float
    panel_bias: float
    mean_posterior_se: float
    extra_se: float
    slope: float
    factor: float


@dataclass(frozen=True)
class Stage1Check:
    """The design-based estimate (B) from an adaptive plan's stage-1 items alone: their number, the
    estimate and its standard error (points, rounded)."""

    items: int
    estimate: float
    standard_error: float


#: which estimate an adaptive plan's localization leads with (:attr:`AdaptiveReading.lead`)
LEAD_ADAPTIVE = "adaptive"
LEAD_STAGE1 = "stage-1 design-based"
#: the rule that chooses it, as the outputs state it (issue 42, item 4)
LEAD_RULE = (
    "the localization leads with the calibrated adaptive estimate (in the studies it placed models of other "
    "lineages best from 50 items: 0.844 against 0.823 for B on a 50-item plan); when the design-based estimate "
    "of the stage-1 items differs from it by more than 1.96 standard errors of their difference "
    "(sqrt(se_adaptive^2 + se_stage1^2)), the panel's 2PL does not fit the model as it fits the panel's (the "
    "studies saw this for family members left out of their own pool: the adaptive estimate 4.8-5.0 points high, "
    "covering 0.70-0.83, while B, which assumes no model, covered 0.93-1.00), and it leads with the design-based one"
)


def leads_with(adaptive: float, adaptive_se: float, check: Stage1Check) -> str:
    """Which estimate an adaptive plan's localization leads with (:data:`LEAD_RULE`)."""
    apart = abs(adaptive - check.estimate) > Z95 * float(np.hypot(adaptive_se, check.standard_error))
    return LEAD_STAGE1 if apart else LEAD_ADAPTIVE


#: where an adaptive estimate's calibration fits came from (:attr:`AdaptiveReading.fits`)
FITS_STORED = "stored with the plan"
FITS_COMPUTED = "computed"
FITS_STALE = "computed again: the plan's stored fits were made on another pool or panel"


@dataclass(frozen=True)
class PanelFits:
    """The reference panel's leave-one-out 2PL fits a calibration runs on (module docstring): for each
    model of ``models`` (the panel models with answers on every pool item), the fit without it, item
    parameters ``a`` and ``c`` (models x pool items) and the other models' abilities ``theta``
    (models x panel size - 1, in the reference panel's order without it); ``fingerprint``: what they
    were fitted on (:func:`panel_fingerprint`)."""

    fingerprint: str
    models: tuple[str, ...]
    a: np.ndarray
    c: np.ndarray
    theta: np.ndarray

    @classmethod
    def of(cls, pool: Pool) -> PanelFits | None:
        """The leave-one-out fits ``pool`` holds for its complete panel models (None unless all are there)."""
        names, resp = pool.reference_panel()
        complete = [names[j] for j in range(len(names)) if (resp[j] >= 0).all()]
        fits = [pool.fitted(name) for name in complete]
        if not complete or any(fit is None for fit in fits):
            return None
        return cls(
            fingerprint=panel_fingerprint(pool),
            models=tuple(complete),
            a=np.stack([fit.a for fit in fits]),
            c=np.stack([fit.c for fit in fits]),
            theta=np.stack([fit.theta for fit in fits]),
        )


def panel_fingerprint(pool: Pool) -> str:
    """A digest of what the panel's fits depend on: the reference panel's names and answers (after
    what a -1 counts as), the item-response model and evalprism's version (a later fit may differ)."""
    names, resp = pool.reference_panel()
    digest = hashlib.sha256()
    for part in (__version__, str(pool.irt_kind), pool.missing, "\x1f".join(names), str(resp.shape)):
        digest.update(part.encode("utf-8") + b"\x1e")
    digest.update(np.ascontiguousarray(resp).tobytes())
    return digest.hexdigest()


def use_stored_fits(pool: Pool, fits: PanelFits | None) -> str:
    """Give ``pool`` the stored leave-one-out ``fits`` when they were fitted on its panel; where the
    calibration's fits come from (:data:`FITS_STORED`, :data:`FITS_COMPUTED`, :data:`FITS_STALE`)."""
    if fits is None:
        return FITS_COMPUTED
    if fits.fingerprint != panel_fingerprint(pool):
        return FITS_STALE
    names, _ = pool.reference_panel()
    for row, model in enumerate(fits.models):
        pool.give_fit(
            model,
            IRTFit(
                a=fits.a[row],
                c=fits.c[row],
                theta=fits.theta[row],
                models=[m for m in names if m != model],
                kind=pool.irt_kind or "2pl",
                info={"stored": True},
            ),
        )
    return FITS_STORED


@dataclass(frozen=True)
class AdaptiveReading:
    """What an adaptive estimate rests on: the posterior mean ability and the posterior's standard
    error (points), the calibration on the panel, the plan's stage sizes and, once read beside it,
    the stage-1 design-based check (:class:`Stage1Check`), where the calibration's leave-one-out
    fits came from (``fits``: :data:`FITS_STORED`, :data:`FITS_COMPUTED` or :data:`FITS_STALE`), which
    estimate the localization leads with (``lead``: :data:`LEAD_ADAPTIVE` or :data:`LEAD_STAGE1`,
    :func:`leads_with`) and the calibrated adaptive estimate itself (points; the cross-check when the
    stage-1 estimate leads)."""

    posterior_theta: float
    posterior_se: float
    calibration: CalibrationSummary
    stages: tuple[int, ...]
    stage1_check: Stage1Check | None = None
    fits: str = FITS_COMPUTED
    lead: str = LEAD_ADAPTIVE
    estimate: float | None = None
    standard_error: float | None = None


def panel_runs(
    pool: Pool, stage1: np.ndarray, sizes: list[int], seed: int, exclude: str | None = None, progress: bool = False
) -> PanelRuns:
    """Run the plan (stage-1 items ``stage1``, later stages of ``sizes``) :data:`CALIBRATION_RUNS`
    times on every panel model with answers on every pool item, each with the 2PL refitted without
    it (module docstring); ``exclude`` (the model being located, when it is in the panel) is left out."""
    names, resp = pool.reference_panel(exclude)
    complete = [j for j in range(len(names)) if (resp[j] >= 0).all()]
    if len(complete) < MIN_CALIBRATION_MODELS:
        raise EvalprismError(
            f"the adaptive estimate is calibrated on reference-panel models with answers on every "
            f"pool item: this pool has {len(complete)}, fewer than {MIN_CALIBRATION_MODELS}; build "
            "the pool with a larger panel (`stem pool --panel`) or use a stratified plan"
        )
    weights = ScoreWeights.of(pool)
    errors = np.empty((len(complete), CALIBRATION_RUNS))
    variances = np.empty_like(errors)
    with progress_bar("calibrating on the panel", len(complete), progress) as bar:
        for row, j in enumerate(complete):
            fit = pool.irt_fit(exclude=names[j])
            y = (resp[j] == 1).astype(float)
            truth = float(weights.per_item @ y)
            for run in range(CALIBRATION_RUNS):
                planned = run_plan(fit, y, stage1, sizes, seed + 7919 * (run + 1))
                mean, var = score_posterior(
                    fit, weights, planned, y[planned], ability_posterior(fit, planned, y[planned])
                )
                errors[row, run], variances[row, run] = mean - truth, var
            bar.update(1)
    truths = np.array([float(weights.per_item @ (resp[j] == 1)) for j in complete])
    return PanelRuns(names=[names[j] for j in complete], errors=errors, variances=variances, truths=truths)


def calibrate(
    pool: Pool, stage1: np.ndarray, sizes: list[int], seed: int, exclude: str | None = None, progress: bool = False
) -> Calibration:
    """:class:`Calibration` from :func:`panel_runs` (module docstring)."""
    runs = panel_runs(pool, stage1, sizes, seed, exclude, progress)
    return runs.calibration()


def adaptive_estimate(
    pool: Pool, target: Target, plan: Plan, idx: np.ndarray, progress: bool = False
) -> tuple[float, float, AdaptiveReading]:
    """The calibrated adaptive estimate of the full-pool score (percent), its standard error and
    what the output says about it (posterior, calibration; the stage-1 check is added by the reader)."""
    fit = pool.irt_fit(exclude=target.model)
    y = (target.outcome[idx] == 1).astype(float)
    weights = ScoreWeights.of(pool)
    post = ability_posterior(fit, idx, y)
    mean, var = score_posterior(fit, weights, idx, y, post)
    sizes = plan.stage_sizes()
    in_panel = pool.panel_size(target.model) < pool.panel_size()
    cal = calibrate(
        pool,
        idx[plan.items["stage"].to_numpy() == 1],
        sizes[1:],
        plan.seed,
        exclude=target.model if in_panel else None,
        progress=progress,
    )
    mean, se = cal.corrected(mean), cal.standard_error(var)
    info = AdaptiveReading(
        posterior_theta=round(float(post @ GRID), 4),
        posterior_se=round(100 * float(np.sqrt(var)), 4),
        calibration=cal.summary(),
        stages=tuple(sizes),
        estimate=round(100 * mean, 4),
        standard_error=round(100 * se, 4),
    )
    return 100 * mean, 100 * se, info
