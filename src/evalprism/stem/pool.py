"""The STS pool of a reference family (seed 003, Key Design 3 step 1) and the contamination audit.

:func:`build_pool` orders the family by parameter count, builds every item's IRV, classifies it
(:mod:`evalprism.stats.irv`), and summarises each benchmark: anomaly rate (share of non-monotone
IRVs among the items considered), difficulty polarization (easy = every member right, hard = every
member wrong, intermediate = the rest, shares of the items considered), discriminability and weight
(:mod:`evalprism.stem.discriminability`). Items that some member has no row for are left out
(counted as ``incomplete``). A :class:`Pool` saves to and loads from a directory (``pool.csv``
holds every item's IRV, so the directory alone is enough to locate new models).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.correctness import EncodedCorrectness, encode_correctness, read_models
from evalprism.io.options import check_applies
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.preflight import pool_directory
from evalprism.io.record import Provenance, RunRecord
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table
from evalprism.io.text import read_text
from evalprism.keyed import content_order
from evalprism.stats import irv as irv_kernel
from evalprism.stats.irv import KINDS
from evalprism.stem.discriminability import discriminability, reference_scores, weights
from evalprism.stem.options import AuditOptions, PoolOptions
from evalprism.vocabularies import IRTKind, Missing


@dataclass(frozen=True)
class PoolSummary:
    """What building a pool decided and counted: the family and its members (smallest first), the
    pool's items and how many of them are of each kind (transition: the significant transition
    samples; excluded: items left out under ``missing="exclude"``), the reference panel's size (the
    family with the panel models, 0 without a panel), the item-response model fitted on it and
    its fit's report (None without a panel)."""

    family: str
    members: tuple[str, ...]
    items: int
    transition: int
    easy: int
    hard: int
    anomalous: int
    excluded: int
    panel_models: int
    irt: IRTKind | None
    irt_fit: dict[str, Any] | None


