"""The registry of STEM's localization methods (evalprism.stem.methods.METHODS): every user-facing
name is an entry, what an entry declares is what its estimates hold, and the estimators give the
closed-form answer where there is one (a sample that is the whole pool)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalprism.errors import EvalprismError
from evalprism.stem import build_pool, run_trials
from evalprism.stem.methods import BASELINE, METHODS, TRIAL_METHODS, choose_method, get_method
from evalprism.stem.options import PoolOptions
from evalprism.stem.simulate import simulate_family
from evalprism.vocabularies import LocateMethod, PlanMethod, choices


@pytest.fixture(scope="module")
def family() -> tuple[pd.DataFrame, pd.DataFrame]:
    return simulate_family(n_items=600, seed=5)


def test_every_user_facing_method_is_one_entry() -> None:
    for vocabulary in (LocateMethod, PlanMethod):
        named = [m for m in choices(vocabulary) if m != "auto"]
        assert set(named) <= set(METHODS), vocabulary
    # a method a model is placed by from its own answers estimates a score with a standard error
    for name in ("stratified", "irt", "adaptive"):
        assert METHODS[name].estimates_score and METHODS[name].has_standard_error
    assert [m.name for m in TRIAL_METHODS] == ["paper", "stratified", "irt", "random", "bayesian"]
    assert BASELINE.compared_in_trials and BASELINE.estimates_score and not BASELINE.has_standard_error
    with pytest.raises(EvalprismError, match="unknown method 'nosuch'"):
        get_method("nosuch")


def test_an_estimate_holds_what_its_entry_declares(family) -> None:
    correctness, meta = family
    pool = build_pool(correctness, meta, PoolOptions(family="toy"))
    model = meta.loc[meta["family"] == "other", "model"].iloc[0]
    trials = run_trials(pool, correctness, items=60, trials=12, seed=2, model=model)
    assert trials.methods == ["paper", "stratified", "random", "bayesian"]  # irt needs a panel
    for name, est in trials.estimates.items():
        entry = METHODS[name]
        assert est.position.shape == (12,) and est.position.dtype == np.int64
        assert (est.score is not None) == entry.estimates_score, name
        assert (est.standard_error is not None) == entry.has_standard_error, name
    frame = trials.frame()
    assert "paper_rule_strength" in frame.columns and "stratified_confidence" in frame.columns
    assert frame["random_confidence"].isna().all()  # random sampling gives no confidence
    with pytest.raises(EvalprismError, match="method 'irt' did not run"):
        trials.positions_of("irt")


def test_a_sample_of_the_whole_pool_gives_the_full_pool_score(family) -> None:
    # more items asked than the pool holds: A and random sampling draw every item, so both estimates
    # are the model's reference score exactly (A's standard error 0) and both place it right
    correctness, meta = family
    pool = build_pool(correctness, meta, PoolOptions(family="toy"))
    for model in meta.loc[meta["family"] == "other", "model"]:
        trials = run_trials(pool, correctness, items=10 * len(pool.items), trials=3, seed=0, model=model)
        for name in ("stratified", "random"):
            est = trials.estimates[name]
            assert est.score == pytest.approx(np.full(3, trials.reference_score), abs=1e-9), name
            assert (est.position == trials.truth).all(), name
        assert trials.estimates["stratified"].standard_error == pytest.approx(np.zeros(3), abs=1e-9)


def test_auto_and_a_method_that_needs_a_panel(family) -> None:
    correctness, meta = family
    pool = build_pool(correctness, meta, PoolOptions(family="toy"))
    assert choose_method(pool, None) == "stratified"  # no reference panel
    with pytest.raises(EvalprismError, match="method irt needs a reference panel"):
        choose_method(pool, None, "irt")
    others = correctness[~correctness["model"].isin(meta.loc[meta["family"] == "toy", "model"])]
    with_panel = build_pool(correctness, meta, PoolOptions(family="toy"), panel=others)
    assert with_panel.panel_size() < 10 and choose_method(with_panel, None) == "stratified"
    assert choose_method(with_panel, None, "irt") == "irt"
