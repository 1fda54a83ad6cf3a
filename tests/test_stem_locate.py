"""STEM localization: the boundary rule by hand, the baselines by hand, and a planted family."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evalprism.errors import EvalprismError
from evalprism.stats.binomial import sign_test_pvalues
from evalprism.stats.irv import boundary_counts
from evalprism.stem import Pool, build_pool, locate_model, locate_models, run_trials
from evalprism.stem.baselines import (
    bayesian_positions,
    interval_success,
    random_positions,
)
from evalprism.stem.options import LocateOptions, PoolOptions
from evalprism.stem.rule import (
    interval_confidence,
    level_weights,
    positions_from_counts,
)
from evalprism.stem.simulate import simulate_family
from evalprism.stem.trials import trial_run


def test_boundary_counts_and_position_by_hand() -> None:
    # 3 members, 4 levels of 10 items; the model gets 9, 8, 3, 1 right
    right, size = np.array([9, 8, 3, 1]), np.array([10, 10, 10, 10])
    b, c = boundary_counts(right, size)
    # vs M1 (answers level 1): right above = 8+3+1, wrong at or below = 1
    # vs M2 (levels 1-2): right above = 3+1, wrong = 1+2; vs M3: right above = 1, wrong = 1+2+7
    assert b.tolist() == [12, 4, 1] and c.tolist() == [1, 3, 10]
    assert positions_from_counts(b, c) == 2  # beats M1 and M2, not M3
    p_above, p_below = sign_test_pvalues(b, c)
    for j in range(3):
        n = b[j] + c[j]
        assert p_above[j] == pytest.approx(stats.binomtest(b[j], n, 0.5, alternative="greater").pvalue)
        assert p_below[j] == pytest.approx(stats.binomtest(b[j], n, 0.5, alternative="less").pvalue)
    p_lower, p_upper, conf = interval_confidence(np.array(2), p_above, p_below)
    assert p_lower == pytest.approx(p_above[1]) and p_upper == pytest.approx(p_below[2])
    assert conf == pytest.approx(1 - p_above[1] - p_below[2])
    # a tie (b = c) is not "above"; open ends contribute no p-value
    assert positions_from_counts(np.array([2, 1]), np.array([2, 1])) == 0
    _, p_upper0, _ = interval_confidence(np.array(3), p_above, p_below)
    assert p_upper0 == 0.0


def test_stratified_weighting_counts_each_level_by_its_pool_size() -> None:
    # the hardest level holds 70 pool items but only 10 are drawn: each counts 7 in the decision
    levels = [np.arange(10), np.arange(10, 20), np.arange(20, 30), np.arange(30, 100)]
    right, size = np.array([9, 8, 3, 2]), np.array([10, 10, 10, 10])
    assert level_weights(levels, size, "balanced") is None
    w = level_weights(levels, size, "stratified")
    assert w.tolist() == [1.0, 1.0, 1.0, 7.0]
    assert positions_from_counts(*boundary_counts(right, size)) == 2  # balanced: b_3 = 2 < c_3 = 10
    b, c = boundary_counts(right, size, w)
    assert b.tolist() == [8 + 3 + 14, 3 + 14, 14] and c.tolist() == [1, 3, 10]
    assert positions_from_counts(b, c) == 3
    with pytest.raises(EvalprismError, match="weighting"):
        level_weights(levels, size, "uniform")


def test_random_and_bayesian_baselines_by_hand() -> None:
    # two members; three candidate items on one benchmark; IRVs (0,1), (1,1), (0,0)
    irv = np.array([[0, 1], [1, 1], [0, 0]])
    q = interval_success(irv, epsilon=0.1)
    # intervals: below M1 (anchor M1), between (mean), above M2 (anchor M2); eps + 0.8 * mean
    np.testing.assert_allclose(q, [[0.1, 0.5, 0.9], [0.9, 0.9, 0.9], [0.1, 0.1, 0.1]])
    right = np.array([True, True, False])
    draws = np.array([[0, 1, 2], [0, 0, 0]])
    best, mass = bayesian_positions(q, right, draws)
    # draw 1: likelihoods 0.1*0.9*0.9, 0.5*0.9*0.9, 0.9*0.9*0.9 -> above M2 with 0.9 / 1.5
    assert best.tolist()[0] == 2 and mass[0] == pytest.approx(0.9 / 1.5)
    assert best.tolist()[1] == 2 and mass[1] == pytest.approx(0.9**3 / (0.1**3 + 0.5**3 + 0.9**3))
    # random sampling: draw 1 scores 2/3 = 66.7% (between members at 40 and 70), draw 2 scores 100%
    pos = random_positions(
        np.zeros(3, dtype=np.int64), right.astype(float), draws, np.array([1.0]), np.array([40.0, 70.0])
    )
    assert pos.tolist() == [1, 2]


@pytest.fixture(scope="module")
def planted() -> tuple[pd.DataFrame, pd.DataFrame, Pool]:
    correctness, meta = simulate_family(n_items=2000, seed=3)
    return correctness, meta, build_pool(correctness, meta, PoolOptions(family="toy"))


def test_planted_family_localization_is_correct_and_beats_random(planted) -> None:
    correctness, meta, pool = planted
    others = meta.loc[meta["family"] == "other", "model"].tolist()
    stem_hits, random_hits, total = 0, 0, 0
    truths = []
    for model in others:
        trials = run_trials(pool, correctness, items=100, trials=100, seed=1, model=model, method="paper")
        assert trials.positions.shape == (100,) and trials.positions.dtype.kind == "i"
        assert (trials.positions == trials.positions_of("paper")).all() and trials.method == "paper"
        assert trials.accuracy("paper") >= 0.95, (model, np.bincount(trials.positions))
        assert trials.accuracy("stratified") >= 0.95, (model, np.bincount(trials.positions_of("stratified")))
        assert "irt" not in trials.estimates  # no reference panel
        stem_hits += int((trials.positions == trials.truth).sum())
        random_hits += int((trials.positions_of("random") == trials.truth).sum())
        total += 100
        truths.append(trials.truth)
    assert truths == [0, 1, 2, 3, 4]  # planted abilities span every interval of the 4-member family
    assert stem_hits / total >= 0.95
    assert stem_hits > random_hits


def test_locate_is_trial_zero_of_evaluate_and_places_members_by_their_own_answers(planted) -> None:
    correctness, _, pool = planted
    loc = locate_model(pool, correctness, items=100, seed=7, model="other-c", method="paper")
    trials = run_trials(pool, correctness, items=100, trials=5, seed=7, model="other-c")
    assert loc.position == trials.positions_of("paper")[0] and loc.method == "paper"
    assert loc.levels["items"].tolist() == [20] * 5
    assert loc.levels["correct"].sum() == (loc.subset["score"] == 1).sum()
    # without a panel, auto is estimator A; its localization is trial 0 of the trials
    auto = locate_model(pool, correctness, items=100, seed=7, model="other-c")
    assert auto.method == trials.method == "stratified"
    assert auto.position == trials.positions[0] == trials.positions_of("stratified")[0]
    assert auto.estimate == pytest.approx(trials.estimates["stratified"].score[0])
    assert auto.standard_error == pytest.approx(trials.estimates["stratified"].standard_error[0])
    assert auto.confidence == pytest.approx(trials.confidence[0]) and len(auto.subset) == 100
    # a family member answers exactly the levels up to its own index: M_j beats M_1..M_{j-1}
    for j, member in enumerate(pool.members["model"], 1):
        placed = locate_model(pool, correctness, items=100, seed=0, model=member, method="paper")
        assert placed.levels["accuracy"].tolist() == [1.0] * j + [0.0] * (pool.n + 1 - j)
        assert placed.position == j - 1 and placed.truth == j - 1


def test_locate_models_places_a_model_by_trial_zero_of_its_own_trials(planted, monkeypatch) -> None:
    # with trials, locate_models reads the localization off trial 0 of those trials instead of running
    # trial 0 again: it is the one locate_model gives with the same seed, and trial 0 of what it saved
    from evalprism.stem import evaluate, locate_one

    correctness, _, pool = planted
    runs: list[int] = []  # trials per run of the engine, wherever locate_models starts one

    def counted(*args, **kwargs):
        runs.append(args[3])
        return trial_run(*args, **kwargs)

    monkeypatch.setattr(evaluate, "trial_run", counted)
    monkeypatch.setattr(locate_one, "trial_run", counted)
    for method, weighting in (("paper", "balanced"), ("paper", "stratified"), ("auto", None)):
        runs.clear()
        result = locate_models(
            pool,
            correctness,
            LocateOptions(model=["other-c"], items=100, trials=20, seed=7, method=method, weighting=weighting),
            progress=False,
        )
        assert runs == [20]
        ((loc, trials),) = result.results
        alone = locate_model(
            pool, correctness, items=100, seed=7, model="other-c", method=method, weighting=weighting or "balanced"
        )
        for frame in ("levels", "tests", "subset"):
            pd.testing.assert_frame_equal(getattr(loc, frame), getattr(alone, frame))
        assert loc.summary() == alone.summary() and loc.draw == alone.draw
        assert loc.position == trials.positions[0] and len(trials.positions) == 20
        assert loc.confidence == trials.confidence[0]


def test_results_are_deterministic_and_saved_atomically(planted, tmp_path) -> None:
    correctness, _, pool = planted
    other = correctness[correctness["model"].isin(["other-b", "other-d"])]
    first = locate_models(pool, other, LocateOptions(items=60, trials=20, seed=2), progress=False).save(tmp_path / "a")
    second = locate_models(pool, other, LocateOptions(items=60, trials=20, seed=2), progress=False).save(tmp_path / "b")
    for name in ("levels.csv", "tests.csv", "subset.csv", "trials.csv", "summary.csv", "localization.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert "Accuracy by transition index" in (first / "report.html").read_text(encoding="utf-8")
    pool.save(tmp_path / "pool")
    loaded = Pool.load(tmp_path / "pool")
    assert (loaded.irv == pool.irv).all() and (loaded.ti == pool.ti).all()
    pd.testing.assert_frame_equal(loaded.benchmarks, pool.benchmarks)
    assert (
        locate_model(loaded, correctness, model="other-d").position
        == locate_model(pool, correctness, model="other-d").position
    )


def test_locate_input_errors(planted) -> None:
    correctness, _, pool = planted
    with pytest.raises(EvalprismError, match="choose one"):
        locate_model(pool, correctness)
    with pytest.raises(EvalprismError, match="'nobody' is not there"):
        locate_model(pool, correctness, model="nobody")
    with pytest.raises(EvalprismError, match="fewer than the 5 TI levels"):
        locate_model(pool, correctness, items=3, model="other-a")
    with pytest.raises(EvalprismError, match="method irt needs a reference panel"):
        locate_model(pool, correctness, model="other-a", method="irt")
    with pytest.raises(EvalprismError, match="method: expected one of auto, paper, stratified, irt"):
        locate_model(pool, correctness, model="other-a", method="best")
    only_one = correctness[(correctness["model"] == "other-a") & (correctness["benchmark"] == "bench-1")]
    with pytest.raises(EvalprismError, match="no rows for benchmark bench-2"):
        locate_model(pool, only_one)


def test_missing_exclude_skips_unanswered_items(planted) -> None:
    correctness, meta, _ = planted
    pool = build_pool(correctness, meta, PoolOptions(family="toy", missing="exclude"))
    loc = locate_model(pool, correctness, model="other-b")
    assert (loc.subset["score"] != -1).all()
    assert pool.benchmarks["excluded"].sum() > 0
