"""Score estimators that locate a model from a sample of items (issue 17): A, stratified by
(benchmark x members right), and B, the IRT difference (GREG) estimator, beside the paper's rule.

Both estimate the model's full-benchmark reference score ``sum_b w_b S_b`` (the ground truth's own
quantity) and place it above every member whose reference score is lower.

Notation: benchmarks b with the pool's weights ``w_b`` (sum 1); ``N_b`` items each, anomalous
included (every pool item the model can be scored on: it has a row, and under
``missing="exclude"`` it answered); ``y_i`` the model's correctness (a -1 is wrong); ``r_i`` the
number of family members right on item i; strata ``h = (b, r_i)`` with ``N_h`` items.

A, stratified estimate:

1. Allocation: ``n_h`` proportional to ``w_b N_h / N_b``, at least one item per non-empty stratum,
   largest-remainder rounding to the budget (a stratum never gets more than its ``N_h``).
2. Draw ``n_h`` items without replacement per stratum, from the items in content order.
3. ``T = 100 sum_b w_b sum_{h in b} (N_h / N_b) mean_h(y)``.
4. ``V = 10^4 sum_b w_b^2 sum_h (N_h / N_b)^2 (1 - n_h / N_h) s_h^2 / n_h``, ``s_h^2`` the sample
   variance (ddof 1); a stratum with ``n_h = 1`` uses the benchmark's pooled sample variance (the
   variance of all of that benchmark's drawn items, ddof 1; 0.25 when it has a single item). A
   stratum whose drawn items are all right (all wrong) has ``s_h^2 = 0``; its ``s_h^2`` is floored at
   ``p~ (1 - p~)``, ``p~ = (k + 1) / (k + 2)`` (``1 / (k + 2)``), ``k`` the items drawn in all of the
   benchmark's all-right (all-wrong) strata together. Without the floor V underestimates for models
   near 100% (95% coverage 0.86-0.89 at 95-98% accuracy in a planted 2PL world; with it >= 0.95,
   conservative above 98%). T is unchanged, so A stays design-unbiased; V is biased upward a little
   (``s_h^2`` alone is unbiased on average, its zeros balanced by larger values elsewhere, but the
   Wald interval then fails exactly where the zeros cluster: near 100%).
5. Position ``p`` = members with ``mu_j < T``; confidence =
   ``Phi((mu_(p+1) - T) / sqrt V) - Phi((mu_(p) - T) / sqrt V)`` over the members' reference scores
   sorted, ``mu_(0) = -inf``, ``mu_(n+1) = +inf``.

B, IRT difference (GREG) estimator: a 2PL fitted on the reference panel (:mod:`evalprism.stem.irt`,
never including the model being located); the model's ``theta`` by MAP from its sampled items;

    T = 100 sum_b w_b [ (1/N_b) sum_{i in b} P_i(theta) + sum_{h in b} (N_h / N_b) mean_{i in S_h}(y_i - P_i(theta)) ]

with ``h = b`` for a simple random sample (design ``random``: the random-sampling baseline's own
draw) or A's strata (design ``stratified``: A's own draw); V as in A with the residuals
``y_i - P_i(theta)`` in place of ``y``. The residual term is what makes it unbiased: the plug-in
``sum P_i(theta)`` alone is not. Under the random design a benchmark that the draw missed adds no
residual and its variance term uses the pooled residual variance of the whole draw with ``n = 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from scipy.special import ndtr

from evalprism.errors import EvalprismError

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool


@dataclass(frozen=True)
class Strata:
    """The stratified population of one model: ``items`` (pool indices, content order) with their
    ``stratum`` code; per stratum its benchmark ``bench``, members right ``right``, size ``size``
    (N_h) and share ``share`` = w_b N_h / N_b; per benchmark ``bench_size`` (N_b) and ``weights``."""

    items: np.ndarray
    stratum: np.ndarray
    bench: np.ndarray
    right: np.ndarray
    size: np.ndarray
    share: np.ndarray
    bench_size: np.ndarray
    weights: np.ndarray

    def members(self) -> list[np.ndarray]:
        """Pool indices of each stratum, in content order."""
        order = np.argsort(self.stratum, kind="stable")
        return np.split(self.items[order], np.cumsum(self.size)[:-1])


def pool_strata(pool: Pool) -> Strata:
    """Estimator A's strata over every pool item (the population a plan draws from)."""
    return build_strata(pool.item_order, pool.bench_code, pool.members_right, pool.weights, pool.n)


