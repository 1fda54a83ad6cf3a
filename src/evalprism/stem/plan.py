"""Which items a new model should run: ``evalprism stem plan`` (issue 26, part 1).

A plan is one draw of estimator A's stratified design (:mod:`evalprism.stem.estimate`) over the
whole pool, made before the new model has answered anything:

- population: every pool item (``pool.csv``'s rows), strata ``h = (benchmark, members right)``;
- allocation: :func:`~evalprism.stem.estimate.allocate` (proportional to ``w_b N_h / N_b``, at least
  one item per stratum);
- draw: :func:`~evalprism.stem.estimate.stratified_draw` with ``numpy.random.default_rng([seed, 0])``
  from the items sorted by (benchmark, item_id), so the plan depends only on (pool, items, seed).

Each planned item carries its stratum, the stratum's size ``N_h`` and draw ``n_h``, its inclusion
probability ``n_h / N_h`` and design weight ``N_h / n_h``. ``stem locate --plan`` reads them back and
estimates the **full-pool** score from the answers by the design (:mod:`evalprism.stem.subset`).

``method`` names the estimator the answers will be read with: ``stratified`` (A) or ``irt`` (B,
the IRT difference estimator on this same stratified sample; it needs a reference panel);
``auto`` is what :func:`~evalprism.stem.methods.choose_method` chooses for a model outside the
panel. Both use the same draw: stratifying by how many members are right already spreads the
items over the ability range an IRT-informative design would target. Adaptive (staged) designs are
not implemented.

Harness lists (``write_extra``): ``lm_eval_samples.json`` maps each benchmark (an lm-eval task) to
its planned doc indices (lm-evaluation-harness ``--samples``, a JSON string); it is written only
when every planned item_id is a non-negative integer, as lm-eval's doc ids are.
``inspect_sample_ids.json`` maps each benchmark (an inspect_ai task) to its planned sample ids
joined by commas (``inspect eval TASK --sample-id ...``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.options import check_applies
from evalprism.io.outputs import OutputKind, SavedResult, write_json
from evalprism.io.preflight import PLAN_FILE, plan_directory
from evalprism.io.record import Provenance, RunRecord
from evalprism.stem.adaptive import PanelFits
from evalprism.stem.estimate import allocate, pool_strata, stratified_draw
from evalprism.stem.methods import METHODS, choose_method
from evalprism.stem.options import PlanOptions
from evalprism.stem.pool import Pool
from evalprism.vocabularies import PlanMethod, choices

PLAN_METHODS = choices(PlanMethod)
STRATIFIED_DESIGN = "stratified (benchmark x members right), proportional allocation"
ADAPTIVE_DESIGN = (
    "adaptive: stage 1 stratified (benchmark x members right), later stages by expected Fisher information"
)
#: the reference panel's leave-one-out fits stored with a later stage of an adaptive plan
FITS_FILE = "calibration.npz"
#: columns of plan.csv
PLAN_COLUMNS = [
    "benchmark",
    "item_id",
    "stratum",
    "members_right",
    "stratum_size",
    "stratum_drawn",
    "inclusion_probability",
    "design_weight",
    "stage",
]


@dataclass(frozen=True)
class SoFar:
    """The localization from an adaptive plan's previous stages, as the next stage records and
    reports it: the interval, the estimated full-pool score and its standard error (points), the
    interval's confidence and the answers it rests on."""

    interval: str
    estimate: float
    standard_error: float
    confidence: float
    items: int


