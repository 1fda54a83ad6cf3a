"""Calibrated confidence for A and B on a plan's items, and the 2PL's ceiling (issue 42, item 1).

A (stratified) and B (IRT difference) state a standard error from the design alone. Measured on real
families it is too small where the model is near the top (a checkpoint right on almost every planned
item: B's residuals are then all near 0 and its interval shrinks to about 1 point, while the truth
lies 3-4 points below) and at small plans. The adaptive estimate already fixes this by running the
panel's own models through the same plan (:func:`evalprism.stem.adaptive.calibrate`); this module does
the same for A and B, and states what the interval is at the ceiling.

**Calibration** (:func:`calibrate_plan`): every reference-panel model with answers on every pool item
(the located model left out) is read through the plan's own items and through :data:`REDRAWS` more
draws of the same stratified design (the plan's per-stratum counts, seeds ``[plan seed, 7919 k]``),
with the same estimator; B's 2PL is refitted without it (its leave-one-out fit, as the adaptive
estimate's calibration does). Each run gives ``z = (estimate - full-pool score) / stated se``. The
rule is split-conformal (:func:`conformal_quantile`) and local: with ``q`` the ``ceil(0.95 (k + 1))``-th
smallest ``|z|`` of the ``k`` = :data:`NEIGHBOURS` runs off the ceiling whose share of planned items
right is nearest the located model's, its standard error is multiplied by ``max(0.5, q / 1.96)``, so
that its 95% interval is as wide as the one that covered 95% of the panel's runs like it: wider than
the design's where the design understates its error, narrower where it overstates it (at 50 planned
items most strata hold 1-2 items and A's variance floor and B's pooled benchmark variance take over:
the design's interval then covered 0.977-0.986 of real runs, above the 95% it states), never below
:data:`MIN_FACTOR` of it (a panel of near-identical runs cannot shrink an interval to nothing). Local, because the design's standard error errs most near the top: on
GSM8K (Llama-3.1 family) B's was about 1.1-1.5 points for frontier checkpoints wrong on 5-10 of 100
planned items and 3 points off, while the panel's runs as a whole needed no widening. Why conformal rather than the adaptive estimate's
added variance: the target is the interval's coverage, and the panel's errors are heavy-tailed (a
few models the 2PL fits worse); the quantile holds for a model exchangeable with the panel's,
whatever the shape of the errors. A model the panel does not resemble can still fall outside. With
fewer than :data:`~evalprism.stem.adaptive.MIN_CALIBRATION_MODELS` complete panel models there is no
calibration, and the output says so.

**Ceiling** (:func:`at_ceiling`): a model wrong on fewer than :data:`CEILING_WRONG` of its planned
items (the textbook condition for a normal interval on a proportion, ``n (1 - p) >= 5``, fails) is at
the ceiling: its items cannot show how far below 100% it is, and the estimators err high there (B's
residuals are all near 0). Its interval is one-sided, "at or above L", ``L = estimate - q_c se``
with ``q_c`` the one-sided conformal 95% quantile of the signed ``z`` of the panel's runs at the
ceiling (at least 1.645; when fewer than :data:`MIN_CEILING_RUNS` are at the ceiling, the two-sided
quantile of every run's ``|z|``, the wider rule, stated). Its standard error is reported as ``se q_c / 1.645``, so that ``L`` is ``estimate - 1.645``
of it. The point placement is kept (trials score it); the outputs lead with the bound.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from evalprism.stats.pairwise import Z95
from evalprism.stem.adaptive import MIN_CALIBRATION_MODELS, ScoreWeights, conformal_quantile
from evalprism.stem.estimate import Sample, Strata, stratified_draw
from evalprism.stem.target import Target

if TYPE_CHECKING:
    from evalprism.stem.methods import Evidence, Method

#: a model wrong on fewer than this many planned items is at the ceiling (n (1 - p) >= 5 fails)
CEILING_WRONG = 5
#: the one-sided 95% normal quantile of the ceiling's bound
Z_ONE_SIDED = 1.6448536269514722
#: more draws of the plan's design each panel model is read through, besides the plan itself
REDRAWS = 9
#: fewest panel runs at the ceiling that calibrate the ceiling's bound on their own (19: the fewest
#: whose conformal 95% quantile is not simply their largest)
MIN_CEILING_RUNS = 19
#: the coverage the calibration targets
LEVEL = 0.95
#: panel runs off the ceiling, nearest the located model in share right, that calibrate its factor
NEIGHBOURS = 60
#: the smallest factor: the calibrated standard error is never below half the design's
MIN_FACTOR = 0.5


def at_ceiling(wrong: np.ndarray | int) -> np.ndarray:
    """Whether a run with ``wrong`` wrong planned answers is at the 2PL's ceiling (module docstring)."""
    return np.asarray(wrong) < CEILING_WRONG