@dataclass(frozen=True)
class Sample:
    """Items a method estimates from, drawn under a known design: one row per trial (a model's own
    answers on part of the pool are one row).

    ``picked``: trials x items, pool indices; ``group``: each drawn item's design group (items, or
    trials x items): a stratum of A, a benchmark of a simple random sample, a TI level (1..n+1) of
    the paper's balanced subset; ``group_size``: each group's population size (N_h; a TI level's
    pool items); ``group_bench``: each group's benchmark (None for TI levels); ``valid``: which drawn
    items count (None: all; under ``missing="exclude"`` a drawn -1 of a random draw is outside the
    population)."""

    picked: np.ndarray
    group: np.ndarray
    group_size: np.ndarray
    group_bench: np.ndarray | None = None
    valid: np.ndarray | None = None

    def answers(self, outcome: np.ndarray) -> np.ndarray:
        """The model's answers on the drawn items (1.0 right, 0.0 otherwise; a -1 is wrong), trials x items."""
        return (outcome[self.picked] == 1).astype(float)


def build_strata(
    items: np.ndarray, bench_code: np.ndarray, members_right: np.ndarray, weights: np.ndarray, n_members: int
) -> Strata:
    """Strata (benchmark, members right) of the usable pool ``items`` (content order);
    ``bench_code`` and ``members_right`` are per pool item."""
    nb = len(weights)
    code = bench_code[items] * (n_members + 1) + members_right[items]
    present, stratum = np.unique(code, return_inverse=True)
    size = np.bincount(stratum, minlength=len(present))
    bench = present // (n_members + 1)
    bench_size = np.bincount(bench_code[items], minlength=nb).astype(float)
    w = np.where(bench_size > 0, np.asarray(weights, dtype=float), 0.0)
    if w.sum() <= 0:
        raise EvalprismError("no pool benchmark with a positive weight has an item the model can be scored on")
    w = w / w.sum()
    share = w[bench] * size / bench_size[bench]
    return Strata(
        items=np.asarray(items),
        stratum=stratum.astype(np.int64),
        bench=bench.astype(np.int64),
        right=(present % (n_members + 1)).astype(np.int64),
        size=size.astype(np.int64),
        share=share,
        bench_size=bench_size,
        weights=w,
    )


def allocate(budget: int, size: np.ndarray, share: np.ndarray) -> np.ndarray:
    """Items per stratum: proportional to ``share``, at least one per non-empty stratum, at most its
    ``size``, summing to ``budget`` (largest remainders get the rounding; all items when the budget
    exceeds them)."""
    size = np.asarray(size, dtype=np.int64)
    share = np.asarray(share, dtype=float)
    nonempty = size > 0
    if budget >= size.sum():
        return size.copy()
    if budget < nonempty.sum():
        raise EvalprismError(
            f"items: {budget} is fewer than the {int(nonempty.sum())} strata (benchmark x members "
            f"right) of the pool; use at least {int(nonempty.sum())}"
        )
    n = nonempty.astype(np.int64)
    # the remaining budget goes by largest remainder on the quota, never past a stratum's size
    quota = budget * share / share.sum() if share.sum() > 0 else budget * nonempty / nonempty.sum()
    left = budget - n.sum()
    while left > 0:
        room = size - n
        if not (room > 0).any():
            break
        # whole items first: where the quota exceeds the allocation by at least one
        want = np.where(room > 0, np.floor(np.maximum(quota - n, 0)), 0).astype(np.int64)
        want = np.minimum(want, room)
        if want.sum() > 0:
            if want.sum() > left:  # more whole items wanted than left: largest wants first
                order = np.argsort(-(quota - n), kind="stable")
                for h in order:
                    take = min(want[h], left)
                    n[h] += take
                    left -= take
                    if left == 0:
                        break
            else:
                n += want
                left -= int(want.sum())
            continue
        # then one item each to the largest remainders (ties: first stratum)
        remainder = np.where(room > 0, quota - n, -np.inf)
        order = np.argsort(-remainder, kind="stable")[:left]
        order = order[np.isfinite(remainder[order])]
        n[order] += 1
        left -= len(order)
    return n


