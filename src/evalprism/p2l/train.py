"""Training a P2L model (seed 002 section 3.1): minimise the outcome NLL of battles given prompts.

- Prompts, not battles, are split into training and validation sets, so no validation prompt was
  seen in training (battles of one prompt are strongly correlated). A prompt's side is decided by a
  hash of its text and the seed, and the battles are trained on in content order, so the same battles
  in another file order train the identical model.
- The head starts at the marginal leaderboard fitted on the training battles (zero weights, the
  marginal coefficients as bias), so a head that learns nothing *is* the marginal baseline.
- Frozen backbones encode each distinct prompt once (through the embedding cache); by default the
  head is then fitted by ridge (:mod:`evalprism.p2l.ridge`): to convergence, with a penalty on its
  weights chosen by cross-validation over the training prompts, infinite (the marginal itself)
  included: with little data it falls back to the marginal leaderboard. On real battles it beat the
  epoch loop (``docs/p2l_heldout_study.md``).
- ``fit='adamw'`` (and always with ``finetune``, which trains the backbone too with a smaller
  learning rate) is the epoch loop: AdamW on mini-batches, early stopping on the validation NLL,
  the best epoch kept, so P2L is never worse on validation than its start.
- A checkpoint is written after every epoch (atomically); ``resume`` continues an interrupted run
  with the same data and options from its last completed epoch, on any number of processes.
- Under ``torchrun`` every process runs the same steps on its shard of each global batch, with
  DistributedDataParallel (:mod:`evalprism.p2l.distributed`): ``batch_size`` is the global batch
  whatever the world size (``micro_batch_size`` bounds one forward pass: gradients accumulate),
  the split, order and early stopping are the same on every rank, and rank 0 alone writes.

The steps, in order: :func:`prepare_battles` (the split), :func:`warm_start`, then :func:`fit_ridge`
or :meth:`Trainer.run` (the epoch loop, :meth:`Trainer.validate`, :meth:`Trainer.checkpoint`), and
:func:`build_result`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from torch import nn

from evalprism.errors import EvalprismError
from evalprism.io.battles import BattleArrays, BattlesInput
from evalprism.io.outputs import (
    OutputKind,
    OutputTarget,
    SavedResult,
    as_target,
    check_output,
    claim_output,
    open_work_dir,
    remove_output,
    save_result,
    why_write_stopped,
)
from evalprism.io.record import Provenance
from evalprism.p2l.backbones import Backbone, load_backbone
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.distributed import World, autocast, autocast_dtype, join_world
from evalprism.p2l.evaluate import compare_predictors, marginal_log_probs, p2l_log_probs
from evalprism.p2l.head import CoefficientHead
from evalprism.p2l.marginal import Leaderboard
from evalprism.p2l.model import P2LModel
from evalprism.p2l.options import DEFAULT_LR, HOW_READ, ResolvedTrainOptions, TrainOptions
from evalprism.p2l.prepared import PreparedBattles, prepare_battle_arrays
from evalprism.p2l.ridge import CV_FOLDS, PENALTY_GRID, RidgeBattles, choose_penalty, fit_penalised
from evalprism.p2l.split import split_prompts
from evalprism.p2l.train_summary import EpochChoice, PenaltyChoice, TrainSummary, training_entry
from evalprism.p2l.training_prompts import write_training_prompts
from evalprism.progress import progress_bar, status, warn
from evalprism.stats.pairwise import PairCounts, outcome_weights
from evalprism.vocabularies import OutcomeModelName

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class TrainResult(SavedResult):
    """A trained model, its epoch history, the validation comparison and where checkpoints live; the
    options as resolved, what the run counted and chose (:class:`~evalprism.p2l.train_summary.TrainSummary`)
    and what the readers chose. Saved, it is a model directory: the model's own files
    (:meth:`P2LModel.save`, its ``config.json`` holding :meth:`training`), ``history.csv``,
    ``evaluation.csv``, ``run.json`` and ``report.html``."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_TRAIN

    model: P2LModel
    history: pd.DataFrame
    evaluation: pd.DataFrame
    options: ResolvedTrainOptions
    summary: TrainSummary
    provenance: Provenance = field(default_factory=Provenance)
    checkpoint_dir: Path | None = None
    main_process: bool = True  # False on the other ranks of a torchrun world: they write nothing
    #: the prompts whose battles the fit and the validation read, recorded as hashes (training_prompts.npz)
    seen_prompts: dict[str, list[str]] | None = None

    @staticmethod
    def claim(
        out: str | Path, *, inputs: Iterable[str | Path | None] = (), overwrite: bool = False, progress: bool = True
    ) -> OutputTarget:
        """Claim the model directory ``out`` and its checkpoint directory before any work
        (:func:`~evalprism.io.outputs.claim_output`). In a torchrun world rank 0 alone claims them;
        every rank gets the target, or the same error."""

        def claim() -> OutputTarget:
            target = claim_output(out, OutputKind.P2L_TRAIN, inputs=inputs, overwrite=overwrite, progress=progress)
            claim_output(checkpoint_dir_for(target), OutputKind.P2L_CHECKPOINT, inputs=inputs, progress=progress)
            return target

        return join_world().on_main(claim)

    def findings(self) -> list[str]:
        """Training's headline: held-out NLL of P2L against the marginal leaderboard."""
        from evalprism.p2l.reports import training_index_line

        return [training_index_line(self)]

    @property
    def notes(self) -> tuple[str, ...]:
        """Why the epoch loop stopped (fit ``adamw``; a ridge fit runs no epochs)."""
        chosen = self.summary.chosen
        return (chosen.stopped,) if isinstance(chosen, EpochChoice) else ()

    def training(self) -> dict[str, Any]:
        """How the model was trained, as its ``config.json`` keeps it (:func:`training_entry`)."""
        return training_entry(self.options, self.summary, self.provenance)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"history": self.history, "evaluation": self.evaluation}

    def write_extra(self, directory: Path) -> None:
        self.model.save(directory, {"training": self.training()})
        if self.seen_prompts is not None:
            write_training_prompts(directory, self.seen_prompts["fit"], self.seen_prompts["validation"])

    def report(self) -> Any:
        from evalprism.p2l.reports import training_report

        return training_report(self)

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write the model directory atomically, then drop the checkpoints of the finished run (only
        the files evalprism wrote there). The other ranks of a torchrun world write nothing."""
        if not self.main_process:
            return as_target(out_dir, self.output_kind).path
        path = save_result(self, out_dir)
        if self.checkpoint_dir is not None:
            remove_output(self.checkpoint_dir, OutputKind.P2L_CHECKPOINT)
        return path


def checkpoint_dir_for(model_dir: str | Path | OutputTarget) -> Path:
    """Where a run writing ``model_dir`` keeps its checkpoints: ``<model_dir>.checkpoint`` beside it."""
    model_dir = model_dir.path if isinstance(model_dir, OutputTarget) else Path(model_dir)
    return model_dir.with_name(model_dir.name + ".checkpoint")


def _open_checkpoint_dir(directory: Path) -> Path:
    """Create (or reuse) the checkpoint directory, marked as evalprism's with the files it may hold."""
    return open_work_dir(directory, OutputKind.P2L_CHECKPOINT, [CHECKPOINT_FILE, CHECKPOINT_FILE + ".tmp"])


