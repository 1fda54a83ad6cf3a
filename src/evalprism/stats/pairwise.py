"""Marginal pairwise-comparison models: Bradley-Terry, BT with ties, Rao-Kupper, grounded Rao-Kupper.

One outcome model per name, written once in torch, serves both the marginal fits here and (later)
the prompt-conditioned P2L heads. Each maps the two coefficients of a battle (and the model's
extra parameter) to log-probabilities of the four outcomes (A wins, B wins, tie, tie both bad):

- ``bt``: P(A) = σ(θ_A − θ_B); ties are left out.
- ``bt-tie``: as ``bt``, with every tie counted as half a win for each side.
- ``rk`` (Rao-Kupper, seed 002 section 2.2, logistic form): P(A) = σ(θ_A − θ_B − η),
  P(B) = σ(θ_B − θ_A − η), P(tie) = 1 − P(A) − P(B), with η ≥ 0; "tie (bothbad)" counts as a tie.
- ``grk`` (grounded Rao-Kupper, seed 002 eq. 8): with φ = exp(β) and λ ≥ 1,
  P(A) = φ_A / (φ_A + λ φ_B + 1), P(B) = φ_B / (φ_B + λ φ_A + 1),
  P(both bad) = 1 / (1 + φ_A + φ_B), P(tie) = the rest; the fictitious "bad" model has β = 0,
  so coefficients are absolute (not shift-invariant). λ = 1 + exp(s), as in lmarena/p2l.

Battles are aggregated to unique (a, b) pairs with outcome counts (soft labels add fractional
counts) before fitting, so a fit costs O(unique pairs) per step. The maximum-likelihood fit uses
L-BFGS-B (scipy) on the exact gradient from torch autograd in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy.optimize import minimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from evalprism.errors import EvalprismError
from evalprism.io.battles import WINNERS

PairModel = Literal["bt", "bt-tie", "rk", "grk"]
PAIR_MODELS: tuple[str, ...] = ("bt", "bt-tie", "rk", "grk")
OUTCOMES = WINNERS  # outcome j of the count matrices is the battles table's winner value WINNERS[j]
_LOG_FLOOR = 1e-300


@dataclass(frozen=True)
class PairCounts:
    """Outcome counts per unique ordered pair: ``counts[:, j]`` for outcome ``OUTCOMES[j]``."""

    a: np.ndarray
    b: np.ndarray
    counts: np.ndarray
    n_models: int

    @classmethod
    def from_battles(cls, a: np.ndarray, b: np.ndarray, outcome: np.ndarray, n_models: int,
                     p_b: np.ndarray | None = None) -> PairCounts:
        """Aggregate battles (model indices, outcome index into ``OUTCOMES``) to unique pairs.

        Where a soft label P(B preferred) is given (finite ``p_b``), it replaces the hard outcome of
        that battle: 1 - p_b of a win for A and p_b of a win for B."""
        a, b, outcome = np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(outcome, np.int64)
        rows = np.zeros((a.size, 4))
        rows[np.arange(a.size), outcome] = 1.0
        if p_b is not None:
            p_b = np.asarray(p_b, dtype=float)
            soft = np.isfinite(p_b)
            rows[soft] = 0.0
            rows[soft, 0] = 1.0 - p_b[soft]
            rows[soft, 1] = p_b[soft]
        key = a * n_models + b
        uniq, inverse = np.unique(key, return_inverse=True)
        counts = np.zeros((uniq.size, 4))
        np.add.at(counts, inverse, rows)
        return cls(uniq // n_models, uniq % n_models, counts, n_models)


def log_outcome_probs(model: str, coef_a: torch.Tensor, coef_b: torch.Tensor, extra: torch.Tensor | None) -> torch.Tensor:
    """Log-probabilities (n, 4) of (A wins, B wins, tie, tie both bad) under ``model``.

    Outcomes a model does not have get log-probability −inf (they carry zero weight in the fits).
    """
    delta = coef_a - coef_b
    neg_inf = torch.full_like(delta, -torch.inf)
    if model in ("bt", "bt-tie"):
        return torch.stack([torch.nn.functional.logsigmoid(delta), torch.nn.functional.logsigmoid(-delta),
                            neg_inf, neg_inf], dim=-1)
    if model == "rk":
        assert extra is not None
        eta = extra
        p_a = torch.sigmoid(delta - eta)
        p_b = torch.sigmoid(-delta - eta)
        p_tie = torch.clamp(1.0 - p_a - p_b, min=_LOG_FLOOR)
        return torch.stack([torch.nn.functional.logsigmoid(delta - eta), torch.nn.functional.logsigmoid(-delta - eta),
                            torch.log(p_tie), neg_inf], dim=-1)
    if model == "grk":
        assert extra is not None
        lam = 1.0 + torch.exp(extra)
        phi_a, phi_b = torch.exp(coef_a), torch.exp(coef_b)
        p_a = phi_a / (phi_a + lam * phi_b + 1.0)
        p_b = phi_b / (phi_b + lam * phi_a + 1.0)
        p_bad = 1.0 / (1.0 + phi_a + phi_b)
        p_tie = torch.clamp(1.0 - p_a - p_b - p_bad, min=_LOG_FLOOR)
        return torch.log(torch.stack([p_a, p_b, p_tie, p_bad], dim=-1))
    raise EvalprismError(f"unknown pairwise model '{model}': expected one of {', '.join(PAIR_MODELS)}")


def outcome_weights(model: str, counts: np.ndarray) -> np.ndarray:
    """How each model uses the four observed outcome counts (ties dropped, halved or kept)."""
    w = np.array(counts, dtype=float, copy=True)
    ties = w[:, 2] + w[:, 3]
    if model == "bt":
        w[:, 2:] = 0.0
    elif model == "bt-tie":
        w[:, 0] += 0.5 * ties
        w[:, 1] += 0.5 * ties
        w[:, 2:] = 0.0
    elif model == "rk":
        w[:, 2] = ties
        w[:, 3] = 0.0
    return w


@dataclass(frozen=True)
class PairwiseFit:
    """A fitted marginal model: ``coefs`` per model (centred to mean 0 except for ``grk``), the
    extra parameter (η for ``rk``, λ for ``grk``), the negative log-likelihood and its gradient norm."""

    model: str
    coefs: np.ndarray
    extra: float | None
    nll: float
    grad_norm: float
    n_iter: int
    params: np.ndarray  # the optimiser's parameters at the optimum (coefs as reported, raw extra last)


def check_connected(pairs: PairCounts, names: list[str] | None = None) -> None:
    """Refuse a comparison graph in more than one piece: coefficients across pieces are not comparable."""
    used = np.concatenate([pairs.a, pairs.b])
    graph = coo_matrix((np.ones(pairs.a.size), (pairs.a, pairs.b)), shape=(pairs.n_models, pairs.n_models))
    n_comp, labels = connected_components(graph, directed=False)
    present = np.unique(used)
    if np.unique(labels[present]).size > 1:
        name = (lambda i: names[i]) if names else str
        groups: dict[int, list[str]] = {}
        for i in present:
            groups.setdefault(int(labels[i]), []).append(name(int(i)))
        shown = "; ".join("{" + ", ".join(g[:5]) + (", …" if len(g) > 5 else "") + "}" for g in groups.values())
        raise EvalprismError(
            f"the comparison graph is disconnected ({len(groups)} groups of models never compared with each other: "
            f"{shown}); fit each group separately or add battles between them"
        )


def _unpack(model: str, x: np.ndarray, n_models: int) -> tuple[np.ndarray, float | None]:
    if model in ("rk", "grk"):
        return x[:n_models], float(x[n_models])
    return x, None


def pairwise_nll(model: str, x: torch.Tensor, pairs: PairCounts, weights: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood of the aggregated counts at parameters ``x`` (coefs [+ extra])."""
    coefs = x[: pairs.n_models]
    extra = x[pairs.n_models] if model in ("rk", "grk") else None
    logp = log_outcome_probs(model, coefs[torch.as_tensor(pairs.a)], coefs[torch.as_tensor(pairs.b)], extra)
    used = weights > 0
    return -(weights[used] * logp[used]).sum()


