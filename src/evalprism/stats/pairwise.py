"""Marginal fits of the pairwise outcome models: battles aggregated to pairs, maximum likelihood,
sandwich and bootstrap intervals.

The models themselves (``bt``, ``bt-tie``, ``rk``, ``grk``: outcomes, tie parameter, likelihood and
derivatives) are entries of :mod:`evalprism.stats.outcome_models`; every function here reads its
model's entry and holds no per-model branch.

Battles are aggregated to unique (a, b) pairs with outcome counts (soft labels add fractional
counts) before fitting, so a fit costs O(unique pairs) per step. The maximum-likelihood fit uses
L-BFGS-B (scipy) on the exact gradient in float64, then Fisher-scoring steps that take it from
where L-BFGS-B stops (about 1e-7 to 1e-6 in the coefficients) to rounding level.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from evalprism.errors import EvalprismError
from evalprism.stats.outcome_models import NUMPY_OPS, OUTCOME_MODELS, OutcomeModel, OutcomeModelName, get_outcome_model
from evalprism.stats.outcomes import A_WINS, B_WINS, BOTH_BAD, OUTCOMES, TIE
from evalprism.vocabularies import CiMethod

#: aggregate with a dense (n_models^2 x 4) table while n_models^2 is at most this or the battle count
_DENSE_PAIRS = 1 << 16
#: how :func:`coef_intervals` computes 95% intervals
Z95 = 1.959963984540054  # standard normal 97.5% quantile


def battle_cells(
    outcome: np.ndarray, p_b: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Where each battle's unit of weight goes among the four outcome cells (the one rule that
    :meth:`PairCounts.from_battles` and :func:`outcome_rows` sum by).

    A hard outcome puts 1 in its own cell. A soft label P(B preferred) (finite ``p_b``) replaces the
    hard outcome of its battle: 1 − p_b of a win for A, then p_b of a win for B. Returns ``cells``
    (n, parts) of outcome indices, their ``weights`` (n, parts; None: 1 each) and the mask of
    soft-labelled battles (None without any); ``parts`` is 2 when some battle has a soft label (a
    hard battle's second part is 0 in its own cell), else 1.
    """
    outcome = np.asarray(outcome, np.int64)
    if p_b is not None:
        p_b = np.asarray(p_b, dtype=float)
        soft = np.isfinite(p_b)
        if soft.any():
            cells = np.stack([np.where(soft, A_WINS, outcome), np.where(soft, B_WINS, outcome)], axis=1)
            weights = np.stack([np.where(soft, 1.0 - p_b, 1.0), np.where(soft, p_b, 0.0)], axis=1)
            return cells, weights, soft
    return outcome[:, None], None, None


def outcome_rows(outcome: np.ndarray, p_b: np.ndarray | None = None) -> np.ndarray:
    """One row of outcome weights (n, 4) per battle: one-hot of the outcome index, or
    (1 − p_b, p_b, 0, 0) where a soft label is given (:func:`battle_cells`)."""
    cells, weights, _ = battle_cells(outcome, p_b)
    n = cells.shape[0]
    bins = (np.arange(n)[:, None] * 4 + cells).ravel()
    return np.bincount(bins, None if weights is None else weights.ravel(), minlength=4 * n).astype(float).reshape(n, 4)