def _content_digest(prompts: pd.Index, prompt_codes: np.ndarray, arrays: BattleArrays, rows: np.ndarray) -> str:
    """A hash of what training reads of the battles (prompt texts, models, outcomes) in content order:
    the same for the same battles in any file order, different for other battles."""
    h = hashlib.sha256(json.dumps([arrays.names, [str(p) for p in prompts]]).encode())
    for arr in (prompt_codes, arrays.a, arrays.b, rows):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


#: options a resumed run may change: train longer (max_epochs, patience), or on another number of
#: processes with another memory budget (micro_batch_size, gradient_checkpointing)
RESUMABLE_CHANGES = ("max_epochs", "patience", "micro_batch_size", "gradient_checkpointing")


def _fingerprint(content: str, options: TrainOptions) -> str:
    """What a checkpoint must match to be resumed: the battles' content and the options."""
    fixed = {k: v for k, v in options.fields().items() if k not in RESUMABLE_CHANGES and k not in HOW_READ}
    return hashlib.sha256((content + json.dumps(fixed, sort_keys=True)).encode()).hexdigest()


def _save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    """Write the checkpoint atomically. A failed write (a full disk: torch raises a RuntimeError
    without the cause) leaves no partial file: the earlier checkpoint, if any, is kept for --resume,
    else the directory goes."""
    _open_checkpoint_dir(directory)
    tmp = directory / (CHECKPOINT_FILE + ".tmp")
    try:
        torch.save(state, tmp)
        os.replace(tmp, directory / CHECKPOINT_FILE)  # a crash mid-write never leaves a torn checkpoint
    except (OSError, RuntimeError) as exc:
        why = why_write_stopped(tmp, exc)
        tmp.unlink(missing_ok=True)
        if (directory / CHECKPOINT_FILE).is_file():
            kept = f"the previous epoch's checkpoint is kept in {directory} (rerun with resume once it can be written)"
        else:
            remove_output(directory, OutputKind.P2L_CHECKPOINT)
            kept = "nothing was kept"
        raise EvalprismError(
            f"{directory / CHECKPOINT_FILE}: cannot write the checkpoint ({why}); {kept}", parameter="resume"
        ) from None