def fit_counts(pairs: PairCounts, model: PairModel = "bt", l2: float = 0.0, tol: float = 1e-10,
                 names: list[str] | None = None) -> PairwiseFit:
    """Maximum-likelihood coefficients of ``model`` for the aggregated battles ``pairs``.

    ``l2`` adds ``l2/2 * ||coefs||^2`` (0 = plain MLE; a small value keeps coefficients finite when
    a model never loses). Raises :class:`EvalprismError` on a disconnected comparison graph.
    """
    if model not in PAIR_MODELS:
        raise EvalprismError(f"unknown pairwise model '{model}': expected one of {', '.join(PAIR_MODELS)}")
    check_connected(pairs, names)
    n = pairs.n_models
    weights = torch.as_tensor(outcome_weights(model, pairs.counts), dtype=torch.float64)
    if model in ("rk", "grk") and float(weights[:, 2:].sum()) == 0.0:
        raise EvalprismError(f"model '{model}' needs ties to estimate its tie parameter; there are none")
    if model == "grk" and float(weights[:, 3].sum()) == 0.0:
        raise EvalprismError("model 'grk' needs 'tie (bothbad)' outcomes to ground the coefficients; there are "
                             "none (without them every coefficient grows without bound): use 'rk' instead")
    x0 = np.zeros(n + (1 if model in ("rk", "grk") else 0))
    bounds = [(None, None)] * n
    if model == "rk":
        x0[n] = 0.5
        bounds.append((0.0, None))
    elif model == "grk":
        bounds.append((None, None))
    total = float(weights.sum())

    def value_and_grad(x: np.ndarray) -> tuple[float, np.ndarray]:
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        loss = pairwise_nll(model, xt, pairs, weights)
        if l2:
            loss = loss + 0.5 * l2 * (xt[:n] ** 2).sum()
        loss = loss / total  # scale-free for the optimiser's tolerances
        loss.backward()
        return float(loss.detach()), xt.grad.numpy().copy()  # type: ignore[union-attr]

    res = minimize(value_and_grad, x0, jac=True, method="L-BFGS-B", bounds=bounds,
                   options={"maxiter": 10_000, "ftol": tol * 1e-3, "gtol": tol})
    coefs, extra = _unpack(model, res.x, n)
    if model in ("bt", "bt-tie", "rk") and not l2:
        coefs = coefs - coefs.mean()  # shift-invariant models: report the mean-zero solution
    if model == "grk":
        extra = 1.0 + float(np.exp(extra))  # type: ignore[arg-type]
    _, grad = value_and_grad(res.x)
    params = np.concatenate([coefs, res.x[n:]])
    return PairwiseFit(model, coefs, extra, float(res.fun) * total, float(np.linalg.norm(grad)), int(res.nit), params)


