"""Splitting battles by prompt: the one rule training uses for its validation prompts, and
``evalprism p2l split``, which applies it to make the held-out file ``p2l evaluate`` needs.

Battles of one prompt are strongly correlated, so a held-out set must hold out prompts, not battles.
:func:`split_prompts` decides each prompt's side from a hash of its text and the seed
(:func:`evalprism.keyed.keyed_choice`): the same battles in another file order split the same way,
and ``p2l split --test-fraction f --seed s`` holds out exactly the prompts that ``p2l train
--val-fraction f --seed s`` would validate on. No torch here: splitting a file loads no model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from evalprism import __version__
from evalprism.errors import EvalprismError
from evalprism.io.battles import readable_prompts, to_canonical_battles
from evalprism.io.options import check_number
from evalprism.io.outputs import MARKER_FILE, OutputKind, OutputTarget, as_target, atomic_output_dir, write_json
from evalprism.io.subsets import write_row_subsets
from evalprism.keyed import keyed_choice


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


@dataclass
class SplitResult:
    """The rows of a battles table (as read, every column kept) on each side of a split by prompt:
    ``train`` and ``test`` hold row positions of ``table``; ``options`` what ``run.json`` records."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_SPLIT

    table: pd.DataFrame
    train: np.ndarray
    test: np.ndarray
    options: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        """The two sides as tables (the input's rows and columns, file order)."""
        return {"train": self.table.iloc[self.train], "test": self.table.iloc[self.test]}

    def save(self, out: str | Path | OutputTarget) -> Path:
        """Write ``train.<ext>`` and ``test.<ext>`` (the input's format: JSON Lines and JSON rows copied
        verbatim; else JSON Lines) and ``run.json``, atomically, by the output rules of
        :mod:`evalprism.io.outputs`."""
        target = as_target(out, self.output_kind)
        with atomic_output_dir(target, self.output_kind) as tmp:
            files = write_row_subsets(self.table, {"train": self.train, "test": self.test}, tmp)
            write_json(tmp / MARKER_FILE, {"evalprism": __version__, "options": self.options, "files": files})
        return target.path


def split_battles(battles: pd.DataFrame, *, test_fraction: float = 0.2, seed: int = 0) -> SplitResult:
    """Split ``battles`` (any supported battles format, as read by :func:`evalprism.io.read_table`) by
    prompt into a training and a held-out test set, by training's own rule (:func:`split_prompts`).

    The prompt is the canonical one (FastChat conversations and arena-55k turn lists reduced to their
    user turns), so a conversation's battles stay on one side in every format."""
    check_number("test_fraction", test_fraction)
    canonical = to_canonical_battles(battles)
    where = canonical.attrs.get("source") or "battles table"
    keep, note = readable_prompts(canonical, where)  # battles a text model cannot read go to neither side
    rows = np.flatnonzero(keep)
    prompts = canonical["prompt"].astype(str)
    try:
        is_test = split_prompts(prompts.iloc[rows], test_fraction, seed)
    except EvalprismError as exc:
        raise EvalprismError(f"{where}: {exc}") from None
    test, train = rows[is_test], rows[~is_test]
    options = {
        "source": battles.attrs.get("source"),
        "format": canonical.attrs.get("battles_format"),
        "test_fraction": test_fraction,
        "seed": seed,
        "rule": "evalprism.p2l.split.split_prompts (the rule of `p2l train --val-fraction F --seed S`)",
        "battles": {"train": int(train.size), "test": int(test.size)},
        "prompts": {"train": int(prompts.iloc[train].nunique()), "test": int(prompts.iloc[test].nunique())},
        "read": [*canonical.attrs.get("choices", []), *([note] if note else [])],
    }
    return SplitResult(battles, train, test, options)
