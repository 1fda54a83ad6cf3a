"""The pairwise outcome models, each defined once: ``bt``, ``bt-tie``, ``rk`` and ``grk``.

A model maps the two coefficients of a battle (and its tie parameter, if it has one) to
log-probabilities of the four outcomes of :data:`~evalprism.stats.outcomes.OUTCOMES` (A wins, B
wins, tie, tie both bad):

- ``bt``: P(A) = σ(θ_A − θ_B); ties are left out.
- ``bt-tie``: as ``bt``, with every tie counted as half a win for each side.
- ``rk`` (Rao-Kupper, seed 002 section 2.2, logistic form): P(A) = σ(θ_A − θ_B − η),
  P(B) = σ(θ_B − θ_A − η), P(tie) = 1 − P(A) − P(B), with η ≥ 0; "tie (bothbad)" counts as a tie.
- ``grk`` (grounded Rao-Kupper, seed 002 eq. 8): with φ = exp(β) and λ ≥ 1,
  P(A) = φ_A / (φ_A + λ φ_B + 1), P(B) = φ_B / (φ_B + λ φ_A + 1),
  P(both bad) = 1 / (1 + φ_A + φ_B), P(tie) = the rest; the fictitious "bad" model has β = 0,
  so coefficients are absolute (not shift-invariant). λ = 1 + exp(s), as in lmarena/p2l.

Everything evalprism reads about a model is one :class:`OutcomeModel` entry of
:data:`OUTCOME_MODELS`: the marginal fits and their intervals (:mod:`evalprism.stats.pairwise`),
the P2L head, its training and evaluation (:mod:`evalprism.p2l`) and the router's value of a
model's coefficients. An entry holds

- the outcomes it predicts and how observed ties enter its likelihood (``ties``);
- its tie parameter (:class:`TieParameter`): the raw value the likelihood takes and its domain,
  the value reported to users, and how the P2L head's unconstrained output maps onto the domain;
- its log-probabilities written once against a small array namespace (:class:`ArrayOps`): the
  P2L head runs them in torch (:mod:`evalprism.p2l.likelihood` supplies torch's functions), so
  this package never imports torch;
- the same log-probabilities in numpy with hand-written first and second derivatives, for the
  marginal fits and their sandwich covariance: a fit evaluates the gradient tens of times, and
  one torch autograd round trip costs more than a whole numpy evaluation (the tests hold the two
  to each other, to torch autograd and to finite differences);
- whether a common shift of the coefficients leaves it unchanged, and how the router values them;
- which outcomes bound which coefficient from which side (``bounds``): the one rule that
  :func:`evalprism.stats.separation.model_separation` reads to say which coefficients the battles
  identify. An outcome bounds a coefficient from above when its probability goes to 0 as that
  coefficient grows (a loss), from below when it goes to 0 as the coefficient falls (a win).
  In ``grk`` the fictitious "bad" model (``GROUND``) takes part: a win bounds the winner from
  below against it too (P(A) -> 0 as β_A -> −inf together with β_B), a tie bounds both sides from
  below against it (P(tie) -> 0 as both fall), and "both bad" bounds both coefficients from ABOVE
  only (P(both bad) = 1/(1 + φ_A + φ_B) grows as β -> −inf): a model with only losses and "both
  bad" outcomes has no finite maximum-likelihood coefficient.

Adding a model (say Davidson ties) is one more entry here, and its name in :data:`OutcomeModelName`
(and in the command line's list of choices, ``evalprism.cli``, which must not import numpy).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np
from scipy.special import expit, log_expit

from evalprism.errors import EvalprismError
from evalprism.stats.outcomes import A_WINS, B_WINS, BOTH_BAD, OUTCOMES, TIE
from evalprism.vocabularies import OutcomeModelName, RouteValue

__all__ = [
    "GROUND",
    "NUMPY_OPS",
    "OUTCOME_MODELS",
    "OUTCOME_MODEL_NAMES",
    "ArrayOps",
    "OutcomeModel",
    "OutcomeModelName",
    "Side",
    "TieParameter",
    "get_outcome_model",
]

#: the names of :data:`OUTCOME_MODELS`, for static checks (a test keeps the two in step)
#: how observed ties enter a model's likelihood (:meth:`OutcomeModel.weights`)
TieRule = Literal["drop", "half", "merge", "apart"]
#: a side of a battle in :attr:`OutcomeModel.bounds`: model A, model B, or the fictitious "bad"
#: model of coefficient 0 that grounds a model without shift invariance (``grk``)
Side = Literal["a", "b", "ground"]
GROUND: Side = "ground"
#: floor of a probability that takes "the rest" (a tie), so that its log stays finite
LOG_FLOOR = 1e-300


class ArrayOps(Protocol):
    """The elementwise functions the log-probabilities are written with; numpy's are
    :data:`NUMPY_OPS`, torch's :data:`evalprism.p2l.likelihood.TORCH_OPS`. Arithmetic operators
    (+, −, ×, ÷) come from the arrays themselves."""

    def exp(self, x: Any) -> Any: ...
    def log(self, x: Any) -> Any: ...
    def sigmoid(self, x: Any) -> Any: ...
    def logsigmoid(self, x: Any) -> Any: ...
    def softplus(self, x: Any) -> Any: ...
    def clamp_min(self, x: Any, low: float) -> Any: ...
    def stack(self, xs: Sequence[Any]) -> Any: ...  # along a new last axis
    def full_like(self, x: Any, value: float) -> Any: ...


class _NumpyOps:
    """:class:`ArrayOps` in numpy (float64)."""

    exp = staticmethod(np.exp)
    log = staticmethod(np.log)
    sigmoid = staticmethod(expit)
    logsigmoid = staticmethod(log_expit)

    @staticmethod
    def softplus(x: Any) -> Any:
        return np.logaddexp(0.0, x)

    @staticmethod
    def clamp_min(x: Any, low: float) -> Any:
        return np.maximum(x, low)

    @staticmethod
    def stack(xs: Sequence[Any]) -> Any:
        return np.stack(xs, axis=-1)

    @staticmethod
    def full_like(x: Any, value: float) -> Any:
        return np.full_like(x, value, dtype=float)


NUMPY_OPS: ArrayOps = _NumpyOps()


@dataclass(frozen=True)
class TieParameter:
    """The extra parameter of a model with ties, in its three forms.

    - raw: what the likelihood takes and the marginal fit optimises (``start``; domain
      [``lower``, ∞), or all reals when ``lower`` is None, which L-BFGS-B keeps as a bound);
    - reported (``symbol``): what users read, in ``PairwiseFit.extra``, the P2L predictions and
      ``run.json`` (``report`` / ``unreport``);
    - the P2L head's output: one unconstrained linear output mapped onto the raw domain
      (:meth:`from_head`: the identity on all reals, ``lower + softplus`` on [lower, ∞)).
    """

    symbol: str
    start: float
    lower: float | None
    report: Callable[[ArrayOps, Any], Any]  # raw -> reported, numpy or torch
    unreport: Callable[[Any], Any]  # reported -> raw, numpy

    def from_head(self, ops: ArrayOps, out: Any) -> Any:
        """The raw value of the P2L head's unconstrained output ``out``."""
        return out if self.lower is None else self.lower + ops.softplus(out)

    def to_head(self, raw: float) -> float:
        """The head output that gives ``raw`` (the head's starting bias: the marginal fit's value)."""
        return float(raw if self.lower is None else np.log(np.expm1(raw - self.lower)))


