"""The P2L model: a backbone and a coefficient head that turn a prompt into a leaderboard.

The head is one linear layer with M outputs, one Bradley-Terry coefficient per model (seed 002
section 3.1), plus one output for the tie parameter of an outcome model that has one (Rao-Kupper's η ≥ 0,
grounded Rao-Kupper's λ ≥ 1, eq. 8), mapped onto the parameter's domain as its registry entry says
(:class:`~evalprism.stats.outcome_models.TieParameter`), as in lmarena/p2l. The outcome
probabilities are the outcome model's entry in :mod:`evalprism.stats.outcome_models`, the same model as the
marginal fits (in torch: :mod:`evalprism.p2l.likelihood`), so a P2L model with a constant head is
exactly the marginal model.

A model directory holds ``config.json`` (backbone spec, outcome_model, model list, training options and
metrics), ``head.safetensors``, ``marginal.csv`` (the marginal fit on the training battles, the
baseline and the head's starting point; its tie parameter in config.json's ``marginal`` entry: one
:class:`~evalprism.p2l.baseline.MarginalBaseline`) and, when the backbone was fine-tuned, ``backbone/``.
:meth:`P2LModel.load` also loads a checkpoint in the layout lmarena released (``model_list.json``
beside a Qwen2/Llama base model and its head, :mod:`evalprism.p2l.lmarena`). Loading needs no network.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from safetensors.torch import load_file, save

from evalprism.errors import EvalprismError
from evalprism.io.options import check_choice
from evalprism.io.outputs import write_json
from evalprism.p2l.backbones import Backbone, describe, load_backbone
from evalprism.p2l.baseline import CONFIG_ENTRY, MARGINAL_FILE, MarginalBaseline
from evalprism.p2l.head import HEAD_FILE as HEAD_FILE
from evalprism.p2l.head import CoefficientHead as CoefficientHead
from evalprism.p2l.head import LeaderboardHead as LeaderboardHead
from evalprism.p2l.likelihood import TORCH_OPS
from evalprism.p2l.lmarena import is_lmarena_checkpoint, load_lmarena, read_model_list
from evalprism.stats.outcome_models import OUTCOME_MODEL_NAMES, OUTCOME_MODELS, get_outcome_model
from evalprism.vocabularies import OutcomeModelName, RouteValue

CONFIG_FILE = "config.json"
#: the layout of a model directory (config.json's keys, the head's tensors, marginal.csv). Recorded in
#: config.json's ``evalprism`` entry with the version that wrote it; a directory without the entry is
#: format 1 (written before the entry existed). Raise it when a change makes older evalprism misread a
#: model; a newer format is refused with one message, older ones are read (:func:`upgraded_config`).
#: Format 2 names the outcome model ``outcome_model`` where format 1 said ``loss`` (top level and in
#: the ``training`` options).
MODEL_FORMAT = 2
#: keys each format renamed, read under their new names from older directories: format -> {old: new}
RENAMED_KEYS = {2: {"loss": "outcome_model"}}


@dataclass(frozen=True)
class Prediction:
    """Per-prompt leaderboards ``coefs`` (n, M) and the reported tie parameter per prompt (η for rk,
    λ for grk: :attr:`TieParameter.symbol <evalprism.stats.outcome_models.TieParameter.symbol>`);
    ``raw_extra`` is the same parameter in the form the likelihood takes, as the head gave it
    (evaluation reads it; None when only the reported value is known)."""

    coefs: np.ndarray
    extra: np.ndarray | None
    raw_extra: np.ndarray | None = None


class P2LModel:
    """A trained prompt-to-leaderboard model. ``models`` lists the model names in coefficient order."""

    def __init__(
        self,
        backbone: Backbone,
        head: LeaderboardHead,
        models: list[str],
        config: dict[str, Any],
        marginal: MarginalBaseline | None = None,
    ) -> None:
        self.backbone = backbone
        self.head = head
        self.models = list(models)
        self.config = config
        self.marginal = marginal

    @property
    def outcome_model(self) -> OutcomeModelName:
        """The outcome model of the battles the head was trained on (checked when the directory was read)."""
        return check_choice("outcome_model", self.config["outcome_model"], OutcomeModelName)

    def predict(self, prompts: Sequence[str], batch_size: int = 4096) -> Prediction:
        """Leaderboards for ``prompts`` (features in batches of ``batch_size``; no gradients). Large
        batches let the embedder sort by length across more prompts (less padding)."""
        prompts = [p if isinstance(p, str) else str(p) for p in prompts]  # a Conversation keeps its turns
        coefs, raws, extras = [], [], []
        tie = self.head.tie
        self.head.eval()
        self.backbone.eval()
        with torch.no_grad():
            for start in range(0, len(prompts), batch_size):
                c, e = self.head(self.backbone.features(prompts[start : start + batch_size]).float())
                coefs.append(c.numpy())
                if tie is not None:
                    raws.append(e.numpy())
                    extras.append(tie.report(TORCH_OPS, e).numpy())
        n = len(self.models)
        out = np.concatenate(coefs).astype(np.float64) if coefs else np.zeros((0, n))
        if not raws:
            return Prediction(out, None)
        return Prediction(out, np.concatenate(extras).astype(np.float64), np.concatenate(raws).astype(np.float64))

    @property
    def routing_value(self) -> RouteValue:
        """How this model's leaderboards value a model when routing (:func:`evalprism.p2l.route`'s
        ``model``), the training outcome model's ``route_by`` in the outcome-model registry: ``grk``
        coefficients are absolute, so a model's value is σ(β), its chance of not being worse than
        the "bad" model (seed eq. 8); every shift-invariant outcome model gives BT-scale coefficients, valued
        by win rate against the opponent distribution. The CLI, the library and the service all read
        this one property."""
        return get_outcome_model(self.outcome_model).route_by

    def leaderboards(self, prompts: Sequence[str]) -> np.ndarray:
        """Array (n_prompts, n_models): the coefficient of every model on every prompt."""
        return self.predict(prompts).coefs

    def save(self, directory: str | Path, extra_config: dict[str, Any] | None = None) -> Path:
        """Write the model into ``directory`` (which should be empty or a staging directory)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        spec = self.backbone.save_weights(directory)
        from evalprism import __version__

        config = {
            **self.config,
            **(extra_config or {}),
            "models": self.models,
            "outcome_model": self.outcome_model,
            "backbone": {**describe(self.backbone), "spec": spec},
            "evalprism": {"version": __version__, "format": MODEL_FORMAT},
        }
        # serialised here and written by Python: a full disk is then an OSError naming its cause (safetensors'
        # own writer raises a SafetensorError with the cause in its text); the head is kilobytes
        head = save({k: v.detach().contiguous() for k, v in self.head.state_dict().items()})
        (directory / HEAD_FILE).write_bytes(head)
        if self.marginal is not None:
            config[CONFIG_ENTRY] = self.marginal.save(directory)
        write_json(directory / CONFIG_FILE, config)
        self.config = config
        return directory

    @classmethod
    def load(
        cls,
        directory: str | Path,
        *,
        cache_dir: str | Path | bool | None = None,
        progress: bool = False,
        precision: str = "float32",
        runtime: str = "torch",
    ) -> P2LModel:
        """Load a model directory written by ``evalprism p2l train``, or a P2L checkpoint lmarena
        released, downloaded by the user (detected by its ``model_list.json``:
        :mod:`evalprism.p2l.lmarena`). No network needed.

        ``precision="bfloat16"`` runs the backbone in bfloat16 (the head stays float32): faster
        inference on CPUs with native bf16, leaderboards within about 1e-2 of float32's.
        ``runtime="openvino"`` (or ``auto``) runs a sentence-encoder backbone in OpenVINO, the
        router service's default: the same leaderboards (float32: to ~1e-6), faster on a CPU."""
        directory = Path(directory)
        if is_lmarena_checkpoint(directory):
            return cls(*load_lmarena(directory, precision=precision, runtime=runtime, progress=progress))
        config, state, marginal = read_model_files(directory)
        models, outcome_model = list(config["models"]), config["outcome_model"]
        backbone = load_backbone(
            str(config["backbone"]["spec"]),
            cache_dir=cache_dir,
            progress=progress,
            root=directory,
            precision=precision,
            runtime=runtime,
        )
        head = CoefficientHead(backbone.dim, len(models), outcome_model)
        try:
            head.load_state_dict(state)
        except RuntimeError as exc:
            raise invalid_model_dir(
                directory,
                f"{HEAD_FILE} does not match {CONFIG_FILE} ({len(models)} models, "
                f"{backbone.dim}-dim backbone): {str(exc).splitlines()[-1].strip()}",
            ) from None
        return cls(backbone, head, models, config, marginal)