@dataclass
class Pool(SavedResult):
    """A reference family's items, IRVs, kinds and transition indices, with per-benchmark summaries.

    ``irv``: items x members (int8, members ordered by params); ``kind``: code into
    :data:`~evalprism.stats.irv.KINDS`; ``ti``: 1..n+1 for pool items (easy/sts/hard), 0 otherwise;
    ``items``: (benchmark, item_id) per row; ``members``: model, params, position, reference_score;
    ``benchmarks``: the per-benchmark table; ``scores``: benchmarks x members, percent. Saved:
    pool.csv, benchmarks.csv, models.csv, anomalies.csv, run.json and report.html.

    ``panel`` (optional, issue 17): items x other models (int8: 1, 0, -1, -2 for no row) of models
    outside the family answering the same items, ``panel_models`` their names. The reference panel
    of the IRT estimator is the family plus these models (:meth:`reference_panel`); its 2PL fit
    (:meth:`irt_fit`) is cached here and saved as ``irt.csv`` (and the panel as ``panel.csv``).

    ``options``: what it was built with (:class:`~evalprism.stem.options.PoolOptions`);
    ``provenance``: what the readers of its correctness files read and chose; ``notes``: the
    benchmarks it leaves out whole; :attr:`summary`: what building it decided.
    """

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_POOL

    family: str
    members: pd.DataFrame
    items: pd.DataFrame
    irv: np.ndarray
    kind: np.ndarray
    ti: np.ndarray
    bench_code: np.ndarray
    benchmarks: pd.DataFrame
    scores: pd.DataFrame
    options: PoolOptions = field(default_factory=PoolOptions)
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    panel: np.ndarray | None = None
    panel_models: list[str] = field(default_factory=list)
    _irt: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)
    _order: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def item_order(self) -> np.ndarray:
        """Item indices sorted by (benchmark, item_id): every draw picks from items in this order, so
        the same items in another file order give the same subsets (:mod:`evalprism.keyed`).
        Computed once per pool (sorting a million string ids is most of a trial run's setup)."""
        if self._order is None:
            self._order = content_order(self.items["benchmark"], self.items["item_id"])
        return self._order

    @property
    def n(self) -> int:
        """Number of family members."""
        return len(self.members)

    @property
    def missing(self) -> Missing:
        """What a -1 (no answer) counts as: wrong, or the item is excluded."""
        return self.options.missing

    @property
    def irt_kind(self) -> IRTKind | None:
        """The item-response model fitted on the reference panel (``options.irt``, default 2pl); None
        without a panel."""
        return None if self.panel is None else self.options.irt or "2pl"

    @property
    def summary(self) -> PoolSummary:
        """What building the pool decided and counted (:class:`PoolSummary`; with a panel, its fit runs now)."""
        counts = np.bincount(self.kind, minlength=len(KINDS))
        return PoolSummary(
            family=self.family,
            members=tuple(str(m) for m in self.members["model"]),
            items=len(self.items),
            transition=int(counts[irv_kernel.STS]),
            easy=int(counts[irv_kernel.EASY]),
            hard=int(counts[irv_kernel.HARD]),
            anomalous=int(counts[irv_kernel.ANOMALOUS]),
            excluded=int(counts[irv_kernel.EXCLUDED]),
            panel_models=self.panel_size(),
            irt=self.irt_kind,
            irt_fit=None if self.panel is None else dict(self.irt_fit().info),
        )

    def findings(self) -> list[str]:
        """The headline: the pool's items by kind and the highest anomaly rate."""
        from evalprism.stem.report import pool_index_line

        return [pool_index_line(self)]

    @property
    def weights(self) -> np.ndarray:
        return self.benchmarks["weight"].to_numpy(dtype=float)

    def pool_frame(self) -> pd.DataFrame:
        """``pool.csv``: benchmark, item_id, irv, ti (empty for anomalous/excluded), anomalous, kind."""
        return pd.DataFrame(
            {
                "benchmark": self.items["benchmark"].to_numpy(),
                "item_id": self.items["item_id"].to_numpy(),
                "irv": irv_kernel.irv_text(self.irv),
                "ti": pd.arrays.IntegerArray(self.ti.astype(np.int64), mask=self.ti == 0),
                "anomalous": self.kind == irv_kernel.ANOMALOUS,
                "kind": np.asarray(KINDS, dtype=object)[self.kind],
            }
        )

    def anomalies(self) -> pd.DataFrame:
        """The per-item contamination audit: anomalous items, most inversions first. ``inversions``
        counts member pairs (smaller right, larger wrong); ``right_members`` names who was right."""
        rows = np.flatnonzero(self.kind == irv_kernel.ANOMALOUS)
        sub = self.irv[rows]
        names = self.members["model"].to_numpy()
        right = [", ".join(names[np.flatnonzero(r == 1)]) for r in sub]
        frame = pd.DataFrame(
            {
                "benchmark": self.items["benchmark"].to_numpy()[rows],
                "item_id": self.items["item_id"].to_numpy()[rows],
                "irv": irv_kernel.irv_text(sub),
                "inversions": irv_kernel.inversions(sub),
                "right_members": right,
            }
        )
        return frame.sort_values(["inversions", "benchmark"], ascending=[False, True], kind="stable").reset_index(
            drop=True
        )

    def frames(self) -> dict[str, pd.DataFrame]:
        out = {
            "pool": self.pool_frame(),
            "benchmarks": self.benchmarks,
            "models": self.members_frame(),
            "anomalies": self.anomalies(),
        }
        if self.panel is not None:
            out["panel"] = self.panel_frame()
            fit = self.irt_fit()
            out["irt"] = pd.DataFrame(
                {
                    "benchmark": self.items["benchmark"].to_numpy(),
                    "item_id": self.items["item_id"].to_numpy(),
                    "a": fit.a,
                    "c": fit.c,
                }
            )
            out["irt_models"] = pd.DataFrame(
                {
                    "model": fit.models,
                    "theta": fit.theta,
                    "in_family": [m in set(self.members["model"]) for m in fit.models],
                }
            )
        return out

    def panel_frame(self) -> pd.DataFrame:
        """``panel.csv``: benchmark, item_id and one column per panel model (1, 0, -1; empty: no row)."""
        frame = pd.DataFrame(
            {"benchmark": self.items["benchmark"].to_numpy(), "item_id": self.items["item_id"].to_numpy()}
        )
        panel = self.panel if self.panel is not None else np.zeros((len(self.items), 0), dtype=np.int8)
        for j, name in enumerate(self.panel_models):
            col = panel[:, j].astype(np.int64)
            frame[name] = pd.arrays.IntegerArray(col, mask=col == -2)
        return frame

    @property
    def members_right(self) -> np.ndarray:
        """Per item: how many family members answer it right (the strata of estimator A)."""
        return (self.irv == 1).sum(axis=1).astype(np.int64)

    def reference_panel(self, exclude: str | None = None) -> tuple[list[str], np.ndarray]:
        """The IRT reference panel: the family and the panel models, without ``exclude`` (the model
        being located); names and a models x items matrix (1 right, 0 wrong, negative: not observed;
        a -1 is wrong, or not observed under ``missing="exclude"``)."""
        names = list(self.members["model"]) + list(self.panel_models)
        matrix = self.irv if self.panel is None else np.concatenate([self.irv, self.panel], axis=1)
        keep = [j for j, m in enumerate(names) if m != exclude]
        resp = matrix[:, keep].T.astype(np.int8)
        if self.missing == "wrong":
            resp = np.where(resp == -1, 0, resp).astype(np.int8)
        else:
            resp = np.where(resp == -1, -2, resp).astype(np.int8)
        return [names[j] for j in keep], resp

    def panel_size(self, exclude: str | None = None) -> int:
        """Models in the reference panel without ``exclude`` (0 when the pool has no panel)."""
        if self.panel is None:
            return 0
        return len([m for m in list(self.members["model"]) + list(self.panel_models) if m != exclude])

    def irt_fit(self, exclude: str | None = None) -> Any:
        """The 2PL (or 1PL, :attr:`irt_kind`) MAP fit on the reference panel without ``exclude``
        (:func:`evalprism.stem.irt.fit_irt`), cached per excluded model."""
        from evalprism.stem.irt import fit_irt

        if self.panel is None:
            raise EvalprismError(
                "the pool has no reference panel: build it with a panel (`evalprism stem pool "
                "--panel OTHER_CORRECTNESS`) to use the IRT estimator"
            )
        names, resp = self.reference_panel(exclude)
        key = None if len(names) == self.panel_size() else exclude
        if key not in self._irt or self._irt[key].models != names:
            full = self.irt_fit() if key is not None else None  # a leave-one-out fit starts from the full one
            self._irt[key] = fit_irt(resp, names, kind=self.irt_kind or "2pl", start=full)
        return self._irt[key]

    def fitted(self, exclude: str) -> Any:
        """The fit without reference-panel model ``exclude`` when it has been made or given (else None)."""
        return self._irt.get(exclude)

    def give_fit(self, exclude: str, fit: Any) -> None:
        """Keep ``fit`` as the fit without ``exclude`` (fits stored with a plan for this panel,
        :func:`evalprism.stem.adaptive.use_stored_fits`): :meth:`irt_fit` then returns it."""
        self._irt[exclude] = fit

    def members_frame(self) -> pd.DataFrame:
        """Members with their per-benchmark scores (percent) beside the reference score."""
        out = self.members.copy()
        for bench in self.scores.index:
            out[f"score:{bench}"] = self.scores.loc[bench].to_numpy()
        return out

    def report(self) -> Any:
        from evalprism.stem.report import pool_report

        return pool_report(self)

    @classmethod
    def load(cls, pool_dir: str | Path) -> Pool:
        """A pool saved by :meth:`save` (``pool.csv``, ``models.csv``, ``run.json``); anything wrong with
        them is one message, "not a valid evalprism pool directory: <what>"."""
        pool_dir = pool_directory(Path(pool_dir))
        try:
            return _load_pool(pool_dir)
        except EvalprismError as exc:
            raise EvalprismError(f"{pool_dir}: not a valid evalprism pool directory: {exc}") from None

    def audit(self) -> Audit:
        """The contamination report of this pool."""
        o = self.options
        return Audit(self, AuditOptions(family=o.family, missing=o.missing, harness=o.harness, min_models=o.min_models))


