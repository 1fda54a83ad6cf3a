"""Agreement kernels: Gwet's AC1 (value, SE, interval) against irrCAC, kappa against scikit-learn,
published and hand-computed values, and the grouped kernel against one call per group."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from evalprism.stats import agreement_by_group, cohen_kappa, gwet_ac1, percent_agreement
from evalprism.stats.agreement import encode_ratings

TOL = 1e-10


def irrcac_gwet(a, b, categories, N=np.inf, confidence=0.95) -> dict:
    """irrCAC's raw-ratings AC1 (the oracle), unrounded."""
    raw = pytest.importorskip("irrCAC.raw", reason="irrCAC is the AC1 oracle: pip install --no-deps irrcac")
    df = pd.DataFrame({"r1": np.asarray(a, dtype=float), "r2": np.asarray(b, dtype=float)})
    return raw.CAC(df, categories=list(categories), N=N, confidence_level=confidence, digits=30).gwet()["est"]


def assert_matches_irrcac(a, b, categories, **kw) -> None:
    ours = gwet_ac1(
        a,
        b,
        categories=categories,
        **({"population_size": kw["N"]} if "N" in kw else {}),
        **({"confidence": kw["confidence"]} if "confidence" in kw else {}),
    )
    ref = irrcac_gwet(a, b, categories, **kw)
    assert ours.value == pytest.approx(ref["coefficient_value"], abs=TOL)
    assert ours.pa == pytest.approx(ref["pa"], abs=TOL)
    assert ours.pe == pytest.approx(ref["pe"], abs=TOL)
    # irrCAC replaces a zero SE by 1e-15; ours stays 0: equal to far below 1e-10 either way
    assert ours.se == pytest.approx(ref["se"], abs=TOL)
    assert ours.ci[0] == pytest.approx(ref["confidence_interval"][0], abs=TOL)
    assert ours.ci[1] == pytest.approx(ref["confidence_interval"][1], abs=TOL)


def random_table(
    rng: np.random.Generator, n: int, q: int, agree: float, missing: float
) -> tuple[np.ndarray, np.ndarray]:
    a = rng.integers(0, q, n).astype(float)
    b = np.where(rng.random(n) < agree, a, rng.integers(0, q, n)).astype(float)
    a[rng.random(n) < missing] = np.nan
    b[rng.random(n) < missing] = np.nan
    return a, b


@pytest.mark.parametrize("seed", range(8))
def test_ac1_equals_irrcac_on_random_tables(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    q = int(rng.integers(2, 6))
    a, b = random_table(rng, n, q, agree=float(rng.uniform(0.2, 0.95)), missing=0.1 if seed % 2 else 0.0)
    assert_matches_irrcac(a, b, categories=[float(c) for c in range(q)])


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]),  # one category only, everyone agrees
        ([1, 1, 1, 1], [1, 1, 1, 0]),  # almost one category
        ([0, 1], [0, 1]),  # the smallest cluster with an SE (n = 2)
        ([1, 0], [0, 1]),  # n = 2, complete disagreement
        ([0, 1, 1], [1, 1, 0]),  # n = 3
        ([1, 1, 0, np.nan, 1], [1, np.nan, 0, 1, 0]),  # single ratings count for pi but not for pa
        ([0] * 95 + [1] * 5, [0] * 90 + [1] * 5 + [0] * 5),  # kappa paradox table
    ],
)
def test_ac1_equals_irrcac_on_edge_cases(a, b) -> None:
    assert_matches_irrcac(a, b, categories=[0.0, 1.0])


def test_finite_population_and_confidence_level_match_irrcac() -> None:
    a, b = random_table(np.random.default_rng(11), 60, 3, agree=0.7, missing=0.05)
    assert_matches_irrcac(a, b, categories=[0.0, 1.0, 2.0], N=200, confidence=0.9)
    wide, narrow = gwet_ac1(a, b, [0, 1, 2]), gwet_ac1(a, b, [0, 1, 2], population_size=200)
    assert narrow.se == pytest.approx(wide.se * np.sqrt(1 - wide.n / 200), rel=1e-12)


def test_kappa_paradox_high_agreement_kappa_near_zero_ac1_high() -> None:
    # 90 pairs both 0, 5 (1, 0), 5 (0, 1), none both 1: 90% agreement.
    a = [0] * 90 + [1] * 5 + [0] * 5
    b = [0] * 90 + [0] * 5 + [1] * 5
    # by hand: kappa pe = .95*.95 + .05*.05 = .905 -> (.9 - .905) / .095; AC1 pe = 2 * .05 * .95 = .095
    assert percent_agreement(a, b) == pytest.approx(0.9)
    assert cohen_kappa(a, b) == pytest.approx((0.9 - 0.905) / 0.095, abs=1e-12)
    ac1 = gwet_ac1(a, b, categories=[0, 1])
    assert ac1.pe == pytest.approx(0.095, abs=1e-12)
    assert ac1.value == pytest.approx((0.9 - 0.095) / 0.905, abs=1e-12)
    assert cohen_kappa(a, b) < 0.0 < 0.85 < ac1.value


