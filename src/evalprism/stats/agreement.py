"""Agreement between two raters: Gwet's AC1 with its standard error and interval, Cohen's kappa,
percent agreement; for one table or for many groups (clusters, query x cluster cells) at once.

Gwet's AC1 (Gwet 2008, "Computing inter-rater reliability and its variance in the presence of high
agreement", Br. J. Math. Stat. Psychol. 61) is computed exactly as irrCAC's ``CAC.gwet`` (the Python
port of Gwet's R package) computes it for two raters with identity weights:

- subjects with no rating are dropped; ``n`` subjects have at least one rating, ``n2`` have both;
- ``pa`` = share of agreeing subjects among the ``n2`` rated by both;
- ``pi_k`` = mean over the ``n`` subjects of (ratings in category k) / (ratings of the subject);
- ``pe`` = sum_k pi_k (1 - pi_k) / (q - 1) with q the number of categories, AC1 = (pa - pe) / (1 - pe);
- variance by linearisation: per subject ``ac1_i = (n/n2)(pa_i - pe [r_i = 2]) / (1 - pe)``,
  ``pe_i = sum_k a_ik (1 - pi_k) / ((q - 1) r_i)``, ``x_i = ac1_i - 2 (1 - AC1)(pe_i - pe)/(1 - pe)``,
  ``var = (1 - f) / (n (n - 1)) * sum_i (x_i - AC1)^2`` with the finite-population fraction
  ``f = n / N`` (irrCAC's default ``N = inf``, so ``f = 0``);
- interval: Student t with ``n - 1`` degrees of freedom around AC1, the upper end capped at 1 (the lower
  end is not capped, as in irrCAC).

Departures from irrCAC, all where irrCAC has no answer: with fewer than two subjects the SE and the
interval are NaN (irrCAC divides by zero); a zero SE stays 0 (irrCAC substitutes 1e-15); a single
category (q = 1) is refused: pass the full scale with ``categories=`` (irrCAC's convention there,
``pe = 1 - 1e-15``, gives values above 1).

Cohen's kappa uses the subjects rated by both; it is NaN when the chance agreement is 1 (both raters
use one and the same category), as scikit-learn's ``cohen_kappa_score`` does.

The grouped functions compute every group in one pass of ``np.bincount`` over (group, category)
codes rather than a Python loop per group: the judge analysis needs tens of thousands of query x
cluster cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as _st


@dataclass(frozen=True)
class Agreement:
    """Gwet's AC1 of two raters with its standard error and confidence interval.

    ``pa`` is the observed (percent) agreement, ``pe`` the AC1 chance agreement, ``n`` the subjects
    with at least one rating, ``n_both`` those rated by both.
    """

    value: float
    se: float
    ci: tuple[float, float]
    pa: float
    pe: float
    n: int
    n_both: int
    confidence: float = 0.95


@dataclass(frozen=True)
class GroupAgreement:
    """Agreement statistics for many groups at once; every field is an array indexed by group."""

    ac1: np.ndarray
    se: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    pa: np.ndarray
    pe: np.ndarray
    kappa: np.ndarray
    n: np.ndarray
    n_both: np.ndarray


def encode_ratings(
    rater1: Sequence[Any] | np.ndarray, rater2: Sequence[Any] | np.ndarray, categories: Sequence[Any] | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Category codes 0..q-1 of both raters (-1 = missing: None or NaN) and the category list.

    ``categories`` defaults to the sorted union of the observed ratings; a rating not in
    ``categories`` raises ``ValueError``.
    """
    a = np.asarray(rater1, dtype=object if not _numeric(rater1) else float)
    b = np.asarray(rater2, dtype=object if not _numeric(rater2) else float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"rater1 and rater2 must be 1-D and of equal length, got shapes {a.shape} and {b.shape}")
    miss_a, miss_b = _missing(a), _missing(b)
    if categories is None:
        observed = np.concatenate([a[~miss_a], b[~miss_b]])
        cats = np.unique(observed.astype(float)) if observed.dtype != object else np.array(sorted(set(observed)))
    else:
        cats = np.asarray(list(categories))
    codes = []
    for values, miss in ((a, miss_a), (b, miss_b)):
        code = np.full(values.shape, -1, dtype=np.int64)
        present = values[~miss]
        if cats.dtype.kind in "fiub" and present.dtype != object:
            order = np.argsort(cats, kind="stable")
            pos = np.searchsorted(cats[order], present.astype(float))
            pos = np.clip(pos, 0, cats.size - 1)
            found = cats[order][pos] == present
            mapped = order[pos]
        else:
            lookup = {c: i for i, c in enumerate(cats.tolist())}
            mapped = np.array([lookup.get(v, -1) for v in present.tolist()], dtype=np.int64)
            found = mapped >= 0
        if not np.all(found):
            bad = present[~found][0]
            raise ValueError(f"rating {bad!r} is not one of the categories {cats.tolist()}")
        code[~miss] = mapped
        codes.append(code)
    return codes[0], codes[1], cats