def invalid_checkpoint(path: Path, what: str) -> EvalprismError:
    """The one message for a checkpoint file that cannot be resumed from."""
    return EvalprismError(
        f"resume: {path} is not a valid evalprism checkpoint: {what}; start without resume", parameter="resume"
    )


def read_checkpoint(directory: Path | None, fingerprint: str) -> dict[str, Any]:
    """The state saved after the last finished epoch in ``directory``, checked to be a complete
    checkpoint of this very run (same battles and options: ``fingerprint``)."""
    path = None if directory is None else directory / CHECKPOINT_FILE
    if path is None or not path.is_file():
        raise EvalprismError(f"resume: no checkpoint at {path}; start without resume", parameter="resume")
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)  # broadcast to ranks on other devices
    except Exception as exc:  # torn or foreign files raise pickle, zip and EOF errors alike
        first = (str(exc).strip() or "empty").splitlines()[0]
        raise invalid_checkpoint(path, f"it cannot be read ({type(exc).__name__}: {first})") from None
    needed = {
        "fingerprint",
        "epoch",
        "current",
        "optimizer",
        "best",
        "best_val",
        "bad_epochs",
        "history",
        "rng",
        "torch_rng",
    }
    if not isinstance(state, dict) or not needed <= set(state):
        raise invalid_checkpoint(path, "it is not a training state saved by `evalprism p2l train`")
    if state["fingerprint"] != fingerprint:
        raise EvalprismError(
            f"resume: the checkpoint in {directory} is from different battles or options; "
            "start without it (or use the original ones)",
            parameter="resume",
        )
    return state


@dataclass
class TrainingData:
    """The battles as training reads them: ``battles`` prepared once (in content order, indexed:
    :func:`~evalprism.p2l.prepared.prepare_battle_arrays`, as evaluation and the marginal fit read
    them), weighted by the outcome model's outcome rows and split by prompt (:func:`split_prompts`).
    ``content`` hashes the battles (every rank of a torchrun world must read the same),
    ``fingerprint`` the battles and options (for resuming)."""

    battles: PreparedBattles
    weights: np.ndarray  # the outcome model's weight of each outcome (n, 4)
    train_idx: np.ndarray
    val_idx: np.ndarray
    content: str
    fingerprint: str

    @property
    def where(self) -> str:
        return self.battles.where

    @property
    def n_battles(self) -> int:
        return self.battles.n_battles

    @property
    def arrays(self) -> BattleArrays:
        return self.battles.arrays

    @property
    def rows(self) -> np.ndarray:
        """Outcome rows (n, 4): soft labels as fractional outcomes."""
        return self.battles.rows

    @property
    def prompt_codes(self) -> np.ndarray:
        """Each battle's index into :attr:`prompts`."""
        return self.battles.prompt_index()[0]

    @property
    def prompts(self) -> pd.Index:
        """The distinct prompts, in order of first appearance."""
        return self.battles.prompt_index()[1]

    @property
    def read(self) -> list[str]:
        """What reading the battles did (:func:`~evalprism.io.battles.to_canonical_battles`)."""
        return self.battles.read

    @property
    def names(self) -> list[str]:
        return self.arrays.names

    def split_digest(self) -> str:
        """A hash of the prompt split (the battles on each side)."""
        return hashlib.sha256(self.train_idx.tobytes() + b"|" + self.val_idx.tobytes()).hexdigest()


def prepare_battles(battles: pd.DataFrame | BattlesInput, opts: TrainOptions) -> TrainingData:
    """Step 1, the split: validate ``battles`` and put them in content order
    (:func:`~evalprism.p2l.prepared.prepare_battle_arrays`: the prompt split, each epoch's seeded
    permutation, the batches and every sum over battles are then the same for the same battles in any
    file order), then split them by prompt. Battles the outcome model cannot use are on neither side."""
    data = prepare_battle_arrays(battles)
    prompt_codes, prompts = data.prompt_index()
    weights = outcome_weights(opts.outcome_model, data.rows)
    keep = weights.sum(axis=1) > 0
    if not keep.any():
        raise EvalprismError(
            f"{data.where}: no battle carries information for outcome model '{opts.outcome_model}' (only ties?)"
        )
    is_val = split_prompts(data.table["prompt"], opts.val_fraction, opts.seed)
    train_idx, val_idx = np.flatnonzero(keep & ~is_val), np.flatnonzero(keep & is_val)
    content = _content_digest(prompts, prompt_codes, data.arrays, data.rows)
    return TrainingData(data, weights, train_idx, val_idx, content, _fingerprint(content, opts))


