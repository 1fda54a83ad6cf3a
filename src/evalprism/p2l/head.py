"""The P2L head: features -> one coefficient per model (and the raw tie parameter of an outcome model with one).

:class:`LeaderboardHead` is what a :class:`~evalprism.p2l.model.P2LModel` predicts through: evalprism's
own :class:`CoefficientHead`, or the head of a released lmarena checkpoint
(:class:`evalprism.p2l.lmarena.LmarenaHead`). It lives apart from :mod:`evalprism.p2l.model` so that
the model loads lmarena's checkpoints and lmarena's head subclasses this one without either module
importing the other back.
"""

from __future__ import annotations

import torch
from torch import nn

from evalprism.p2l.likelihood import TORCH_OPS, log_outcome_probs
from evalprism.stats.outcome_models import get_outcome_model
from evalprism.vocabularies import OutcomeModelName

__all__ = ["HEAD_FILE", "CoefficientHead", "LeaderboardHead"]

#: the head's weights in a model directory
HEAD_FILE = "head.safetensors"


class LeaderboardHead(nn.Module):
    """features (n, dim) -> coefficients (n, M) and the raw tie parameter (n,) of the outcome model's
    registry entry (None for an outcome model without one). Subclasses define ``forward``: evalprism's own
    :class:`CoefficientHead`, and the head of a released lmarena checkpoint
    (:class:`evalprism.p2l.lmarena.LmarenaHead`), which maps its outputs onto the same raw values."""

    def __init__(self, n_models: int, outcome_model: OutcomeModelName) -> None:
        super().__init__()
        self.n_models = n_models
        self.outcome_model = outcome_model
        self.tie = get_outcome_model(outcome_model).extra
        self.has_extra = self.tie is not None

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:  # pragma: no cover
        raise NotImplementedError

    def log_probs(self, features: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Log-probabilities (n, 4) of the outcomes of battles a vs b on the prompts behind ``features``."""
        coefs, extra = self(features)
        rows = torch.arange(coefs.shape[0])
        return log_outcome_probs(self.outcome_model, coefs[rows, a], coefs[rows, b], extra)


class CoefficientHead(LeaderboardHead):
    """One linear layer: M coefficients, plus one unconstrained output for the tie parameter of a
    loss with one, mapped onto its domain by the registry entry (:meth:`TieParameter.from_head
    <evalprism.stats.outcome_models.TieParameter.from_head>`)."""

    def __init__(self, dim: int, n_models: int, outcome_model: OutcomeModelName) -> None:
        super().__init__(n_models, outcome_model)
        self.linear = nn.Linear(dim, n_models + int(self.has_extra))
        nn.init.zeros_(self.linear.weight)  # start at the constant (marginal) leaderboard in the bias
        nn.init.zeros_(self.linear.bias)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = self.linear(features)
        if self.tie is None:
            return out, None
        return out[:, : self.n_models], self.tie.from_head(TORCH_OPS, out[:, self.n_models])