def _numeric(values: Any) -> bool:
    arr = np.asarray(values)
    if arr.dtype.kind in "fiub":
        return True
    if arr.dtype == object:
        return all(v is None or isinstance(v, int | float | np.integer | np.floating) for v in arr.tolist())
    return False


def _missing(values: np.ndarray) -> np.ndarray:
    if values.dtype == object:
        return np.array([v is None or (isinstance(v, float) and np.isnan(v)) for v in values.tolist()], dtype=bool)
    return np.isnan(values.astype(float))


def agreement_by_group(
    codes1: np.ndarray,
    codes2: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    n_categories: int,
    *,
    confidence: float = 0.95,
    population_size: float = np.inf,
) -> GroupAgreement:
    """AC1 (value, SE, interval, pa, pe) and Cohen's kappa of every group in one vectorised pass.

    ``codes1``/``codes2``: category codes 0..q-1, -1 for a missing rating; ``groups``: group index
    0..n_groups-1 of each subject (-1 = leave the subject out). Formulas: the module docstring.
    """
    q = int(n_categories)
    if q < 2:
        raise ValueError("AC1 needs at least two categories: pass the full rating scale with categories=")
    c1 = np.asarray(codes1, dtype=np.int64)
    c2 = np.asarray(codes2, dtype=np.int64)
    g = np.asarray(groups, dtype=np.int64)
    has1, has2 = c1 >= 0, c2 >= 0
    r = has1.astype(np.int64) + has2
    keep = (r > 0) & (g >= 0)
    c1, c2, g, r, has1, has2 = c1[keep], c2[keep], g[keep], r[keep], has1[keep], has2[keep]
    G = int(n_groups)
    both = r == 2
    agree = both & (c1 == c2)

    n = np.bincount(g, minlength=G).astype(float)
    n2 = np.bincount(g, weights=both, minlength=G)
    n_agree = np.bincount(g, weights=agree, minlength=G)
    with np.errstate(invalid="ignore", divide="ignore"):
        pa = n_agree / n2
        # pi_gk = mean over the group's subjects of a_ik / r_i
        share = 1.0 / np.maximum(r, 1)
        pi = _cell_sum(g[has1], c1[has1], share[has1], G, q) + _cell_sum(g[has2], c2[has2], share[has2], G, q)
        pi /= n[:, None]
        pe = (pi * (1 - pi)).sum(axis=1) / (q - 1)
        ac1 = (pa - pe) / (1 - pe)

        # Linearised per-subject terms (Gwet 2008; irrCAC's ac1_ivec_x).
        one_minus_pi = 1 - pi
        a_dot = np.zeros(c1.size)
        a_dot[has1] += one_minus_pi[g[has1], c1[has1]]
        a_dot[has2] += one_minus_pi[g[has2], c2[has2]]
        pe_i = a_dot / ((q - 1) * r)
        pa_i = agree.astype(float)
        ac1_i = (n[g] / n2[g]) * (pa_i - pe[g] * both) / (1 - pe[g])
        x_i = ac1_i - 2 * (1 - ac1[g]) * (pe_i - pe[g]) / (1 - pe[g])
        ss = np.bincount(g, weights=(x_i - ac1[g]) ** 2, minlength=G)
        f = n / population_size
        var = (1 - f) / (n * (n - 1)) * ss
        se = np.sqrt(var)
        se[n < 2] = np.nan
        df = np.where(n >= 2, n - 1, np.nan)
        half = _st.t.ppf((1 + confidence) / 2, df) * se
        lo = ac1 - half
        hi = np.minimum(1.0, ac1 + half)

        # Cohen's kappa on the subjects rated by both: chance agreement from the two marginals.
        ones = np.ones(int(both.sum()))
        m1 = _cell_sum(g[both], c1[both], ones, G, q)
        m2 = _cell_sum(g[both], c2[both], ones, G, q)
        pe_k = (m1 * m2).sum(axis=1) / n2**2
        kappa = np.where(np.isclose(pe_k, 1.0), np.nan, (pa - pe_k) / (1 - pe_k))
    return GroupAgreement(
        ac1=ac1, se=se, lo=lo, hi=hi, pa=pa, pe=pe, kappa=kappa, n=n.astype(np.int64), n_both=n2.astype(np.int64)
    )


