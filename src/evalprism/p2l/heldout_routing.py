"""Routing policies valued on held-out verdicts (``evalprism p2l evaluate MODEL HELD_OUT --costs``).

``p2l route``'s budget curve values the router and the best single model with the same P2L
predictions, so the router wins by construction. Here every policy is valued on the *verdicts* of
held-out battles instead (:mod:`evalprism.stats.policy_value`: a model's held-out score on a prompt is
its win rate in that prompt's battles that involve it, a tie ½; a draw that lands on a model without a
verdict on the prompt is excluded and counted). This follows the offline router benchmarks:
RouterBench (Hu et al. 2024, arXiv:2403.12031) values a router by the mean quality of the model it
picks per prompt against its mean cost, beside every single model and an oracle that picks the best
model per prompt; RouterArena (Lu et al. 2025, arXiv:2510.00202) reports quality, cost and a
router's gap to that oracle. Their data score every model on every prompt; pairwise battles score a
few models per prompt, hence the exclusion rule and its counts.

Five policies per budget, all with the same per-prompt budget (each prompt's expected cost at most
the budget: Theorem 1 as stated), so the oracle faces the constraint the routers do:

- ``p2l``: Theorem 1 (:func:`~evalprism.stats.routing.best_mix`) on the P2L leaderboard of each prompt;
- ``best single``: the one model, among those whose cost fits the budget, with the highest value on
  the marginal leaderboard of the training battles (``marginal.csv``); a model without one (a released
  lmarena checkpoint) uses P2L's mean predicted value over the evaluation prompts. Chosen from
  training data and predictions only, never from the held-out verdicts;
- ``marginal router``: Theorem 1 on the marginal leaderboard (the same mix of at most two models on
  every prompt);
- ``random mix``: a prompt-blind distribution over all the models, π ∝ exp(−t c), with t set so that
  its expected cost equals the P2L router's mean expected cost (quality ignored, cost matched);
- ``oracle``: Theorem 1 on the held-out scores themselves, among the models with a verdict on the
  prompt (it reads the test verdicts: a reference, not a policy one could run). Where every model
  fought on every prompt it is an upper bound; on sparse battle sets it picks among the two to five
  models that fought on a prompt and is valued on more prompts than the routers, so it can score
  below them.

The value a router maximises is chosen by ``value``: ``score`` (the default), each model's expected
score against a uniform opponent under the model's full outcome probabilities, P(win) + ½ P(tie) +
½ P(both bad) -- the quantity the held-out value measures; or ``own``, the model's own routing value
(:attr:`~evalprism.p2l.model.P2LModel.routing_value`: the same for BT-scale models; σ(β) for ``grk``,
which saturates near 1 for the stronger models and so values routers alike: on RWQ's held-out prompts
the better 11 of 23 models have mean σ(β) between 0.91 and 0.99 where their expected scores run from
0.60 to 0.87). σ(β) is monotone in β, so both values pick the same best model on a prompt (on RWQ: every
prompt); they differ in how a router mixes models and in the values it reports.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import brentq
from scipy.special import expit

from evalprism.errors import EvalprismError
from evalprism.stats.outcome_models import NUMPY_OPS, get_outcome_model
from evalprism.stats.outcomes import A_WINS, B_WINS
from evalprism.stats.policy_value import PolicyValue, paired_value_difference, policy_value
from evalprism.stats.routing import best_mix, win_values
from evalprism.vocabularies import OutcomeModelName, RouteValueKind, choices

ROUTE_VALUE_KINDS = choices(RouteValueKind)
#: policies in the order of the table; the first is the one every other is compared with
POLICIES: tuple[str, ...] = ("p2l", "best single", "marginal router", "random mix", "oracle")
#: budgets when none are given: this many, spaced geometrically from the cheapest to the dearest model
DEFAULT_BUDGETS = 5


def score_values(outcome_model: OutcomeModelName, coefs: np.ndarray, extra: np.ndarray | float | None) -> np.ndarray:
    """Expected score (n, M) of each model against a uniform opponent over the M models (itself
    included, ½), under ``outcome_model``'s outcome probabilities: P(win) + ½ (P(tie) + P(both bad)).
    ``coefs`` (n, M); ``extra`` the *reported* tie parameter per prompt (n,) or one value."""
    theta = np.atleast_2d(np.asarray(coefs, dtype=np.float64))
    n, m = theta.shape
    entry = get_outcome_model(outcome_model)
    raw = None
    if entry.extra is not None:
        if extra is None:
            raise EvalprismError(f"outcome model {outcome_model!r} needs its tie parameter to value models")
        raw = np.broadcast_to(np.asarray(entry.extra.unreport(np.asarray(extra, dtype=np.float64))), (n,))
    out = np.empty((n, m))
    step = max(1, 2_000_000 // (m * m))
    for start in range(0, n, step):
        t = theta[start : start + step]
        k = t.shape[0]
        ca = np.broadcast_to(t[:, :, None], (k, m, m))
        cb = np.broadcast_to(t[:, None, :], (k, m, m))
        ex = None if raw is None else np.broadcast_to(raw[start : start + step, None, None], (k, m, m))
        with np.errstate(divide="ignore"):
            p = np.exp(entry.log_probs(NUMPY_OPS, ca, cb, ex))
        wins, losses = p[..., A_WINS], p[..., B_WINS]
        score = wins + 0.5 * (1.0 - wins - losses)  # the rest of the mass is a tie of either kind
        out[start : start + step] = score.mean(axis=2)
    return out


def own_values(route_by: str, coefs: np.ndarray) -> np.ndarray:
    """The model's own routing value (:func:`evalprism.p2l.route`'s): σ(β) for ``grk``, the win rate
    against a uniform opponent for BT-scale coefficients."""
    theta = np.atleast_2d(np.asarray(coefs, dtype=np.float64))
    if route_by == "grk":
        return expit(theta)
    return win_values(theta, np.full(theta.shape[1], 1.0 / theta.shape[1]))


def router_values(
    kind: str, outcome_model: OutcomeModelName, route_by: str, coefs: np.ndarray, extra: np.ndarray | float | None
) -> np.ndarray:
    """The values (n, M) a router maximises: ``score`` (:func:`score_values`) or ``own``."""
    if kind not in ROUTE_VALUE_KINDS:
        raise EvalprismError(
            f"unknown routing value {kind!r}; expected one of {', '.join(ROUTE_VALUE_KINDS)}", parameter="value"
        )
    return score_values(outcome_model, coefs, extra) if kind == "score" else own_values(route_by, coefs)


def default_budgets(cost: np.ndarray) -> list[float]:
    """:data:`DEFAULT_BUDGETS` budgets from the cheapest to the most expensive model's cost,
    geometrically spaced (evenly when the cheapest is free)."""
    low, high = float(cost.min()), float(cost.max())
    if high <= low:
        return [low]
    spaced = np.geomspace(low, high, DEFAULT_BUDGETS) if low > 0 else np.linspace(low, high, DEFAULT_BUDGETS)
    spaced[0], spaced[-1] = low, high  # exactly the two costs, not a rounding below the cheapest
    return [float(b) for b in spaced]


def cost_matched_mix(cost: np.ndarray, target: float) -> np.ndarray:
    """A prompt-blind distribution over all the models, π ∝ exp(−t c), whose expected cost is
    ``target`` (clipped to the range of the costs): quality plays no part. With ``target`` at most the
    budget, every prompt's expected cost is within it (the budget is on the expectation)."""
    low, high = float(cost.min()), float(cost.max())
    probs = np.zeros(cost.size)
    if target <= low + 1e-12 * max(1.0, abs(low)) or high - low <= 0:
        probs[cost == low] = 1.0
        return probs / probs.sum()
    if target >= high - 1e-12 * max(1.0, abs(high)):
        probs[cost == high] = 1.0
        return probs / probs.sum()
    scaled = (cost - low) / (high - low)

    def gibbs(t: float) -> np.ndarray:
        z = -t * scaled
        w = np.exp(z - z.max())
        return w / w.sum()

    t = brentq(lambda t: float(gibbs(t) @ cost) - target, -800.0, 800.0, xtol=1e-12)
    return gibbs(t)