def sandwich_cov(fit: PairwiseFit, pairs: PairCounts) -> np.ndarray:
    """Sandwich (robust) covariance H⁺ J H⁺ of the fitted parameters (coefs, then the raw extra).

    H is the exact Hessian of the negative log-likelihood; J sums the outer products of per-battle
    score vectors, each battle of one outcome in one pair sharing the same score (soft labels are
    treated as fractional battles of each outcome). The pseudo-inverse returns the covariance of the
    mean-zero coefficients for the shift-invariant models.
    """
    n = pairs.n_models
    weights = torch.as_tensor(outcome_weights(fit.model, pairs.counts), dtype=torch.float64)
    x = torch.tensor(fit.params, dtype=torch.float64)
    hess = torch.autograd.functional.hessian(lambda v: pairwise_nll(fit.model, v, pairs, weights), x).numpy()
    has_extra = fit.model in ("rk", "grk")
    ca = torch.tensor(fit.params[pairs.a], requires_grad=True)
    cb = torch.tensor(fit.params[pairs.b], requires_grad=True)
    ex = torch.full((pairs.a.size,), float(fit.params[n]) if has_extra else 0.0, dtype=torch.float64, requires_grad=True)
    meat = np.zeros_like(hess)
    w = weights.numpy()
    for k in range(4):
        if not np.any(w[:, k] > 0):
            continue
        logp = log_outcome_probs(fit.model, ca, cb, ex if has_extra else None)[:, k]
        ga, gb, ge = torch.autograd.grad(logp.sum(), (ca, cb, ex), allow_unused=True)
        ge = torch.zeros_like(ca) if ge is None else ge
        used = w[:, k] > 0
        idx = [pairs.a[used], pairs.b[used]] + ([np.full(used.sum(), n)] if has_extra else [])
        grads = [ga.numpy()[used], gb.numpy()[used]] + ([ge.numpy()[used]] if has_extra else [])
        for i_idx, gi in zip(idx, grads, strict=True):
            for j_idx, gj in zip(idx, grads, strict=True):
                np.add.at(meat, (i_idx, j_idx), w[used, k] * gi * gj)
    bread = np.linalg.pinv(hess, hermitian=True)
    return bread @ meat @ bread


def bootstrap_coefs(pairs: PairCounts, model: PairModel, rounds: int = 100, seed: int = 0,
                    on_step: Callable[[int], None] | None = None) -> np.ndarray:
    """Coefficients refitted on ``rounds`` multinomial resamples of the aggregated battle counts."""
    rng = np.random.default_rng(seed)
    flat = pairs.counts.ravel()
    total = flat.sum()
    whole = int(round(total))
    out = np.empty((rounds, pairs.n_models))
    for r in range(rounds):
        draw = rng.multinomial(whole, flat / total).reshape(pairs.counts.shape).astype(float)
        keep = draw.sum(axis=1) > 0
        resampled = PairCounts(pairs.a[keep], pairs.b[keep], draw[keep], pairs.n_models)
        out[r] = fit_counts(resampled, model).coefs
        if on_step is not None:
            on_step(1)
    return out


ELO_SCALE = 400.0 / np.log(10.0)


def elo_ratings(coefs: np.ndarray, base: float = 1000.0) -> np.ndarray:
    """Coefficients on the familiar Elo-like scale: ``base + 400/ln(10) * θ``."""
    return base + ELO_SCALE * np.asarray(coefs, dtype=float)
