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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.options import check_number
from evalprism.io.outputs import OutputKind, SavedResult, write_json
from evalprism.io.preflight import PLAN_FILE, plan_directory
from evalprism.stem.estimate import allocate, pool_strata, stratified_draw
from evalprism.stem.methods import METHODS, choose_method
from evalprism.stem.pool import Pool
from evalprism.vocabularies import PlanMethod, choices

PLAN_METHODS = choices(PlanMethod)
STRATIFIED_DESIGN = "stratified (benchmark x members right), proportional allocation"
ADAPTIVE_DESIGN = (
    "adaptive: stage 1 stratified (benchmark x members right), later stages by expected Fisher information"
)
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


@dataclass
class Plan(SavedResult):
    """The planned items (``items``: the columns of :data:`PLAN_COLUMNS`, grouped by stratum) and
    how they were chosen (``options``: pool family and size, items, seed, method, design)."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_PLAN

    items: pd.DataFrame
    options: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"plan": self.items}

    @property
    def adaptive(self) -> bool:
        """True for an adaptive plan (stages after the first picked from the model's answers)."""
        return bool(self.options.get("method") == "adaptive")

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
        samples = self.lm_eval_samples()
        if samples is not None:
            write_json(directory / "lm_eval_samples.json", samples)
        write_json(directory / "inspect_sample_ids.json", self.inspect_sample_ids())

    def report(self) -> Any:
        from evalprism.stem.report import plan_report

        return plan_report(self)

    @classmethod
    def load(cls, plan_dir: str | Path) -> Plan:
        """A plan written by :meth:`save` (``plan.csv`` and ``run.json``); anything wrong is one message."""
        import json

        plan_dir = plan_directory(Path(plan_dir))
        path = plan_dir / PLAN_FILE
        try:
            items = pd.read_csv(path, dtype={"benchmark": str, "item_id": str})
            options = json.loads((plan_dir / "run.json").read_text(encoding="utf-8")).get("options", {})
        except (OSError, ValueError, pd.errors.ParserError) as exc:
            raise EvalprismError(f"{plan_dir}: not a valid evalprism plan directory: {exc}") from None
        if "stage" not in items.columns:  # a plan written before stages existed: one stage
            items["stage"] = 1
        missing = [c for c in PLAN_COLUMNS if c not in items.columns]
        if missing:
            raise EvalprismError(f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(PLAN_COLUMNS)})")
        return cls(items=items, options=options)


def _natural(text: str) -> tuple:
    return (0, int(text), "") if text.isdigit() else (1, 0, text)


def make_plan(pool: Pool, items: int = 100, seed: int = 0, method: str = "auto") -> Plan:
    """The ``items`` pool items to run a new model on, by A's stratified design (module docstring)."""
    if method not in PLAN_METHODS:
        raise EvalprismError(f"method: expected {', '.join(PLAN_METHODS)}, got {method!r}", parameter="method")
    check_number("items", items)
    needs = METHODS[method].needs_panel if method != "auto" else None
    if needs is not None and pool.panel is None:
        raise EvalprismError(
            f"method {method} needs a reference panel ({needs}): "
            "build the pool with other models' results on the same items (`evalprism stem pool ... "
            "--panel OTHER_CORRECTNESS`), or plan stratified",
            parameter="method",
        )
    chosen = method if method != "auto" else choose_method(pool, None)  # a model outside the panel
    strata = pool_strata(pool)
    alloc = allocate(items, strata.size, strata.share)
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
    options = {
        "family": pool.family,
        "pool_items": len(pool.items),
        "items": len(frame),
        "items_requested": items,
        "seed": seed,
        "method": chosen,
        "method_requested": method,
        "design": STRATIFIED_DESIGN if chosen != "adaptive" else ADAPTIVE_DESIGN,
        "strata": len(strata.size),
        "panel_models": pool.panel_size(),
        "benchmarks": pool.benchmarks["benchmark"].tolist(),
        "weights": [float(w) for w in strata.weights],
    }
    if chosen == "adaptive":
        options.update(stage=1, stages=[len(frame)])
    return Plan(items=frame, options=options)


def plan_rows(pool: Pool, plan: Plan) -> np.ndarray:
    """Pool indices of the plan's items; refuses a plan made on another pool."""
    if plan.options.get("family") not in (None, pool.family) or plan.options.get("pool_items") not in (
        None,
        len(pool.items),
    ):
        raise EvalprismError(
            f"plan: made on a pool of family {plan.options.get('family')!r} with "
            f"{plan.options.get('pool_items')} items, not this pool ({pool.family!r}, "
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
