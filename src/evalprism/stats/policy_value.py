"""The value of a routing policy on held-out pairwise verdicts, with standard errors by prompt.

A battle set gives, for each prompt p and each model m that fought on p, m's held-out score on p:
its mean result over the battles of p that involve it (a win 1, a tie of either kind ½, a loss 0;
a soft label ``p_b`` gives the fractional result) -- the win rate of Chatbot Arena's tables and of
RouterBench's pairwise setting, restricted to one prompt. :func:`prompt_scores` computes it.

A routing policy sends prompt p to model m with probability π_p(m). Its value on p is the expected
held-out score of the model it draws. Pairwise battle sets cover only a few models per prompt (on
EloBench's RWQ about 4 of 23), so for most prompts most models have no verdict. A draw that lands on
a model without a verdict on p is *excluded*, not scored: the policy's value is the mean score over
the draws that can be scored, in expectation over the draw (Rao-Blackwellised)::

    w_p = Σ_{m scored on p} π_p(m)           (the policy's covered mass on p, 0..1)
    v_p = Σ_{m scored on p} π_p(m) s_p(m) / w_p
    V   = Σ_p w_p v_p / Σ_p w_p

For a deterministic policy w_p is 1 or 0: V is its mean score over the prompts whose chosen model
has a verdict, and Σ_p (1 − w_p) counts the prompts left out. When which models fight on a prompt
does not depend on the prompt's outcomes (random pairing, as in Chatbot Arena and EloBench's
arrangement), the scored draws are a random subsample of all draws and V estimates the policy's
value without bias; the cost is variance, which the standard errors carry.

Standard errors treat prompts as the independent draws (battles of one prompt are correlated): V is
a ratio of prompt sums, so its SE is the delta-method (linearised) sandwich with the small-sample
factor G/(G−1), ψ_p = w_p (v_p − V) / Σ w. The difference of two policies on the same prompts has
ψ_p^A − ψ_p^B, which carries their correlation (the paired SE). With every w_p = 1 both reduce to the
textbook SE of a mean over prompts, sd/√G. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PolicyValue", "paired_value_difference", "policy_value", "prompt_scores"]


def prompt_scores(
    prompt: np.ndarray, a: np.ndarray, b: np.ndarray, result_a: np.ndarray, n_prompts: int, n_models: int
) -> np.ndarray:
    """Held-out score (n_prompts, n_models) of each model on each prompt: the mean of its results in
    the battles of that prompt that involve it (``result_a``: model a's result per battle in [0, 1],
    b's is 1 − result_a); NaN where the model has no battle on the prompt."""
    assert prompt.shape == a.shape == b.shape == result_a.shape
    total = np.zeros((n_prompts, n_models))
    count = np.zeros((n_prompts, n_models))
    np.add.at(total, (prompt, a), result_a)
    np.add.at(total, (prompt, b), 1.0 - result_a)
    np.add.at(count, (prompt, a), 1.0)
    np.add.at(count, (prompt, b), 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1.0), np.nan)


@dataclass(frozen=True)
class PolicyValue:
    """A policy on a battle set: ``value`` V and its ``se``; ``covered`` w_p and ``prompt_value`` v_p
    per prompt (NaN where w_p = 0); ``scored`` Σ w_p and ``excluded`` Σ (1 − w_p), in prompts."""

    value: float
    se: float
    covered: np.ndarray
    prompt_value: np.ndarray

    @property
    def scored(self) -> float:
        return float(self.covered.sum())

    @property
    def excluded(self) -> float:
        return float(self.covered.size - self.covered.sum())

    def influence(self) -> np.ndarray:
        """ψ_p = w_p (v_p − V) / Σ w (0 where w_p = 0): V's linearisation by prompt."""
        total = self.covered.sum()
        if total <= 0:
            return np.full(self.covered.shape, np.nan)
        return np.where(self.covered > 0, self.covered * (np.nan_to_num(self.prompt_value) - self.value), 0.0) / total


def _sandwich(psi: np.ndarray) -> float:
    g = psi.size
    if g < 2 or not np.all(np.isfinite(psi)):
        return float("nan")
    return float(np.sqrt(g / (g - 1) * np.sum(psi**2)))


def policy_value(probs: np.ndarray, scores: np.ndarray) -> PolicyValue:
    """The held-out value of a policy (module docstring): ``probs`` (G, M) or (M,) for the same
    distribution on every prompt, ``scores`` (G, M) from :func:`prompt_scores` (NaN: no verdict)."""
    scores = np.asarray(scores, dtype=np.float64)
    pi = np.broadcast_to(np.asarray(probs, dtype=np.float64), scores.shape)
    seen = np.isfinite(scores)
    covered = np.where(seen, pi, 0.0).sum(axis=1)
    covered = np.where(covered > 1e-12, covered, 0.0)  # float dust of a mix is no coverage
    mass = np.where(seen, pi * np.nan_to_num(scores), 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_prompt = np.where(covered > 0, mass / np.where(covered > 0, covered, 1.0), np.nan)
    total = covered.sum()
    value = float((covered * np.nan_to_num(per_prompt)).sum() / total) if total > 0 else float("nan")
    out = PolicyValue(value, float("nan"), covered, per_prompt)
    return PolicyValue(value, _sandwich(out.influence()) if total > 0 else float("nan"), covered, per_prompt)


def paired_value_difference(first: PolicyValue, second: PolicyValue) -> tuple[float, float]:
    """V_first − V_second on the same prompts and its paired standard error by prompt (the sandwich
    of ψ_first − ψ_second, module docstring)."""
    assert first.covered.shape == second.covered.shape
    return first.value - second.value, _sandwich(first.influence() - second.influence())