def model_names(directory: str | Path) -> list[str]:
    """The model list of a model directory (evalprism's or a released lmarena checkpoint), read and
    checked without loading the backbone: routing checks costs, budget and opponent against it before
    the slow part (loading the encoder, encoding every prompt)."""
    directory = Path(directory)
    if is_lmarena_checkpoint(directory):
        return read_model_list(directory)
    return list(read_model_files(directory)[0]["models"])


def invalid_model_dir(directory: str | Path, what: str) -> EvalprismError:
    """The one message for a model directory that cannot be used, whatever part of it is wrong."""
    return EvalprismError(f"{directory}: not a valid evalprism model directory: {what}")


def check_model_format(directory: Path, written_by: object) -> int:
    """The model format of a directory (config.json's ``evalprism`` entry; none: format 1, written
    before the entry existed); a newer format than this evalprism reads is refused."""
    from evalprism import __version__

    if written_by is None:
        return 1
    fmt = written_by.get("format") if isinstance(written_by, dict) else None
    if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt < 1:
        raise invalid_model_dir(
            directory,
            f"{CONFIG_FILE}: 'evalprism' must hold the model format (a whole number from 1), got {written_by!r}",
        )
    if fmt > MODEL_FORMAT:
        version = written_by.get("version", "a newer version") if isinstance(written_by, dict) else "?"
        raise EvalprismError(
            f"{directory}: written by evalprism {version} in model format {fmt}; this evalprism "
            f"({__version__}) reads formats up to {MODEL_FORMAT}: upgrade evalprism to use it"
        )
    return fmt