@dataclass(frozen=True)
class PlanSummary:
    """What planning decided: the pool's family and items, the items planned (all stages) and asked
    for (this stage), the seed, the estimator the answers will be read with (``method``; the one
    asked for: ``method_requested``), the design, the strata, the reference panel's size, the
    pool's benchmarks and their weights; for an adaptive plan its stage, every stage's size, the
    localization from the previous stages (``so_far``) and, when the target confidence was reached,
    why no item was added (``stopped``). A plan saved by an older evalprism may lack some (None)."""

    family: str | None
    pool_items: int | None
    items: int
    items_requested: int | None
    seed: int
    method: str | None
    method_requested: PlanMethod | None
    design: str | None
    strata: int | None
    panel_models: int | None
    benchmarks: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    stage: int | None = None
    stages: tuple[int, ...] | None = None
    so_far: SoFar | None = None
    stopped: str | None = None

    @classmethod
    def from_json(cls, saved: Mapping[str, Any], items: int) -> PlanSummary:
        """The summary a saved plan's ``run.json`` holds (format 2: its ``results``; format 1: its
        ``options``); ``items``: the rows of its plan.csv, where it does not say."""
        so_far = saved.get("so_far")
        stages = saved.get("stages")
        return cls(
            family=saved.get("family"),
            pool_items=saved.get("pool_items"),
            items=int(saved.get("items", items)),
            items_requested=saved.get("items_requested"),
            seed=int(saved.get("seed") or 0),
            method=saved.get("method"),
            method_requested=saved.get("method_requested"),
            design=saved.get("design"),
            strata=saved.get("strata"),
            panel_models=saved.get("panel_models"),
            benchmarks=tuple(map(str, saved.get("benchmarks") or ())),
            weights=tuple(float(w) for w in saved.get("weights") or ()),
            stage=saved.get("stage"),
            stages=None if stages is None else tuple(int(k) for k in stages),
            so_far=SoFar(**{f.name: so_far[f.name] for f in fields(SoFar)}) if isinstance(so_far, Mapping) else None,
            stopped=saved.get("stopped"),
        )


@dataclass
class Plan(SavedResult):
    """The planned items (``items``: the columns of :data:`PLAN_COLUMNS`, grouped by stratum), the
    options it was planned with (:class:`~evalprism.stem.options.PlanOptions`), what planning
    decided (:class:`PlanSummary`: pool family and size, items, seed, method, design, stages) and,
    for a later stage of an adaptive plan, what the readers of the model's answers read and chose, and
    the reference panel's leave-one-out fits its calibration ran on (``panel_fits``, saved as
    :data:`FITS_FILE` and read back by :meth:`load`: :mod:`~evalprism.stem.adaptive`, "Reuse")."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_PLAN

    items: pd.DataFrame
    options: PlanOptions
    summary: PlanSummary
    provenance: Provenance = field(default_factory=Provenance)
    panel_fits: PanelFits | None = field(default=None, repr=False, compare=False)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"plan": self.items}

    @property
    def adaptive(self) -> bool:
        """True for an adaptive plan (stages after the first picked from the model's answers)."""
        return self.summary.method == "adaptive"

    @property
    def seed(self) -> int:
        """The plan's seed: every stage draws with it."""
        return self.summary.seed

    def findings(self) -> list[str]:
        """The headline: how many items are planned, how, and for an adaptive plan's later stage the
        localization so far (or why no item was added)."""
        from evalprism.stem.report import plan_finding

        return [plan_finding(self)]

    @property
    def notes(self) -> tuple[str, ...]:
        """Why a later stage of an adaptive plan added no item (nothing otherwise)."""
        return () if self.summary.stopped is None else (self.summary.stopped,)

    def stage_sizes(self) -> list[int]:
        """Items of each stage, stage 1 first (a stratified plan has one stage)."""
        return [int(k) for k in self.items.groupby("stage", sort=True).size()]

    def lm_eval_samples(self) -> dict[str, list[int]] | None:
        """Benchmark -> planned doc indices (lm-eval ``--samples``), or None when an item_id is not
        a non-negative integer (then the pool did not come from lm-eval doc ids)."""
        out: dict[str, list[int]] = {}
        for bench, ids in self.items.groupby("benchmark", sort=True)["item_id"]:
            text = ids.astype(str)
            if not text.str.fullmatch(r"\d+").all():
                return None
            out[str(bench)] = sorted(int(i) for i in text)
        return out

    def inspect_sample_ids(self) -> dict[str, str]:
        """Benchmark -> planned sample ids joined by commas (inspect_ai ``--sample-id``)."""
        return {
            str(bench): ",".join(sorted(ids.astype(str), key=_natural))
            for bench, ids in self.items.groupby("benchmark", sort=True)["item_id"]
        }

    def write_extra(self, directory: Path) -> None:
        if self.panel_fits is not None:
            write_fits(directory / FITS_FILE, self.panel_fits)
        samples = self.lm_eval_samples()
        if samples is not None:
            write_json(directory / "lm_eval_samples.json", samples)
        write_json(directory / "inspect_sample_ids.json", self.inspect_sample_ids())

    def report(self) -> Any:
        from evalprism.stem.report import plan_report

        return plan_report(self)

    @classmethod
    def load(cls, plan_dir: str | Path) -> Plan:
        """A plan written by :meth:`save` (``plan.csv`` and ``run.json``, of any format); anything
        wrong is one message."""
        plan_dir = plan_directory(Path(plan_dir))
        path = plan_dir / PLAN_FILE
        try:
            items = pd.read_csv(path, dtype={"benchmark": str, "item_id": str})
            run = json.loads((plan_dir / "run.json").read_text(encoding="utf-8"))
            options, summary = _saved_plan(run, len(items))
        except (OSError, ValueError, TypeError, KeyError, pd.errors.ParserError, EvalprismError) as exc:
            raise EvalprismError(f"{plan_dir}: not a valid evalprism plan directory: {exc}") from None
        if "stage" not in items.columns:  # a plan written before stages existed: one stage
            items["stage"] = 1
        missing = [c for c in PLAN_COLUMNS if c not in items.columns]
        if missing:
            raise EvalprismError(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(PLAN_COLUMNS)})")
        return cls(
            items=items,
            options=options,
            summary=summary,
            provenance=RunRecord.from_json(run).provenance,
            panel_fits=read_fits(plan_dir / FITS_FILE),
        )


