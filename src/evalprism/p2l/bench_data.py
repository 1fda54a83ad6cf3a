"""Graded items as a router benchmark reads them: one quality matrix (items x models) per split.

A router benchmark values a policy *pointwise* (RouterBench, RouterArena, LLMRouterBench): every model
is scored on every item, and a policy's value on an item is the score of the model it routes to. The
inputs are whatever the one item-level reader reads (:func:`evalprism.io.items.read_items`: score
tables ``model,item_id,score[,benchmark],prompt``, lm-eval ``--log_samples`` directories, inspect_ai
logs), with the items' text. Here they become :class:`GradedItems`: an item's several scores of one
model (samples, epochs) are averaged; an item not scored by every model is left out and counted (its
pointwise value is undefined for a policy that routes to a missing model). A score table with a ``cost``
column (what answering the item cost, e.g. its tokens at the model's prices) gives each item its own cost
per model (``item_cost``, averaged over samples like the score). Pairwise battle files have
no pointwise value: :func:`read_graded` refuses them; ``p2l bench`` reads two battles files with
:mod:`evalprism.p2l.bench_battles` instead and values policies by held-out win rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import Input, read_items
from evalprism.io.record import Provenance
from evalprism.p2l.from_logs import is_graded


@dataclass(frozen=True)
class GradedItems:
    """One split: ``quality`` (n, M) in 0..1, the ``models`` (columns), each item's ``benchmark``,
    ``item_id`` and ``prompt``; ``incomplete`` items left out (not scored by every model);
    ``provenance`` what the reader read and chose; ``item_cost`` (n, M) each item's cost per model,
    where the input has a cost column (None: it has none)."""

    quality: np.ndarray
    models: tuple[str, ...]
    benchmark: np.ndarray
    item_id: np.ndarray
    prompt: list[str]
    incomplete: int
    provenance: Provenance
    item_cost: np.ndarray | None = None

    @property
    def n_items(self) -> int:
        return int(self.quality.shape[0])

    def keys(self) -> pd.Index:
        """(benchmark, item_id) of every item, to find items in both splits."""
        return pd.MultiIndex.from_arrays([self.benchmark, self.item_id])

    def columns(self, models: Sequence[str]) -> GradedItems:
        """The same items with the columns of ``models`` in that order (each must be here)."""
        pos = [self.models.index(m) for m in models]
        return GradedItems(
            self.quality[:, pos],
            tuple(models),
            self.benchmark,
            self.item_id,
            self.prompt,
            self.incomplete,
            self.provenance,
            None if self.item_cost is None else self.item_cost[:, pos],
        )

    def mean_cost(self) -> np.ndarray | None:
        """Each model's mean cost over the items (M,), where the items carry costs."""
        return None if self.item_cost is None else self.item_cost.mean(axis=0)


def refuse_battles(path: Input, role: str) -> None:
    """A battles table (``winner`` column) has no pointwise value: one message naming the command that
    values policies on battles."""
    if isinstance(path, pd.DataFrame) or not Path(path).is_file() or is_graded(Path(path)):
        return
    from evalprism.io.tables import read_table

    table = read_table(path)
    if "winner" in table.columns:
        raise EvalprismError(
            f"{path} ({role}): holds pairwise battles (a 'winner' column); `p2l bench` values routers pointwise "
            "and needs graded items, every model scored on each item (a model,item_id,score,prompt table, lm-eval "
            "or inspect_ai logs). Battles are valued by held-out win rate when both splits are battles files"
        )


def read_graded(path: Input, role: str, harness: HarnessOptions | None = None) -> GradedItems:
    """One split read as graded items (module docstring); ``role`` names it in messages (TRAIN, HELDOUT)."""
    refuse_battles(path, role)
    items = read_items([path], harness=harness, prompts=True, costs=True)
    return graded_matrix(items.table, f"{path if not isinstance(path, pd.DataFrame) else role}", items.provenance)


def graded_matrix(table: pd.DataFrame, where: str, provenance: Provenance | None = None) -> GradedItems:
    """The long table of :func:`read_items` (``run, benchmark, item_id, score, prompt``) as a quality
    matrix over the items every model scored (module docstring)."""
    if "prompt" not in table.columns:
        raise EvalprismError(
            f"{where}: has no prompt text: the routers learn from the prompt, so every item needs its text "
            "(a score table: add a 'prompt' column; lm-eval samples and inspect logs carry it)"
        )
    keys = ["benchmark", "item_id"]
    wide = table.pivot_table(index=keys, columns="run", values="score", aggfunc="mean", sort=True)
    models = tuple(str(m) for m in wide.columns)
    if len(models) < 2:
        raise EvalprismError(f"{where}: {len(models)} model(s); routing needs at least two models scored on the items")
    complete = wide.notna().all(axis=1).to_numpy()
    if not complete.any():
        raise EvalprismError(f"{where}: no item is scored by every one of its {len(models)} models")
    wide = wide[complete]
    text = table.dropna(subset=["prompt"]).groupby(keys, sort=True)["prompt"].first()
    prompts = text.reindex(wide.index)
    blank = prompts.map(lambda v: not isinstance(v, str) or not v.strip()).to_numpy(dtype=bool)
    if blank.any():
        bench, item = wide.index[int(np.flatnonzero(blank)[0])]
        raise EvalprismError(
            f"{where}: column 'prompt': no text for {int(blank.sum()):,} item(s) (first: benchmark '{bench}', "
            f"item '{item}'); every item needs its prompt"
        )
    index = wide.index.to_frame(index=False)
    item_cost = None
    if "cost" in table.columns:
        spent = table.pivot_table(index=keys, columns="run", values="cost", aggfunc="mean", sort=True)
        item_cost = spent.reindex(index=wide.index, columns=wide.columns).to_numpy(dtype=np.float64)
    return GradedItems(
        quality=wide.to_numpy(dtype=np.float64),
        models=models,
        benchmark=index["benchmark"].astype(str).to_numpy(),
        item_id=index["item_id"].astype(str).to_numpy(),
        prompt=[str(p) for p in prompts],
        incomplete=int((~complete).sum()),
        provenance=provenance or Provenance(),
        item_cost=item_cost,
    )


def aligned_splits(train: GradedItems, heldout: GradedItems, where: tuple[str, str]) -> GradedItems:
    """``heldout`` with the training models' columns: the same models in both splits, and no item in
    both (a router valued on an item it was trained on is not held out)."""
    missing = [m for m in train.models if m not in heldout.models]
    extra = [m for m in heldout.models if m not in train.models]
    if missing or extra:
        what = f"not scored in {where[1]}: {', '.join(missing)}" if missing else ""
        what += ("; " if what and extra else "") + (f"not in {where[0]}: {', '.join(extra)}" if extra else "")
        raise EvalprismError(f"the two splits score different models ({what}); both need the same models")
    shared = train.keys().intersection(heldout.keys())
    if len(shared):
        bench, item = shared[0]
        raise EvalprismError(
            f"{where[1]}: {len(shared):,} item(s) are also in {where[0]} (first: benchmark '{bench}', item "
            f"'{item}'): held-out items must not be trained on"
        )
    return heldout.columns(train.models)
