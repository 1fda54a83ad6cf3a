"""Training a P2L model (seed 002 section 3.1): minimise the outcome NLL of battles given prompts.

- Prompts, not battles, are split into training and validation sets, so no validation prompt was
  seen in training (battles of one prompt are strongly correlated). A prompt's side is decided by a
  hash of its text and the seed, and the battles are trained on in content order, so the same battles
  in another file order train the identical model.
- The head starts at the marginal leaderboard fitted on the training battles (zero weights, the
  marginal coefficients as bias): epoch 0 *is* the marginal baseline, and early stopping on the
  validation NLL keeps the best epoch, so P2L is never worse on validation than that start.
- Frozen backbones encode each distinct prompt once (through the embedding cache), then the head
  trains on the cached features: tens of thousands of battles take seconds to minutes on a CPU.
  ``finetune`` trains the backbone too (AdamW, a smaller learning rate for the backbone).
- A checkpoint is written after every epoch (atomically); ``resume`` continues an interrupted run
  with the same data and options from its last completed epoch.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch

from evalprism.errors import EvalprismError
from evalprism.io.battles import battle_arrays, in_content_order, require_prompts, to_canonical_battles
from evalprism.io.options import check_number
from evalprism.keyed import keyed_choice
from evalprism.io.outputs import (
    OutputKind,
    OutputTarget,
    SavedResult,
    check_output,
    open_work_dir,
    remove_output,
    save_result,
)
from evalprism.p2l.backbones import load_backbone
from evalprism.p2l.evaluate import compare_predictors, marginal_log_probs, p2l_log_probs
from evalprism.p2l.marginal import Leaderboard
from evalprism.p2l.model import CoefficientHead, P2LModel
from evalprism.progress import progress_bar, status
from evalprism.stats.outcome_models import PAIR_MODELS
from evalprism.stats.pairwise import PairCounts, ignored_battles_note, outcome_rows, outcome_weights

CHECKPOINT_FILE = "checkpoint.pt"


@dataclass
class TrainOptions:
    """Options of one training run; ``None`` means the default for the backbone kind."""

    backbone: str = "minilm"
    loss: str = "bt"
    finetune: bool = False
    val_fraction: float = 0.1
    max_epochs: int | None = None  # frozen: 200, fine-tuning: 3
    batch_size: int | None = None  # frozen: 1024 battles, fine-tuning: 16
    lr: float = 3e-3  # head
    backbone_lr: float = 2e-5
    weight_decay: float = 1e-2  # on the head's weights (not the bias: the marginal leaderboard is not shrunk)
    patience: int = 8
    seed: int = 0

    def resolved(self) -> TrainOptions:
        """A copy with the defaults filled in; every value checked first (a negative or NaN learning
        rate trains nothing and would silently return the marginal leaderboard)."""
        if self.loss not in PAIR_MODELS:
            raise EvalprismError(f"unknown loss '{self.loss}': expected one of {', '.join(PAIR_MODELS)}")
        check_number("val_fraction", self.val_fraction, low=0, high=1, low_open=True,
                     high_open=True)
        check_number("lr", self.lr, low=0, low_open=True)
        check_number("backbone_lr", self.backbone_lr, low=0, low_open=True)
        check_number("weight_decay", self.weight_decay, low=0)
        check_number("patience", self.patience, low=1, integer=True)
        for name, value in (("max_epochs", self.max_epochs), ("batch_size", self.batch_size)):
            if value is not None:
                check_number(name, value, low=1, integer=True)
        out = TrainOptions(**asdict(self))
        out.max_epochs = self.max_epochs or (3 if self.finetune else 200)
        out.batch_size = self.batch_size or (16 if self.finetune else 1024)
        return out


@dataclass
class TrainResult(SavedResult):
    """A trained model, its epoch history, the validation comparison and where checkpoints live.
    Saved, it is a model directory: the model's own files (:meth:`P2LModel.save`), ``history.csv``,
    ``evaluation.csv``, ``run.json`` and ``report.html``."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_TRAIN

    model: P2LModel
    history: pd.DataFrame
    evaluation: pd.DataFrame
    options: dict[str, Any] = field(default_factory=dict)
    checkpoint_dir: Path | None = None

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"history": self.history, "evaluation": self.evaluation}

    def write_extra(self, directory: Path) -> None:
        self.model.save(directory, {"training": self.options})

    def report(self) -> Any:
        from evalprism.p2l.reports import training_report

        return training_report(self)

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write the model directory atomically, then drop the checkpoints of the finished run (only
        the files evalprism wrote there)."""
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


def split_prompts(prompts: pd.Series, val_fraction: float, seed: int) -> np.ndarray:
    """Boolean mask of battles whose prompt is in the validation set: the ``val_fraction`` share of the
    distinct prompts (at least one, and at least one left for training) with the smallest hash of
    (seed, prompt text) (:func:`evalprism.keyed.keyed_choice`). A prompt's side depends on its text and
    the seed only, never on where its battles stand in the file."""
    distinct = pd.unique(prompts)
    if distinct.size < 2:
        raise EvalprismError("training needs at least two distinct prompts (one for validation)")
    n_val = min(max(1, int(round(val_fraction * distinct.size))), distinct.size - 1)
    val = set(distinct[keyed_choice([str(p) for p in distinct], n_val, seed)])
    return prompts.isin(val).to_numpy()


def _fingerprint(prompt_id: np.ndarray, a: np.ndarray, b: np.ndarray, rows: np.ndarray, options: TrainOptions) -> str:
    h = hashlib.sha256()
    for arr in (prompt_id, a, b, rows):
        h.update(np.ascontiguousarray(arr).tobytes())
    # max_epochs and patience may change on resume (train longer); everything else must match
    fixed = {k: v for k, v in asdict(options).items() if k not in ("max_epochs", "patience")}
    h.update(json.dumps(fixed, sort_keys=True).encode())
    return h.hexdigest()


def _save_checkpoint(directory: Path, state: dict[str, Any]) -> None:
    _open_checkpoint_dir(directory)
    tmp = directory / (CHECKPOINT_FILE + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, directory / CHECKPOINT_FILE)  # a crash mid-write never leaves a torn checkpoint


def invalid_checkpoint(path: Path, what: str) -> EvalprismError:
    """The one message for a checkpoint file that cannot be resumed from."""
    return EvalprismError(f"--resume: {path} is not a valid evalprism checkpoint: {what}; start without --resume")


def read_checkpoint(directory: Path | None, fingerprint: str) -> dict[str, Any]:
    """The state saved after the last finished epoch in ``directory``, checked to be a complete
    checkpoint of this very run (same battles and options: ``fingerprint``)."""
    path = None if directory is None else directory / CHECKPOINT_FILE
    if path is None or not path.is_file():
        raise EvalprismError(f"resume: no checkpoint at {path}; start without resume", parameter="resume")
    try:
        state = torch.load(path, weights_only=False)
    except Exception as exc:  # torn or foreign files raise pickle, zip and EOF errors alike
        first = (str(exc).strip() or "empty").splitlines()[0]
        raise invalid_checkpoint(path, f"it cannot be read ({type(exc).__name__}: {first})") from None
    needed = {"fingerprint", "epoch", "current", "optimizer", "best", "best_val", "bad_epochs", "history", "rng",
              "torch_rng"}
    if not isinstance(state, dict) or not needed <= set(state):
        raise invalid_checkpoint(path, "it is not a training state saved by `evalprism p2l train`")
    if state["fingerprint"] != fingerprint:
        raise EvalprismError(f"resume: the checkpoint in {directory} is from different battles or options; "
                             "start without it (or use the original ones)", parameter="resume")
    return state


def _batch_nll(head: CoefficientHead, feats: torch.Tensor, a: torch.Tensor, b: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Summed negative log-likelihood; outcomes with zero weight contribute nothing (even at -inf)."""
    logp = head.log_probs(feats, a, b)
    return -torch.where(w > 0, w * logp, torch.zeros_like(logp)).sum()