def upgraded_config(config: dict[str, Any], fmt: int) -> dict[str, Any]:
    """``config`` of model format ``fmt`` with the keys later formats renamed under their new names
    (:data:`RENAMED_KEYS`), at the top level and in the ``training`` options: older directories are
    read as they are, never rewritten."""
    out = dict(config)
    for version, renames in sorted(RENAMED_KEYS.items()):
        if fmt >= version:
            continue
        for old, new in renames.items():
            if old in out and new not in out:
                out[new] = out.pop(old)
            training = out.get("training")
            if isinstance(training, dict) and old in training and new not in training:
                out["training"] = {new if k == old else k: v for k, v in training.items()}
    return out


def read_model_files(directory: Path) -> tuple[dict[str, Any], dict[str, torch.Tensor], MarginalBaseline | None]:
    """Read and check a model directory's own files before any backbone is loaded: ``config.json``
    (:func:`read_model_config`), ``head.safetensors`` (:func:`read_head`) and ``marginal.csv`` when
    present (:func:`read_marginal`)."""
    from evalprism.io.preflight import model_directory

    directory = model_directory(directory)
    for path in (directory / CONFIG_FILE, directory / HEAD_FILE):
        if not path.is_file():
            raise invalid_model_dir(directory, f"{path.name} is missing (train one with `evalprism p2l train`)")
    config = read_model_config(directory)
    return config, read_head(directory, config), read_marginal(directory, config)


