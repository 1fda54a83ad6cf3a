"""k-sample metrics (pass@k, avg@k, maj@k, G-Pass@k) against exhaustive enumeration of k-subsets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from evalprism.errors import EvalprismError
from evalprism.stats.k_rules import parse_metric
from evalprism.stats.pass_at_k import check_enough_samples, item_values, metric_summary


def _enumerated(kind: str, n: int, c: int, k: int, tau: float | None = None) -> float:
    """The metric's expectation over every k-subset of n samples whose first c are right."""
    samples = [1] * c + [0] * (n - c)
    outcomes = []
    for subset in itertools.combinations(range(n), k):
        right = sum(samples[i] for i in subset)
        if kind == "pass":
            outcomes.append(right >= 1)
        elif kind == "avg":
            outcomes.append(right / k)
        elif kind == "maj":
            outcomes.append(right > k / 2)
        else:
            assert tau is not None
            outcomes.append(right / k >= tau)
    return float(np.mean(outcomes))


CASES = [(n, c, k) for n in (1, 3, 5, 8) for c in range(n + 1) for k in range(1, n + 1)]


@pytest.mark.parametrize("kind", ["pass", "avg"])
def test_pass_and_avg_equal_enumeration(kind: str) -> None:
    for n, c, k in CASES:
        value = item_values(parse_metric(f"{kind}@{k}"), np.array([n]), np.array([c]))[0]
        assert value == pytest.approx(_enumerated(kind, n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_chens_closed_form() -> None:
    for n, c, k in CASES:
        closed = 1.0 - math.comb(n - c, k) / math.comb(n, k)
        assert item_values(parse_metric(f"pass@{k}"), np.array([n]), np.array([c]))[0] == pytest.approx(closed)


def test_majority_equals_enumeration_for_odd_k() -> None:
    for n, c, k in CASES:
        if k % 2:
            value = item_values(parse_metric(f"maj@{k}"), np.array([n]), np.array([c]))[0]
            assert value == pytest.approx(_enumerated("maj", n, c, k), abs=1e-12), (n, c, k)


@pytest.mark.parametrize("tau", [0.25, 0.5, 0.75, 1.0])
def test_g_pass_equals_enumeration(tau: float) -> None:
    for n, c, k in CASES:
        value = item_values(parse_metric(f"gpass@{k}:{tau}"), np.array([n]), np.array([c]))[0]
        assert value == pytest.approx(_enumerated("gpass", n, c, k, tau), abs=1e-12), (n, c, k, tau)


def test_pass_at_k_stays_exact_where_binomials_overflow_floats() -> None:
    # C(2000, 1000) overflows a float; pass@1000 with 1 right of 2000 is exactly k / n
    value = item_values(parse_metric("pass@1000"), np.array([2000]), np.array([1]))[0]
    assert value == pytest.approx(0.5, rel=1e-12)


def test_summary_is_the_mean_over_items_with_its_standard_error() -> None:
    n, c = np.array([4, 4, 4, 4]), np.array([0, 1, 2, 4])
    summary = metric_summary(parse_metric("pass@2"), n, c)
    per_item = np.array([0.0, 0.5, 5 / 6, 1.0])
    assert summary.value == pytest.approx(per_item.mean())
    assert summary.standard_error == pytest.approx(per_item.std(ddof=1) / 2)
    assert (summary.items, summary.fewest_samples, summary.metric) == (4, 4, "pass@2")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("maj@4", "odd k"),
        ("pass@0", "at least 1"),
        ("gpass@8", "gpass@K:TAU"),
        ("pass@4:0.5", "only gpass"),
        ("gpass@8:1.5", "expected pass@K"),
        ("best@3", "expected pass@K"),
    ],
)
def test_bad_metric_spellings_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(EvalprismError, match=fragment):
        parse_metric(text)


def test_k_above_an_items_samples_is_refused() -> None:
    with pytest.raises(EvalprismError, match=r"pass@5 needs at least 5 samples per item; 1 item\(s\) have fewer"):
        check_enough_samples(parse_metric("pass@5"), np.array([8, 4, 6]), "run a")