def stratified_draw(strata_members: list[np.ndarray], alloc: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One stratified sample: ``alloc[h]`` pool indices from each stratum, without replacement,
    grouped by stratum in stratum order."""
    picks = []
    for members, k in zip(strata_members, alloc, strict=True):
        if k >= len(members):
            picks.append(members)
        elif k > 0:
            picks.append(members[rng.choice(len(members), k, replace=False)])
    return np.concatenate(picks) if picks else np.zeros(0, dtype=np.int64)


def _group_stats(values: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trial (rows) and group: count, mean and sample variance (ddof 1, NaN below 2 items) of
    ``values`` (trials x items); ``group`` is trials x items or items."""
    trials = values.shape[0]
    group = np.broadcast_to(np.asarray(group), values.shape)
    flat = (group + n_groups * np.arange(trials)[:, None]).ravel()
    count = np.bincount(flat, minlength=trials * n_groups).reshape(trials, n_groups).astype(float)
    total = np.bincount(flat, weights=values.ravel(), minlength=trials * n_groups).reshape(trials, n_groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        dev = values - np.take_along_axis(mean, group, axis=1)
        ss = np.bincount(flat, weights=(dev * dev).ravel(), minlength=trials * n_groups).reshape(trials, n_groups)
        var = np.where(count >= 2, ss / (count - 1), np.nan)
    return count, mean, var


def add_one_variance(count: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """``p~ (1 - p~)`` with the add-one proportion ``p~ = (k + 1) / (n + 2)`` of ``k = n * mean`` right
    answers out of ``n``: the Bernoulli variance a stratum cannot be below. It is never 0, so a stratum
    whose drawn items are all right (or all wrong) still carries sampling variance."""
    with np.errstate(invalid="ignore"):
        p = (np.nan_to_num(count * mean) + 1.0) / (count + 2.0)
    return p * (1.0 - p)


def _floor_uniform_strata(
    var: np.ndarray, count: np.ndarray, mean: np.ndarray, strata_bench: np.ndarray, nb: int
) -> np.ndarray:
    """Floor the variance of every stratum whose drawn 0/1 answers are all right (or all wrong) at
    the add-one variance of all such strata of its benchmark pooled: ``k`` items drawn in the
    benchmark's all-right strata give ``p~ = (k + 1) / (k + 2)`` and the floor ``p~ (1 - p~)``
    (about 1/k); the same for all-wrong strata. Pooling within the benchmark keeps the floor near
    the true variance of such strata (a stratum of its own, n_h = 3, would get 0.16 and make the
    interval several times too wide); strata with varying answers are left as they are."""
    onehot = (strata_bench[:, None] == np.arange(nb)[None, :]).astype(float)  # strata x benchmarks
    drawn = count >= 1
    for value in (1.0, 0.0):
        uniform = drawn & (np.nan_to_num(mean, nan=-1.0) == value)
        k = (count * uniform) @ onehot  # trials x benchmarks: items in the benchmark's uniform strata
        floor = add_one_variance(k, np.full_like(k, value))[:, strata_bench]
        var = np.where(uniform, np.maximum(var, floor), var)
    return var


def design_estimate(
    values: np.ndarray,
    stratum: np.ndarray,
    strata_bench: np.ndarray,
    strata_size: np.ndarray,
    weights: np.ndarray,
    bench_size: np.ndarray,
    valid: np.ndarray | None = None,
    binary: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """``sum_b w_b sum_h (N_h/N_b) mean_h(values)`` and its variance (unscaled: fractions, not
    percent), per trial. ``values``: trials x items; ``stratum``: their stratum code (items, or
    trials x items); ``valid``: which drawn items count (default all). A stratum with no drawn item
    contributes no mean, and its variance term uses the pooled variance of the whole draw with n = 1.

    ``binary`` (values are 0/1 answers, estimator A): the variance of a stratum answered all right
    or all wrong is floored (:func:`_floor_uniform_strata`); without it such a stratum has
    s_h^2 = 0 and V underestimates for models near 100%. The estimate itself is untouched."""
    n_strata = len(strata_size)
    stratum = np.broadcast_to(np.asarray(stratum), values.shape)
    if valid is not None:
        stratum = np.where(valid, stratum, n_strata)  # a group of its own, dropped below
    groups = n_strata + (valid is not None)
    count, mean, var = _group_stats(values, stratum, groups)
    count, mean, var = count[:, :n_strata], mean[:, :n_strata], var[:, :n_strata]
    # the benchmark's pooled sample variance: all of its drawn items together
    nb = len(weights)
    bench_of = np.append(np.asarray(strata_bench), nb)[stratum]
    b_count, _, b_var = _group_stats(values, bench_of, nb + 1)
    b_count, b_var = b_count[:, :nb], b_var[:, :nb]
    b_var = np.where(b_count >= 2, b_var, 0.25)

    everything = np.where(stratum < n_strata, 0, 1)
    _, _, all_var = _group_stats(values, everything, 2)
    all_var = np.where(np.isnan(all_var[:, 0]), 0.25, all_var[:, 0])
    b_var = np.where(b_count >= 1, b_var, all_var[:, None])
    var = np.where(count >= 2, var, b_var[:, strata_bench])
    if binary:
        var = _floor_uniform_strata(var, count, mean, np.asarray(strata_bench), nb)
    coef = weights[strata_bench] * strata_size / bench_size[strata_bench]  # w_b N_h / N_b
    drawn = count >= 1
    estimate = (np.where(drawn, mean, 0.0) * coef).sum(axis=1)
    n_eff = np.maximum(count, 1.0)
    fpc = np.where(drawn, np.clip(1.0 - count / strata_size, 0.0, 1.0), 1.0)
    variance = (coef**2 * fpc * var / n_eff).sum(axis=1)
    return estimate, variance


def positions_of(score: np.ndarray, member_scores: np.ndarray) -> np.ndarray:
    """Members with a lower reference score than each estimate."""
    return (np.asarray(member_scores, dtype=float) < np.asarray(score, dtype=float)[..., None]).sum(axis=-1)


def bounding_cdf(score: np.ndarray, se: np.ndarray, member_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``Phi((mu_(p) - T)/se)`` and ``Phi((mu_(p+1) - T)/se)``: the normal distribution of the
    estimate T at the two members bounding it, p = members below T, over the sorted member scores
    with open ends at -inf and +inf (0 and 1 when se = 0). Below the interval lies the first, above
    it one minus the second (a score localization's ``p_lower`` and ``p_upper``)."""
    score = np.asarray(score, dtype=float)
    se = np.asarray(se, dtype=float)
    mu = np.concatenate([[-np.inf], np.sort(np.asarray(member_scores, dtype=float)), [np.inf]])
    p = positions_of(score, member_scores)
    lo, hi = mu[p], mu[p + 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        z_hi = np.where(se > 0, (hi - score) / se, np.inf)
        z_lo = np.where(se > 0, (lo - score) / se, -np.inf)
    return ndtr(z_lo), ndtr(z_hi)


def score_confidence(score: np.ndarray, se: np.ndarray, member_scores: np.ndarray) -> np.ndarray:
    """``Phi((mu_(p+1) - T)/se) - Phi((mu_(p) - T)/se)`` (:func:`bounding_cdf`): the probability of
    the interval the estimate places the model in (1 when se = 0)."""
    below, up_to = bounding_cdf(score, se, member_scores)
    return up_to - below