def read_model_config(directory: Path) -> dict[str, Any]:
    """A model directory's ``config.json``, upgraded to the current format (:func:`upgraded_config`):
    a JSON object with a model list of distinct names, a known outcome model and a backbone spec."""
    from evalprism.io.text import read_text

    try:
        config = json.loads(read_text(directory / CONFIG_FILE))
    except json.JSONDecodeError as exc:
        raise invalid_model_dir(
            directory, f"{CONFIG_FILE} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except EvalprismError as exc:
        raise invalid_model_dir(directory, str(exc)) from None
    if isinstance(config, dict):
        config = upgraded_config(config, check_model_format(directory, config.get("evalprism")))
    models = config.get("models") if isinstance(config, dict) else None
    backbone = config.get("backbone") if isinstance(config, dict) else None
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
        raise invalid_model_dir(directory, f"{CONFIG_FILE}: 'models' must be a non-empty list of model names")
    if len(set(models)) != len(models):
        raise invalid_model_dir(directory, f"{CONFIG_FILE}: 'models' names a model twice")
    if config.get("outcome_model") not in OUTCOME_MODEL_NAMES:
        raise invalid_model_dir(
            directory,
            f"{CONFIG_FILE}: 'outcome_model' is {config.get('outcome_model')!r}, "
            f"expected one of {', '.join(OUTCOME_MODEL_NAMES)}",
        )
    if not isinstance(backbone, dict) or not isinstance(backbone.get("spec"), str):
        raise invalid_model_dir(directory, f"{CONFIG_FILE}: 'backbone' must hold the backbone's 'spec'")
    return config


def read_head(directory: Path, config: dict[str, Any]) -> dict[str, torch.Tensor]:
    """A model directory's ``head.safetensors``: readable, finite, one output per model of the checked
    ``config`` plus the tie parameter of rk/grk."""
    try:
        state = load_file(str(directory / HEAD_FILE))
    except Exception as exc:  # safetensors raises its own error type for truncated or foreign files
        raise invalid_model_dir(
            directory, f"{HEAD_FILE} cannot be read ({type(exc).__name__}: {str(exc) or 'empty file'})"
        ) from None
    models = config["models"]
    outputs = len(models) + OUTCOME_MODELS[config["outcome_model"]].n_extra
    weight = state.get("linear.weight")
    if weight is None or weight.ndim != 2 or weight.shape[0] != outputs:
        shape = "no 'linear.weight'" if weight is None else f"'linear.weight' of shape {tuple(weight.shape)}"
        raise invalid_model_dir(
            directory,
            f"{HEAD_FILE} holds {shape}, expected {outputs} outputs (the {len(models)} models of {CONFIG_FILE})",
        )
    if not all(bool(torch.isfinite(t).all()) for t in state.values()):
        raise invalid_model_dir(directory, f"{HEAD_FILE} holds NaN or infinite weights")
    return state


def read_marginal(directory: Path, config: dict[str, Any]) -> MarginalBaseline | None:
    """A model directory's ``marginal.csv``, or None without one: a finite ``coef`` for exactly the
    checked ``config``'s models, with its tie parameter (:meth:`MarginalBaseline.from_config`)."""
    from evalprism.io.schema import Column, Schema

    if not (directory / MARGINAL_FILE).is_file():
        return None
    schema = Schema("marginal", (Column("model", "key"), Column("coef", "number")))
    try:
        marginal = schema.validate(pd.read_csv(directory / MARGINAL_FILE), source=MARGINAL_FILE)
    except (ValueError, pd.errors.ParserError, EvalprismError) as exc:  # ParserError, EmptyDataError, decoding
        raise invalid_model_dir(
            directory,
            str(exc)
            if isinstance(exc, EvalprismError)
            else f"{MARGINAL_FILE} cannot be read ({str(exc).strip().splitlines()[0]})",
        ) from None
    if sorted(marginal["model"]) != sorted(config["models"]):
        raise invalid_model_dir(directory, f"{MARGINAL_FILE} lists other models than {CONFIG_FILE}")
    marginal.attrs = {}
    try:
        return MarginalBaseline.from_config(marginal, config)
    except EvalprismError as exc:
        raise invalid_model_dir(directory, str(exc)) from None
