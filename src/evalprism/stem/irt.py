"""A two-parameter logistic (2PL) item-response model fitted by MAP on a reference panel (issue 17, B).

Model: panel model m answers item i right with probability ``P_i(theta_m) = sigmoid(a_i theta_m + c_i)``
(1PL: every ``a_i = 1``). Priors: ``theta ~ N(0, 1)``, ``a_i ~ N(1, 1)``, ``c_i ~ N(0, 9)``. The fit
maximises the joint log posterior of every theta, a and c over the observed cells (a cell a model has
no row for is left out; a -1 counts as wrong unless the pool excludes it) with scipy's L-BFGS-B and
the analytic gradient, vectorised over the whole models x items matrix. Start: ``c_i`` the logit of
the item's (smoothed) share right, ``theta_m`` the standardised logit of the model's score, ``a = 1``.

The ability of a new model is then the MAP of ``theta`` alone given the fitted items
(:func:`theta_map`, Newton's method, vectorised over trials), from only the items it was scored on.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from evalprism.errors import EvalprismError

IRTKind = Literal["2pl", "1pl"]

#: prior means and variances: theta ~ N(0, 1), a ~ N(1, 1), c ~ N(0, 9)
PRIOR_THETA_VAR, PRIOR_A_MEAN, PRIOR_A_VAR, PRIOR_C_VAR = 1.0, 1.0, 1.0, 9.0


@dataclass
class IRTFit:
    """Fitted item parameters (``a``, ``c`` per item, in the pool's item order), the panel's
    abilities (``theta`` per model of ``models``) and how the fit went."""

    a: np.ndarray
    c: np.ndarray
    theta: np.ndarray
    models: list[str]
    kind: IRTKind = "2pl"
    info: dict = field(default_factory=dict)

    def probability(self, theta: np.ndarray | float, items: np.ndarray | slice = slice(None)) -> np.ndarray:
        """``P_i(theta)`` for the given items (last axis) at each theta (leading axes)."""
        theta = np.asarray(theta, dtype=float)
        return _sigmoid(theta[..., None] * self.a[items] + self.c[items])


def _sigmoid(z: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _block(theta: np.ndarray, a: np.ndarray, c: np.ndarray, sign: np.ndarray, mask: np.ndarray | None
           ) -> tuple[float, np.ndarray]:
    """Negative log likelihood over one block of items and ``r = sigmoid(z) - y`` (0 off the mask).

    With ``s = 1 - 2y`` and ``t = s z``: the cell's loss is ``softplus(t)`` and ``r = s sigmoid(t)``,
    computed in place from one ``exp(-|t|)``."""
    t = np.multiply.outer(theta, a)
    t += c
    t *= sign
    e = np.abs(t)
    np.negative(e, out=e)
    np.exp(e, out=e)
    cell = np.log1p(e)
    cell += np.maximum(t, 0.0)
    if mask is not None:
        cell *= mask
    loss = float(cell.sum(dtype=np.float64))
    del cell
    q = e + 1.0
    np.reciprocal(q, out=q)  # 1 / (1 + e): sigmoid(|t|)
    # sigmoid(t) = q where t >= 0, 1 - q where t < 0
    np.subtract(1.0, q, out=q, where=t < 0)
    q *= sign
    if mask is not None:
        q *= mask
    return loss, q


def _objective_blocks(theta: np.ndarray, a: np.ndarray, c: np.ndarray, sign: np.ndarray, mask: np.ndarray | None,
                      bounds: list[tuple[int, int]], pool) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Loss, and the gradient pieces ``r @ a`` (per model), ``theta @ r`` and ``r.sum(0)`` (per item),
    over item blocks (in threads when ``pool`` is given: numpy releases the GIL in these loops)."""

    def one(bound: tuple[int, int]) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        s, e = bound
        loss, r = _block(theta, a[s:e], c[s:e], sign[:, s:e], None if mask is None else mask[:, s:e])
        return loss, r @ a[s:e], theta @ r, r.sum(axis=0)

    parts = list(pool.map(one, bounds)) if pool is not None else [one(b) for b in bounds]
    loss = sum(p[0] for p in parts)
    g_theta = np.sum([p[1] for p in parts], axis=0)
    return loss, g_theta, np.concatenate([p[2] for p in parts]), np.concatenate([p[3] for p in parts])


def fit_irt(responses: np.ndarray, models: list[str] | None = None, kind: IRTKind = "2pl", *,
            max_iter: int = 2000, tol: float = 1e-6, threads: int | None = None) -> IRTFit:
    """MAP fit of the 2PL (or 1PL) model on a models x items matrix of 1 (right), 0 (wrong) and any
    negative value for "not observed". ``tol``: stop when the largest gradient entry of the
    (negative) log posterior falls below it (or the relative change of the objective below 1e-13).
    ``threads``: item blocks evaluated in parallel (default: the machine's cores, at most 8)."""
    from scipy.optimize import minimize

    if kind not in ("2pl", "1pl"):
        raise EvalprismError(f"irt: expected '2pl' or '1pl', got {kind!r}")
    resp = np.asarray(responses)
    if resp.ndim != 2 or resp.shape[0] < 2 or resp.shape[1] < 1:
        raise EvalprismError(f"irt: the reference panel needs at least 2 models and 1 item (got shape {resp.shape})")
    n_models, n_items = resp.shape
    observed = resp >= 0
    mask = None if observed.all() else observed.astype(float)
    y = (resp == 1).astype(float)
    sign = 1.0 - 2.0 * y
    started = time.perf_counter()

    # start: item logits of the smoothed share right, standardised model logits, a = 1
    n_obs_item = observed.sum(axis=0)
    p_item = (y.sum(axis=0) + 0.5) / (n_obs_item + 1.0)
    c0 = np.log(p_item / (1 - p_item))
    n_obs_model = observed.sum(axis=1)
    p_model = (y.sum(axis=1) + 0.5) / (n_obs_model + 1.0)
    t0 = np.log(p_model / (1 - p_model))
    t0 = (t0 - t0.mean()) / (t0.std() if t0.std() > 0 else 1.0)
    a0 = np.ones(n_items)
    two = kind == "2pl"
    threads = threads or min(os.cpu_count() or 1, 8)

    def unpack(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        theta = x[:n_models]
        if two:
            return theta, x[n_models:n_models + n_items], x[n_models + n_items:]
        return theta, a0, x[n_models:]

    cells = n_models * n_items
    n_blocks = max(1, min(threads * 4, cells // 500_000)) if threads > 1 else max(1, cells // 2_000_000)
    edges = np.linspace(0, n_items, n_blocks + 1).astype(int)
    bounds = [(int(s), int(e)) for s, e in zip(edges[:-1], edges[1:]) if e > s]
    executor = ThreadPoolExecutor(threads) if threads > 1 and len(bounds) > 1 else None

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, a, c = unpack(x)
        loss, g_theta, g_a, g_c = _objective_blocks(theta, a, c, sign, mask, bounds, executor)
        g_theta += theta / PRIOR_THETA_VAR
        g_c += c / PRIOR_C_VAR
        loss += 0.5 * (theta @ theta) / PRIOR_THETA_VAR + 0.5 * (c @ c) / PRIOR_C_VAR
        if two:
            g_a += (a - PRIOR_A_MEAN) / PRIOR_A_VAR
            loss += 0.5 * float(((a - PRIOR_A_MEAN) ** 2).sum()) / PRIOR_A_VAR
            return loss, np.concatenate([g_theta, g_a, g_c])
        return loss, np.concatenate([g_theta, g_c])

    x0 = np.concatenate([t0, a0, c0] if two else [t0, c0])
    # diagonal preconditioning: L-BFGS runs on u = sqrt(h) (x - x0), h the Hessian's diagonal at the
    # start (an ability's curvature sums over every item, an item's over the models: thousands of
    # times apart on a large benchmark, which would cost L-BFGS hundreds of extra iterations)
    z0 = np.multiply.outer(t0, a0) + c0
    w = _sigmoid(z0)
    w *= 1 - w
    if mask is not None:
        w *= mask
    h_parts = [w @ (a0 * a0) + 1 / PRIOR_THETA_VAR]
    if two:
        h_parts.append((t0 * t0) @ w + 1 / PRIOR_A_VAR)
    h_parts.append(w.sum(axis=0) + 1 / PRIOR_C_VAR)
    del z0, w
    scale = 1.0 / np.sqrt(np.concatenate(h_parts))

    def scaled(u: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = fun(x0 + scale * u)
        return loss, grad * scale

    try:
        res = minimize(scaled, np.zeros_like(x0), jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "gtol": tol, "ftol": 1e-13, "maxcor": 20})
    finally:
        if executor is not None:
            executor.shutdown()
    theta, a, c = unpack(x0 + scale * res.x)
    info = {"kind": kind, "models": n_models, "items": n_items, "iterations": int(res.nit),
            "evaluations": int(res.nfev), "converged": bool(res.success), "message": str(res.message),
            "neg_log_posterior": float(res.fun), "seconds": round(time.perf_counter() - started, 3)}
    return IRTFit(a=np.array(a, dtype=float), c=np.array(c, dtype=float), theta=np.array(theta, dtype=float),
                  models=list(models) if models is not None else [f"m{i}" for i in range(n_models)], kind=kind,
                  info=info)


def theta_map(a: np.ndarray, c: np.ndarray, y: np.ndarray, *, iterations: int = 50) -> np.ndarray:
    """MAP ability of each row of ``y`` (rows: trials, columns: the items drawn, 1 right / 0 wrong)
    given the drawn items' ``a`` and ``c`` (same shape as ``y``, or broadcastable), prior N(0, 1).

    The log posterior is concave in theta; Newton steps from 0, each clipped to +-2, until the
    largest step is below 1e-10."""
    a = np.broadcast_to(np.asarray(a, dtype=float), np.shape(y))
    c = np.broadcast_to(np.asarray(c, dtype=float), np.shape(y))
    y = np.asarray(y, dtype=float)
    theta = np.zeros(y.shape[:-1])
    for _ in range(iterations):
        p = _sigmoid(theta[..., None] * a + c)
        grad = ((y - p) * a).sum(axis=-1) - theta / PRIOR_THETA_VAR
        hess = (a * a * p * (1 - p)).sum(axis=-1) + 1.0 / PRIOR_THETA_VAR
        step = np.clip(grad / hess, -2.0, 2.0)
        theta = theta + step
        if np.abs(step).max(initial=0.0) < 1e-10:
            break
    return theta


def mean_probability(fit: IRTFit, items_by_group: list[np.ndarray], theta: np.ndarray, *,
                     exact_cells: int = 20_000_000, grid: int = 257) -> np.ndarray:
    """``(1/N_g) sum_{i in g} P_i(theta)`` for each group g of item indices, at every theta (any
    shape); returns theta.shape + (groups,).

    Exact when (distinct thetas) x items is at most ``exact_cells``; otherwise computed exactly on
    ``grid`` evenly spaced thetas spanning the values and interpolated by a cubic spline (the mean
    of sigmoids is smooth: the spline's error is far below 1e-6 of a score point)."""
    from scipy.interpolate import CubicSpline

    theta = np.asarray(theta, dtype=float)
    flat, inverse = np.unique(theta.ravel(), return_inverse=True)
    total_items = sum(len(g) for g in items_by_group)
    use_grid = len(flat) > grid and len(flat) * total_items > exact_cells
    points = np.linspace(flat[0], flat[-1], grid) if use_grid else flat
    out = np.empty((len(points), len(items_by_group)))
    chunk = max(1, exact_cells // max(total_items, 1))
    for g, items in enumerate(items_by_group):
        if len(items) == 0:
            out[:, g] = np.nan
            continue
        a, c = fit.a[items], fit.c[items]
        for s in range(0, len(points), chunk):
            out[s:s + chunk, g] = _sigmoid(points[s:s + chunk, None] * a + c).mean(axis=1)
    values = CubicSpline(points, out, axis=0)(flat) if use_grid else out
    return values[inverse].reshape(theta.shape + (len(items_by_group),))
