"""The STEM commands from their files: what `stem pool`, `stem audit`, `stem locate` and `stem plan`
read, each with its options object (:mod:`evalprism.stem.options`), returning the result the command
saves. Every correctness file is read by :func:`~evalprism.io.items.read_correctness` with the
options' harness readers; what the readers chose is kept with the result (its run record's ``read``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from evalprism.io.items import read_correctness
from evalprism.io.record import Provenance
from evalprism.stem.evaluate import locate_models
from evalprism.stem.location_result import LocationResult
from evalprism.stem.options import AuditOptions, LocateOptions, PlanOptions, PoolOptions
from evalprism.stem.plan import Plan
from evalprism.stem.pool import Audit, Pool, build_pool_from_files
from evalprism.stem.staging import plan_stage


def pool_from_files(
    correctness: str | Path, models: str | Path, options: PoolOptions | None = None, *, panel: str | Path | None = None
) -> Pool:
    """A family's pool (:func:`~evalprism.stem.pool.build_pool`) from a correctness file or directory
    and a metadata table; ``panel``: another correctness file of other models on the same items (the
    IRT reference panel)."""
    o = options or PoolOptions()
    return build_pool_from_files(
        correctness, models, family=o.family, missing=o.missing, harness=o.harness, panel=panel, irt=o.irt
    )


def audit_from_files(correctness: str | Path, models: str | Path, options: AuditOptions | None = None) -> Audit:
    """The contamination audit of a family (its pool, which need not hold a transition sample)."""
    o = options or AuditOptions()
    pool = build_pool_from_files(
        correctness, models, family=o.family, missing=o.missing, harness=o.harness, require_sts=False
    )
    return pool.audit()


def locate_from_files(
    pool_dir: str | Path,
    correctness: str | Path,
    options: LocateOptions | None = None,
    *,
    plan: str | Path | None = None,
    progress: bool = True,
) -> LocationResult:
    """New models located on a saved pool's family from their correctness file (and a saved plan)."""
    o = options or LocateOptions()
    pool = Pool.load(pool_dir)
    the_plan = Plan.load(plan) if plan is not None else None
    read = read_correctness(correctness, harness=o.harness)
    result = locate_models(
        pool,
        read.table,
        list(o.model) if o.model else None,
        items=o.items,
        trials=o.trials,
        seed=o.seed,
        weighting=o.weighting,
        method=o.method,
        design=o.design,
        plan=the_plan,
        progress=progress,
    )
    _with_read(result.options, read.provenance)
    return result


def _with_read(options: dict[str, Any], read: Provenance) -> None:
    """Put what the readers chose (``read``) into a localization's ``options``, before the notes the
    localization made when there are choices (its report lists the options in order: what was read,
    then what was noted)."""
    notes = options.pop("notes", None) if read.choices else None
    options["read"] = list(read.choices)
    if notes is not None:
        options["notes"] = notes


def plan_from_files(
    pool_dir: str | Path,
    options: PlanOptions | None = None,
    *,
    previous: str | Path | None = None,
    answers: str | Path | None = None,
    progress: bool = True,
) -> Plan:
    """Which items of a saved pool to run a new model on, or an adaptive plan's next stage from the
    model's ``answers`` on its ``previous`` plan's items."""
    o = options or PlanOptions()
    pool = Pool.load(pool_dir)
    prior = Plan.load(previous) if previous is not None else None
    read = read_correctness(answers, harness=o.harness) if answers is not None else None
    plan, _current = plan_stage(
        pool,
        items=o.items,
        seed=o.seed,
        method=o.method,
        previous=prior,
        answers=read.table if read is not None else None,
        model=o.model,
        stage=o.stage,
        target_confidence=o.target_confidence,
        progress=progress,
    )
    if read is not None:
        plan.options["read"] = list(read.provenance.choices)
    return plan