def train_model(
    battles: pd.DataFrame,
    options: TrainOptions | None = None,
    *,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    cache_dir: str | Path | None | bool = None,
    progress: bool = True,
) -> TrainResult:
    """Train a P2L model on ``battles`` (any supported battles format) and return it unsaved."""
    opts = (options or TrainOptions()).resolved()
    ckpt_dir = None if checkpoint_dir is None else check_output(checkpoint_dir, OutputKind.P2L_CHECKPOINT).path
    table = to_canonical_battles(battles)
    where = table.attrs.get("source") or "battles table"
    require_prompts(table["prompt"], where)
    # battles in content order: the prompt split, each epoch's seeded permutation, the batches and every
    # sum over battles are then the same for the same battles in any file order
    table = in_content_order(table)
    arrays = battle_arrays(table)
    names = arrays.names
    rows = outcome_rows(arrays.outcome, arrays.p_b)
    weights = outcome_weights(opts.loss, rows)
    keep = weights.sum(axis=1) > 0
    if not keep.any():
        raise EvalprismError(f"{where}: no battle carries information for loss '{opts.loss}' (only ties?)")
    prompt_codes, distinct_prompts = pd.factorize(table["prompt"])
    is_val = split_prompts(table["prompt"], opts.val_fraction, opts.seed)
    fingerprint = _fingerprint(prompt_codes, arrays.a, arrays.b, rows, opts)
    resumed = read_checkpoint(ckpt_dir, fingerprint) if resume else None  # before any slow work
    train_idx = np.flatnonzero(keep & ~is_val)
    val_idx = np.flatnonzero(keep & is_val)
    if val_idx.size == 0 or train_idx.size == 0:
        raise EvalprismError(f"{where}: the prompt split left no {'validation' if val_idx.size == 0 else 'training'} "
                             f"battles for loss '{opts.loss}'; use more prompts or another val_fraction",
                             parameter="val_fraction")
    note = ignored_battles_note(opts.loss, arrays.outcome, arrays.p_b)
    if note:
        status(note, progress)
    status(f"{len(table)} battles, {len(names)} models, {len(distinct_prompts)} prompts; "
           f"{train_idx.size} training / {val_idx.size} validation battles used (split by prompt)", progress)

    torch.manual_seed(opts.seed)
    train_pairs = PairCounts.from_battles(arrays.a[train_idx], arrays.b[train_idx], arrays.outcome[train_idx],
                                          len(names), p_b=None if arrays.p_b is None else arrays.p_b[train_idx])
    marginal = Leaderboard.from_counts(train_pairs, opts.loss, ci=None, names=names)  # type: ignore[arg-type]
    backbone = load_backbone(opts.backbone, finetune=opts.finetune, cache_dir=cache_dir, progress=progress)
    head = CoefficientHead(backbone.dim, len(names), opts.loss)
    with torch.no_grad():
        head.linear.bias[: len(names)] = torch.as_tensor(marginal.coefs, dtype=torch.float32)
        if head.tie is not None:  # the head output that maps onto the marginal fit's raw tie parameter
            head.linear.bias[len(names)] = head.tie.to_head(marginal.fit.params[-1])

    frozen_features = None if opts.finetune else backbone.features(list(distinct_prompts)).float()
    groups = [{"params": [head.linear.weight], "weight_decay": opts.weight_decay, "lr": opts.lr},
              {"params": [head.linear.bias], "weight_decay": 0.0, "lr": opts.lr}]
    if opts.finetune:
        groups.append({"params": [p for p in backbone.parameters() if p.requires_grad], "weight_decay": 0.0,
                       "lr": opts.backbone_lr})
    optimizer = torch.optim.AdamW(groups)

    a_t, b_t = torch.from_numpy(arrays.a.copy()), torch.from_numpy(arrays.b.copy())
    w_t = torch.as_tensor(weights, dtype=torch.float32)
    prompt_t = torch.as_tensor(prompt_codes)

    def features(idx: np.ndarray) -> torch.Tensor:
        if frozen_features is not None:
            return frozen_features[prompt_t[idx]]
        return backbone.features([distinct_prompts[i] for i in prompt_codes[idx]])

    def nll_of(idx: np.ndarray) -> float:
        """Mean NLL per unit of outcome weight over battles ``idx`` (no gradients)."""
        head.eval()
        backbone.eval()
        total = 0.0
        step = 4096 if frozen_features is not None else 64
        with torch.no_grad():
            for s in range(0, idx.size, step):
                i = idx[s:s + step]
                total += float(_batch_nll(head, features(i), a_t[i], b_t[i], w_t[i]))
        return total / float(w_t[idx].sum())

    def trainable_state() -> dict[str, Any]:
        state = {"head": {k: v.clone() for k, v in head.state_dict().items()}}
        if opts.finetune:
            state["backbone"] = {k: v.clone() for k, v in backbone.state_dict().items()}
        return state

    def restore(state: dict[str, Any]) -> None:
        head.load_state_dict(state["head"])
        if "backbone" in state:
            backbone.load_state_dict(state["backbone"])

    rng = np.random.default_rng(opts.seed)
    history: list[dict[str, float]] = []
    start_epoch, best_val, bad_epochs = 1, nll_of(val_idx), 0
    best_state = trainable_state()
    history.append({"epoch": 0, "train_nll": nll_of(train_idx), "val_nll": best_val})
    if resumed is not None:
        state = resumed
        try:
            restore(state["current"])
            optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise invalid_checkpoint(ckpt_dir / CHECKPOINT_FILE, f"its weights do not fit this model ({exc})") from None
        best_state, best_val, bad_epochs = state["best"], state["best_val"], state["bad_epochs"]
        history, start_epoch = state["history"], state["epoch"] + 1
        rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        status(f"resuming after epoch {state['epoch']} (best validation NLL {best_val:.4f})", progress)

    batch = int(opts.batch_size)  # type: ignore[arg-type]
    steps = -(-train_idx.size // batch)
    epochs_left = int(opts.max_epochs) - start_epoch + 1  # type: ignore[operator]
    try:
        with progress_bar(f"training P2L ({opts.loss}, {'fine-tuning' if opts.finetune else 'frozen'} {opts.backbone})",
                          max(epochs_left, 0) * steps, progress) as bar:
            for epoch in range(start_epoch, int(opts.max_epochs) + 1):  # type: ignore[arg-type]
                if bad_epochs >= opts.patience:
                    break
                head.train()
                backbone.train(opts.finetune)
                order = train_idx[rng.permutation(train_idx.size)]
                for s in range(0, order.size, batch):
                    i = order[s:s + batch]
                    loss = _batch_nll(head, features(i), a_t[i], b_t[i], w_t[i]) / w_t[i].sum()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    bar.update(1)
                val = nll_of(val_idx)
                history.append({"epoch": epoch, "train_nll": nll_of(train_idx), "val_nll": val})
                if val < best_val - 1e-6:
                    best_val, best_state, bad_epochs = val, trainable_state(), 0
                else:
                    bad_epochs += 1
                if ckpt_dir is not None:
                    _save_checkpoint(ckpt_dir, {
                        "fingerprint": fingerprint, "epoch": epoch, "current": trainable_state(),
                        "optimizer": optimizer.state_dict(), "best": best_state, "best_val": best_val,
                        "bad_epochs": bad_epochs, "history": history, "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(),
                    })
    except KeyboardInterrupt:
        if ckpt_dir is not None and (ckpt_dir / CHECKPOINT_FILE).is_file():
            status(f"interrupted: the last finished epoch is saved in {ckpt_dir}; rerun with --resume to continue",
                   True)
        raise
    stopped = "early stopping" if bad_epochs >= opts.patience else "max epochs"
    restore(best_state)
    best_epoch = int(min(history, key=lambda r: r["val_nll"])["epoch"])
    status(f"best epoch {best_epoch} of {int(history[-1]['epoch'])} ({stopped}); validation NLL "
           f"{history[0]['val_nll']:.4f} (marginal) -> {best_val:.4f} (P2L)", progress)

    marginal_frame = marginal.frame()
    model = P2LModel(backbone, head, names, {"loss": opts.loss}, marginal_frame)
    evaluation = compare_predictors(opts.loss, rows[val_idx], {
        "marginal": marginal_log_probs(opts.loss, marginal.coefs, marginal.extra, arrays.a[val_idx], arrays.b[val_idx]),
        "p2l": p2l_log_probs(model, list(distinct_prompts[prompt_codes[val_idx]]), arrays.a[val_idx], arrays.b[val_idx]),
    })
    run = {**asdict(opts), "n_battles": int(len(table)), "n_prompts": int(len(distinct_prompts)),
           "train_battles": int(train_idx.size), "val_battles": int(val_idx.size), "best_epoch": best_epoch,
           "stopped": stopped, "marginal_extra": marginal.extra}
    return TrainResult(model, pd.DataFrame(history), evaluation, run, ckpt_dir)