def test_published_gwet_values_of_two_contingency_tables() -> None:
    """Gwet's textbook tables (as in his R package irrCAC): AC1 0.456 (4x4 diagnoses) and 0.849
    (3x3 abstractors). The published SE comes from the contingency-table variance, which differs from
    the raw-ratings linearisation in the third decimal; both SEs agree to 0.002."""
    tables = {
        (0.456, 0.043): [[40, 4, 4, 17], [6, 25, 2, 13], [4, 1, 21, 12], [15, 5, 9, 45]],
        (0.849, 0.043): [[13, 0, 0], [0, 20, 7], [0, 4, 56]],
    }
    for (value, se), counts in tables.items():
        m = np.asarray(counts)
        rows, cols = np.indices(m.shape)
        a = np.repeat(rows.ravel(), m.ravel())
        b = np.repeat(cols.ravel(), m.ravel())
        res = gwet_ac1(a, b, categories=range(m.shape[0]))
        assert round(res.value, 3) == value
        assert res.se == pytest.approx(se, abs=0.002)


@pytest.mark.parametrize("seed", range(6))
def test_kappa_equals_sklearn(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    q = int(rng.integers(2, 5))
    a, b = random_table(rng, int(rng.integers(10, 300)), q, agree=float(rng.uniform(0.3, 0.9)), missing=0.0)
    assert cohen_kappa(a, b, categories=range(q)) == pytest.approx(cohen_kappa_score(a, b), abs=TOL)
    assert percent_agreement(a, b) == pytest.approx(np.mean(a == b), abs=TOL)


def test_kappa_with_missing_uses_pairs_rated_by_both() -> None:
    a, b = random_table(np.random.default_rng(7), 200, 3, agree=0.6, missing=0.15)
    both = ~np.isnan(a) & ~np.isnan(b)
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a[both], b[both]), abs=TOL)


def test_hand_computed_small_case() -> None:
    a = [1, 1, 1, 1, 0, 0, 0, 0, 1, 0]
    b = [1, 1, 1, 0, 0, 0, 0, 1, 1, 0]
    # pa = 8/10; pi_1 = (5 + 5) / 20 = .5; pe = 2 * .25 / (2 - 1) = .5; AC1 = (.8 - .5) / .5
    res = gwet_ac1(a, b)
    assert (res.pa, res.pe, res.value, res.n) == (pytest.approx(0.8), pytest.approx(0.5), pytest.approx(0.6), 10)
    assert res.ci[0] < res.value < res.ci[1] <= 1.0


def test_grouped_kernel_equals_one_call_per_group() -> None:
    rng = np.random.default_rng(5)
    n = 2000
    a, b = random_table(rng, n, 2, agree=0.8, missing=0.05)
    groups = rng.integers(0, 40, n)
    groups[rng.random(n) < 0.05] = -1  # left out
    c1, c2, _ = encode_ratings(a, b, [0.0, 1.0])
    res = agreement_by_group(c1, c2, groups, 41, 2)
    for g in range(41):
        sel = groups == g
        if not sel.any():
            assert res.n[g] == 0
            continue
        one = gwet_ac1(a[sel], b[sel], categories=[0.0, 1.0])
        assert res.ac1[g] == pytest.approx(one.value, abs=TOL, nan_ok=True)
        assert res.se[g] == pytest.approx(one.se, abs=TOL, nan_ok=True)
        assert (res.lo[g], res.hi[g]) == (
            pytest.approx(one.ci[0], abs=TOL, nan_ok=True),
            pytest.approx(one.ci[1], abs=TOL, nan_ok=True),
        )
        assert res.kappa[g] == pytest.approx(cohen_kappa(a[sel], b[sel], [0.0, 1.0]), abs=TOL, nan_ok=True)
        if sel.sum() >= 2:
            assert_matches_irrcac(a[sel], b[sel], categories=[0.0, 1.0])


def test_single_subject_has_no_standard_error_and_single_category_is_refused() -> None:
    one = gwet_ac1([1], [1], categories=[0, 1])
    assert one.value == 1.0 and np.isnan(one.se) and np.isnan(one.ci[0])
    with pytest.raises(ValueError, match="at least two categories"):
        gwet_ac1([1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="not one of the categories"):
        gwet_ac1([0, 2], [0, 1], categories=[0, 1])
    with pytest.raises(ValueError, match="equal length"):
        gwet_ac1([0, 1], [0])


def test_string_categories() -> None:
    a = ["rel", "rel", "non", "non", "rel"]
    b = ["rel", "non", "non", "non", "rel"]
    codes = [1 if x == "rel" else 0 for x in a], [1 if x == "rel" else 0 for x in b]
    assert gwet_ac1(a, b).value == pytest.approx(gwet_ac1(*codes).value, abs=TOL)
