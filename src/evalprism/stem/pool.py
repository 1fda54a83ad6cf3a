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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.correctness import EncodedCorrectness, encode_correctness, read_correctness, read_models
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table
from evalprism.io.text import read_text
from evalprism.stats import irv as irv_kernel
from evalprism.stem.discriminability import discriminability, reference_scores, weights
from evalprism.stats.irv import KINDS, Missing


@dataclass
class Pool(SavedResult):
    """A reference family's items, IRVs, kinds and transition indices, with per-benchmark summaries.

    ``irv``: items x members (int8, members ordered by params); ``kind``: code into
    :data:`~evalprism.stats.irv.KINDS`; ``ti``: 1..n+1 for pool items (easy/sts/hard), 0 otherwise;
    ``items``: (benchmark, item_id) per row; ``members``: model, params, position, reference_score;
    ``benchmarks``: the per-benchmark table; ``scores``: benchmarks x members, percent. Saved:
    pool.csv, benchmarks.csv, models.csv, anomalies.csv, run.json and report.html.
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
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def n(self) -> int:
        """Number of family members."""
        return len(self.members)

    @property
    def weights(self) -> np.ndarray:
        return self.benchmarks["weight"].to_numpy(dtype=float)

    def pool_frame(self) -> pd.DataFrame:
        """``pool.csv``: benchmark, item_id, irv, ti (empty for anomalous/excluded), anomalous, kind."""
        return pd.DataFrame({
            "benchmark": self.items["benchmark"].to_numpy(),
            "item_id": self.items["item_id"].to_numpy(),
            "irv": irv_kernel.irv_text(self.irv),
            "ti": pd.arrays.IntegerArray(self.ti.astype(np.int64), mask=self.ti == 0),
            "anomalous": self.kind == irv_kernel.ANOMALOUS,
            "kind": np.asarray(KINDS, dtype=object)[self.kind],
        })

    def anomalies(self) -> pd.DataFrame:
        """The per-item contamination audit: anomalous items, most inversions first. ``inversions``
        counts member pairs (smaller right, larger wrong); ``right_members`` names who was right."""
        rows = np.flatnonzero(self.kind == irv_kernel.ANOMALOUS)
        sub = self.irv[rows]
        names = self.members["model"].to_numpy()
        right = [", ".join(names[np.flatnonzero(r == 1)]) for r in sub]
        frame = pd.DataFrame({
            "benchmark": self.items["benchmark"].to_numpy()[rows],
            "item_id": self.items["item_id"].to_numpy()[rows],
            "irv": irv_kernel.irv_text(sub),
            "inversions": irv_kernel.inversions(sub),
            "right_members": right,
        })
        return frame.sort_values(["inversions", "benchmark"], ascending=[False, True], kind="stable").reset_index(drop=True)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"pool": self.pool_frame(), "benchmarks": self.benchmarks, "models": self.members_frame(),
                "anomalies": self.anomalies()}

    def members_frame(self) -> pd.DataFrame:
        """Members with their per-benchmark scores (percent) beside the reference score."""
        out = self.members.copy()
        for bench in self.scores.index:
            out[f"score:{bench}"] = self.scores.loc[bench].to_numpy()
        return out

    def run_info(self) -> dict[str, Any]:
        return {"family": self.family, "options": self.options}

    def report(self) -> Any:
        from evalprism.stem.report import pool_report

        return pool_report(self)

    @classmethod
    def load(cls, pool_dir: str | Path) -> Pool:
        """A pool saved by :meth:`save` (``pool.csv``, ``models.csv``, ``run.json``); anything wrong with
        them is one message, "not a valid evalprism pool directory: <what>"."""
        pool_dir = Path(pool_dir)
        if not pool_dir.is_dir():
            raise EvalprismError(f"{pool_dir}: no such pool directory (write one with `evalprism stem pool`)")
        try:
            return _load_pool(pool_dir)
        except EvalprismError as exc:
            raise EvalprismError(f"{pool_dir}: not a valid evalprism pool directory: {exc}") from None

    def audit(self) -> Audit:
        """The contamination report of this pool."""
        return Audit(self)


@dataclass
class Audit(SavedResult):
    """Contamination audit of a family: per-benchmark anomaly rates and the per-item anomaly list.
    Saved: benchmarks.csv, anomalies.csv, run.json and report.html."""

    output_kind: ClassVar[OutputKind] = OutputKind.STEM_AUDIT

    pool: Pool

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"benchmarks": self.pool.benchmarks, "anomalies": self.pool.anomalies()}

    def run_info(self) -> dict[str, Any]:
        return self.pool.run_info()

    def report(self) -> Any:
        from evalprism.stem.report import pool_report

        return pool_report(self.pool, audit=True)


POOL_MEMBERS_SCHEMA = Schema("pool members", (Column("model", "key"),
                                               Column("params", "number", description="parameters in billions")))
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
        raise EvalprismError("models.csv, column 'params': expected positive parameter counts in increasing order "
                             "(the members ordered by size)")
    table = POOL_ITEMS_SCHEMA.validate(read_table(pool_dir / "pool.csv"), source="pool.csv")
    matrix = irv_kernel.parse_irv(table["irv"].tolist(), len(members), "pool.csv")
    items = pd.DataFrame({"benchmark": table["benchmark"].to_numpy(dtype=object),
                          "item_id": table["item_id"].to_numpy(dtype=object)})
    return _assemble(str(run.get("family", "")), members["model"].to_numpy(dtype=object), params, items, matrix,
                     run.get("options", {}))


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
            raise EvalprismError(f"{where}: the metadata holds several families ({', '.join(families[:30])}); "
                                 "choose one (family)", parameter="family")
    elif family is not None:
        raise EvalprismError(f"{where}: no 'family' column to select family '{family}' from")
    meta = meta.reset_index(drop=True)
    meta.attrs["source"] = where
    return meta


def build_pool(correctness: pd.DataFrame | EncodedCorrectness, models: pd.DataFrame | str | Path, *,
               family: str | None = None, missing: Missing = "wrong", min_models: int = 3,
               require_sts: bool = True) -> Pool:
    """The STS pool of a family: ``models`` are the family's metadata rows (model, params[, family]);
    ``correctness`` holds at least every member's scores (long table or :func:`encode_correctness`).

    Raises :class:`EvalprismError` for a member missing from ``correctness``, a member without
    params, two members of equal size, fewer than ``min_models`` members, or (``require_sts``) an
    item set without a single significant transition sample.
    """
    if missing not in ("wrong", "exclude"):
        raise EvalprismError(f"missing: expected 'wrong' or 'exclude', got {missing!r}")
    enc = correctness if isinstance(correctness, EncodedCorrectness) else encode_correctness(correctness)
    meta = select_family(models, family)
    where = meta.attrs.get("source", "model metadata")
    no_params = meta["params"].isna().to_numpy()
    if no_params.any():
        row = meta.iloc[int(np.flatnonzero(no_params)[0])]
        raise EvalprismError(f"{where}: row {row['_row']}: model '{row['model']}' has no params; the family is "
                             "ordered by parameter count, so every member needs one")
    if len(meta) < min_models:
        raise EvalprismError(f"{where}: the family has {len(meta)} model{'s' if len(meta) != 1 else ''}"
                             f"{' (' + ', '.join(meta['model']) + ')' if len(meta) else ''}; STEM needs at least "
                             f"{min_models} members of different sizes")
    known = set(enc.model_names.tolist())
    unknown = [m for m in meta["model"] if m not in known]
    if unknown:
        row = meta[meta["model"] == unknown[0]].iloc[0]
        raise EvalprismError(f"{where}: row {row['_row']}: model '{unknown[0]}' is not in {enc.source} "
                             f"(models there: {', '.join(sorted(known)[:20])}{', ...' if len(known) > 20 else ''})")
    meta = meta.sort_values("params", kind="stable").reset_index(drop=True)
    same = meta["params"].duplicated(keep=False)
    if same.any():
        tied = meta[same]
        raise EvalprismError(f"{where}: models {', '.join(tied['model'])} have the same params "
                             f"({tied['params'].iloc[0]:g}B); the family must be ordered strictly by size")
    members = meta["model"].to_numpy(dtype=object)
    matrix, complete = enc.matrix(list(members))
    name = family or (str(meta["family"].iloc[0]) if "family" in meta.columns else "")
    pool = _assemble(name, members, meta["params"].to_numpy(dtype=float), enc.items[complete].reset_index(drop=True),
                     matrix[complete], {"missing": missing, "min_models": min_models},
                     incomplete=enc.items.loc[~complete, "benchmark"].value_counts())
    if require_sts and not (pool.kind == irv_kernel.STS).any():
        raise EvalprismError(f"{enc.source}: no significant transition sample: no item is answered wrong by the "
                             f"smaller and right by the larger members of {', '.join(members)} (of "
                             f"{len(pool.kind)} items, {(pool.kind == irv_kernel.EASY).sum()} all right, "
                             f"{(pool.kind == irv_kernel.HARD).sum()} all wrong, "
                             f"{(pool.kind == irv_kernel.ANOMALOUS).sum()} anomalous)")
    return pool


def _assemble(family: str, members: np.ndarray, params: np.ndarray, items: pd.DataFrame, matrix: np.ndarray,
              options: dict[str, Any], incomplete: pd.Series | None = None) -> Pool:
    """Classify the items and summarise the benchmarks (shared by :func:`build_pool` and :meth:`Pool.load`)."""
    missing = options.get("missing", "wrong")
    kind, ti = irv_kernel.classify(matrix, missing)
    bench_code, bench_names = pd.factorize(items["benchmark"], sort=True)
    bench_names = np.asarray(bench_names, dtype=object)
    nb = len(bench_names)
    right = (matrix == 1)
    counts = np.stack([np.bincount(bench_code, weights=right[:, j], minlength=nb) for j in range(right.shape[1])],
                      axis=1)
    n_items = np.bincount(bench_code, minlength=nb)
    scores = 100.0 * counts / np.maximum(n_items, 1)[:, None]
    d = discriminability(scores, params)
    w = weights(d)
    kind_counts = np.bincount(bench_code * len(KINDS) + kind, minlength=nb * len(KINDS)).reshape(nb, len(KINDS))
    considered = n_items - kind_counts[:, irv_kernel.EXCLUDED]
    share = kind_counts / np.maximum(considered, 1)[:, None]
    benchmarks = pd.DataFrame({
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
    })
    score_frame = pd.DataFrame(scores, index=pd.Index(bench_names, name="benchmark"), columns=list(members))
    ref = reference_scores(scores, w)
    member_frame = pd.DataFrame({"model": members, "params": params, "position": np.arange(1, len(members) + 1),
                                 "reference_score": ref})
    return Pool(family=family, members=member_frame, items=items, irv=matrix, kind=kind, ti=ti,
                bench_code=bench_code.astype(np.int64), benchmarks=benchmarks, scores=score_frame, options=dict(options))


def build_pool_from_files(correctness: str | Path, models: str | Path, *, family: str | None = None,
                    missing: Missing = "wrong", metric: str = "acc", lm_eval_filter: str | None = None,
                    require_sts: bool = True) -> Pool:
    """:func:`build_pool` from a correctness file or directory (any adapter of
    :func:`~evalprism.io.correctness.read_correctness`) and a metadata table."""
    table = read_correctness(correctness, metric=metric, lm_eval_filter=lm_eval_filter)
    return build_pool(table, models, family=family, missing=missing, require_sts=require_sts)