def require_same_battles(world: World, data: TrainingData) -> None:
    """Every rank of a torchrun world must train on the same battles, options and split: compare
    their digests (all-gathered) and stop every rank with one message when they differ (e.g. nodes
    holding different copies of the data file)."""

    def message(rank: int, other: tuple[str, str, str, str], first: tuple[str, str, str, str]) -> str:
        what = (
            "read different battles"
            if other[1] != first[1]
            else "got different training options"
            if other[2] != first[2]
            else "drew different prompt splits"
        )
        return (
            f"the processes of this torchrun world {what}: rank {rank} read {other[0]} (content hash "
            f"{other[1][:12]}), rank 0 read {first[0]} (content hash {first[1][:12]}); every process must "
            "read the same battles with the same options"
        )

    world.require_same((data.where, data.content, data.fingerprint, data.split_digest()), message)


def _check_split(data: TrainingData, outcome_model: OutcomeModelName) -> None:
    """Refuse a prompt split that left no training or no validation battle for ``outcome_model``."""
    if data.val_idx.size == 0 or data.train_idx.size == 0:
        side = "validation" if data.val_idx.size == 0 else "training"
        raise EvalprismError(
            f"{data.where}: the prompt split left no {side} battles for outcome model '{outcome_model}'; use more "
            "prompts or another val_fraction",
            parameter="val_fraction",
        )


def _announce(data: TrainingData, outcome_model: OutcomeModelName, world: World, progress: bool) -> None:
    """Tell the user what the run trains on (and which battles the outcome model cannot use)."""
    note = data.battles.ignored_note(outcome_model)
    if note:
        status(note, progress)
    processes = f" on {world.size} processes" if world.distributed else ""
    status(
        f"{data.n_battles} battles, {len(data.names)} models, {len(data.prompts)} prompts; "
        f"{data.train_idx.size} training / {data.val_idx.size} validation battles used (split by prompt)"
        f"{processes}",
        progress,
    )


def fit_marginal(data: TrainingData, outcome_model: OutcomeModelName, idx: np.ndarray | None = None) -> Leaderboard:
    """The marginal leaderboard of battles ``idx`` (default: the training battles): the head's warm
    start and the baseline. Coefficients the battles do not identify under ``outcome_model`` (separation, as
    the registry's ``bounds`` say) are pinned to finite values (:meth:`Leaderboard.pinned`), so no
    warm start begins at an optimiser's arbitrary −31; ``identified`` marks them (``marginal.csv``)."""
    a, b, idx = data.arrays.a, data.arrays.b, data.train_idx if idx is None else idx
    p_b = None if data.arrays.p_b is None else data.arrays.p_b[idx]
    pairs = PairCounts.from_battles(a[idx], b[idx], data.arrays.outcome[idx], len(data.names), p_b=p_b)
    return Leaderboard.from_counts(pairs, outcome_model, ci=None, names=data.names).pinned(pairs)


def pinned_note(marginal: Leaderboard) -> str | None:
    """A warning naming the models whose marginal coefficient was pinned for the warm start, or None."""
    if marginal.identified is None or marginal.identified.all():
        return None
    names = [n for n, ok in zip(marginal.names, marginal.identified, strict=True) if not ok]
    return (
        f"the training battles do not identify the {marginal.outcome_model} coefficient of {', '.join(names)} "
        "(separation: no finite maximum-likelihood value); the warm start and the marginal baseline pin "
        "it to the nearest identified coefficient (see marginal.csv, identified = False)"
    )


def warm_start(head: CoefficientHead, marginal: Leaderboard) -> None:
    """Step 2, the warm start: zero weights and the marginal leaderboard as the head's bias (and its tie
    parameter as the tie output), so that epoch 0 *is* the marginal model, frozen or fine-tuned."""
    n = head.n_models
    with torch.no_grad():
        head.linear.weight.zero_()
        head.linear.bias[:n] = torch.as_tensor(marginal.coefs, dtype=torch.float32)
        if head.tie is not None:  # the head output that maps onto the marginal fit's raw tie parameter
            head.linear.bias[n] = head.tie.to_head(marginal.fit.params[-1])