Terms = Callable[[np.ndarray, np.ndarray, "float | None"], tuple[np.ndarray, np.ndarray]]
SecondTerms = Callable[[np.ndarray, np.ndarray, "float | None", np.ndarray, np.ndarray], np.ndarray]
LogProbs = Callable[[ArrayOps, Any, Any, Any], Any]


@dataclass(frozen=True)
class OutcomeModel:
    """One pairwise outcome model (see the module docstring for the formulas).

    - ``outcomes``: indices into :data:`OUTCOMES` it gives a probability (the first k: wins, then
      tie, then both bad); the others get log-probability −inf and weight 0.
    - ``ties``: how observed ties enter its likelihood: ``drop`` (not an outcome: the battle is left
      out), ``half`` (half a win for each side, arena-rank's outcome 0.5), ``merge`` (both kinds are
      one tie outcome), ``apart`` (tie and tie both bad are separate outcomes).
    - ``extra``: its tie parameter, or None.
    - ``shift_invariant``: adding a constant to every coefficient changes no probability (the fits
      report the mean-zero solution, and the information matrix is singular along that shift).
    - ``route_by``: how the router values its coefficients: ``bt``, the win rate against an
      opponent distribution (any shift-invariant model); ``grk``, σ(β), the chance of not being
      worse than the fictitious "bad" model of coefficient 0.
    - ``needs``: (outcome indices, message) pairs: the fit is refused with the message when the
      outcome weights of those indices are all zero (the maximum-likelihood point is not finite).
    - ``bounds``: per outcome index it predicts, the (upper, lower) pairs of sides (:data:`Side`)
      it orders: the outcome's probability goes to 0 as the coefficient of ``lower`` rises without
      bound relative to ``upper`` (so ``upper`` bounds ``lower`` from above and ``lower`` bounds
      ``upper`` from below; an edge upper -> lower of the separation graph). Outcomes a model
      drops, halves or merges (``ties``) have their observed weight moved by :meth:`weights`
      first, so only the model's own outcomes need entries.
    - ``log_probs(ops, coef_a, coef_b, raw_extra)``: log-probabilities (n, 4), numpy or torch.
    - ``terms(coef_a, coef_b, raw_extra)``: numpy log-probabilities (4, n) and their derivatives
      (4, 3, n) with respect to (coef_a, coef_b, raw extra) of each battle.
    - ``second_terms(coef_a, coef_b, raw_extra, logp, dlogp)``: second derivatives (4, 3, 3, n).
    """

    name: str
    outcomes: tuple[int, ...]
    ties: TieRule
    extra: TieParameter | None
    shift_invariant: bool
    route_by: RouteValue
    needs: tuple[tuple[tuple[int, ...], str], ...]
    bounds: dict[int, tuple[tuple[Side, Side], ...]]
    log_probs: LogProbs
    terms: Terms
    second_terms: SecondTerms

    def __post_init__(self) -> None:
        if self.outcomes != tuple(range(len(self.outcomes))):
            raise ValueError(f"{self.name}: outcomes must be the first k of {OUTCOMES}")
        if set(self.bounds) != set(self.outcomes):
            raise ValueError(f"{self.name}: bounds must name exactly its outcomes {self.outcomes}")
        if self.shift_invariant == any(GROUND in pair for rules in self.bounds.values() for pair in rules):
            raise ValueError(f"{self.name}: the ground model bounds exactly the models without shift invariance")

    @property
    def n_extra(self) -> int:
        """Parameters beyond the coefficients: 1 with a tie parameter, else 0."""
        return 0 if self.extra is None else 1

    @property
    def n_local(self) -> int:
        """Parameters one battle's likelihood depends on: coef_a, coef_b[, raw extra]."""
        return 2 + self.n_extra

    def weights(self, counts: np.ndarray) -> np.ndarray:
        """How this model uses observed outcome counts (n, 4): ties dropped, halved, merged or kept."""
        w = np.array(counts, dtype=float, copy=True)
        ties = w[:, TIE] + w[:, BOTH_BAD]
        if self.ties == "drop":
            w[:, TIE:] = 0.0
        elif self.ties == "half":
            w[:, A_WINS] += 0.5 * ties
            w[:, B_WINS] += 0.5 * ties
            w[:, TIE:] = 0.0
        elif self.ties == "merge":
            w[:, TIE] = ties
            w[:, BOTH_BAD] = 0.0
        return w

    def check_weights(self, weights: np.ndarray) -> None:
        """Refuse outcome weights without the outcomes the model needs (see ``needs``)."""
        for columns, message in self.needs:
            if float(weights[:, list(columns)].sum()) == 0.0:
                raise EvalprismError(message)


