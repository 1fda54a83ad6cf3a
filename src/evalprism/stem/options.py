"""The options of the STEM commands, declared once (:mod:`evalprism.io.options`): building a family's
pool (and its audit), locating new models, planning which items to run. Importing this module imports
neither numpy nor pandas.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evalprism.io.harness_options import HarnessOptions
from evalprism.io.options import Options, group, option
from evalprism.vocabularies import Design, IRTKind, LocateMethod, Missing, PlanMethod, Weighting

_FAMILY_HELP = "Family to use from the metadata (needed when it lists several)."
_MISSING_HELP = "A -1 (no answer): count it as wrong, or exclude the item."
_MIN_MODELS_HELP = "Fewest family members a pool is built from (the library's; the commands keep 3)."


@dataclass(frozen=True)
class AuditOptions(Options):
    """How a family's correctness is read for its contamination audit: which family of the metadata,
    what a -1 (no answer) counts as, and how harness logs are read (``min_models``, the library's
    alone: the fewest members a family may have)."""

    family: str | None = option(None, help=_FAMILY_HELP)
    missing: Missing = option("wrong", help=_MISSING_HELP)
    harness: HarnessOptions = group(HarnessOptions)
    min_models: int = option(3, help=_MIN_MODELS_HELP, shown=False)


@dataclass(frozen=True)
class PoolOptions(Options):
    """:class:`AuditOptions` and, with a reference panel, the item-response model fitted on it."""

    family: str | None = option(None, help=_FAMILY_HELP)
    missing: Missing = option("wrong", help=_MISSING_HELP)
    harness: HarnessOptions = group(HarnessOptions)
    min_models: int = option(3, help=_MIN_MODELS_HELP, shown=False)
    irt: IRTKind | None = option(
        None,
        help="With --panel: item-response model fitted on the panel: 2pl (default), or 1pl (every discrimination 1).",
        order=("2pl", "1pl"),
    )


@dataclass(frozen=True)
class LocateOptions(Options):
    """How :func:`evalprism.stem.locate_models` locates new models: which ones, how many items a
    localization of a model that answered the whole pool draws, the trials against the truth, the
    method and its design, and the paper rule's weighting."""

    model: Sequence[str] | None = option(
        None, help="Model to locate (repeat for several; default: every model in the file)."
    )
    items: int | None = option(
        None, help="Items per localization of a model that answered the whole pool (default 100)."
    )
    trials: int = option(100, help="Repeated trials of every method, compared with random sampling (0: none).")
    seed: int | None = option(
        None, help="Random seed of the sample drawn from a model that answered the whole pool (default 0)."
    )
    method: LocateMethod = option(
        "auto",
        help="auto: irt when the pool has a reference panel of at least 10 models, else stratified; paper: the "
        "STEM paper's rule on a balanced subset; stratified: estimator A (strata benchmark x members right); irt: "
        "estimator B (random sample + IRT difference estimator).",
    )
    design: Design | None = option(
        None,
        help="With a pool that has a reference panel: the IRT estimator's sample: random (simple random sample, "
        "the default) or stratified (A's strata).",
    )
    weighting: Weighting | None = option(
        None,
        help="The paper's rule: balanced (the default): every TI level counts the same (paper); stratified: each "
        "level by its size in the pool.",
    )
    harness: HarnessOptions = group(HarnessOptions)


@dataclass(frozen=True)
class PlanOptions(Options):
    """How :func:`evalprism.stem.plan_stage` picks the items to run a new model on: a plan's size,
    seed and method, or an adaptive plan's next stage from the model's answers."""

    items: int = option(100, help="Items to run the new model on (with --plan: the new stage's items).")
    seed: int | None = option(None, help="Random seed (default 0; a later stage carries on its plan's seed).")
    method: PlanMethod | None = option(
        None,
        help="Estimator the answers will be read with: auto (the default: irt when the pool has a reference panel "
        "of at least 10 models, else stratified), stratified (A) or irt (B); both draw the same stratified sample "
        "(benchmark x members right). adaptive: stage 1 of an adaptive plan (the same draw); later stages with "
        "--plan and --answers.",
    )
    stage: int | None = option(
        None, help="With --plan: the stage to plan (checked: one more than the plan's last stage)."
    )
    model: str | None = option(
        None, help="With --answers: the model to plan for (default: the only model in the file)."
    )
    target_confidence: float | None = option(
        None,
        help="With --plan: add no item when the localization so far already has this confidence (e.g. 0.95).",
    )
    harness: HarnessOptions = group(HarnessOptions)
