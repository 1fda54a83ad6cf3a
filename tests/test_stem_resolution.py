"""Abstention near a member and the design's resolution (issue 42, item 2): closed forms by hand, then a
planted family where the members themselves (located at their own score) abstain and the outside
models (far from every member) are placed, in every output."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from evalprism.stem import build_pool, locate_models
from evalprism.stem.options import LocateOptions, PoolOptions
from evalprism.stem.resolution import abstention, resolution
from evalprism.stem.simulate import simulate_family

Z95 = 1.959963984540054
NAMES = ["a", "b", "c", "d"]
MU = np.array([10.0, 30.0, 70.0, 90.0])


def test_far_from_every_member_is_placed_and_resolved() -> None:
    assert abstention(50.0, 2.0, NAMES, MU) is None
    r = resolution(50.0, 2.0, 100, NAMES, MU)
    assert r.distance == Z95 * 2.0 and r.gap == 20.0 and r.nearest == "b"  # ties: the first member
    assert r.needed == 100 and r.more == 0 and r.resolves_nearest


def test_an_interval_holding_a_member_abstains_with_the_normal_side_probabilities() -> None:
    a = abstention(31.0, 2.0, NAMES, MU)
    assert a is not None
    assert (a.member, a.lower, a.upper, a.straddled) == ("b", "a", "c", ("b",))
    assert a.interval == "between a and c, cannot tell which side of b"
    # by hand: P(below b) = Phi((30 - 31) / 2) = Phi(-0.5), the standard normal table's 0.3085375387
    assert a.p_below == pytest.approx(0.3085375387259869, abs=1e-15)
    assert a.p_below + a.p_above == 1.0
    # the wider interval (a, c): Phi((70 - 31) / 2) - Phi((10 - 31) / 2), both tails below 1e-20
    assert a.confidence == pytest.approx(1.0, abs=1e-15)
    assert a.positions == (1, 2) and a.holds(1) and a.holds(2) and not a.holds(0) and not a.holds(3)


def test_abstention_starts_exactly_where_the_interval_reaches_a_member() -> None:
    se = 2.0
    edge = 30.0 + Z95 * se
    while abs(edge - 30.0) < Z95 * se:  # the first float whose distance to b is the resolution
        edge = np.nextafter(edge, np.inf)
    assert abstention(edge, se, NAMES, MU) is None  # the interval's end on the member: it is cleared
    just_inside = abstention(np.nextafter(edge, 0.0), se, NAMES, MU)
    assert just_inside is not None and just_inside.p_below == pytest.approx(0.025, abs=1e-9)
    assert abstention(30.0, 0.0, NAMES, MU) is None  # no standard error, no interval to hold it


def test_at_an_open_end_and_over_several_members() -> None:
    top = abstention(89.0, 1.0, NAMES, MU)
    assert top is not None and top.interval == "above c, cannot tell which side of d" and top.positions == (3, 4)
    assert top.p_above == pytest.approx(0.15865525393145707, abs=1e-12)  # 1 - Phi((90 - 89) / 1) = Phi(-1)
    wide = abstention(50.0, 12.0, NAMES, MU)  # +-23.5: holds b (20 away) and c (20 away)
    assert wide is not None and wide.straddled == ("b", "c") and (wide.lower, wide.upper) == ("a", "d")
    assert wide.member == "b" and wide.p_below == pytest.approx(0.5 - 0.4522096477271853, abs=1e-12)  # Phi(-5/3)
    # the side of c is not told either, and the sentence says so
    assert wide.interval == "between a and d, cannot tell which side of b (nor of c: the interval holds it too)"


def test_items_to_resolve_the_nearest_member_scale_as_one_over_root_n() -> None:
    r = resolution(31.0, 2.0, 100, NAMES, MU)
    # 100 items give 1.96 * 2 = 3.92 points; 1 point needs 100 * 3.92^2 = 1536.6 items
    assert r.needed == math.ceil(100 * (Z95 * 2.0) ** 2) == 1537 and r.more == 1437 and not r.resolves_nearest
    on_member = resolution(30.0, 2.0, 100, NAMES, MU)
    assert on_member.gap == 0 and on_member.needed is None and on_member.more is None


@pytest.fixture(scope="module")
def located():
    correctness, meta = simulate_family(n_items=2000, seed=5)
    pool = build_pool(correctness, meta, PoolOptions(family="toy"))
    return locate_models(pool, correctness, LocateOptions(items=400, trials=0, method="stratified"), progress=False)


def test_planted_family_members_abstain_and_far_models_are_placed(located, tmp_path) -> None:
    """Located from 400 items, each member sits at its own reference score (its interval holds it) and
    each outside model lies 6.9-10.7 points from the nearest member (the simulation spaces them so),
    about four standard errors: the members abstain, the outside models are placed, exactly where
    the 95% interval holds a member's score."""
    by_model = {loc.model: loc for loc, _ in located.results}
    for loc in by_model.values():
        assert loc.estimate is not None and loc.standard_error is not None and loc.member_scores is not None
        holds = (np.abs(loc.member_scores - loc.estimate) < Z95 * loc.standard_error).any()
        assert (loc.abstention is not None) == holds, loc.model
    members = [m for m in by_model if m.startswith("toy-")]
    outside = [m for m in by_model if m.startswith("other-")]
    assert all(by_model[m].abstention is not None and by_model[m].abstention.member == m for m in members)
    assert all(by_model[m].abstention is None for m in outside)
    assert located.findings() == [
        "5 of 5 models placed at their true position; 4 more too close to a member to tell which side "
        "(abstained), their wider interval holding the true position for 4 of 4"
    ]
    out = located.save(tmp_path / "loc")
    table = pd.read_csv(out / "located.csv", keep_default_na=False).set_index("model")
    entries = {e["model"]: e for e in json.loads((out / "localization.json").read_text())}
    for m in members:
        a = by_model[m].abstention
        assert a is not None and table.at[m, "cannot tell side of"] == m
        assert table.at[m, "interval"].endswith(f"cannot tell side of {m}")
        assert float(table.at[m, "p below"]) + float(table.at[m, "p above"]) == pytest.approx(1.0, abs=2e-3)
        assert entries[m]["abstains"] and entries[m]["abstention"]["member"] == m
        assert entries[m]["abstention"]["p_below"] == round(a.p_below, 6)
    for m in outside:
        assert table.at[m, "cannot tell side of"] == "" and table.at[m, "more items for nearest"] == 0
        assert not entries[m]["abstains"] and entries[m]["abstention"] is None
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "Resolution: with these items a member closer than" in page
    assert "4 models&#x27; 95% intervals hold a member&#x27;s score" in page or "4 models' 95% intervals hold" in page
    assert "cannot tell which side of toy-14b" in page and "With 400 items the resolution is" in page
