"""Splitting battles by prompt: the one rule training uses for its validation prompts, and
``evalprism p2l split``, which applies it to make the held-out file ``p2l evaluate`` needs.

Battles of one prompt are strongly correlated, so a held-out set must hold out prompts, not battles.
:func:`split_prompts` decides each prompt's side from a hash of its text and the seed
(:func:`evalprism.keyed.keyed_choice`): the same battles in another file order split the same way,
and ``p2l split --test-fraction f --seed s`` holds out exactly the prompts that ``p2l train
--val-fraction f --seed s`` would validate on. No torch here: splitting a file loads no model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.battles import BattlesInput, as_battles_input, readable_prompts, to_canonical_battles
from evalprism.io.outputs import (
    MARKER_FILE,
    OutputKind,
    OutputTarget,
    SavedResult,
    as_target,
    atomic_output_dir,
    write_json,
)
from evalprism.io.record import Provenance
from evalprism.io.subsets import write_row_subsets
from evalprism.keyed import keyed_choice
from evalprism.p2l.options import SplitOptions


def split_prompts(prompts: pd.Series, val_fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of battles whose prompt is held out (training's validation set, ``p2l split``'s
    test set): the ``val_fraction`` share of the distinct prompts (at least one, and at least one left
    on the other side) with the smallest hash of (seed, prompt text)
    (:func:`evalprism.keyed.keyed_choice`). A prompt's side depends on its text and the seed only,
    never on where its battles stand in the file."""
    distinct = pd.unique(prompts)
    if distinct.size < 2:
        raise EvalprismError(
            f"the battles hold {distinct.size} distinct prompt(s): holding prompts out needs at "
            "least two (one on each side of the split)"
        )
    n_val = min(max(1, round(val_fraction * distinct.size)), distinct.size - 1)
    val = set(distinct[keyed_choice([str(p) for p in distinct], n_val, seed)])
    return prompts.isin(val).to_numpy()


#: how a split decides each prompt's side, as ``run.json`` names it
SPLIT_RULE = "evalprism.p2l.split.split_prompts (the rule of `p2l train --val-fraction F --seed S`)"


@dataclass(frozen=True)
class Sides:
    """A count on each side of the split."""

    train: int
    test: int


@dataclass(frozen=True)
class SplitSummary:
    """What one split read and counted: the file and the battles format it was read as, the rule
    that split it (:data:`SPLIT_RULE`), and the battles and distinct prompts on each side."""

    source: str | None
    format: str | None
    rule: str
    battles: Sides
    prompts: Sides


@dataclass
class SplitResult(SavedResult):
    """The rows of a battles table (as read, every column kept) on each side of a split by prompt:
    ``train`` and ``test`` hold row positions of ``table``; the options it ran with, what it counted
    (:class:`SplitSummary`) and what the readers chose (and the battles no text model can read,
    which go to neither side)."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_SPLIT

    table: pd.DataFrame
    train: np.ndarray
    test: np.ndarray
    options: SplitOptions
    summary: SplitSummary
    provenance: Provenance = field(default_factory=Provenance)
    verbatim: bool = True  # the rows are the input file's own (False: battles made from graded scores)

    def findings(self) -> list[str]:
        """How many battles and prompts each side holds."""
        b, p = self.summary.battles, self.summary.prompts
        return [f"train {b.train} battles on {p.train} prompts, test {b.test} battles on {p.test} prompts"]

    def frames(self) -> dict[str, pd.DataFrame]:
        """The two sides as tables (the input's rows and columns, file order)."""
        return {"train": self.table.iloc[self.train], "test": self.table.iloc[self.test]}

    def save(self, out: str | Path | OutputTarget) -> Path:
        """Write ``train.<ext>`` and ``test.<ext>`` (the input's format: JSON Lines and JSON rows copied
        verbatim; else JSON Lines) and ``run.json``, atomically, by the output rules of
        :mod:`evalprism.io.outputs`."""
        target = as_target(out, self.output_kind)
        with atomic_output_dir(target, self.output_kind) as tmp:
            files = write_row_subsets(self.table, {"train": self.train, "test": self.test}, tmp, verbatim=self.verbatim)
            record = self.record
            record = replace(record, results={**record.results, "files": files}).completed(target.inputs)
            write_json(tmp / MARKER_FILE, record.as_json())
        return target.path


def split_battles(battles: pd.DataFrame | BattlesInput, options: SplitOptions | None = None) -> SplitResult:
    """Split ``battles`` (any supported battles format, as read by :func:`evalprism.io.read_table`, or
    a command's :class:`~evalprism.io.battles.BattlesInput`: graded scores converted to battles, whose
    rows are written out rather than copied from the file) by prompt into a training and a held-out
    test set, by training's own rule (:func:`split_prompts`).

    The prompt is the canonical one (FastChat conversations and arena-55k turn lists reduced to their
    user turns), so a conversation's battles stay on one side in every format. ``options``: the held-out
    share of prompts and the seed (:class:`~evalprism.p2l.options.SplitOptions`)."""
    options = options or SplitOptions()
    test_fraction, seed = options.test_fraction, options.seed
    given = as_battles_input(battles)
    canonical = to_canonical_battles(given.table, read=given.provenance)
    where = canonical.attrs.get("source") or "battles table"
    keep, note = readable_prompts(canonical, where)  # battles a text model cannot read go to neither side
    rows = np.flatnonzero(keep)
    prompts = canonical["prompt"].astype(str)
    try:
        is_test = split_prompts(prompts.iloc[rows], test_fraction, seed)
    except EvalprismError as exc:
        raise EvalprismError(f"{where}: {exc}") from None
    test, train = rows[is_test], rows[~is_test]
    summary = SplitSummary(
        source=given.table.attrs.get("source"),
        format=canonical.attrs.get("battles_format"),
        rule=SPLIT_RULE,
        battles=Sides(int(train.size), int(test.size)),
        prompts=Sides(int(prompts.iloc[train].nunique()), int(prompts.iloc[test].nunique())),
    )
    provenance = split_provenance(canonical, note)
    return SplitResult(given.table, train, test, options, summary, provenance, verbatim=not given.from_scores)


def split_provenance(canonical: pd.DataFrame, unreadable: str | None) -> Provenance:
    """What the readers chose for the battles split: the lines they left on the canonical table
    (``attrs["choices"]``), and which battles no text model can read (on neither side)."""
    return Provenance(choices=(*canonical.attrs.get("choices", []), *([unreadable] if unreadable else [])))
