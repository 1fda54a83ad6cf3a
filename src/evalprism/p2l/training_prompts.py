"""Which prompts a model was trained on, kept small, so that ``p2l evaluate`` can tell held-out
battles from training ones.

``p2l train`` writes ``training_prompts.npz`` into the model directory: a 64-bit BLAKE2b hash of the
text of every prompt of the training file (``fit``: the prompts on the training side of the split,
including those whose battles the loss leaves out) and of its validation prompts (``validation``),
sorted. 8 bytes a prompt (about 50 KB for 6,000 prompts), no prompt text; two distinct prompts share a
hash with probability about n² / 2⁶⁵. The prompt is the canonical one training reads
(:func:`~evalprism.io.battles.to_canonical_battles`), compared exactly.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evalprism.errors import EvalprismError

TRAINING_PROMPTS_FILE = "training_prompts.npz"
SIDES = ("fit", "validation")


def prompt_hashes(prompts: Iterable[str]) -> np.ndarray:
    """Sorted distinct 64-bit hashes (uint64) of the prompt texts."""
    digests = {
        int.from_bytes(hashlib.blake2b(str(p).encode("utf-8"), digest_size=8).digest(), "little") for p in prompts
    }
    return np.array(sorted(digests), dtype=np.uint64)


def write_training_prompts(directory: str | Path, fit: Iterable[str], validation: Iterable[str]) -> None:
    """Record the hashes of the training and validation prompts in ``directory``."""
    with open(Path(directory) / TRAINING_PROMPTS_FILE, "wb") as handle:
        np.savez(handle, fit=prompt_hashes(fit), validation=prompt_hashes(validation))


def read_training_prompts(directory: str | Path) -> dict[str, np.ndarray] | None:
    """The recorded hashes by side, or None when the model records none (an older model directory,
    a released lmarena checkpoint)."""
    path = Path(directory) / TRAINING_PROMPTS_FILE
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as saved:
            out = {side: np.asarray(saved[side], dtype=np.uint64) for side in SIDES}
    except (OSError, ValueError, KeyError) as exc:
        detail = str(exc).splitlines()[0] if str(exc) else "unreadable"
        raise EvalprismError(
            f"{path}: not a training-prompt record written by `evalprism p2l train` ({type(exc).__name__}: {detail})"
        ) from None
    return out


@dataclass(frozen=True)
class PromptOverlap:
    """How many of an evaluation's ``prompts`` (distinct) the model was trained on (``fit``) or
    validated on (``validation``); both None when the model records no training prompts
    (``recorded`` False)."""

    recorded: bool
    prompts: int
    fit: int | None
    validation: int | None


def prompt_overlap(recorded: dict[str, np.ndarray] | None, prompts: Iterable[str]) -> PromptOverlap:
    """How many of the distinct ``prompts`` the model was trained (``fit``) or validated on, by the
    record ``recorded`` of :func:`read_training_prompts` (None: nothing recorded)."""
    hashes = prompt_hashes(prompts)
    if recorded is None:
        return PromptOverlap(False, int(hashes.size), None, None)
    fit, validation = (int(np.isin(hashes, recorded[side]).sum()) for side in SIDES)
    return PromptOverlap(True, int(hashes.size), fit, validation)


def overlap_sentence(overlap: PromptOverlap) -> str | None:
    """What the overlap means for the claim "held-out", in words; None when the prompts are held out."""
    if not overlap.recorded:
        return (
            "This model records no training prompts (trained before they were recorded, or not by "
            "`evalprism p2l train`), so whether these battles are held out cannot be checked."
        )
    fit, val, n = overlap.fit, overlap.validation, overlap.prompts
    if fit:
        return (
            f"**Not held out: {fit} of these {n} prompts were training prompts of this model**"
            + (f" (and {val} its validation prompts)" if val else "")
            + "; its scores here are in-sample and flatter it. Evaluate on prompts it never saw "
            "(`evalprism p2l split`, then train on the train side)."
        )
    if val:
        return (
            f"{val} of these {n} prompts were this model's validation prompts (not fitted on, but seen: "
            "early stopping reads them when the head is fitted by adamw)."
        )
    return None
