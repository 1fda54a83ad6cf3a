"""The command's result: what ``evalprism stem locate`` writes, the localizations (and trials) of
several models on one pool, as one result (:class:`LocationResult`). It holds its parts and writes
them; it computes nothing, so it sits below :mod:`~evalprism.stem.placement` (a single
localization saves through it) and :mod:`~evalprism.stem.evaluate` (which builds it for several
models), and above :mod:`~evalprism.stem.report` (its summary table and report).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pandas as pd

from evalprism.io.outputs import OutputKind, SavedResult, write_json
from evalprism.io.record import Provenance
from evalprism.stem.options import LocateOptions

if TYPE_CHECKING:
    from evalprism.stem.placement import Localization
    from evalprism.stem.pool import Pool
    from evalprism.stem.trials import Trials


@dataclass(frozen=True)
class PlanUsed:
    """The plan whose items the models answered, as a localization records it: its items, seed,
    estimator (method), design and number of strata (None where an older plan did not say)."""

    items: int | None
    seed: int | None
    method: str | None
    design: str | None
    strata: int | None


@dataclass(frozen=True)
class LocateSummary:
    """What one run of ``stem locate`` decided, its options resolved: the pool's family and members,
    the items of each sample drawn from a whole-pool model, the trials, seed, what a -1 counts as,
    the paper rule's weighting, the method asked for, the IRT estimator's sample design, the models
    located, the reference panel's size (0 without one) and its item-response model, and the plan
    the answers were read by (None without one)."""

    family: str
    members: tuple[str, ...]
    items: int
    trials: int
    seed: int | None
    missing: str
    weighting: str
    method: str
    design: str
    models: tuple[str, ...]
    panel_models: int
    irt: str | None
    plan: PlanUsed | None = None


@dataclass
class LocationResult(SavedResult):
    """Localizations (and, when trials ran, their trials) of several models on one pool: what
    ``evalprism stem locate`` writes (located.csv: one row per model, the report's summary table; levels.csv, tests.csv, subset.csv, trials.csv and summary.csv
    when trials ran, localization.json, run.json, report.html).

    ``options``: what the run was asked (:class:`~evalprism.stem.options.LocateOptions`);
    ``summary``: what it decided (:class:`LocateSummary`); ``provenance``: what the readers of the
    models' correctness read and chose; ``notes``: what the run changed or could not do as asked
    (more items asked than a model answered, models that answered part of the pool, ...)."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_LOCATE

    pool: Pool | None
    results: list[tuple[Localization, Trials | None]]
    options: LocateOptions
    summary: LocateSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()

    def findings(self) -> list[str]:
        """The headline: the models placed at their true position, and each method's trial accuracy."""
        from evalprism.stem.report import location_index_line

        return [location_index_line(self)]

    def frames(self) -> dict[str, pd.DataFrame]:
        levels = pd.concat([loc.levels.assign(model=loc.model) for loc, _ in self.results], ignore_index=True)
        tests = pd.concat([loc.tests.assign(model=loc.model) for loc, _ in self.results], ignore_index=True)
        subset = pd.concat([loc.subset.assign(model=loc.model) for loc, _ in self.results], ignore_index=True)
        from evalprism.stem.report import located_table

        out = {
            "located": located_table(self),
            "levels": _model_first(levels),
            "tests": _model_first(tests),
            "subset": _model_first(subset),
        }
        ran = [t for _, t in self.results if t is not None]
        if ran:
            out["trials"] = pd.concat([t.frame() for t in ran], ignore_index=True)
            out["summary"] = pd.concat([t.by_method() for t in ran], ignore_index=True)
        return out

    def localization(self) -> list[dict[str, Any]]:
        """``localization.json``: one entry per model (headline, and trial accuracies when run)."""
        entries = []
        for loc, trials in self.results:
            entry = loc.summary()
            if trials is not None:
                entry["trials"] = {
                    "n": len(trials.positions),
                    "items": trials.sampling.items,
                    "method": trials.method,
                    "accuracy": round(trials.accuracy(), 4),
                    **{f"accuracy_{m}": round(trials.accuracy(m), 4) for m in trials.methods},
                    **{f"score_rmse_{m}": round(trials.rmse(m), 4) for m in trials.score_methods},
                    **{f"coverage_95_{m}": round(trials.coverage(m), 4) for m in trials.error_methods},
                }
            entries.append(entry)
        return entries

    def write_extra(self, directory: Path) -> None:
        write_json(directory / "localization.json", self.localization())

    def report(self) -> Any:
        from evalprism.stem.report import location_report

        return location_report(self)


def _model_first(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[["model"] + [c for c in frame.columns if c != "model"]]