def _cell_sum(groups: np.ndarray, codes: np.ndarray, weights: np.ndarray, n_groups: int, q: int) -> np.ndarray:
    """Sum of ``weights`` per (group, category) cell as a (n_groups, q) float array (one bincount;
    numpy gives an integer array for empty input, even with weights)."""
    cells = np.bincount(groups * q + codes, weights=weights, minlength=n_groups * q)
    return cells.astype(np.float64, copy=False).reshape(n_groups, q)


def gwet_ac1(
    rater1: Sequence[Any] | np.ndarray,
    rater2: Sequence[Any] | np.ndarray,
    categories: Sequence[Any] | None = None,
    *,
    confidence: float = 0.95,
    population_size: float = np.inf,
) -> Agreement:
    """Gwet's AC1 of two raters with its SE and ``confidence`` interval (Gwet 2008, as irrCAC).

    ``rater1[i]``, ``rater2[i]``: the two ratings of subject i (None/NaN = missing). ``categories``:
    the full rating scale (default: the categories observed). ``population_size``: the number of
    subjects in the population for the finite-population correction (default infinite, irrCAC's
    default).
    """
    c1, c2, cats = encode_ratings(rater1, rater2, categories)
    res = agreement_by_group(
        c1, c2, np.zeros(c1.size, dtype=np.int64), 1, len(cats), confidence=confidence, population_size=population_size
    )
    return Agreement(
        value=float(res.ac1[0]),
        se=float(res.se[0]),
        ci=(float(res.lo[0]), float(res.hi[0])),
        pa=float(res.pa[0]),
        pe=float(res.pe[0]),
        n=int(res.n[0]),
        n_both=int(res.n_both[0]),
        confidence=confidence,
    )


def cohen_kappa(
    rater1: Sequence[Any] | np.ndarray, rater2: Sequence[Any] | np.ndarray, categories: Sequence[Any] | None = None
) -> float:
    """Cohen's kappa over the subjects rated by both raters (NaN when chance agreement is 1)."""
    c1, c2, cats = encode_ratings(rater1, rater2, categories)
    res = agreement_by_group(c1, c2, np.zeros(c1.size, dtype=np.int64), 1, max(len(cats), 2))
    return float(res.kappa[0])


def percent_agreement(
    rater1: Sequence[Any] | np.ndarray, rater2: Sequence[Any] | np.ndarray, categories: Sequence[Any] | None = None
) -> float:
    """Share of the subjects rated by both raters on which they agree."""
    c1, c2, _ = encode_ratings(rater1, rater2, categories)
    both = (c1 >= 0) & (c2 >= 0)
    return float(np.mean(c1[both] == c2[both])) if both.any() else float("nan")