def oracle_policy(scores: np.ndarray, cost: np.ndarray, budget: float) -> np.ndarray:
    """Theorem 1 on the held-out scores themselves: per prompt, the best distribution over the models
    with expected cost at most ``budget``, a model without a verdict on the prompt valued −1 (below any
    score), so it is used only where no scored model fits the budget (that mass is then excluded when
    valued). It reads the test verdicts: a reference, not a policy one could run. On sparse battle
    sets it chooses among the few models that fought on each prompt, so it is not an upper bound on a
    router valued on other prompts."""
    return best_mix(np.where(np.isfinite(scores), scores, -1.0), cost, budget)


def _policies(
    p2l: np.ndarray, single: np.ndarray, scores: np.ndarray, cost: np.ndarray, budget: float
) -> dict[str, np.ndarray]:
    """The routing distribution of each policy at ``budget`` ((G, M) or (M,))."""
    router = best_mix(p2l, cost, budget)
    affordable = cost <= budget + 1e-12
    best = np.zeros(cost.size)
    best[int(np.flatnonzero(affordable)[np.argmax(single[affordable])])] = 1.0
    spent = float((router @ cost).mean())
    return {
        "p2l": router,
        "best single": best,
        "marginal router": best_mix(single, cost, budget),
        "random mix": cost_matched_mix(cost, spent),
        "oracle": oracle_policy(scores, cost, budget),
    }


