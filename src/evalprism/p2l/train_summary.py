"""What one training run counted and decided (:class:`TrainSummary`), and the record of it that a
model directory keeps: ``config.json``'s ``training`` entry (:func:`training_entry`), which
:meth:`~evalprism.p2l.model.P2LModel.load` reads back (``marginal_extra``) and the training report
shows as its run details.

What the fit chose depends on the fit: the ridge penalty and whether the option or cross-validation
set it (:class:`PenaltyChoice`), or the epoch loop's best epoch, how many ran and why it stopped
(:class:`EpochChoice`). Importing this module imports neither torch nor pandas (the reports read it).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from evalprism.io.record import Provenance
from evalprism.p2l.options import ResolvedTrainOptions

#: folds of the cross-validation over training prompts
CV_FOLDS = 5

StopReason = Literal["early stopping", "max epochs"]


@dataclass(frozen=True)
class PenaltyChoice:
    """What a ridge fit chose: the penalty λ on the head's weights (∞: the marginal leaderboard) and
    who chose it (the ``penalty`` option, or cross-validation over the training prompts)."""

    penalty_chosen: float
    penalty_by: Literal["option", "cv"]

    def line(self) -> str:
        """The choice in words: ``penalty λ = 0.3 (5-fold cross-validation)``."""

        how = "fixed" if self.penalty_by == "option" else f"{CV_FOLDS}-fold cross-validation"
        lam = self.penalty_chosen
        return ("penalty ∞: the marginal leaderboard" if math.isinf(lam) else f"penalty λ = {lam:g}") + f" ({how})"


@dataclass(frozen=True)
class EpochChoice:
    """What the epoch loop chose: the best epoch (the weights kept), how many epochs ran and why it stopped."""

    best_epoch: int
    epochs_run: int
    stopped: StopReason

    def line(self) -> str:
        """The choice in words: ``best epoch 2 of 3 (max epochs)``."""
        return f"best epoch {self.best_epoch} of {self.epochs_run} ({self.stopped})"


@dataclass(frozen=True)
class TrainSummary:
    """What one training run counted and decided: the battles and distinct prompts read, the battles
    on each side of the prompt split that the outcome model uses, what the fit chose, the marginal
    leaderboard's reported tie parameter (None without one), the processes of the torchrun world, and
    the models whose marginal coefficients the training battles do not identify (pinned to finite
    values for the warm start)."""

    n_battles: int
    n_prompts: int
    train_battles: int
    val_battles: int
    chosen: PenaltyChoice | EpochChoice
    marginal_extra: float | None
    processes: int
    marginal_pinned: tuple[str, ...] = ()


def training_entry(options: ResolvedTrainOptions, summary: TrainSummary, provenance: Provenance) -> dict[str, Any]:
    """``config.json``'s ``training`` entry: how the model was trained (the options as resolved, less
    the harness readers'), what the run counted and chose, the readers' choices (``read``) and the
    pinned models, in that order (model directories written before keep the same layout)."""
    return {
        **options.training_record(),
        "n_battles": summary.n_battles,
        "n_prompts": summary.n_prompts,
        "train_battles": summary.train_battles,
        "val_battles": summary.val_battles,
        **asdict(summary.chosen),
        "marginal_extra": summary.marginal_extra,
        "processes": summary.processes,
        "read": list(provenance.choices),
        "marginal_pinned": list(summary.marginal_pinned),
    }