class BattleNLL(nn.Module):
    """The training objective: the summed outcome NLL of battles picked by index (outcomes with zero
    weight contribute nothing, even at -inf). Frozen backbones' features are encoded once
    (``frozen``); a fine-tuned backbone is a submodule, encoding each batch's prompts with gradients
    (under bfloat16 autocast when ``autocast_to`` says so; the head computes in float32)."""

    def __init__(
        self,
        head: CoefficientHead,
        backbone: Backbone,
        data: TrainingData,
        frozen: torch.Tensor | None,
        device: torch.device,
        autocast_to: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        self.head = head
        self.backbone = backbone if frozen is None else None
        self.frozen = None if frozen is None else frozen.to(device)
        self.device, self.autocast_to = device, autocast_to
        self.prompts, self.prompt_codes = data.prompts, data.prompt_codes
        self.prompt_t = torch.as_tensor(data.prompt_codes).to(device)
        self.a = torch.from_numpy(data.arrays.a.copy()).to(device)
        self.b = torch.from_numpy(data.arrays.b.copy()).to(device)
        self.w = torch.as_tensor(data.weights, dtype=torch.float32).to(device)

    def features(self, idx: np.ndarray) -> torch.Tensor:
        if self.frozen is not None:
            return self.frozen[self.prompt_t[idx]]
        with autocast(self.autocast_to, self.device):
            feats = self.backbone.features([self.prompts[i] for i in self.prompt_codes[idx]])  # type: ignore[union-attr]
        return feats.float()

    def forward(self, idx: np.ndarray) -> torch.Tensor:
        logp = self.head.log_probs(self.features(idx), self.a[idx], self.b[idx])
        w = self.w[idx]
        return -torch.where(w > 0, w * logp, torch.zeros_like(logp)).sum()

    def weight(self, idx: np.ndarray) -> torch.Tensor:
        """The total outcome weight of battles ``idx`` (the NLL's unit)."""
        return self.w[idx].sum()

    def trainable_state(self) -> dict[str, Any]:
        """A copy of what training changes, on the CPU: the head and a fine-tuned backbone."""
        state = {"head": {k: v.detach().to("cpu", copy=True) for k, v in self.head.state_dict().items()}}
        if self.backbone is not None:
            state["backbone"] = {k: v.detach().to("cpu", copy=True) for k, v in self.backbone.state_dict().items()}
        return state

    def restore(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        if self.backbone is not None and "backbone" in state:
            self.backbone.load_state_dict(state["backbone"])


def build_objective(
    head: CoefficientHead, backbone: Backbone, data: TrainingData, opts: ResolvedTrainOptions, world: World
) -> BattleNLL:
    """The objective on this process's device. A frozen backbone encodes every distinct prompt once,
    here (in a torchrun world on rank 0, the only one that touches the embedding cache)."""
    backbone.to(world.device)
    head.to(world.device)
    if opts.finetune:
        backbone.configure_training(max_length=opts.max_length, gradient_checkpointing=opts.gradient_checkpointing)
        return BattleNLL(head, backbone, data, None, world.device, autocast_dtype(opts.precision, world.device))
    frozen = world.on_main(lambda: backbone.features(list(data.prompts)).float().cpu())
    return BattleNLL(head, backbone, data, frozen, world.device)


def build_optimizer(objective: BattleNLL, opts: ResolvedTrainOptions) -> torch.optim.Optimizer:
    """AdamW: weight decay on the head's weights only (the marginal leaderboard in the bias is not
    shrunk), a smaller learning rate for a fine-tuned backbone."""
    head = objective.head
    groups: list[dict[str, Any]] = [
        {"params": [head.linear.weight], "weight_decay": opts.schedule.weight_decay, "lr": opts.schedule.lr},
        {"params": [head.linear.bias], "weight_decay": 0.0, "lr": opts.schedule.lr},
    ]
    if objective.backbone is not None:
        groups.append(
            {
                "params": [p for p in objective.backbone.parameters() if p.requires_grad],
                "weight_decay": 0.0,
                "lr": opts.backbone_lr,
            }
        )
    return torch.optim.AdamW(groups)


@dataclass
class RunState:
    """Where a run stands after its last finished epoch: what early stopping reads and a checkpoint
    saves (with the current weights and the optimiser)."""

    epoch: int
    best: dict[str, Any]
    best_val: float
    bad_epochs: int
    history: list[dict[str, float]]
    rng: np.random.Generator

    def record(self, epoch: int, train_nll: float, val_nll: float, snapshot: Callable[[], dict[str, Any]]) -> None:
        """Add an epoch's losses; a better validation NLL makes the current weights (``snapshot()``,
        taken only then) the best."""
        self.epoch = epoch
        self.history.append({"epoch": epoch, "train_nll": train_nll, "val_nll": val_nll})
        if val_nll < self.best_val - 1e-6:
            self.best_val, self.best, self.bad_epochs = val_nll, snapshot(), 0
        else:
            self.bad_epochs += 1

    @classmethod
    def from_checkpoint(cls, saved: dict[str, Any]) -> RunState:
        """The state a checkpoint saved (the caller restores the weights and optimiser)."""
        rng = np.random.default_rng()
        rng.bit_generator.state = saved["rng"]
        torch.set_rng_state(saved["torch_rng"])
        return cls(saved["epoch"], saved["best"], saved["best_val"], saved["bad_epochs"], saved["history"], rng)


@dataclass
class Trainer:
    """One run's moving parts: the objective (``model`` is the same under DistributedDataParallel in
    a torchrun world), the optimiser, this process's place in the world, and where checkpoints go."""

    data: TrainingData
    opts: ResolvedTrainOptions
    objective: BattleNLL
    optimizer: torch.optim.Optimizer
    world: World
    ckpt_dir: Path | None
    progress: bool
    model: nn.Module | None = None

    def validate(self, idx: np.ndarray) -> float:
        """Step 4, validation: the mean NLL per unit of outcome weight over battles ``idx`` (no
        gradients; each rank sums its shard, the sums are added in rank order)."""
        self.objective.eval()
        shard, total = self.world.shard(idx), 0.0
        step = self.opts.micro_batch_size or (4096 if self.objective.frozen is not None else 64)
        with torch.no_grad():
            for s in range(0, shard.size, step):
                total += float(self.objective(shard[s : s + step]))
        return self.world.sum(total) / float(self.objective.weight(idx))

    def start(self, saved: dict[str, Any] | None) -> RunState:
        """Epoch 0, the warm start's losses; or the state of an interrupted run, its weights, optimiser
        and random generators restored (from a checkpoint of any number of processes)."""
        if saved is None:
            best_val = self.validate(self.data.val_idx)
            state = RunState(
                0, self.objective.trainable_state(), best_val, 0, [], np.random.default_rng(self.opts.seed)
            )
            state.history.append({"epoch": 0, "train_nll": self.validate(self.data.train_idx), "val_nll": best_val})
            return state
        try:
            self.objective.restore(saved["current"])
            self.optimizer.load_state_dict(saved["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            path = self.ckpt_dir / CHECKPOINT_FILE  # type: ignore[operator]
            raise invalid_checkpoint(path, f"its weights do not fit this model ({exc})") from None
        state = RunState.from_checkpoint(saved)
        status(f"resuming after epoch {state.epoch} (best validation NLL {state.best_val:.4f})", self.progress)
        return state

    def step(self, batch: np.ndarray) -> None:
        """One optimiser step on one global batch: this rank's shard in micro-batches, each loss scaled
        so that the gradient, summed over micro-batches and averaged over ranks by DDP, is the gradient
        of the batch's mean NLL per unit of outcome weight, as on one process."""
        model = self.model or self.objective
        pieces = self.world.micro_batches(batch, self.opts.micro_batch_size)
        scale = self.objective.weight(batch) / self.world.size
        self.optimizer.zero_grad()
        for k, piece in enumerate(pieces):
            with self.world.accumulating(model, last=k == len(pieces) - 1):
                # an empty share still runs forward and backward (zero loss) for DDP's all-reduce
                loss = model(piece) / scale if piece.size else model(batch[:1]) * 0.0
                loss.backward()
        self.optimizer.step()

    def checkpoint(self, state: RunState) -> None:
        """Step 5, the checkpoint: everything :meth:`start` needs to resume, written atomically by rank 0."""
        if self.ckpt_dir is None:
            return
        ckpt_dir, objective, optimizer = self.ckpt_dir, self.objective, self.optimizer
        self.world.on_main(
            lambda: _save_checkpoint(
                ckpt_dir,
                {
                    "fingerprint": self.data.fingerprint,
                    "epoch": state.epoch,
                    "current": objective.trainable_state(),
                    "optimizer": optimizer.state_dict(),
                    "best": state.best,
                    "best_val": state.best_val,
                    "bad_epochs": state.bad_epochs,
                    "history": state.history,
                    "rng": state.rng.bit_generator.state,
                    "torch_rng": torch.get_rng_state(),
                },
            )
        )

    def diverged(self, epoch: int, train: float, val: float) -> None:
        """Stop a run whose loss is no longer a number (a learning rate far too large): keeping the best
        epoch would silently return the warm start (the marginal leaderboard) as the trained model.
        Its checkpoints go too: resuming would diverge again."""
        if self.ckpt_dir is not None:
            ckpt_dir = self.ckpt_dir
            self.world.on_main(lambda: remove_output(ckpt_dir, OutputKind.P2L_CHECKPOINT))
        raise EvalprismError(
            f"training diverged: after epoch {epoch} the training NLL is {train} and the validation "
            f"NLL {val}; lr {self.opts.schedule.lr:g} is too large for these battles (the default is "
            f"{DEFAULT_LR:g}); lower it; nothing was saved",
            parameter="lr",
        )

    def run(self, state: RunState) -> None:
        """Step 3, the epoch loop: train, validate, checkpoint until max_epochs or ``patience`` epochs
        without a better validation NLL."""
        opts, train_idx = self.opts, self.data.train_idx
        batch, max_epochs = opts.schedule.batch_size, opts.schedule.max_epochs
        kind = "fine-tuning" if opts.finetune else "frozen"
        try:
            with progress_bar(
                f"training P2L ({opts.outcome_model}, {kind} {opts.backbone})",
                max(max_epochs - state.epoch, 0) * -(-train_idx.size // batch),
                self.progress,
            ) as bar:
                for epoch in range(state.epoch + 1, max_epochs + 1):
                    if state.bad_epochs >= opts.schedule.patience:
                        break
                    order = train_idx[state.rng.permutation(train_idx.size)]
                    (self.model or self.objective).train()
                    for s in range(0, order.size, batch):
                        self.step(order[s : s + batch])
                        bar.update(1)
                    val, train = self.validate(self.data.val_idx), self.validate(train_idx)
                    if not (math.isfinite(val) and math.isfinite(train)):
                        self.diverged(epoch, train, val)
                    state.record(epoch, train, val, self.objective.trainable_state)
                    self.checkpoint(state)
        except KeyboardInterrupt:
            if self.world.is_main and self.ckpt_dir is not None and (self.ckpt_dir / CHECKPOINT_FILE).is_file():
                status(
                    f"interrupted: the last finished epoch is saved in {self.ckpt_dir}; rerun with --resume to "
                    "continue",
                    True,
                )
            raise


def fit_ridge(
    head: CoefficientHead,
    backbone: Backbone,
    data: TrainingData,
    opts: ResolvedTrainOptions,
    world: World,
    progress: bool,
) -> pd.DataFrame:
    """The ridge fit (:mod:`evalprism.p2l.ridge`), in place of steps 3-5: encode every distinct prompt
    once, choose the penalty by cross-validation over the training prompts (unless ``opts.penalty``
    fixes it) and fit the warm-started ``head`` on all training battles. Rank 0 computes (it is
    seconds of work on cached features) and every rank receives the head. Returns the
    cross-validation table (one row per candidate penalty)."""

    def compute() -> tuple[dict[str, torch.Tensor], pd.DataFrame]:
        features = backbone.features(list(data.prompts)).double().cpu().numpy()
        idx = data.train_idx
        battles = RidgeBattles(data.prompt_codes[idx], data.arrays.a[idx], data.arrays.b[idx], data.weights[idx])
        if opts.penalty is None:
            fits = (len(PENALTY_GRID) + 1) * CV_FOLDS
            with progress_bar(
                f"choosing the ridge penalty ({CV_FOLDS}-fold CV over training prompts)", fits, progress
            ) as bar:
                table = choose_penalty(
                    features,
                    [str(p) for p in data.prompts],
                    battles,
                    opts.outcome_model,
                    lambda inside: fit_marginal(data, opts.outcome_model, idx[inside]),
                    warm_start,
                    seed=opts.seed,
                    step=lambda: bar.update(1),
                )
        else:
            table = pd.DataFrame(
                {"penalty": [float(opts.penalty)], "cv_nll": [np.nan], "cv_se": [np.nan], "chosen": [True]}
            )
        fit_penalised(head, features, battles, float(table.loc[table["chosen"], "penalty"].iloc[0]))
        return {k: v.detach().clone() for k, v in head.state_dict().items()}, table

    state, table = world.on_main(compute)
    head.load_state_dict(state)
    return table


def build_result(
    data: TrainingData,
    opts: ResolvedTrainOptions,
    world: World,
    head: CoefficientHead,
    backbone: Backbone,
    marginal: Leaderboard,
    history: pd.DataFrame,
    chosen: PenaltyChoice | EpochChoice,
    ckpt_dir: Path | None,
    progress: bool,
) -> TrainResult:
    """Step 6, the result: the fitted head as a :class:`P2LModel` (on the CPU), compared with the
    marginal leaderboard on the validation battles (by rank 0; every rank returns the result).
    ``history`` is the epoch history (adamw) or the penalty's cross-validation (ridge); ``chosen``
    what the fit chose (best epoch and why it stopped, or the penalty)."""
    head.to("cpu")
    backbone.to("cpu")
    baseline = MarginalBaseline.from_leaderboard(marginal)
    model = P2LModel(backbone, head, data.names, {"outcome_model": opts.outcome_model}, baseline)
    val, a, b = data.val_idx, data.arrays.a, data.arrays.b
    evaluation = world.on_main(
        lambda: compare_predictors(
            opts.outcome_model,
            data.rows[val],
            {
                "marginal": marginal_log_probs(baseline, a[val], b[val], data.names),
                "p2l": p2l_log_probs(model, list(data.prompts[data.prompt_codes[val]]), a[val], b[val]),
            },
            data.prompt_codes[val],
        )
    )
    ev = evaluation.set_index("predictor")["nll"]
    status(f"{chosen.line()}; validation NLL {ev['marginal']:.4f} (marginal) -> {ev['p2l']:.4f} (P2L)", progress)
    summary = TrainSummary(
        n_battles=data.n_battles,
        n_prompts=len(data.prompts),
        train_battles=int(data.train_idx.size),
        val_battles=int(val.size),
        chosen=chosen,
        marginal_extra=marginal.extra,
        processes=world.size,
        marginal_pinned=()
        if marginal.identified is None
        else tuple(n for n, ok in zip(marginal.names, marginal.identified, strict=True) if not ok),
    )
    seen = {
        side: [str(p) for p in data.prompts[np.unique(data.prompt_codes[idx])]]
        for side, idx in (("fit", data.train_idx), ("validation", val))
    }
    provenance = training_provenance(data)
    result = TrainResult(model, history, evaluation, opts, summary, provenance, ckpt_dir, world.is_main, seen)
    model.config["training"] = result.training()  # as P2LModel.load reads it back
    return result


def training_provenance(data: TrainingData) -> Provenance:
    """What the readers chose for the training battles: the lines they left on the canonical table,
    with the prompts a text model cannot read (:attr:`TrainingData.read`)."""
    return Provenance(choices=tuple(data.read))


def epoch_choice(state: RunState, opts: ResolvedTrainOptions) -> EpochChoice:
    """What the epoch loop chose: the best epoch, how many ran and why it stopped."""
    history = state.history
    return EpochChoice(
        best_epoch=int(min(history, key=lambda r: r["val_nll"])["epoch"]),
        epochs_run=int(history[-1]["epoch"]),
        stopped="early stopping" if state.bad_epochs >= opts.schedule.patience else "max epochs",
    )


def train_model(
    battles: pd.DataFrame | BattlesInput,
    options: TrainOptions | None = None,
    *,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    cache_dir: str | Path | bool | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a P2L model on ``battles`` (any supported battles format) and return it unsaved: the
    split, the warm start, the epoch loop with validation and checkpoints, the result. Under
    ``torchrun`` every process calls this with the same battles and options (see the module)."""
    opts = (options or TrainOptions()).resolved()
    world = join_world()
    progress = progress and world.is_main
    ckpt_dir = world.on_main(
        lambda: None if checkpoint_dir is None else check_output(checkpoint_dir, OutputKind.P2L_CHECKPOINT).path
    )
    data = world.everywhere(lambda: prepare_battles(battles, opts))
    require_same_battles(world, data)
    if resume and opts.fit == "ridge":
        raise EvalprismError(
            "resume: a ridge fit keeps no checkpoints (it takes seconds once the prompts are "
            "encoded, and their embeddings are cached); start without resume",
            parameter="resume",
        )
    saved = world.on_main(lambda: read_checkpoint(ckpt_dir, data.fingerprint)) if resume else None  # before slow work
    _check_split(data, opts.outcome_model)
    _announce(data, opts.outcome_model, world, progress)
    torch.manual_seed(opts.seed)
    marginal = fit_marginal(data, opts.outcome_model)
    if (note := pinned_note(marginal)) is not None and world.is_main:
        warn(note)
    backbone = load_backbone(
        opts.backbone, finetune=opts.finetune, cache_dir=cache_dir, progress=progress, engine=opts.encoding
    )
    head = CoefficientHead(backbone.dim, len(data.names), opts.outcome_model)
    warm_start(head, marginal)
    if opts.fit == "ridge":
        table = fit_ridge(head, backbone, data, opts, world, progress)
        penalty = PenaltyChoice(
            float(table.loc[table["chosen"], "penalty"].iloc[0]), "option" if opts.penalty is not None else "cv"
        )
        return build_result(data, opts, world, head, backbone, marginal, table, penalty, None, progress)
    objective = build_objective(head, backbone, data, opts, world)
    trainer = Trainer(data, opts, objective, build_optimizer(objective, opts), world, ckpt_dir, progress)
    state = trainer.start(saved)
    trainer.model = world.wrap(objective, lambda module: module(data.train_idx[:1]))
    trainer.run(state)
    objective.restore(state.best)
    return build_result(
        data,
        opts,
        world,
        head,
        backbone,
        marginal,
        pd.DataFrame(state.history),
        epoch_choice(state, opts),
        ckpt_dir,
        progress,
    )
