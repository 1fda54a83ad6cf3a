"""The STEM commands from their files: what `stem pool`, `stem audit`, `stem locate` and `stem plan`
read, each with its options object (:mod:`evalprism.stem.options`), returning the result the command
saves. Every correctness file is read by :func:`~evalprism.io.items.read_correctness` with the
options' harness readers; what the readers read and chose (their
:class:`~evalprism.io.record.Provenance`) is handed to the result (its run record's ``read``).
"""

from __future__ import annotations

from pathlib import Path

from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import Correctness, read_correctness
from evalprism.io.record import Provenance
from evalprism.stem.evaluate import locate_models
from evalprism.stem.location_result import LocationResult
from evalprism.stem.options import AuditOptions, LocateOptions, PlanOptions, PoolOptions
from evalprism.stem.plan import Plan
from evalprism.stem.pool import Audit, Pool, audit_family, build_pool
from evalprism.stem.staging import plan_stage


def pool_from_files(
    correctness: str | Path, models: str | Path, options: PoolOptions | None = None, *, panel: str | Path | None = None
) -> Pool:
    """A family's pool (:func:`~evalprism.stem.pool.build_pool`) from a correctness file or directory
    and a metadata table; ``panel``: another correctness file of other models on the same items (the
    IRT reference panel)."""
    o = options or PoolOptions()
    family, other = _read_family(correctness, panel, o.harness)
    pool = build_pool(family.table, models, o, panel=None if other is None else other.table)
    pool.provenance = family.provenance if other is None else family.provenance + other.provenance
    return pool


def audit_from_files(correctness: str | Path, models: str | Path, options: AuditOptions | None = None) -> Audit:
    """The contamination audit of a family (:func:`~evalprism.stem.pool.audit_family`) from its files."""
    o = options or AuditOptions()
    family, _ = _read_family(correctness, None, o.harness)
    audit = audit_family(family.table, models, o)
    audit.pool.provenance = family.provenance
    return audit


def _read_family(
    correctness: str | Path, panel: str | Path | None, harness: HarnessOptions
) -> tuple[Correctness, Correctness | None]:
    """The family's correctness and the panel's, read with the same harness options (refused only if
    neither file is read by the reader an option steers)."""
    family = read_correctness(correctness, harness=harness, check_harness=False)
    other = read_correctness(panel, harness=harness, check_harness=False) if panel is not None else None
    readers = family.provenance.readers + (other.provenance.readers if other is not None else ())
    inputs = f"{correctness}" + (f" and {panel}" if panel is not None else "")
    harness.check_applies(readers, f"{inputs} hold{'s' * (panel is None)} no such input")
    return family, other


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
    result = locate_models(pool, read.table, o, plan=the_plan, progress=progress)
    result.provenance = read.provenance
    return result


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
        pool, o, previous=prior, answers=read.table if read is not None else None, progress=progress
    )
    plan.provenance = read.provenance if read is not None else Provenance()
    return plan