# ---------------------------------------------------------------------------------------------
# log-probabilities, once for numpy and torch (the P2L head)
# ---------------------------------------------------------------------------------------------


def _bt_log_probs(ops: ArrayOps, coef_a: Any, coef_b: Any, extra: Any) -> Any:
    delta = coef_a - coef_b
    neg_inf = ops.full_like(delta, -math.inf)
    return ops.stack([ops.logsigmoid(delta), ops.logsigmoid(-delta), neg_inf, neg_inf])


def _rk_log_probs(ops: ArrayOps, coef_a: Any, coef_b: Any, extra: Any) -> Any:
    assert extra is not None
    delta = coef_a - coef_b
    eta = extra
    p_a = ops.sigmoid(delta - eta)
    p_b = ops.sigmoid(-delta - eta)
    p_tie = ops.clamp_min(1.0 - p_a - p_b, LOG_FLOOR)
    return ops.stack(
        [ops.logsigmoid(delta - eta), ops.logsigmoid(-delta - eta), ops.log(p_tie), ops.full_like(delta, -math.inf)]
    )


def _grk_log_probs(ops: ArrayOps, coef_a: Any, coef_b: Any, extra: Any) -> Any:
    assert extra is not None
    lam = 1.0 + ops.exp(extra)
    phi_a, phi_b = ops.exp(coef_a), ops.exp(coef_b)
    p_a = phi_a / (phi_a + lam * phi_b + 1.0)
    p_b = phi_b / (phi_b + lam * phi_a + 1.0)
    p_bad = 1.0 / (1.0 + phi_a + phi_b)
    p_tie = ops.clamp_min(1.0 - p_a - p_b - p_bad, LOG_FLOOR)
    return ops.log(ops.stack([p_a, p_b, p_tie, p_bad]))


