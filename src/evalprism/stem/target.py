"""A model to locate, aligned to the pool's items (:class:`Target`), and which of them it can be scored on.

:func:`target_of` takes one model's answers and gives, per pool item, its outcome (1 right, 0
wrong, -1 no answer, :data:`NO_ROW` when it has no row), its full-benchmark score per pool
benchmark, its weighted reference score and the ground truth: the number of family members whose
reference score is below its own. Every design, estimator and localization starts from a
:class:`Target`; :func:`usable_items` is the one rule of which items count, and
:func:`answered_whole_pool` says whether the full-pool truth (and so validation by trials) exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.correctness import EncodedCorrectness, encode_correctness
from evalprism.stem.discriminability import reference_scores

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool

NO_ROW = -2  # outcome of a pool item the model has no row for


@dataclass(frozen=True)
class Target:
    """A model to locate, aligned to the pool's items: ``outcome`` per pool item (1, 0, -1, or -2
    when it has no row), its full-benchmark ``scores`` (percent per pool benchmark), weighted
    ``reference_score`` and ``truth`` = members with a lower reference score (both None for a model
    without answers on the whole pool: :meth:`without_truth`)."""

    model: str
    outcome: np.ndarray
    scores: np.ndarray
    reference_score: float | None
    truth: int | None

    def without_truth(self) -> Target:
        """The same answers with no full-pool truth (a model that answered part of the pool: its
        score on the answered items is not its full-pool score)."""
        return replace(self, reference_score=None, truth=None)


def target_of(pool: Pool, correctness: pd.DataFrame | EncodedCorrectness, model: str | None = None) -> Target:
    """Align one model of ``correctness`` to ``pool`` and compute its ground-truth position."""
    enc = correctness if isinstance(correctness, EncodedCorrectness) else encode_correctness(correctness)
    names = enc.model_names.tolist()
    if model is None:
        if len(names) != 1:
            raise EvalprismError(
                f"{enc.source}: holds {len(names)} models ({', '.join(names[:20])}); choose one (model)",
                parameter="model",
            )
        model = names[0]
    if model not in names:
        raise EvalprismError(
            f"{enc.source}: model '{model}' is not there (models: {', '.join(names[:20])}"
            f"{', ...' if len(names) > 20 else ''})"
        )
    own = enc.scores_of(model)
    keys = pd.MultiIndex.from_frame(enc.items[["benchmark", "item_id"]])
    where = keys.get_indexer(pd.MultiIndex.from_frame(pool.items[["benchmark", "item_id"]]))
    outcome = np.where(where >= 0, own[np.maximum(where, 0)], NO_ROW).astype(np.int8)
    has = outcome != NO_ROW
    nb = len(pool.benchmarks)
    answered = np.bincount(pool.bench_code, weights=has, minlength=nb)
    lacking = [b for b, k in zip(pool.benchmarks["benchmark"], answered, strict=True) if k == 0]
    if lacking:
        raise EvalprismError(
            f"{enc.source}: model '{model}' has no rows for benchmark{'s' if len(lacking) > 1 else ''} "
            f"{', '.join(lacking)} of the pool; its full-pool score needs answers on at least one "
            "item of every pool benchmark"
        )
    if not (outcome[has] >= 0).any():
        raise EvalprismError(
            f"{enc.source}: model '{model}' answered none of the pool's items: all its "
            f"{int(has.sum()):,} rows on them are -1 (no answer); there is nothing to locate it by "
            "(was its run complete?)"
        )
    right = np.bincount(pool.bench_code, weights=outcome == 1, minlength=nb)
    scores = 100.0 * right / answered
    ref = float(reference_scores(scores[:, None], pool.weights)[0])
    truth = int((pool.members["reference_score"].to_numpy() < ref).sum())
    return Target(model=model, outcome=outcome, scores=scores, reference_score=ref, truth=truth)


def usable_items(pool: Pool, target: Target) -> np.ndarray:
    """Which pool items the model can be scored on: those with a row, and under ``missing="exclude"``
    only those it answered (a -1 is outside the population there, wrong otherwise)."""
    usable = target.outcome != NO_ROW
    if pool.missing == "exclude":
        usable &= target.outcome != -1
    return usable


def answered_whole_pool(target: Target) -> bool:
    """True when the model has an answer row for every pool item (the validation view applies)."""
    return bool((target.outcome != NO_ROW).all())