def _saved_plan(run: Any, rows: int) -> tuple[PlanOptions, PlanSummary]:
    """The options and summary of a saved plan's ``run.json``: format 2 as written now keeps the
    options (every field of :class:`PlanOptions`) apart from the summary (``results``); format 1, and
    format 2 as evalprism wrote it before, kept what planning decided in ``options`` (the seed, the
    method asked for, the items asked for among them)."""
    if not isinstance(run, Mapping) or not isinstance(run.get("options", {}), Mapping):
        raise EvalprismError("run.json: expected a JSON object with the plan's options")
    saved = run.get("options", {})
    results = run.get("results")
    if isinstance(results, Mapping) and "pool_items" in results:
        fields_of = {f.name for f in fields(PlanOptions)} - {"harness"}
        return PlanOptions(**{k: v for k, v in saved.items() if k in fields_of}), PlanSummary.from_json(results, rows)
    summary = PlanSummary.from_json(saved, rows)
    return PlanOptions(
        items=summary.items_requested or summary.items, seed=summary.seed, method=summary.method_requested
    ), summary


def write_fits(path: Path, fits: PanelFits) -> None:
    """``calibration.npz``: the panel's leave-one-out fits, exact (float64) so that a calibration on them
    gives the same numbers as one that fits them again."""
    np.savez(
        path,
        fingerprint=np.array(fits.fingerprint),
        models=np.array(fits.models, dtype=str),
        a=fits.a,
        c=fits.c,
        theta=fits.theta,
    )