@dataclass(frozen=True)
class PlanCalibration:
    """The panel's runs through a plan (module docstring): the ``models`` read, ``runs`` in all
    (``ceiling_runs`` of them at the ceiling), the panel's RMSE and root mean stated standard error
    (points), the factor off the ceiling (``factor`` >= :data:`MIN_FACTOR`, from the ``neighbours`` runs nearest the
    located model in share right) and the one-sided quantile at the ceiling (``ceiling_quantile`` >=
    1.645); ``ceiling_pooled``: that came from all runs (too few at the ceiling)."""

    models: int
    runs: int
    ceiling_runs: int
    panel_rmse: float
    mean_stated_se: float
    factor: float
    ceiling_quantile: float
    ceiling_pooled: bool
    neighbours: int

    def standard_error(self, se: float, ceiling: bool) -> float:
        """``se`` (points) widened by the factor of its kind (at the ceiling: the one-sided quantile
        over 1.645, so that the bound ``estimate - 1.645 se'`` is the calibrated one)."""
        return se * (self.ceiling_quantile / Z_ONE_SIDED if ceiling else self.factor)


@dataclass(frozen=True)
class PanelPlanRuns:
    """Per run of a panel model through the plan or a redraw: error against its full-pool score and
    stated variance (fractions), wrong planned answers, which model (``model_of``, into ``models``: the
    panel models read) and which draw (``draw``: 0 the plan itself, then the redraws)."""

    models: list[str]
    errors: np.ndarray
    variances: np.ndarray
    wrong: np.ndarray
    model_of: np.ndarray
    draw: np.ndarray
    items: int

    @property
    def share_right(self) -> np.ndarray:
        """Each run's share of its planned items answered right."""
        return 1.0 - self.wrong / self.items

    def without(self, model: str) -> PanelPlanRuns:
        """The runs of every model but ``model`` (what locating ``model`` itself calibrates on)."""
        keep = self.model_of != self.models.index(model)
        names = [m for m in self.models if m != model]
        renumber = np.cumsum(np.array([m != model for m in self.models])) - 1
        return PanelPlanRuns(
            models=names,
            errors=self.errors[keep],
            variances=self.variances[keep],
            wrong=self.wrong[keep],
            model_of=renumber[self.model_of[keep]],
            draw=self.draw[keep],
            items=self.items,
        )


