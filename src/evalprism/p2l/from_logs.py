"""Battles from graded evaluation logs: what `p2l train` and `p2l fit` read when users have scores,
not pairwise verdicts.

Users rarely have pairwise battles; they have lm-evaluation-harness ``--log_samples`` directories,
inspect_ai logs or score tables (``model, item_id, score[, benchmark][, prompt]``) of several models
on the same items. Every two models scored on the same item form a battle:

- the higher score wins; equal scores are a ``tie``, and both 0 a ``tie (bothbad)`` (the outcome
  grounded Rao-Kupper, ``grk``, reads as "both bad"; ``rk`` merges it with the ties, ``bt-tie``
  halves it, ``bt`` leaves it out);
- an item's several scores of one model (samples, epochs) are averaged first; -1 (no answer) counts
  as 0, as in `evalprism compare`;
- the battle's prompt is the item's text from the logs (lm-eval: the context of the item's first
  request; inspect_ai: the sample's input; a table: its ``prompt`` column), the first one in model
  order when models saw different text (chat templates);
- an item scored by one model only gives no battle.

The scores are read by the one item-level reader (:func:`evalprism.io.items.read_items`, as
`evalprism compare` reads them), so every format and rule of its registry holds here. The result is
the canonical battles frame (``prompt, model_a, model_b, winner`` plus ``benchmark, item_id``) that
the battle readers produce, so training and the marginal fit need only a dispatch
(:func:`read_battles_input`, a :class:`~evalprism.io.battles.BattlesInput`); what the item reader
chose and noted and the conversion's counts are its provenance, which the battle reader puts first
among its notes (printed, and kept in ``run.json`` under ``read``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.battles import BattlesInput
from evalprism.io.inspect_logs import looks_like_inspect_json
from evalprism.io.record import Provenance
from evalprism.io.tables import read_table

if TYPE_CHECKING:
    from evalprism.io.harness_options import HarnessOptions

__all__ = ["Conversion", "battles_from_scores", "is_graded", "read_battles_input"]

#: the battle columns the conversion writes, in order (the canonical battles columns first)
BATTLE_COLUMNS = ["prompt", "model_a", "model_b", "winner", "benchmark", "item_id"]


@dataclass(frozen=True)
class Conversion:
    """What the conversion made of the scores: items (with at least two models), models, battles and
    their outcomes, and the items left out (scored by one model) or without prompt text."""

    items: int
    models: int
    battles: int
    decisive: int
    ties: int
    both_bad: int
    single_model_items: int
    items_without_prompt: int

    def line(self, where: str) -> str:
        """One line for the read notes (and ``run.json``)."""
        left = (
            f"; {self.single_model_items:,} item(s) scored by one model only left out"
            if self.single_model_items
            else ""
        )
        text = f"; {self.items_without_prompt:,} item(s) without prompt text" if self.items_without_prompt else ""
        return (
            f"{where}: graded scores read as battles (every two models scored on the same item; higher score "
            f"wins, equal scores a tie, both 0 'tie (bothbad)'): {self.items:,} items, {self.models} models, "
            f"{self.battles:,} battles: {self.decisive:,} decisive, {self.ties:,} ties, {self.both_bad:,} both bad"
            f"{left}{text}"
        )


def battles_from_scores(
    scores: pd.DataFrame, *, where: str = "scores", require_prompts: bool = True
) -> tuple[pd.DataFrame, Conversion]:
    """Battles from a long score table (``run, benchmark, item_id, score`` in 0..1, optional
    ``prompt``; :func:`~evalprism.io.items.read_items`' table): every two models scored on the same
    item, in model-name order within an item (``model_a`` the first). ``require_prompts``: refuse an
    item without prompt text, naming the ``prompt`` column (P2L trains on the prompt); otherwise the
    battles carry no ``prompt`` column when any item lacks one (the marginal fit reads none)."""
    has_prompt = "prompt" in scores.columns
    keys = ["benchmark", "item_id", "run"]
    frame = scores[keys + ["score"] + (["prompt"] if has_prompt else [])].copy()
    for k in keys:
        frame[k] = frame[k].astype(str)
    frame["score"] = frame["score"].astype(float).replace(-1.0, 0.0)  # no answer is wrong (as read_items says)
    if has_prompt:  # blank text is no text
        text = frame["prompt"]
        frame["prompt"] = text.where(text.map(lambda v: isinstance(v, str) and bool(v.strip())), None)
    per = frame.groupby(keys, sort=True, observed=True)
    mean = per["score"].mean().reset_index()
    if has_prompt:
        mean["prompt"] = per["prompt"].first().to_numpy(dtype=object)  # first() skips missing values
    item_code, items = pd.factorize(pd.MultiIndex.from_frame(mean[["benchmark", "item_id"]]), sort=False)
    sizes = np.bincount(item_code, minlength=len(items))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # mean is sorted by item, then model
    left, right = [], []
    for k in np.unique(sizes[sizes >= 2]):
        i, j = np.triu_indices(int(k), 1)
        base = starts[sizes == k]
        left.append((base[:, None] + i[None, :]).ravel())
        right.append((base[:, None] + j[None, :]).ravel())
    a = np.concatenate(left) if left else np.zeros(0, np.int64)
    b = np.concatenate(right) if right else np.zeros(0, np.int64)
    if a.size == 0:
        raise EvalprismError(
            f"{where}: no item is scored by two or more models, so no battle can be formed "
            f"({len(items):,} items, {mean['run'].nunique()} model(s)); P2L needs several models "
            "scored on the same items"
        )
    s_a, s_b = mean["score"].to_numpy(float)[a], mean["score"].to_numpy(float)[b]
    winner = np.where(s_a > s_b, "model_a", np.where(s_a < s_b, "model_b", np.where(s_a == 0, "tie (bothbad)", "tie")))
    runs = mean["run"].to_numpy(dtype=object)
    battles = pd.DataFrame(
        {
            "model_a": runs[a],
            "model_b": runs[b],
            "winner": winner,
            "benchmark": mean["benchmark"].to_numpy(dtype=object)[a],
            "item_id": mean["item_id"].to_numpy(dtype=object)[a],
        }
    )
    paired = np.zeros(len(items), bool)
    paired[item_code[a]] = True
    if has_prompt:
        item_prompt = pd.Series(mean["prompt"].to_numpy(dtype=object)).groupby(item_code).first()
        # groupby.first skips None: an item has text when any of its models saw text
        texts = item_prompt.reindex(range(len(items))).to_numpy(dtype=object)
    else:
        texts = np.full(len(items), None, dtype=object)
    missing = paired & pd.isna(pd.Series(texts)).to_numpy()
    if missing.any() and require_prompts:
        bench, item = items[int(np.flatnonzero(missing)[0])]
        what = (
            "has no 'prompt' column"
            if not has_prompt
            else f"has no prompt text for {int(missing.sum()):,} of {int(paired.sum()):,} items (first: benchmark "
            f"'{bench}', item '{item}')"
        )
        raise EvalprismError(
            f"{where} {what}: P2L learns from the prompt, so every item needs its text (a score "
            "table: add a 'prompt' column; lm-eval samples and inspect logs carry it); "
            "`p2l fit` (the marginal leaderboard) needs none"
        )
    if not missing.any():
        battles.insert(0, "prompt", texts[item_code[a]])
    counts = pd.Series(winner).value_counts()
    conversion = Conversion(
        items=int(paired.sum()),
        models=int(pd.unique(np.concatenate([runs[a], runs[b]])).size),
        battles=int(a.size),
        decisive=int(counts.get("model_a", 0) + counts.get("model_b", 0)),
        ties=int(counts.get("tie", 0)),
        both_bad=int(counts.get("tie (bothbad)", 0)),
        single_model_items=int((~paired).sum()),
        items_without_prompt=int(missing.sum()),
    )
    battles.attrs["source"] = where
    return battles, conversion


def is_graded(path: Path, table: pd.DataFrame | None = None) -> bool:
    """True when ``path`` (or the table read from it) holds graded scores rather than battles: an
    lm-eval or inspect_ai output directory, an inspect log, or a table with ``item_id`` and ``score``
    and no ``winner``."""
    if path.is_dir() or path.suffix.lower() == ".eval":
        return True
    if path.suffix.lower() == ".json" and looks_like_inspect_json(path):
        return True
    return table is not None and {"item_id", "score"} <= set(table.columns) and "winner" not in table.columns


def read_battles_input(
    path: str | Path, *, prompts: bool = True, harness: HarnessOptions | None = None
) -> BattlesInput:
    """What `p2l train` (``prompts``) and `p2l fit` read: a battles file as
    :func:`~evalprism.io.tables.read_table` reads it, or graded logs and score tables converted to
    battles (:func:`battles_from_scores`), with the provenance of the scores read and converted.
    ``harness``: how the harness readers read lm-eval samples and inspect_ai logs (the metric, filter,
    model names, scorer, epochs; default: the readers' own choices, said in the read notes); an option
    given for a battles file, which no harness reader reads, is refused."""
    from evalprism.io.harness_options import HarnessOptions
    from evalprism.io.items import read_items

    harness = harness or HarnessOptions()
    path = Path(path)  # a missing or unreadable file is refused by the reader that reads it, by name
    table = None if is_graded(path) else read_table(path)  # harness output is not read as a table
    if table is not None and not is_graded(path, table):
        harness.check_applies([], f"{path} holds battles, whose verdicts are read as they are")
        return BattlesInput(table)
    scores = read_items([table if table is not None else path], harness=harness, prompts=True)
    battles, conversion = battles_from_scores(scores.table, where=str(path), require_prompts=prompts)
    return BattlesInput(battles, scores.provenance + Provenance(notes=(conversion.line(str(path)),)), from_scores=True)