@dataclass
class Audit(SavedResult):
    """Contamination audit of a family: per-benchmark anomaly rates and the per-item anomaly list,
    from the family's pool (which need not hold a transition sample) and the options it ran with.
    Saved: benchmarks.csv, anomalies.csv, run.json and report.html."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_AUDIT

    pool: Pool
    options: AuditOptions = field(default_factory=AuditOptions)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"benchmarks": self.pool.benchmarks, "anomalies": self.pool.anomalies()}

    @property
    def provenance(self) -> Provenance:
        """What the readers of the family's correctness read and chose (the pool's)."""
        return self.pool.provenance

    @property
    def notes(self) -> tuple[str, ...]:
        """The benchmarks the audit leaves out whole (the pool's)."""
        return self.pool.notes

    @property
    def summary(self) -> PoolSummary:
        """What building the family's pool decided and counted (the pool's)."""
        return self.pool.summary

    def findings(self) -> list[str]:
        """The headline: the pool's items by kind and the highest anomaly rate."""
        return self.pool.findings()

    def report(self) -> Any:
        from evalprism.stem.report import pool_report

        return pool_report(self.pool, audit=True)


POOL_MEMBERS_SCHEMA = Schema(
    "pool members", (Column("model", "key"), Column("params", "number", description="parameters in billions"))
)
POOL_ITEMS_SCHEMA = Schema("pool", (Column("benchmark", "key"), Column("item_id", "key"), Column("irv", "str")))


def _load_pool(pool_dir: Path) -> Pool:
    """Read and check a pool directory's files (errors name the file; :meth:`Pool.load` says whose)."""
    for name in ("pool.csv", "models.csv", "run.json"):
        if not (pool_dir / name).is_file():
            raise EvalprismError(f"{name} is missing (write one with `evalprism stem pool`)")
    try:
        run = json.loads(read_text(pool_dir / "run.json"))
    except json.JSONDecodeError as exc:
        raise EvalprismError(f"run.json is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(run, dict) or not isinstance(run.get("options", {}), dict):
        raise EvalprismError("run.json: expected a JSON object with the pool's 'family' and 'options'")
    members = POOL_MEMBERS_SCHEMA.validate(read_table(pool_dir / "models.csv"), source="models.csv")
    params = members["params"].to_numpy(dtype=float)
    if (params <= 0).any() or (np.diff(params) <= 0).any():
        raise EvalprismError(
            "models.csv, column 'params': expected positive parameter counts in increasing order "
            "(the members ordered by size)"
        )
    table = POOL_ITEMS_SCHEMA.validate(read_table(pool_dir / "pool.csv"), source="pool.csv")
    matrix = irv_kernel.parse_irv(table["irv"].tolist(), len(members), "pool.csv")
    if (pool_dir / "benchmarks.csv").is_file():
        _check_item_counts(table, read_table(pool_dir / "benchmarks.csv"))
    items = pd.DataFrame(
        {"benchmark": table["benchmark"].to_numpy(dtype=object), "item_id": table["item_id"].to_numpy(dtype=object)}
    )
    results = run["results"] if isinstance(run.get("results"), dict) else {}
    saved = run.get("options", {})
    record = RunRecord.from_json(run)
    pool = _assemble(
        str(run.get("family", results.get("family", ""))),  # format 1 kept the family at the top
        members["model"].to_numpy(dtype=object),
        params,
        items,
        matrix,
        saved_pool_options(saved),
        notes=record.notes or tuple(map(str, saved.get("left_out", []))),  # format 1: the options' left_out
    )
    pool.provenance = record.provenance
    if (pool_dir / "panel.csv").is_file():
        _load_panel(pool, pool_dir)
    return pool


def saved_pool_options(saved: Mapping[str, Any]) -> PoolOptions:
    """The options a saved pool was built with, from its ``run.json``'s ``options``: every format
    names ``missing``, ``min_models`` and (with a panel) ``irt`` alike (format 1 beside the readers'
    choices and the benchmarks left out; format 2 every field of :class:`PoolOptions`, the harness
    readers' options of its files left out here: they steered reading, not the pool)."""
    family = saved.get("family")
    min_models = saved.get("min_models", 3)
    if not isinstance(min_models, int) or isinstance(min_models, bool):
        raise EvalprismError(f"run.json, options: expected a whole number for 'min_models', got {min_models!r}")
    return PoolOptions(
        family=family if isinstance(family, str) else None,
        missing=saved.get("missing", "wrong"),
        irt=saved.get("irt"),
        min_models=min_models,
    )


def _check_item_counts(table: pd.DataFrame, benchmarks: pd.DataFrame) -> None:
    """pool.csv must hold as many items per benchmark as benchmarks.csv (written with it) lists: a
    pool.csv cut at a line end parses cleanly, and would locate models on a part of the pool."""
    if not {"benchmark", "items"} <= set(benchmarks.columns):
        raise EvalprismError("benchmarks.csv: expected the columns 'benchmark' and 'items' (write the pool again)")
    listed = pd.Series(
        pd.to_numeric(benchmarks["items"], errors="coerce").to_numpy(), index=benchmarks["benchmark"].astype(str)
    )
    found = table["benchmark"].astype(str).value_counts()
    if (
        listed.isna().any()
        or not found.reindex(listed.index, fill_value=0).eq(listed).all()
        or not set(found.index) <= set(listed.index)
    ):

        def counts(series: pd.Series) -> str:
            return ", ".join(f"{b} {int(series[b]):,}" for b in sorted(series.index))

        last = table.iloc[-1]
        raise EvalprismError(
            f"pool.csv holds {len(table):,} items ({counts(found)}) but benchmarks.csv lists "
            f"{int(listed.sum()):,} ({counts(listed)}): pool.csv is truncated or was edited (its last "
            f"row, {len(table):,}, is {last['benchmark']}, {last['item_id']}); write the pool again "
            "with `evalprism stem pool`"
        )


def _load_panel(pool: Pool, pool_dir: Path) -> None:
    """The reference panel (panel.csv) and its cached fit (irt.csv, irt_models.csv) of a saved pool."""
    panel = read_table(pool_dir / "panel.csv")
    if list(panel.columns[:2]) != ["benchmark", "item_id"] or len(panel) != len(pool.items):
        raise EvalprismError("panel.csv: expected the pool's items (benchmark, item_id, then one column per model)")
    names = [str(c) for c in panel.columns[2:]]
    values = panel[panel.columns[2:]].apply(pd.to_numeric, errors="coerce")
    matrix = values.fillna(-2).to_numpy(dtype=float)
    if not np.isin(matrix, [1, 0, -1, -2]).all():
        raise EvalprismError("panel.csv: expected 1, 0, -1 or empty in the model columns")
    pool.panel, pool.panel_models = matrix.astype(np.int8), names
    if (pool_dir / "irt.csv").is_file() and (pool_dir / "irt_models.csv").is_file():
        from evalprism.stem.irt import IRTFit

        items = read_table(pool_dir / "irt.csv")
        models = read_table(pool_dir / "irt_models.csv")
        if (
            len(items) == len(pool.items)
            and {"a", "c"} <= set(items.columns)
            and {"model", "theta"} <= set(models.columns)
        ):
            pool._irt[None] = IRTFit(
                a=items["a"].to_numpy(dtype=float),
                c=items["c"].to_numpy(dtype=float),
                theta=models["theta"].to_numpy(dtype=float),
                models=[str(m) for m in models["model"]],
                kind=pool.irt_kind or "2pl",
                info={"cached": True},
            )


def select_family(models: pd.DataFrame | str | Path, family: str | None) -> pd.DataFrame:
    """The metadata rows of ``family`` (all rows when ``family`` is None and the table holds one
    family or has no family column), validated; rows keep their 1-based file row in ``_row``."""
    meta = read_models(models)
    where = meta.attrs.get("source", "model metadata")
    meta = meta.assign(_row=np.arange(1, len(meta) + 1))
    if "family" in meta.columns:
        families = list(dict.fromkeys(meta["family"]))
        if family is not None:
            if family not in families:
                raise EvalprismError(f"{where}: no model of family '{family}' (families: {', '.join(families[:30])})")
            meta = meta[meta["family"] == family]
        elif len(families) > 1:
            raise EvalprismError(
                f"{where}: the metadata holds several families ({', '.join(families[:30])}); choose one (family)",
                parameter="family",
            )
    elif family is not None:
        raise EvalprismError(f"{where}: no 'family' column to select family '{family}' from")
    meta = meta.reset_index(drop=True)
    meta.attrs["source"] = where
    return meta


def build_pool(
    correctness: pd.DataFrame | EncodedCorrectness,
    models: pd.DataFrame | str | Path,
    options: PoolOptions | None = None,
    *,
    panel: pd.DataFrame | EncodedCorrectness | None = None,
    panel_models: list[str] | None = None,
) -> Pool:
    """The STS pool of a family: ``models`` are the family's metadata rows (model, params[, family]);
    ``correctness`` holds at least every member's scores (long table or :func:`encode_correctness`);
    ``options`` (:class:`~evalprism.stem.options.PoolOptions`): which family, what a -1 counts as,
    the fewest members, and the item-response model fitted on the panel.

    Raises :class:`EvalprismError` for a member missing from ``correctness``, a member without
    params, two members of equal size, fewer than ``min_models`` members, or an item set without a
    single significant transition sample (an audit needs none: :func:`audit_family`).

    ``panel``: correctness of other models on the same items (long table or encoded; the family's
    own rows there are ignored), stored as the pool's reference panel for the IRT estimator
    (``panel_models``: which of its models; default all but the family). ``options.irt`` applies
    only with a panel (default ``"2pl"``). The panel's fit runs when the pool is saved or first used.
    """
    options = options or PoolOptions()
    pool, source = _family_pool(correctness, models, options)
    check_applies(
        "irt",
        options.irt,
        panel is not None,
        "the item-response model is fitted on a reference panel, and none is given (panel)",
    )
    if panel is not None:
        attach_panel(pool, panel, panel_models)
    if not (pool.kind == irv_kernel.STS).any():
        members = ", ".join(pool.members["model"])
        raise EvalprismError(
            f"{source}: no significant transition sample: no item is answered wrong by the "
            f"smaller and right by the larger members of {members} (of "
            f"{len(pool.kind)} items, {(pool.kind == irv_kernel.EASY).sum()} all right, "
            f"{(pool.kind == irv_kernel.HARD).sum()} all wrong, "
            f"{(pool.kind == irv_kernel.ANOMALOUS).sum()} anomalous)"
        )
    return pool


def audit_family(
    correctness: pd.DataFrame | EncodedCorrectness,
    models: pd.DataFrame | str | Path,
    options: AuditOptions | None = None,
) -> Audit:
    """The contamination audit of a family (:class:`Audit`): its pool as :func:`build_pool` builds
    it without a panel, which need not hold a significant transition sample."""
    o = options or AuditOptions()
    pool, _ = _family_pool(
        correctness, models, PoolOptions(family=o.family, missing=o.missing, harness=o.harness, min_models=o.min_models)
    )
    return Audit(pool, o)


def _family_pool(
    correctness: pd.DataFrame | EncodedCorrectness, models: pd.DataFrame | str | Path, options: PoolOptions
) -> tuple[Pool, str]:
    """The pool of the family's items that every member answered (without a panel), and where the
    correctness came from (for messages)."""
    enc = correctness if isinstance(correctness, EncodedCorrectness) else encode_correctness(correctness)
    meta = family_members(enc, select_family(models, options.family), options.min_models)
    members = meta["model"].to_numpy(dtype=object)
    matrix, complete = enc.matrix(list(members))
    left_out = left_out_benchmarks(enc.items["benchmark"].to_numpy(dtype=object), matrix, list(members))
    if not complete.any():
        raise EvalprismError(
            f"{enc.source}: no item has a row from every member of the family, so the pool would be "
            f"empty: {'; '.join(left_out)}"
        )
    name = options.family or (str(meta["family"].iloc[0]) if "family" in meta.columns else "")
    pool = _assemble(
        name,
        members,
        meta["params"].to_numpy(dtype=float),
        enc.items[complete].reset_index(drop=True),
        matrix[complete],
        options,
        incomplete=enc.items.loc[~complete, "benchmark"].value_counts(),
        notes=tuple(left_out),
    )
    return pool, str(enc.source)


def family_members(enc: EncodedCorrectness, meta: pd.DataFrame, min_models: int) -> pd.DataFrame:
    """The family's metadata rows ordered by size, checked: every member has params and rows in
    ``enc``, at least ``min_models`` members, no two of the same size (each refusal names the row)."""
    where = meta.attrs.get("source", "model metadata")
    no_params = meta["params"].isna().to_numpy()
    if no_params.any():
        row = meta.iloc[int(np.flatnonzero(no_params)[0])]
        raise EvalprismError(
            f"{where}: row {row['_row']}: model '{row['model']}' has no params; the family is "
            "ordered by parameter count, so every member needs one"
        )
    if len(meta) < min_models:
        raise EvalprismError(
            f"{where}: the family has {len(meta)} model{'s' if len(meta) != 1 else ''}"
            f"{' (' + ', '.join(meta['model']) + ')' if len(meta) else ''}; STEM needs at least "
            f"{min_models} members of different sizes"
        )
    known = set(enc.model_names.tolist())
    unknown = [m for m in meta["model"] if m not in known]
    if unknown:
        row = meta[meta["model"] == unknown[0]].iloc[0]
        raise EvalprismError(
            f"{where}: row {row['_row']}: model '{unknown[0]}' is not in {enc.source} "
            f"(models there: {', '.join(sorted(known)[:20])}{', ...' if len(known) > 20 else ''})"
        )
    meta = meta.sort_values("params", kind="stable").reset_index(drop=True)
    same = meta["params"].duplicated(keep=False)
    if same.any():
        raise EvalprismError(
            f"{where}: {_ties(meta[same])}; the family must be ordered strictly by size: keep one "
            "model of each size (e.g. a metadata file listing only those)"
        )
    return meta


def left_out_benchmarks(bench: np.ndarray, matrix: np.ndarray, members: list[str]) -> list[str]:
    """One sentence per benchmark of the correctness data that the pool leaves out whole because no
    item of it has a row from every member (items some member lacks are left out, see
    :func:`build_pool`): which benchmark, how many items, and which members have no row for it."""
    notes = []
    codes, names = pd.factorize(pd.Series(bench), sort=True)
    for b, benchmark in enumerate(names):
        rows = matrix[codes == b]
        if (rows != -2).all(axis=1).any():
            continue
        absent = [m for j, m in enumerate(members) if (rows[:, j] == -2).all()]
        if absent:
            why = f"{', '.join(absent)} {'has' if len(absent) == 1 else 'have'} no row for it"
        else:
            why = "no item of it has a row from every member"
        notes.append(
            f"benchmark '{benchmark}' ({len(rows):,} items) is left out of the pool: {why} (every pool item "
            "needs the result of every family member)"
        )
    return notes


def _ties(tied: pd.DataFrame) -> str:
    """Each group of members with equal params, named with its size, models and metadata rows."""
    groups = [
        f"{params:g}B is shared by "
        + ", ".join(
            f"'{m}' (row {r})" for m, r in sorted(zip(group["model"], group["_row"], strict=True), key=lambda x: x[1])
        )
        for params, group in tied.groupby("params", sort=True)
    ]
    lead = (
        "two models have the same params"
        if len(tied) == 2
        else (f"{len(groups)} sizes are shared" if len(groups) > 1 else "models have the same params")
    )
    return f"{lead}: " + "; ".join(groups)


def attach_panel(pool: Pool, panel: pd.DataFrame | EncodedCorrectness, models: list[str] | None = None) -> None:
    """Align other models' correctness to the pool's items and store it as the reference panel."""
    enc = panel if isinstance(panel, EncodedCorrectness) else encode_correctness(panel)
    family = set(pool.members["model"])
    names = [m for m in (models if models is not None else enc.model_names.tolist()) if m not in family]
    known = set(enc.model_names.tolist())
    unknown = [m for m in names if m not in known]
    if unknown:
        raise EvalprismError(f"{enc.source}: panel model '{unknown[0]}' is not there")
    if not names:
        raise EvalprismError(
            f"{enc.source}: the panel holds no model outside the family ({', '.join(pool.members['model'])})"
        )
    matrix, _ = enc.matrix(names)
    keys = pd.MultiIndex.from_frame(enc.items[["benchmark", "item_id"]])
    where = keys.get_indexer(pd.MultiIndex.from_frame(pool.items[["benchmark", "item_id"]]))
    aligned = np.where((where >= 0)[:, None], matrix[np.maximum(where, 0)], -2).astype(np.int8)
    has = (aligned != -2).any(axis=0)
    if not has.any():
        raise EvalprismError(
            f"{enc.source}: no panel model has a row for any pool item (the panel must answer "
            "the same items, matched by benchmark and item_id)"
        )
    pool.panel = aligned[:, has]
    pool.panel_models = [n for n, h in zip(names, has, strict=True) if h]
    pool._irt.clear()


def _assemble(
    family: str,
    members: np.ndarray,
    params: np.ndarray,
    items: pd.DataFrame,
    matrix: np.ndarray,
    options: PoolOptions,
    incomplete: pd.Series | None = None,
    notes: tuple[str, ...] = (),
) -> Pool:
    """Classify the items and summarise the benchmarks (shared by :func:`build_pool` and :meth:`Pool.load`)."""
    kind, ti = irv_kernel.classify(matrix, options.missing)
    bench_code, bench_names = pd.factorize(items["benchmark"], sort=True)
    bench_names = np.asarray(bench_names, dtype=object)
    nb = len(bench_names)
    right = matrix == 1
    counts = np.stack(
        [np.bincount(bench_code, weights=right[:, j], minlength=nb) for j in range(right.shape[1])], axis=1
    )
    n_items = np.bincount(bench_code, minlength=nb)
    scores = 100.0 * counts / np.maximum(n_items, 1)[:, None]
    d = discriminability(scores, params)
    w = weights(d)
    kind_counts = np.bincount(bench_code * len(KINDS) + kind, minlength=nb * len(KINDS)).reshape(nb, len(KINDS))
    considered = n_items - kind_counts[:, irv_kernel.EXCLUDED]
    share = kind_counts / np.maximum(considered, 1)[:, None]
    benchmarks = pd.DataFrame(
        {
            "benchmark": bench_names,
            "items": n_items,
            "incomplete": [int(incomplete.get(b, 0)) if incomplete is not None else 0 for b in bench_names],
            "excluded": kind_counts[:, irv_kernel.EXCLUDED],
            "anomalous": kind_counts[:, irv_kernel.ANOMALOUS],
            "anomaly_rate": share[:, irv_kernel.ANOMALOUS],
            "sts": kind_counts[:, irv_kernel.STS],
            "easy_share": share[:, irv_kernel.EASY],
            "intermediate_share": share[:, irv_kernel.STS] + share[:, irv_kernel.ANOMALOUS],
            "hard_share": share[:, irv_kernel.HARD],
            "D": d,
            "weight": w,
        }
    )
    score_frame = pd.DataFrame(scores, index=pd.Index(bench_names, name="benchmark"), columns=list(members))
    ref = reference_scores(scores, w)
    member_frame = pd.DataFrame(
        {"model": members, "params": params, "position": np.arange(1, len(members) + 1), "reference_score": ref}
    )
    return Pool(
        family=family,
        members=member_frame,
        items=items,
        irv=matrix,
        kind=kind,
        ti=ti,
        bench_code=bench_code.astype(np.int64),
        benchmarks=benchmarks,
        scores=score_frame,
        options=options,
        notes=notes,
    )
