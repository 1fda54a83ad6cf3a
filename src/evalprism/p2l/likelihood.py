"""The pairwise outcome models in torch: the log-probabilities the P2L head trains and predicts with.

Each model's formula is its entry's ``log_probs`` in :mod:`evalprism.stats.outcome_models`, written
against a small array namespace; :data:`TORCH_OPS` is torch's, so autograd differentiates the very
formula the marginal fits' numpy derivatives are held to in the tests. Nothing here is per model:
a new entry in the registry works here unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from evalprism.stats.outcome_models import ArrayOps, get_outcome_model
from evalprism.stats.pairwise import PairCounts
from evalprism.vocabularies import OutcomeModelName

__all__ = ["TORCH_OPS", "log_outcome_probs", "pairwise_nll"]


class _TorchOps:
    """:class:`~evalprism.stats.outcome_models.ArrayOps` in torch (any dtype, differentiable)."""

    exp = staticmethod(torch.exp)
    log = staticmethod(torch.log)
    sigmoid = staticmethod(torch.sigmoid)
    logsigmoid = staticmethod(torch.nn.functional.logsigmoid)
    softplus = staticmethod(torch.nn.functional.softplus)

    @staticmethod
    def clamp_min(x: torch.Tensor, low: float) -> torch.Tensor:
        return torch.clamp(x, min=low)

    @staticmethod
    def stack(xs: Sequence[torch.Tensor]) -> torch.Tensor:
        return torch.stack(list(xs), dim=-1)

    @staticmethod
    def full_like(x: torch.Tensor, value: float) -> torch.Tensor:
        return torch.full_like(x, value)


TORCH_OPS: ArrayOps = _TorchOps()


def log_outcome_probs(
    outcome_model: OutcomeModelName, coef_a: torch.Tensor, coef_b: torch.Tensor, extra: torch.Tensor | None
) -> torch.Tensor:
    """Log-probabilities (n, 4) of (A wins, B wins, tie, tie both bad) under ``outcome_model``,
    with ``extra`` the raw tie parameter (None for an outcome model without one).

    Outcomes an outcome model does not have get log-probability −inf (they carry zero weight in the fits).
    """
    return get_outcome_model(outcome_model).log_probs(TORCH_OPS, coef_a, coef_b, extra)


def pairwise_nll(
    outcome_model: OutcomeModelName, x: torch.Tensor, pairs: PairCounts, weights: torch.Tensor
) -> torch.Tensor:
    """Negative log-likelihood of the aggregated counts at parameters ``x`` (coefs [+ raw extra]):
    the marginal fit's objective in torch, for autograd checks of its numpy derivatives."""
    entry = get_outcome_model(outcome_model)
    coefs = x[: pairs.n_models]
    extra = x[pairs.n_models] if entry.extra is not None else None
    logp = log_outcome_probs(outcome_model, coefs[torch.as_tensor(pairs.a)], coefs[torch.as_tensor(pairs.b)], extra)
    used = weights > 0
    return -(weights[used] * logp[used]).sum()
