"""The routing policies of a router benchmark, one budget rule for all of them.

Every learned policy (P2L and each baseline of :mod:`evalprism.p2l.routers`) routes by the same rule:
per item, maximise predicted quality subject to an expected cost at most the budget, Theorem 1 in
closed form (:func:`~evalprism.stats.routing.best_mix`; a mix of at most two models). A router is then
only as good as its predictions, which is what the benchmark compares. Beside them:

- ``best single``: the one model, among those within the budget, with the highest mean quality on the
  training items;
- ``random mix``: prompt-blind, π ∝ exp(−t c), its expected cost matched to the reference router's
  (:func:`~evalprism.p2l.heldout_routing.cost_matched_mix`): what routing buys beyond spending;
- ``oracle``: Theorem 1 on the held-out scores themselves (it reads the truth: a reference, not a
  policy one could run; with every model scored on every item, an upper bound; on battles
  :func:`~evalprism.p2l.heldout_routing.oracle_policy`, among the models with a verdict on the prompt).

A policy is valued pointwise on graded items (:func:`item_outcomes`) or by its held-out win rate on
battles (:func:`battle_outcomes`, ``p2l evaluate --costs``'s valuation).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evalprism.p2l.heldout_routing import cost_matched_mix, oracle_policy
from evalprism.stats.policy_value import PolicyValue, policy_value
from evalprism.stats.routing import best_mix

#: the policies without a learned predictor, in table order after the learned ones
FIXED_POLICIES: tuple[str, ...] = ("best single", "random mix", "oracle")


def routed(predicted: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """The budget rule (module docstring): π (n, M) from predicted quality (n, M) and costs (M,)."""
    return best_mix(predicted, cost, budget)


def best_single(train_means: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """One-hot (M,) on the best model by training mean among those whose cost fits the budget."""
    affordable = np.flatnonzero(cost <= budget + 1e-12)
    probs = np.zeros(cost.size)
    probs[int(affordable[np.argmax(train_means[affordable])])] = 1.0
    return probs


def learned_policies(predictions: Mapping[str, np.ndarray], cost: np.ndarray, budget: float) -> dict[str, np.ndarray]:
    """Each learned predictor's routing distribution (n, M) at ``budget``."""
    return {name: routed(pred, cost, budget) for name, pred in predictions.items()}


def fixed_policies(
    train_means: np.ndarray, truth: np.ndarray, cost: np.ndarray, budget: float, matched_spend: float
) -> dict[str, np.ndarray]:
    """The best single model, the random mix spending ``matched_spend`` and the oracle at ``budget``."""
    return {
        "best single": best_single(train_means, cost, budget),
        "random mix": cost_matched_mix(cost, min(matched_spend, budget)),
        "oracle": oracle_policy(truth, cost, budget),
    }


def item_outcomes(probs: np.ndarray, truth: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pointwise value and cost of a policy on each item (n,): the expected held-out score and cost of
    the model it draws (``probs`` (n, M), or (M,) for the same distribution on every item; ``cost`` (M,)
    per model, or (n, M) each item's own cost per model)."""
    pi = np.broadcast_to(np.asarray(probs, dtype=np.float64), truth.shape)
    spent = pi @ cost if cost.ndim == 1 else (pi * cost).sum(axis=1)
    return (pi * truth).sum(axis=1), spent


def battle_outcomes(probs: np.ndarray, scores: np.ndarray, cost: np.ndarray) -> tuple[PolicyValue, np.ndarray]:
    """A policy's held-out value on battles (:func:`~evalprism.stats.policy_value.policy_value`: the win
    rate of the model it draws on each prompt, draws without a verdict excluded) and its expected cost
    on each prompt (n,); ``scores`` (n, M) the held-out win rates (NaN: no battle), ``cost`` (M,)."""
    pi = np.broadcast_to(np.asarray(probs, dtype=np.float64), scores.shape)
    return policy_value(probs, scores), pi @ cost