@dataclass(frozen=True)
class PairCounts:
    """Outcome counts per unique ordered pair: ``counts[:, j]`` for outcome ``OUTCOMES[j]``.

    ``soft_cross`` (per pair, None when there are no soft labels) is Σ p_b (1 − p_b) over the pair's
    soft-labelled battles: with the counts, it gives the second moments of the battles' labels that
    the sandwich's per-battle scores need (a battle with label 0.7 is not 0.7 of a win plus 0.3 of a
    loss as far as the variance goes)."""

    a: np.ndarray
    b: np.ndarray
    counts: np.ndarray
    n_models: int
    soft_cross: np.ndarray | None = None

    @classmethod
    def from_battles(
        cls, a: np.ndarray, b: np.ndarray, outcome: np.ndarray, n_models: int, p_b: np.ndarray | None = None
    ) -> PairCounts:
        """Aggregate battles (model indices, outcome index into ``OUTCOMES``, soft label ``p_b``) to
        unique pairs: each battle's weight goes where :func:`battle_cells` says."""
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        key = a * n_models + b
        # Hand-written group-by (np.unique + np.add.at on an (n, 4) one-hot matrix is ~10x slower on
        # 1M battles): one weighted bincount over (pair, outcome) cells, the parts of each battle in
        # battle order, so the sums are bit-for-bit those of adding the battles one by one.
        cells, weights, soft = battle_cells(outcome, p_b)
        if n_models * n_models <= max(key.size, _DENSE_PAIRS):
            uniq = np.flatnonzero(np.bincount(key, minlength=n_models * n_models))
            slot = key  # dense: the pair key is its own row of the (n_models^2, 4) table
            n_rows = n_models * n_models
        else:
            uniq, slot = np.unique(key, return_inverse=True)
            n_rows = uniq.size
        bins = (slot[:, None] * 4 + cells).ravel()
        w = None if weights is None else weights.ravel()
        counts = np.bincount(bins, weights=w, minlength=n_rows * 4).astype(float).reshape(n_rows, 4)
        cross = None
        if soft is not None:
            p_b = np.asarray(p_b, dtype=float)
            cross = np.bincount(slot, weights=np.where(soft, p_b * (1.0 - p_b), 0.0), minlength=n_rows)
        if n_rows != uniq.size:
            counts = counts[uniq]
            cross = None if cross is None else cross[uniq]
        return cls(uniq // n_models, uniq % n_models, counts, n_models, cross)


def outcome_terms(
    outcome_model: OutcomeModelName, coef_a: np.ndarray, coef_b: np.ndarray, extra: float | None
) -> tuple[np.ndarray, np.ndarray]:
    """Log-probabilities (n, 4) of (A wins, B wins, tie, tie both bad) under ``outcome_model`` and their
    first derivatives (n, 4, 3) with respect to (coef_a, coef_b, raw extra) of each battle (0 for
    outcomes the model does not have, and for ``extra`` in ``bt``/``bt-tie``): the numpy twin of
    the P2L head's :func:`evalprism.p2l.likelihood.log_outcome_probs`."""
    logp, dlogp = get_outcome_model(outcome_model).terms(
        np.asarray(coef_a, dtype=float), np.asarray(coef_b, dtype=float), extra
    )
    return logp.T, dlogp.transpose(2, 0, 1)


def outcome_weights(outcome_model: OutcomeModelName, counts: np.ndarray) -> np.ndarray:
    """How ``outcome_model`` uses the four observed outcome counts (ties dropped, halved or kept):
    :meth:`~evalprism.stats.outcome_models.OutcomeModel.weights`."""
    return get_outcome_model(outcome_model).weights(counts)


def _listed(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def ignored_battles_note(
    outcome_model: OutcomeModelName, outcome: np.ndarray, p_b: np.ndarray | None = None
) -> str | None:
    """A status line saying how many battles ``outcome_model`` cannot learn from and why, or None when it
    uses them all. Which outcomes an outcome model drops is read from its outcome weights (the one rule):
    today only ``bt`` drops anything, the ties; a soft-labelled battle is always used."""
    dropped = outcome_weights(outcome_model, np.eye(4)).sum(axis=1) <= 0
    ignored = dropped[np.asarray(outcome, np.int64)]
    if p_b is not None:
        ignored &= ~np.isfinite(np.asarray(p_b, dtype=float))
    n = int(ignored.sum())
    if n == 0:
        return None
    kinds = " and ".join(f"'{w}'" for w, d in zip(OUTCOMES, dropped, strict=True) if d)
    half = [m.name for m in OUTCOME_MODELS.values() if m.ties == "half"]
    modelled = [m.name for m in OUTCOME_MODELS.values() if len(m.outcomes) > 2]
    return (
        f"outcome model '{outcome_model}' leaves out {n:,} of {ignored.size:,} battles: {kinds} are not outcomes of that model "
        f"({_listed(half)} count{'s' if len(half) == 1 else ''} a tie as half a win for each side; "
        f"{_listed(modelled)} model ties)"
    )


@dataclass(frozen=True)
class PairwiseFit:
    """A fitted marginal model: ``coefs`` per model (centred to mean 0 for a shift-invariant model,
    i.e. all but ``grk``), the reported tie parameter (η for ``rk``, λ for ``grk``), the negative
    log-likelihood and its gradient norm."""

    outcome_model: OutcomeModelName
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
    _n_comp, labels = connected_components(graph, directed=False)
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


_blas_controller: Any = None


@contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Run BLAS single-threaded: the fits' linear algebra is tiny (vectors and matrices of size
    n_models), and on a small machine shared with other work OpenBLAS's thread hand-offs made a
    1M-battle fit 2 to 10 times slower than one thread (measured on 2 cores)."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController  # a dependency of scikit-learn

        _blas_controller = ThreadpoolController()
    with _blas_controller.limit(limits=1, user_api="blas"):
        yield


def _scatter_matrix(local: np.ndarray, pairs: PairCounts, size: int) -> np.ndarray:
    """Sum per-pair (k x k) blocks ``local`` (k, k, P) over (coef_a, coef_b[, extra]) into a
    (size x size) matrix.

    A hand-written sparse product G^T diag(w) G: one bincount over the k^2 index blocks is several
    times faster than ``np.add.at`` per block or a scipy sparse product at this size."""
    k = local.shape[0]
    idx = [pairs.a, pairs.b, np.full(pairs.a.size, pairs.n_models)][:k]
    flat = np.concatenate([idx[u] * size + idx[v] for u in range(k) for v in range(k)])
    return np.bincount(flat, local.reshape(-1), minlength=size * size).reshape(size, size)


class _Likelihood:
    """Negative log-likelihood of aggregated counts under ``outcome_model`` (+ ``l2``/2 ||coefs||^2), in numpy.

    The parameters ``x`` are the coefficients, then the model's raw tie parameter if it has one."""

    def __init__(
        self, outcome_model: OutcomeModelName, pairs: PairCounts, weights: np.ndarray, l2: float = 0.0
    ) -> None:
        self.outcome_model, self.pairs, self.l2 = outcome_model, pairs, l2
        self.entry: OutcomeModel = get_outcome_model(outcome_model)
        self.n = pairs.n_models
        self.k = self.entry.n_local  # local parameters of a pair: coef_a, coef_b[, extra]
        self.size = self.n + self.entry.n_extra
        self.weights = np.ascontiguousarray(weights.T)  # (4, P)
        self.used = [j for j in self.entry.outcomes if self.weights[j].any()]

    def extra(self, x: np.ndarray) -> float | None:
        """The raw tie parameter in ``x`` (None for a model without one)."""
        return float(x[self.n]) if self.entry.extra is not None else None

    def terms(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        coefs = x[: self.n]
        return self.entry.terms(coefs[self.pairs.a], coefs[self.pairs.b], self.extra(x))

    def value_and_grad(self, x: np.ndarray) -> tuple[float, np.ndarray]:
        logp, dlogp = self.terms(x)
        nll = 0.0
        local = np.zeros((self.k, self.pairs.a.size))
        for j in self.used:
            w = self.weights[j]
            term = float(w @ logp[j])
            if not np.isfinite(term):  # −inf log-probabilities where the weight is 0 do not count
                term = float(w[w > 0] @ logp[j][w > 0])
            nll -= term
            local -= w * dlogp[j, : self.k]
        n = self.n
        grad = np.zeros(self.size)
        grad[:n] = np.bincount(self.pairs.a, local[0], minlength=n) + np.bincount(self.pairs.b, local[1], minlength=n)
        if self.k == 3:
            grad[n] = local[2].sum()
        if self.l2:
            nll += 0.5 * self.l2 * float(x[:n] @ x[:n])
            grad[:n] += self.l2 * x[:n]
        return nll, grad

    def fisher(self, x: np.ndarray) -> np.ndarray:
        """Expected information Σ_pairs n Σ_k P(k) s_k s_kᵀ (+ l2 on the coefficients)."""
        logp, dlogp = self.terms(x)
        per_pair = self.weights.sum(axis=0)
        local = np.zeros((self.k, self.k, per_pair.size))
        for j in self.entry.outcomes:
            s = dlogp[j, : self.k]
            local += (per_pair * np.exp(logp[j])) * s[:, None, :] * s[None, :, :]
        info = _scatter_matrix(local, self.pairs, self.size)
        if self.l2:
            info[np.arange(self.n), np.arange(self.n)] += self.l2
        return info


def _inverse_information(lik: _Likelihood, x: np.ndarray) -> np.ndarray | None:
    """Inverse of the Fisher information at ``x`` (None if singular).

    The likelihood of a shift-invariant model is flat along a common shift of all coefficients and
    its gradient has no component there: adding that direction makes F invertible without
    changing F⁻¹g."""
    info = lik.fisher(x)
    if not lik.l2 and lik.entry.shift_invariant:
        shift = np.zeros(lik.size)
        shift[: lik.n] = 1.0 / np.sqrt(lik.n)
        info += np.trace(info) / lik.size * np.outer(shift, shift)
    try:
        return np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return None


def _scoring_steps(
    lik: _Likelihood, x: np.ndarray, inverse: np.ndarray, max_steps: int = 40
) -> tuple[np.ndarray, bool]:
    """Steps x <- x - F⁻¹ g(x) with a fixed F⁻¹ while the gradient norm falls.

    Returns the last accepted point and whether the steps shrank to rounding level. With F from a
    point near the optimum this converges linearly and fast (for ``bt``/``bt-tie`` F is the exact
    Hessian). It serves twice: to take an L-BFGS-B optimum, which stops where its line search can
    no longer see the loss change (about 1e-7 to 1e-6 in the coefficients for 1M battles), to
    rounding level; and to refit bootstrap resamples from the full-data optimum with the full-data F.
    Hand-written rather than scipy's Newton-type methods, which re-evaluate the Hessian at every
    step and stop on the same loss-change criteria as L-BFGS-B: here one F⁻¹ serves every step, and
    every bootstrap round.
    """
    grad = lik.value_and_grad(x)[1]
    norm = float(np.linalg.norm(grad))
    for _ in range(max_steps):
        step = inverse @ grad
        relative = float(np.max(np.abs(step))) / max(1.0, float(np.max(np.abs(x))))
        if relative <= 1e-13:
            return x, True
        trial = x - step
        if lik.entry.extra is not None and lik.entry.extra.lower is not None and trial[lik.n] < lik.entry.extra.lower:
            return x, False  # a step out of the tie parameter's domain
        trial_grad = lik.value_and_grad(trial)[1]
        trial_norm = float(np.linalg.norm(trial_grad))
        if not trial_norm < norm:
            return x, relative <= 1e-9  # no further progress: converged only if the steps were tiny
        x, grad, norm = trial, trial_grad, trial_norm
    return x, False


def _check_fit_input(
    pairs: PairCounts, outcome_model: OutcomeModelName, weights: np.ndarray, names: list[str] | None
) -> None:
    """Refuse what has no finite maximum-likelihood point: an unknown model, a disconnected
    comparison graph, outcomes the model needs and the battles lack (a tie parameter without ties)."""
    entry = get_outcome_model(outcome_model)
    check_connected(pairs, names)
    entry.check_weights(weights)


def fit_counts(
    pairs: PairCounts,
    outcome_model: OutcomeModelName = "bt",
    l2: float = 0.0,
    tol: float = 1e-10,
    names: list[str] | None = None,
    x0: np.ndarray | None = None,
) -> PairwiseFit:
    """Maximum-likelihood coefficients of ``outcome_model`` for the aggregated battles ``pairs``.

    ``l2`` adds ``l2/2 * ||coefs||^2`` (0 = plain MLE; a small value keeps coefficients finite when
    a model never loses). ``x0`` starts the optimiser from given parameters (a previous fit's
    ``params``, e.g. the full-data optimum for bootstrap refits); the default is 0 for the
    coefficients and the tie parameter's ``start`` (η = 0.5 for ``rk``). L-BFGS-B (``tol``: its gradient tolerance on the per-battle loss) finds the optimum and
    Fisher-scoring steps refine it to rounding level. Raises :class:`EvalprismError` on a
    disconnected comparison graph.
    """
    weights = outcome_weights(outcome_model, pairs.counts)
    _check_fit_input(pairs, outcome_model, weights, names)
    n = pairs.n_models
    lik = _Likelihood(outcome_model, pairs, weights, l2)
    tie = lik.entry.extra
    start = np.zeros(lik.size)
    bounds: list[tuple[float | None, float | None]] = [(None, None)] * n
    if tie is not None:
        start[n] = tie.start
        bounds.append((tie.lower, None))
    if x0 is not None:
        start = np.array(x0, dtype=float, copy=True)
        if start.shape != (lik.size,):
            raise EvalprismError(
                f"x0 has {start.size} parameters; outcome model '{outcome_model}' over {n} models has {lik.size}"
            )
        if tie is not None and tie.lower is not None:
            start[n] = max(start[n], tie.lower)
    total = float(weights.sum())

    def scaled(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, grad = lik.value_and_grad(x)
        return value / total, grad / total  # scale-free for the optimiser's tolerances

    with _single_threaded_blas():
        res = minimize(
            scaled,
            start,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 10_000, "ftol": tol * 1e-3, "gtol": tol},
        )
        inverse = _inverse_information(lik, res.x)
        x = res.x if inverse is None else _scoring_steps(lik, res.x, inverse)[0]
    return _make_fit(lik, x, int(res.nit))


def _make_fit(lik: _Likelihood, x: np.ndarray, n_iter: int) -> PairwiseFit:
    """The reported fit at the optimiser's parameters ``x``."""
    n, entry = lik.n, lik.entry
    coefs, raw = x[:n], lik.extra(x)
    if entry.shift_invariant and not lik.l2:
        coefs = coefs - coefs.mean()  # report the mean-zero solution
    extra = None if entry.extra is None else float(entry.extra.report(NUMPY_OPS, raw))
    loss, grad = lik.value_and_grad(x)
    total = float(lik.weights.sum())
    params = np.concatenate([coefs, x[n:]])
    return PairwiseFit(lik.outcome_model, coefs, extra, loss, float(np.linalg.norm(grad)) / total, n_iter, params)


def sandwich_cov(fit: PairwiseFit, pairs: PairCounts) -> np.ndarray:
    """Sandwich (robust) covariance H⁺ J H⁺ of the fitted parameters (coefs, then the raw extra).

    H is the exact Hessian of the negative log-likelihood; J sums the outer products of per-battle
    score vectors. A battle with outcome shares y (one-hot for a hard outcome; (½, ½) for a tie
    under ``bt-tie``, as arena-rank's outcome 0.5; (1 − p_b, p_b) for a soft label) has score
    Σ_j y_j s_j, so a pair contributes Σ_jk M_jk s_j s_kᵀ with M = Σ_battles y yᵀ: the diagonal is
    the outcome weights and the only off-diagonal entry, between A and B, is c = Σ y_A y_B
    (¼ per tie that counts half a win for each side, p_b(1 − p_b) per soft label). Hence J = Σ_j w_j s_j s_jᵀ − c (s_A − s_B)(s_A − s_B)ᵀ.
    The pseudo-inverse returns the covariance of the mean-zero coefficients for the shift-invariant
    models.

    A pair's log-likelihood depends only on its own (coef_a, coef_b, extra): both matrices are sums
    of per-pair 3 x 3 blocks from the model's ``terms`` and ``second_terms`` (held to torch autograd
    on :func:`evalprism.p2l.likelihood.log_outcome_probs` in the tests; autograd itself is slow here, it needs one backward
    pass per parameter or per local variable and outcome, and its thread pool stalls on a busy
    machine).
    """
    w = outcome_weights(fit.outcome_model, pairs.counts)
    lik = _Likelihood(fit.outcome_model, pairs, w)
    k = lik.k
    coef_a, coef_b = fit.params[pairs.a], fit.params[pairs.b]
    extra = lik.extra(fit.params)
    logp, dlogp = lik.entry.terms(coef_a, coef_b, extra)
    d2logp = lik.entry.second_terms(coef_a, coef_b, extra, logp, dlogp)
    meat_local = np.zeros((k, k, pairs.a.size))
    hess_local = np.zeros((k, k, pairs.a.size))
    for j in lik.used:
        weight = lik.weights[j]
        score = dlogp[j, :k]
        meat_local += weight * score[:, None, :] * score[None, :, :]
        hess_local -= weight * d2logp[j, :k, :k]
    cross = np.zeros(pairs.a.size) if pairs.soft_cross is None else pairs.soft_cross
    if lik.entry.ties == "half":  # a tie is one battle with outcome shares (½, ½): y_A y_B = ¼
        cross = cross + 0.25 * (pairs.counts[:, TIE] + pairs.counts[:, BOTH_BAD])
    if cross.any():
        diff = dlogp[0, :k] - dlogp[1, :k]
        meat_local -= cross * diff[:, None, :] * diff[None, :, :]
    with _single_threaded_blas():
        meat = _scatter_matrix(meat_local, pairs, lik.size)
        bread = np.linalg.pinv(_scatter_matrix(hess_local, pairs, lik.size), hermitian=True)
        return bread @ meat @ bread


def bootstrap_coefs(
    pairs: PairCounts,
    outcome_model: OutcomeModelName,
    rounds: int = 100,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
    x0: np.ndarray | None = None,
) -> np.ndarray:
    """Coefficients refitted on ``rounds`` multinomial resamples of the aggregated battle counts.

    Every refit starts from ``x0`` (default: the full-data fit's ``params``) and takes
    Fisher-scoring steps with the full-data information there, which each resample's optimum is
    close to; a resample where those steps do not converge is refitted from scratch by
    :func:`fit_counts`. Either way each refit is the resample's maximum-likelihood point."""
    rng = np.random.default_rng(seed)
    flat = pairs.counts.ravel()
    total = flat.sum()
    whole = round(total)
    if x0 is None:
        x0 = fit_counts(pairs, outcome_model).params
    x0 = np.asarray(x0, dtype=float)
    out = np.empty((rounds, pairs.n_models))
    with _single_threaded_blas():
        inverse = _inverse_information(
            _Likelihood(outcome_model, pairs, outcome_weights(outcome_model, pairs.counts)), x0
        )
        for r in range(rounds):
            draw = rng.multinomial(whole, flat / total).reshape(pairs.counts.shape).astype(float)
            keep = draw.sum(axis=1) > 0
            resampled = PairCounts(pairs.a[keep], pairs.b[keep], draw[keep], pairs.n_models)
            weights = outcome_weights(outcome_model, resampled.counts)
            _check_fit_input(resampled, outcome_model, weights, None)
            lik = _Likelihood(outcome_model, resampled, weights)
            x, converged = _scoring_steps(lik, x0, inverse) if inverse is not None else (x0, False)
            out[r] = _make_fit(lik, x, 0).coefs if converged else fit_counts(resampled, outcome_model, x0=x0).coefs
            if on_step is not None:
                on_step(1)
    return out


def coef_intervals(
    pairs: PairCounts,
    fit: PairwiseFit,
    ci: CiMethod | None,
    *,
    rounds: int = 100,
    seed: int = 0,
    on_step: Callable[[int], None] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """95% intervals (lower, upper) of ``fit.coefs`` on ``pairs``: ``sandwich`` (robust closed form,
    ±1.96 standard errors from :func:`sandwich_cov`), ``bootstrap`` (percentiles 2.5 and 97.5 of
    ``rounds`` multinomial resamples of the counts, :func:`bootstrap_coefs`; ``on_step`` is called
    once per round) or None (NaN)."""
    n = pairs.n_models
    if ci == "sandwich":
        se = np.sqrt(np.clip(np.diag(sandwich_cov(fit, pairs))[:n], 0, None))
        return fit.coefs - Z95 * se, fit.coefs + Z95 * se
    if ci == "bootstrap":
        boot = bootstrap_coefs(
            pairs,
            fit.outcome_model,
            rounds=rounds,
            seed=seed,
            on_step=on_step,
            x0=fit.params,
        )
        lower, upper = np.percentile(boot, [2.5, 97.5], axis=0)
        return lower, upper
    if ci is None:
        return np.full(n, np.nan), np.full(n, np.nan)
    raise EvalprismError(f"unknown confidence-interval method '{ci}': expected sandwich or bootstrap")


def battles_per_model(pairs: PairCounts) -> np.ndarray:
    """Battles each model took part in (soft labels count one battle each, as the hard ones)."""
    played = np.bincount(
        np.concatenate([pairs.a, pairs.b]),
        weights=np.concatenate([pairs.counts.sum(axis=1)] * 2),
        minlength=pairs.n_models,
    )
    return np.rint(played).astype(np.int64)


ELO_SCALE = 400.0 / np.log(10.0)


def elo_ratings(coefs: np.ndarray, base: float = 1000.0) -> np.ndarray:
    """Coefficients on the familiar Elo-like scale: ``base + 400/ln(10) * θ``."""
    return base + ELO_SCALE * np.asarray(coefs, dtype=float)
