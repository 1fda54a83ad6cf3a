"""Pairwise battles as a router benchmark reads them, and their win-rate valuation.

``evalprism p2l bench`` values routers pointwise on graded items (:mod:`evalprism.p2l.bench_data`). A
battles file (``prompt, model_a, model_b, winner``) scores only the two models of each battle, a few of
the models per prompt, so here both splits are battles and:

- **what the baselines learn**: each training prompt gives every model that fought on it its mean
  result there (a win 1, a loss 0, a tie ½, *both bad* ½ too: the same rule as the held-out value
  below, so the routers learn the quantity they are valued on; a soft label its expected result),
  a sparse pointwise target (prompts x models, NaN where a model did not fight on the prompt). Every
  baseline of :mod:`evalprism.p2l.routers` fits with missing entries; RouteLLM's ``mf`` learns from the
  decisive battles themselves (its own pairwise loss), ties carrying no label as in RouteLLM;
- **how a policy is valued**: by the held-out win rate that ``p2l evaluate --costs`` uses
  (:func:`evalprism.p2l.evaluate.held_out_scores` and
  :func:`evalprism.stats.policy_value.policy_value`: a model's score on a held-out prompt is its win
  rate in that prompt's battles, a draw that lands on a model without a battle there is excluded and
  counted; SEs and paired differences by prompt, :func:`~evalprism.stats.policy_value.paired_value_difference`).

Prompts are the items (a prompt's battles are one unit); a ``category`` column, where the battles carry
one, is the prompt's benchmark for the per-benchmark leaderboard (its first category when its battles
name several); otherwise every prompt is in one category and that leaderboard is the marginal one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import Input
from evalprism.io.record import Provenance
from evalprism.p2l.bench_data import GradedItems
from evalprism.p2l.from_logs import is_graded
from evalprism.stats.outcomes import A_WINS, B_WINS

#: the valuation's name in the summary and the report
WIN_RATE = "win rate (pairwise battles)"
#: every prompt's category when the battles name none
ONE_CATEGORY = "all"


@dataclass(frozen=True)
class BattleSplit:
    """One split of battles as the benchmark reads it: ``items`` the prompts as graded items (quality:
    each model's mean result on the prompt, NaN where it did not fight), ``battles`` their number, and
    the decisive battles (``pair_prompt`` the prompt's row, ``winner``, ``loser``) for RouteLLM's mf."""

    items: GradedItems
    battles: int
    pair_prompt: np.ndarray
    winner: np.ndarray
    loser: np.ndarray

    @property
    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.pair_prompt, self.winner, self.loser


def holds_battles(path: Input) -> bool:
    """True when ``path`` (or a table given in memory) is a battles table: a ``winner`` column, not a
    graded log or score table."""
    if isinstance(path, pd.DataFrame):
        return "winner" in path.columns
    if not Path(path).is_file() or is_graded(Path(path)):
        return False
    from evalprism.io.tables import read_table

    return "winner" in read_table(path).columns


def read_battle_split(
    path: Input, role: str, models: tuple[str, ...] | None = None, harness: HarnessOptions | None = None
) -> BattleSplit:
    """One split of battles (module docstring); ``models``: the training split's (a held-out battle of a
    model the training battles do not have is refused: no router could route to it)."""
    from evalprism.io.battles import BattlesInput
    from evalprism.p2l.evaluate import held_out_scores
    from evalprism.p2l.from_logs import read_battles_input
    from evalprism.p2l.prepared import prepare_battle_arrays

    where = role if isinstance(path, pd.DataFrame) else str(path)
    given = BattlesInput(path) if isinstance(path, pd.DataFrame) else read_battles_input(path, harness=harness)
    if models is not None:
        seen = set(given.table["model_a"].astype(str)) | set(given.table["model_b"].astype(str))
        unknown = sorted(seen - set(models))
        if unknown:
            raise EvalprismError(
                f"{where}: {len(unknown)} model(s) have no battle in the training split: {', '.join(unknown[:5])}; "
                "a router can only route to models it was trained on"
            )
    prepared = prepare_battle_arrays(given, names=None if models is None else list(models), min_battles=1)
    codes, prompts = prepared.prompt_index()
    arrays = prepared.arrays
    quality = held_out_scores(arrays, prepared.rows, codes, len(prompts))
    category = np.full(len(prompts), ONE_CATEGORY, dtype=object)
    if "category" in prepared.table.columns:
        first = pd.Series(prepared.table["category"].to_numpy()).groupby(codes).first()
        category[first.index.to_numpy()] = first.fillna(ONE_CATEGORY).astype(str).to_numpy()
    items = GradedItems(
        quality=quality,
        models=tuple(arrays.names),
        benchmark=category.astype(str),
        item_id=np.asarray([str(p) for p in prompts]),
        prompt=[str(p) for p in prompts],
        incomplete=0,
        provenance=Provenance(choices=tuple(prepared.read)) + given.provenance,
    )
    a_wins, b_wins = prepared.rows[:, A_WINS], prepared.rows[:, B_WINS]
    decisive = a_wins != b_wins
    first_wins = a_wins[decisive] > b_wins[decisive]
    winner = np.where(first_wins, arrays.a[decisive], arrays.b[decisive])
    loser = np.where(first_wins, arrays.b[decisive], arrays.a[decisive])
    return BattleSplit(items, prepared.n_battles, codes[decisive], winner, loser)


def battle_splits(
    train: Input, heldout: Input, names: tuple[str, str], harness: HarnessOptions | None = None
) -> tuple[BattleSplit, BattleSplit]:
    """Both splits of battles, the held-out one on the training models; no prompt in both (a router
    valued on a prompt it was trained on is not held out)."""
    tr = read_battle_split(train, "TRAIN", harness=harness)
    ho = read_battle_split(heldout, "HELDOUT", tr.items.models, harness)
    shared = set(tr.items.prompt) & set(ho.items.prompt)
    if shared:
        first = sorted(shared)[0]
        raise EvalprismError(
            f"{names[1]}: {len(shared):,} prompt(s) also have battles in {names[0]} (first: {first[:80]!r}): "
            "held-out prompts must not be trained on (split by prompt: `evalprism p2l split`)"
        )
    return tr, ho
