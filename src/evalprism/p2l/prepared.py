"""Battles as P2L reads them, prepared once: one sequence for training, evaluation and the marginal fit.

:func:`prepare_battle_arrays` validates a battles table (any supported format:
:func:`~evalprism.io.battles.to_canonical_battles`), orders it so that the same battles in another
file order give the same numbers bit for bit, and indexes it into the arrays every caller reads:
model indices, outcomes, soft labels, outcome rows and each battle's prompt. Its options are the
callers' real differences:

- ``prompts``: training and evaluation read each battle's prompt (an empty one is refused, the rows
  are sorted by content: :func:`~evalprism.io.battles.in_content_order`, and the prompts are indexed
  in that order, a :class:`~evalprism.io.battles.Conversation` keeping its turns); a marginal fit
  reads none (a table without prompt text is accepted, and only the arrays are put in count order:
  :func:`~evalprism.io.battles.in_count_order`, which costs a fraction of sorting by prompt).
- ``names`` and ``min_battles``: evaluation scores battles against a trained model's list (every
  model must be on it; one battle is enough to be scored), a fit learns the list from the battles and
  needs two battles per model to estimate a strength.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from evalprism.io.battles import (
    BattleArrays,
    BattlesInput,
    as_battles_input,
    battle_arrays,
    in_content_order,
    in_count_order,
    readable_prompts,
    to_canonical_battles,
)
from evalprism.stats.pairwise import ignored_battles_note, outcome_rows
from evalprism.vocabularies import OutcomeModelName

__all__ = ["PreparedBattles", "prepare_battle_arrays"]


@dataclass(frozen=True)
class PreparedBattles:
    """A validated battles table and its arrays, in the order every sum over battles runs in.
    ``prompt_codes`` (each battle's index into ``prompts``, the distinct prompts in order of first
    appearance) are None when the prompts were not read."""

    where: str
    table: pd.DataFrame
    arrays: BattleArrays
    rows: np.ndarray  # outcome rows (n, 4): soft labels as fractional outcomes
    prompt_codes: np.ndarray | None = None
    prompts: pd.Index | None = None
    read: list[str] = field(default_factory=list)  # what reading the battles did (to_canonical_battles)

    @property
    def n_battles(self) -> int:
        return len(self.table)

    def prompt_index(self) -> tuple[np.ndarray, pd.Index]:
        """Each battle's index into the distinct prompts, and the prompts: what training and evaluation
        read. Battles prepared without their prompts (``prompts=False``) have none."""
        if self.prompt_codes is None or self.prompts is None:
            raise ValueError(f"{self.where}: these battles were prepared without their prompts")
        return self.prompt_codes, self.prompts

    def ignored_note(self, outcome_model: OutcomeModelName) -> str | None:
        """The battles ``outcome_model`` leaves out (ties under ``bt``), in words, or None."""
        return ignored_battles_note(outcome_model, self.arrays.outcome, self.arrays.p_b)


def prepare_battle_arrays(
    battles: pd.DataFrame | BattlesInput,
    *,
    prompts: bool = True,
    names: list[str] | None = None,
    min_battles: int = 2,
) -> PreparedBattles:
    """Validate, order and index ``battles`` (a table, or a command's input with what was read before
    it; the options: the module docstring)."""
    given = as_battles_input(battles)
    table = to_canonical_battles(given.table, prompts=prompts, read=given.provenance)
    where = table.attrs.get("source") or "battles table"
    read = list(table.attrs.get("choices", []))
    if not prompts:
        arrays = in_count_order(battle_arrays(table, names=names, min_battles=min_battles))
        return PreparedBattles(where, table, arrays, outcome_rows(arrays.outcome, arrays.p_b), read=read)
    keep, note = readable_prompts(table, where)
    if note:
        attrs = dict(table.attrs)
        table = table[keep].reset_index(drop=True)
        table.attrs = attrs
        read.append(note)
    table = in_content_order(table)
    arrays = battle_arrays(table, names=names, min_battles=min_battles)
    codes, distinct = pd.factorize(table["prompt"])
    return PreparedBattles(
        where, table, arrays, outcome_rows(arrays.outcome, arrays.p_b), codes, pd.Index(distinct), read
    )