def redraws(strata: Strata, picked: np.ndarray, group: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The plan's items and :data:`REDRAWS` more draws of its design (its per-stratum counts), as
    trials x items pool indices and their strata."""
    counts = np.bincount(group, minlength=len(strata.size))
    stratum_of = np.empty(int(strata.items.max()) + 1, dtype=np.int64)
    stratum_of[strata.items] = strata.stratum
    rows = [np.asarray(picked)]
    for k in range(1, REDRAWS + 1):
        rows.append(stratified_draw(strata.members(), counts, np.random.default_rng([seed, 7919 * k])))
    order = [np.argsort(stratum_of[r], kind="stable") for r in rows]
    items = np.stack([r[o] for r, o in zip(rows, order, strict=True)])
    return items, stratum_of[items]


def panel_plan_runs(evidence: Evidence, method: Method, seed: int) -> PanelPlanRuns | None:
    """Every complete panel model but the located one read through the plan and its redraws with
    ``method`` (B: its leave-one-out 2PL); None with fewer than the calibration's minimum models."""
    pool, strata, sample = evidence.pool, evidence.strata, evidence.sample
    names, resp = pool.reference_panel(evidence.target.model)
    complete = [j for j in range(len(names)) if (resp[j] >= 0).all()]
    if len(complete) < MIN_CALIBRATION_MODELS:
        return None
    group = np.asarray(sample.group).reshape(-1)
    items, groups = redraws(strata, sample.picked[0], group, seed)
    draws = Sample(picked=items, group=groups, group_size=sample.group_size, group_bench=sample.group_bench)
    weights = ScoreWeights.of(pool).per_item
    errors, variances, wrong = [], [], []
    for j in complete:
        y = resp[j].astype(np.int8)
        panel_model = Target(model=names[j], outcome=y, scores=np.empty(0), reference_score=None, truth=None)
        est = method.estimate(replace(evidence, target=panel_model, sample=draws, plan=None))
        assert est.score is not None and est.standard_error is not None
        errors.append(est.score / 100 - float(weights @ (y == 1)))
        variances.append((est.standard_error / 100) ** 2)
        wrong.append((y[items] != 1).sum(axis=1))
    return PanelPlanRuns(
        models=[names[j] for j in complete],
        errors=np.concatenate(errors),
        variances=np.concatenate(variances),
        wrong=np.concatenate(wrong),
        model_of=np.repeat(np.arange(len(complete)), len(items)),
        draw=np.tile(np.arange(len(items)), len(complete)),
        items=items.shape[1],
    )


def calibration_of(runs: PanelPlanRuns, share_right: float) -> PlanCalibration:
    """:class:`PlanCalibration` from the panel's runs for a located model right on ``share_right`` of
    its planned items (module docstring): the factor from the :data:`NEIGHBOURS` runs off the ceiling
    nearest to it in share right, the ceiling's quantile from the runs at the ceiling."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(runs.variances > 0, runs.errors / np.sqrt(runs.variances), np.sign(runs.errors) * np.inf)
    top = at_ceiling(runs.wrong)
    off = np.flatnonzero(~top) if (~top).any() else np.arange(len(top))
    near = off[np.argsort(np.abs(runs.share_right[off] - share_right), kind="stable")[:NEIGHBOURS]]
    pooled = int(top.sum()) < MIN_CEILING_RUNS
    ceiling_z = np.abs(z) if pooled else z[top]  # too few at the ceiling: every run's |z|, the wider rule
    return PlanCalibration(
        models=len(runs.models),
        runs=len(runs.errors),
        ceiling_runs=int(top.sum()),
        panel_rmse=round(100 * float(np.sqrt(np.mean(runs.errors**2))), 4),
        mean_stated_se=round(100 * float(np.sqrt(np.mean(runs.variances))), 4),
        factor=max(MIN_FACTOR, conformal_quantile(np.abs(z[near]), LEVEL) / Z95),
        ceiling_quantile=max(Z_ONE_SIDED, conformal_quantile(ceiling_z, LEVEL)),
        ceiling_pooled=pooled,
        neighbours=len(near),
    )


def calibrate_plan(evidence: Evidence, method: Method, seed: int) -> PlanCalibration | None:
    """The calibration of ``method`` on the plan read in ``evidence`` (None: too few panel models)."""
    runs = panel_plan_runs(evidence, method, seed)
    share = float(evidence.answers()[0].mean())
    return None if runs is None else calibration_of(runs, share)


def ceiling_bound(estimate: float, se: float) -> float:
    """The one-sided 95% lower bound ``L`` of an estimate at the ceiling (points; ``se`` calibrated)."""
    return estimate - Z_ONE_SIDED * se