# ---------------------------------------------------------------------------------------------
# numpy log-probabilities with hand-written derivatives (marginal fits, sandwich covariance)
# ---------------------------------------------------------------------------------------------


def _sigmoid_parts(z: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """log σ(z), log σ(−z), σ(z), σ(−z) from one exp and one log1p.

    Hand-written instead of scipy.special's log_expit/expit: those cost one exp/log each per call
    and four calls per evaluation; the stable form min(z, 0) − log1p(e^−|z|) is torch's logsigmoid.
    """
    e = np.exp(-np.abs(z))
    soft = np.log1p(e)
    inv = 1.0 / (1.0 + e)
    small = e * inv
    pos = z >= 0
    return np.minimum(z, 0.0) - soft, np.minimum(-z, 0.0) - soft, np.where(pos, inv, small), np.where(pos, small, inv)


def _empty_terms(m: int) -> tuple[np.ndarray, np.ndarray]:
    """logp (4, m) at −inf and dlogp (4, 3, m) at 0: the values of outcomes a model does not have."""
    return np.full((4, m), -np.inf), np.zeros((4, 3, m))


def _tie_takes_the_rest(
    logp: np.ndarray, dlogp: np.ndarray, raw_tie: np.ndarray, others: tuple[tuple[np.ndarray, int], ...]
) -> None:
    """Fill the tie's log-probability and derivative from P(tie) = 1 − Σ P(k) (``raw_tie``) over
    the ``others`` (probability, outcome index): d P(tie) = −Σ P(k) d log P(k). Where the floor is
    active the derivative is 0, as for torch.clamp."""
    p_tie = np.maximum(raw_tie, LOG_FLOOR)
    logp[TIE] = np.log(p_tie)
    d_tie = -sum(p_k * dlogp[k] for p_k, k in others)
    dlogp[TIE] = np.where(raw_tie >= LOG_FLOOR, d_tie / p_tie, 0.0)


def _bt_terms(coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None) -> tuple[np.ndarray, np.ndarray]:
    delta = coef_a - coef_b
    logp, dlogp = _empty_terms(delta.size)
    logp[A_WINS], logp[B_WINS], p_a, p_b = _sigmoid_parts(delta)
    # d log σ(Δ)/dΔ = σ(−Δ) = P(B); d log σ(−Δ)/dΔ = −σ(Δ) = −P(A)
    dlogp[A_WINS, 0], dlogp[A_WINS, 1] = p_b, -p_b
    dlogp[B_WINS, 0], dlogp[B_WINS, 1] = -p_a, p_a
    return logp, dlogp


def _rk_terms(coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None) -> tuple[np.ndarray, np.ndarray]:
    assert extra is not None
    delta = coef_a - coef_b
    logp, dlogp = _empty_terms(delta.size)
    logp[A_WINS], _, p_a, q_a = _sigmoid_parts(delta - extra)  # u = Δ − η: du = (1, −1, −1)
    logp[B_WINS], _, p_b, q_b = _sigmoid_parts(-delta - extra)  # v = −Δ − η: dv = (−1, 1, −1)
    dlogp[A_WINS, 0], dlogp[A_WINS, 1], dlogp[A_WINS, 2] = q_a, -q_a, -q_a
    dlogp[B_WINS, 0], dlogp[B_WINS, 1], dlogp[B_WINS, 2] = -q_b, q_b, -q_b
    _tie_takes_the_rest(logp, dlogp, 1.0 - p_a - p_b, ((p_a, A_WINS), (p_b, B_WINS)))
    return logp, dlogp


def _grk_parts(
    coef_a: np.ndarray, coef_b: np.ndarray, extra: float
) -> tuple[float, float, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Grounded Rao-Kupper (eq. 8) pieces shared by the first and second derivatives: λ − 1 = exp(s),
    λ, φ = exp(β) of both sides and the denominators of P(A), P(B) and P(both bad)."""
    lam1 = float(np.exp(extra))
    lam = 1.0 + lam1
    phi_a, phi_b = np.exp(coef_a), np.exp(coef_b)
    return lam1, lam, phi_a, phi_b, phi_a + lam * phi_b + 1.0, phi_b + lam * phi_a + 1.0, 1.0 + phi_a + phi_b


def _grk_terms(coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None) -> tuple[np.ndarray, np.ndarray]:
    assert extra is not None
    logp, dlogp = _empty_terms(coef_a.size)
    lam1, lam, phi_a, phi_b, den_a, den_b, den_bad = _grk_parts(coef_a, coef_b, extra)
    p_a, p_b, p_bad = phi_a / den_a, phi_b / den_b, 1.0 / den_bad
    with np.errstate(divide="ignore"):
        logp[A_WINS], logp[B_WINS], logp[BOTH_BAD] = np.log(p_a), np.log(p_b), np.log(p_bad)
    # log P(A) = β_A − log(φ_A + λ φ_B + 1) with dλ/ds = λ − 1; log P(bad) = −log(1 + φ_A + φ_B)
    dlogp[A_WINS, 0], dlogp[A_WINS, 1], dlogp[A_WINS, 2] = 1.0 - p_a, -lam * phi_b / den_a, -lam1 * phi_b / den_a
    dlogp[B_WINS, 0], dlogp[B_WINS, 1], dlogp[B_WINS, 2] = -lam * phi_a / den_b, 1.0 - p_b, -lam1 * phi_a / den_b
    dlogp[BOTH_BAD, 0], dlogp[BOTH_BAD, 1] = -phi_a * p_bad, -phi_b * p_bad
    _tie_takes_the_rest(logp, dlogp, 1.0 - p_a - p_b - p_bad, ((p_a, A_WINS), (p_b, B_WINS), (p_bad, BOTH_BAD)))
    return logp, dlogp


def _outer(v: np.ndarray) -> np.ndarray:
    """Per-battle outer products (k, k, n) of the columns of ``v`` (k, n)."""
    return v[:, None, :] * v[None, :, :]


def _tie_second(
    d2: np.ndarray, logp: np.ndarray, dlogp: np.ndarray, others: tuple[tuple[np.ndarray, int], ...]
) -> np.ndarray:
    """Fill the tie's second derivatives: P(tie) = 1 − Σ P(k) gives
    d² P(tie) = −Σ P(k) (d² log P(k) + d log P(k) d log P(k)ᵀ), and
    d² log P(tie) = d² P(tie) / P(tie) − d log P(tie) d log P(tie)ᵀ; 0 where the floor is active."""
    p_tie = np.exp(logp[TIE])
    with np.errstate(over="ignore", invalid="ignore"):
        d2_tie = -sum(p_k * (d2[k] + _outer(dlogp[k])) for p_k, k in others) / p_tie - _outer(dlogp[TIE])
    d2[TIE] = np.where(logp[TIE] > np.log(LOG_FLOOR), d2_tie, 0.0)
    return d2


def _bt_second(
    coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None, logp: np.ndarray, dlogp: np.ndarray
) -> np.ndarray:
    d2 = np.zeros((4, 3, 3, coef_a.size))
    # d²/dΔ² log σ(±Δ) = −σ(Δ)σ(−Δ), and dΔ = (1, −1, 0)
    sign = np.array([1.0, -1.0])
    d2[A_WINS, :2, :2] = d2[B_WINS, :2, :2] = np.multiply.outer(
        np.outer(sign, sign), -np.exp(logp[A_WINS] + logp[B_WINS])
    )
    return d2


def _rk_second(
    coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None, logp: np.ndarray, dlogp: np.ndarray
) -> np.ndarray:
    assert extra is not None
    d2 = np.zeros((4, 3, 3, coef_a.size))
    p_a, p_b = np.exp(logp[A_WINS]), np.exp(logp[B_WINS])
    # d² log σ(u) = −σ(u)σ(−u) du duᵀ, σ(−u) = dlogp[0, 0] (u = Δ − η); likewise v = −Δ − η
    d2[A_WINS] = np.multiply.outer(np.outer([1.0, -1.0, -1.0], [1.0, -1.0, -1.0]), -p_a * dlogp[A_WINS, 0])
    d2[B_WINS] = np.multiply.outer(np.outer([-1.0, 1.0, -1.0], [-1.0, 1.0, -1.0]), -p_b * dlogp[B_WINS, 1])
    return _tie_second(d2, logp, dlogp, ((p_a, A_WINS), (p_b, B_WINS)))


def _grk_second(
    coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None, logp: np.ndarray, dlogp: np.ndarray
) -> np.ndarray:
    assert extra is not None
    m = coef_a.size
    d2 = np.zeros((4, 3, 3, m))
    lam1, lam, phi_a, phi_b, den_a, den_b, den_bad = _grk_parts(coef_a, coef_b, extra)
    # log P = (β_A or β_B or 0) − log D: d² log P = −d²D / D + (dD / D)(dD / D)ᵀ
    for j, den, first, hess in (
        (
            A_WINS,
            den_a,
            (phi_a, lam * phi_b, lam1 * phi_b),
            {(0, 0): phi_a, (1, 1): lam * phi_b, (1, 2): lam1 * phi_b, (2, 2): lam1 * phi_b},
        ),
        (
            B_WINS,
            den_b,
            (lam * phi_a, phi_b, lam1 * phi_a),
            {(0, 0): lam * phi_a, (1, 1): phi_b, (0, 2): lam1 * phi_a, (2, 2): lam1 * phi_a},
        ),
        (BOTH_BAD, den_bad, (phi_a, phi_b, np.zeros(m)), {(0, 0): phi_a, (1, 1): phi_b}),
    ):
        g = np.stack(first) / den
        d2[j] = _outer(g)
        for (u, v), value in hess.items():
            d2[j, u, v] -= value / den
            if u != v:
                d2[j, v, u] -= value / den
    others = ((np.exp(logp[A_WINS]), A_WINS), (np.exp(logp[B_WINS]), B_WINS), (np.exp(logp[BOTH_BAD]), BOTH_BAD))
    return _tie_second(d2, logp, dlogp, others)


# ---------------------------------------------------------------------------------------------
# the registry
# ---------------------------------------------------------------------------------------------

_ETA = TieParameter(symbol="η", start=0.5, lower=0.0, report=lambda ops, raw: raw, unreport=lambda value: value)
_LAMBDA = TieParameter(
    symbol="λ",
    start=0.0,
    lower=None,
    report=lambda ops, raw: 1.0 + ops.exp(raw),
    unreport=lambda value: np.log(value - 1.0),
)


def _needs_ties(name: str) -> tuple[tuple[int, ...], str]:
    """A tie parameter is estimated from ties: without any, its maximum-likelihood value is not finite."""
    return (TIE, BOTH_BAD), f"model '{name}' needs ties to estimate its tie parameter; there are none"


#: a win of A bounds B from above and A from below; B's win the other way round
_WINS: dict[int, tuple[tuple[Side, Side], ...]] = {A_WINS: (("a", "b"),), B_WINS: (("b", "a"),)}
#: Rao-Kupper's tie: P(tie) -> 0 as either coefficient leaves the other, in both directions
_RK_BOUNDS = {**_WINS, TIE: (("a", "b"), ("b", "a"))}
#: grounded Rao-Kupper: each win also beats the "bad" model (P(A) = φ_A / (φ_A + λ φ_B + 1) -> 0 as
#: both fall), a tie bounds both from below against it (P(tie) -> 0 as both fall) as well as each
#: against the other, and "both bad" is a loss of both to the "bad" model: it bounds from above only
_GRK_BOUNDS: dict[int, tuple[tuple[Side, Side], ...]] = {
    A_WINS: (("a", "b"), ("a", GROUND)),
    B_WINS: (("b", "a"), ("b", GROUND)),
    TIE: (("a", "b"), ("b", "a"), ("a", GROUND), ("b", GROUND)),
    BOTH_BAD: ((GROUND, "a"), (GROUND, "b")),
}

#: Bradley-Terry: wins only (ties dropped); "bt-tie" is the same model with a tie counted as half a win each
_BT = OutcomeModel(
    "bt",
    outcomes=(A_WINS, B_WINS),
    ties="drop",
    extra=None,
    shift_invariant=True,
    route_by="bt",
    needs=(),
    bounds=_WINS,
    log_probs=_bt_log_probs,
    terms=_bt_terms,
    second_terms=_bt_second,
)

OUTCOME_MODELS: dict[str, OutcomeModel] = {
    model.name: model
    for model in (
        _BT,
        replace(_BT, name="bt-tie", ties="half"),
        OutcomeModel(
            "rk",
            outcomes=(A_WINS, B_WINS, TIE),
            ties="merge",
            extra=_ETA,
            shift_invariant=True,
            route_by="bt",
            needs=(_needs_ties("rk"),),
            bounds=_RK_BOUNDS,
            log_probs=_rk_log_probs,
            terms=_rk_terms,
            second_terms=_rk_second,
        ),
        OutcomeModel(
            "grk",
            outcomes=(A_WINS, B_WINS, TIE, BOTH_BAD),
            ties="apart",
            extra=_LAMBDA,
            shift_invariant=False,
            route_by="grk",
            needs=(
                _needs_ties("grk"),
                (
                    (BOTH_BAD,),
                    "model 'grk' needs 'tie (bothbad)' outcomes to ground the coefficients; "
                    "there are none (without them every coefficient grows without bound): "
                    "use 'rk' instead",
                ),
            ),
            bounds=_GRK_BOUNDS,
            log_probs=_grk_log_probs,
            terms=_grk_terms,
            second_terms=_grk_second,
        ),
    )
}
OUTCOME_MODEL_NAMES: tuple[str, ...] = tuple(OUTCOME_MODELS)


def get_outcome_model(name: str) -> OutcomeModel:
    """The registry entry of ``name``; an unknown name is refused with the known ones."""
    try:
        return OUTCOME_MODELS[name]
    except (KeyError, TypeError):
        raise EvalprismError(
            f"unknown outcome model '{name}': expected one of {', '.join(OUTCOME_MODEL_NAMES)}"
        ) from None
