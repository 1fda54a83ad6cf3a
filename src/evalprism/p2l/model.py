"""The P2L model: a backbone and a coefficient head that turn a prompt into a leaderboard.

The head is one linear layer with M outputs, one Bradley-Terry coefficient per model (seed 002
section 3.1), plus one output for the tie parameter of Rao-Kupper (η = softplus(raw) ≥ 0) or of
grounded Rao-Kupper (λ = 1 + exp(raw) ≥ 1, eq. 8), as in lmarena/p2l. The outcome
probabilities come from the same :func:`evalprism.stats.pairwise.log_outcome_probs` as the marginal
fits, so a P2L model with a constant head is exactly the marginal model.

A model directory holds ``config.json`` (backbone spec, loss, model list, training options and
metrics), ``head.safetensors``, ``marginal.csv`` (the marginal fit on the training battles, the
baseline and the head's starting point) and, when the backbone was fine-tuned, ``backbone/``.
Loading needs no network.
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
from safetensors.torch import load_file, save_file
from torch import nn

from evalprism.errors import EvalprismError
from evalprism.p2l.backbones import Backbone, describe, load_backbone
from evalprism.stats.pairwise import PAIR_MODELS, log_outcome_probs

CONFIG_FILE = "config.json"
HEAD_FILE = "head.safetensors"
MARGINAL_FILE = "marginal.csv"


class CoefficientHead(nn.Module):
    """features (n, dim) -> coefficients (n, M) and the raw tie parameter (n,) for rk / grk."""

    def __init__(self, dim: int, n_models: int, loss: str) -> None:
        super().__init__()
        self.n_models = n_models
        self.loss = loss
        self.has_extra = loss in ("rk", "grk")
        self.linear = nn.Linear(dim, n_models + int(self.has_extra))
        nn.init.zeros_(self.linear.weight)  # start at the constant (marginal) leaderboard in the bias
        nn.init.zeros_(self.linear.bias)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.linear(features)
        if not self.has_extra:
            return out, None
        raw = out[:, self.n_models]
        extra = nn.functional.softplus(raw) if self.loss == "rk" else raw
        return out[:, : self.n_models], extra

    def log_probs(self, features: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (n, 4) of the outcomes of battles a vs b on the prompts behind ``features``."""
        coefs, extra = self(features)
        rows = torch.arange(coefs.shape[0])
        return log_outcome_probs(self.loss, coefs[rows, a], coefs[rows, b], extra)


@dataclass(frozen=True)
class Prediction:
    """Per-prompt leaderboards ``coefs`` (n, M) and the tie parameter per prompt (η for rk, λ for grk)."""

    coefs: np.ndarray
    extra: np.ndarray | None


class P2LModel:
    """A trained prompt-to-leaderboard model. ``models`` lists the model names in coefficient order."""

    def __init__(self, backbone: Backbone, head: CoefficientHead, models: list[str], config: dict[str, Any],
                 marginal: pd.DataFrame | None = None) -> None:
        self.backbone = backbone
        self.head = head
        self.models = list(models)
        self.config = config
        self.marginal = marginal

    @property
    def loss(self) -> str:
        return str(self.config["loss"])

    def predict(self, prompts: Sequence[str], batch_size: int = 4096) -> Prediction:
        """Leaderboards for ``prompts`` (features in batches of ``batch_size``; no gradients). Large
        batches let the embedder sort by length across more prompts (less padding)."""
        prompts = [str(p) for p in prompts]
        coefs, extras = [], []
        self.head.eval()
        self.backbone.eval()
        with torch.no_grad():
            for start in range(0, len(prompts), batch_size):
                c, e = self.head(self.backbone.features(prompts[start:start + batch_size]).float())
                coefs.append(c.numpy())
                if e is not None:
                    extras.append((1.0 + torch.exp(e) if self.loss == "grk" else e).numpy())
        n = len(self.models)
        out = np.concatenate(coefs).astype(np.float64) if coefs else np.zeros((0, n))
        extra = np.concatenate(extras).astype(np.float64) if extras else None
        return Prediction(out, extra)

    def leaderboards(self, prompts: Sequence[str]) -> np.ndarray:
        """Array (n_prompts, n_models): the coefficient of every model on every prompt."""
        return self.predict(prompts).coefs

    def save(self, directory: str | Path, extra_config: dict[str, Any] | None = None) -> Path:
        """Write the model into ``directory`` (which should be empty or a staging directory)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        spec = self.backbone.save_weights(directory)
        config = {**self.config, **(extra_config or {}), "models": self.models, "loss": self.loss,
                  "backbone": {**describe(self.backbone), "spec": spec}}
        save_file({k: v.detach().contiguous() for k, v in self.head.state_dict().items()}, str(directory / HEAD_FILE))
        if self.marginal is not None:
            self.marginal.to_csv(directory / MARGINAL_FILE, index=False)
        (directory / CONFIG_FILE).write_text(json.dumps(config, indent=2, default=str) + "\n", encoding="utf-8")
        self.config = config
        return directory

    @classmethod
    def load(cls, directory: str | Path, *, cache_dir: str | Path | None | bool = None,
             progress: bool = False, precision: str = "float32", runtime: str = "torch") -> P2LModel:
        """Load a model directory written by ``evalprism p2l train`` (no network needed).

        ``precision="bfloat16"`` runs the backbone in bfloat16 (the head stays float32): faster
        inference on CPUs with native bf16, leaderboards within about 1e-2 of float32's.
        ``runtime="openvino"`` (or ``auto``) runs a sentence-encoder backbone in OpenVINO, the
        router service's default: the same leaderboards (float32: to ~1e-6), faster on a CPU."""
        directory = Path(directory)
        config_path = directory / CONFIG_FILE
        if not config_path.is_file() or not (directory / HEAD_FILE).is_file():
            raise EvalprismError(f"{directory}: not a P2L model directory (expected {CONFIG_FILE} and {HEAD_FILE}; "
                                 "train one with `evalprism p2l train`)")
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
            models, loss, spec = list(config["models"]), str(config["loss"]), str(config["backbone"]["spec"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise EvalprismError(f"{config_path}: unreadable model config ({type(exc).__name__}: {exc})") from None
        if loss not in PAIR_MODELS:
            raise EvalprismError(f"{config_path}: unknown loss '{loss}'")
        backbone = load_backbone(spec, cache_dir=cache_dir, progress=progress, root=directory, precision=precision,
                                 runtime=runtime)
        head = CoefficientHead(backbone.dim, len(models), loss)
        try:
            head.load_state_dict(load_file(str(directory / HEAD_FILE)))
        except (RuntimeError, OSError) as exc:
            raise EvalprismError(f"{directory / HEAD_FILE}: does not match the config "
                                 f"({len(models)} models, {backbone.dim}-dim backbone): {exc}") from None
        marginal = pd.read_csv(directory / MARGINAL_FILE) if (directory / MARGINAL_FILE).is_file() else None
        return cls(backbone, head, models, config, marginal)