def read_fits(path: Path) -> PanelFits | None:
    """The fits :func:`write_fits` stored (None without the file); a damaged file is one message."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            fits = PanelFits(
                fingerprint=str(saved["fingerprint"]),
                models=tuple(str(m) for m in saved["models"]),
                a=saved["a"].astype(float),
                c=saved["c"].astype(float),
                theta=saved["theta"].astype(float),
            )
    except (OSError, ValueError, KeyError) as exc:
        raise EvalprismError(f"{path}: not the panel fits evalprism stores with a plan ({exc}); delete it") from None
    if not (len(fits.models) == len(fits.a) == len(fits.c) == len(fits.theta)) or fits.a.shape != fits.c.shape:
        raise EvalprismError(f"{path}: its arrays do not match its models; delete it")
    return fits


def _natural(text: str) -> tuple:
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def make_plan(pool: Pool, options: PlanOptions | None = None) -> Plan:
    """The ``options.items`` pool items to run a new model on, by A's stratified design (module
    docstring), with ``options.seed`` (default 0) and ``options.method`` (default ``auto``;
    ``adaptive``: stage 1 of an adaptive plan). The options of a later stage (``stage``, ``model``,
    ``target_confidence``) are refused: a later stage is :func:`~evalprism.stem.staging.plan_stage`'s."""
    o = options or PlanOptions()
    later_stage_options(o, None)
    method: PlanMethod = o.method or "auto"
    needs = METHODS[method].needs_panel if method != "auto" else None
    if needs is not None and pool.panel is None:
        raise EvalprismError(
            f"method {method} needs a reference panel ({needs}): "
            "build the pool with other models' results on the same items (`evalprism stem pool ... "
            "--panel OTHER_CORRECTNESS`), or plan stratified",
            parameter="method",
        )
    chosen = method if method != "auto" else choose_method(pool, None)  # a model outside the panel
    seed = 0 if o.seed is None else o.seed
    strata = pool_strata(pool)
    alloc = allocate(o.items, strata.size, strata.share)
    picked = stratified_draw(strata.members(), alloc, np.random.default_rng([seed, 0]))
    stratum_of = np.empty(len(pool.items), dtype=np.int64)
    stratum_of[strata.items] = strata.stratum
    h = stratum_of[picked]
    size, drawn = strata.size[h], np.minimum(alloc, strata.size)[h]
    frame = pd.DataFrame(
        {
            "benchmark": pool.items["benchmark"].to_numpy()[picked],
            "item_id": pool.items["item_id"].to_numpy()[picked],
            "stratum": h,
            "members_right": strata.right[h],
            "stratum_size": size,
            "stratum_drawn": drawn,
            "inclusion_probability": drawn / size,
            "design_weight": size / drawn,
            "stage": 1,
        }
    )
    adaptive = chosen == "adaptive"
    summary = PlanSummary(
        family=pool.family,
        pool_items=len(pool.items),
        items=len(frame),
        items_requested=o.items,
        seed=seed,
        method=chosen,
        method_requested=method,
        design=ADAPTIVE_DESIGN if adaptive else STRATIFIED_DESIGN,
        strata=len(strata.size),
        panel_models=pool.panel_size(),
        benchmarks=tuple(str(b) for b in pool.benchmarks["benchmark"]),
        weights=tuple(float(w) for w in strata.weights),
        stage=1 if adaptive else None,
        stages=(len(frame),) if adaptive else None,
    )
    return Plan(items=frame, options=o, summary=summary)


def later_stage_options(options: PlanOptions, previous: Plan | None) -> None:
    """Refuse the options of a later stage of an adaptive plan (the model's answers' model, the stage,
    the target confidence) without the plan it extends (``previous``)."""
    later = "applies to a later stage of an adaptive plan (planned from the previous stage's plan)"
    for name, value in (
        ("model", options.model),
        ("stage", options.stage),
        ("target_confidence", options.target_confidence),
    ):
        check_applies(name, value, previous is not None, later)


def plan_rows(pool: Pool, plan: Plan) -> np.ndarray:
    """Pool indices of the plan's items; refuses a plan made on another pool."""
    made = plan.summary
    if made.family not in (None, pool.family) or made.pool_items not in (None, len(pool.items)):
        raise EvalprismError(
            f"plan: made on a pool of family {made.family!r} with "
            f"{made.pool_items} items, not this pool ({pool.family!r}, "
            f"{len(pool.items)} items); plan again on this pool (`evalprism stem plan`)"
        )
    keys = pd.MultiIndex.from_arrays(
        [pool.items["benchmark"].astype(str).to_numpy(), pool.items["item_id"].astype(str).to_numpy()]
    )
    where = keys.get_indexer(
        pd.MultiIndex.from_arrays(
            [plan.items["benchmark"].astype(str).to_numpy(), plan.items["item_id"].astype(str).to_numpy()]
        )
    )
    if (where < 0).any():
        row = int(np.flatnonzero(where < 0)[0])
        raise EvalprismError(
            f"plan.csv row {row + 2}: item ({plan.items['benchmark'].iat[row]}, "
            f"{plan.items['item_id'].iat[row]}) is not in the pool; the plan was made on another pool"
        )
    return where