def _named(probs: np.ndarray, names: Sequence[str]) -> str:
    """The models a prompt-blind policy uses, with their shares; "per prompt" for a router."""
    if probs.ndim == 2:
        return "per prompt"
    order = np.argsort(-probs, kind="stable")
    used = [i for i in order if probs[i] > 0.005]
    shown = ", ".join(f"{names[i]} {probs[i]:.0%}" if probs[i] < 0.995 else names[i] for i in used[:3])
    return shown + (f" +{len(used) - 3} more" if len(used) > 3 else "")


def routing_table(
    p2l_values: np.ndarray,
    single_values: np.ndarray,
    scores: np.ndarray,
    cost: np.ndarray,
    names: Sequence[str],
    budgets: Sequence[float],
) -> pd.DataFrame:
    """The held-out router table: per budget and policy (:data:`POLICIES`), its held-out ``value``
    and ``se`` by prompt, ``p2l_gain`` (the P2L router's value minus this policy's, on the same
    prompts; positive: the router is better) with its paired standard error ``se_gain``, the expected
    ``cost`` per prompt, ``prompts_scored`` (Σ w_p) and
    ``prompts_excluded`` (routed mass without a verdict, in prompts), and ``models`` (what a
    prompt-blind policy routes to).

    ``p2l_values`` (G, M) and ``single_values`` (M,): the values the P2L and the marginal router
    maximise (the second also picks the best single model); ``scores`` (G, M) held-out scores
    (:func:`~evalprism.stats.policy_value.prompt_scores`, NaN: no verdict); ``cost`` (M,)."""
    rows = []
    for budget in budgets:
        chosen = _policies(p2l_values, single_values, scores, cost, float(budget))
        valued: dict[str, PolicyValue] = {name: policy_value(p, scores) for name, p in chosen.items()}
        for name in POLICIES:
            pv, probs = valued[name], chosen[name]
            gain, se = (np.nan, np.nan) if name == "p2l" else paired_value_difference(valued["p2l"], pv)
            routed = np.atleast_2d(probs)
            spent = (routed @ cost)[routed.sum(axis=1) > 0]  # the oracle routes no prompt without a verdict
            rows.append(
                {
                    "budget": float(budget),
                    "policy": name,
                    "value": pv.value,
                    "se": pv.se,
                    "p2l_gain": gain,
                    "se_gain": se,
                    "cost": float(spent.mean()) if spent.size else np.nan,
                    "prompts_scored": pv.scored,
                    "prompts_excluded": pv.excluded,
                    "models": _named(probs, names),
                }
            )
    return pd.DataFrame(rows)
