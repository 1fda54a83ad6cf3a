"""`stem plan` and `stem locate` on the planned answers alone (issue 26): in a planted 2PL world the
full-pool score estimated from a plan's items is unbiased and its 95% interval covers at the nominal
rate; the plan is deterministic and its design weights add up to the pool; every subset size (all
right, all wrong, one item, every pool item) gives a result or one message."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli
from test_stem_estimators import FAMILY_THETA, _world

from evalprism.errors import EvalprismError
from evalprism.io.items import read_correctness
from evalprism.io.record import Provenance
from evalprism.stem import build_pool, locate_models, make_plan
from evalprism.stem.options import LocateOptions, PlanOptions
from evalprism.stem.placement import Answered
from evalprism.stem.plan import Plan
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import NO_ROW, target_of

Z95 = 1.959963984540054


@pytest.fixture(scope="module")
def world():
    table, meta = _world(seed=1, n_items=1000, n_panel=12)
    family = table[table["model"].isin(list(FAMILY_THETA))]
    panel = table[table["model"].str.startswith("panel-")]
    pool = build_pool(family, meta, panel=panel)
    answers = table[table["model"] == "target"]
    return pool, answers, target_of(pool, answers)


def _planned_only(target, plan: Plan, pool):
    """The target as if it had answered only the planned items (every other pool item: no row)."""
    keys = pd.MultiIndex.from_frame(pool.items[["benchmark", "item_id"]].astype(str))
    idx = keys.get_indexer(pd.MultiIndex.from_frame(plan.items[["benchmark", "item_id"]].astype(str)))
    outcome = np.full_like(target.outcome, NO_ROW)
    outcome[idx] = target.outcome[idx]
    return replace(target, outcome=outcome)


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
@pytest.mark.parametrize("method", ["stratified", "irt"])
def test_plan_then_locate_is_unbiased_and_covers_the_full_pool_score(world, method: str) -> None:
    pool, _, target = world
    truth = target.reference_score  # the full-pool weighted score of the whole answers
    est, se = [], []
    for seed in range(300):
        plan = make_plan(pool, PlanOptions(items=100, seed=seed, method=method))
        loc = locate_subset(pool, _planned_only(target, plan, pool), plan=plan, method=method)
        assert loc.truth is None and loc.draw.items == len(plan.items) == 100
        est.append(loc.estimate)
        se.append(loc.standard_error)
    err = np.array(est) - truth
    assert abs(err.mean()) <= 3 * err.std(ddof=1) / np.sqrt(len(err)), (err.mean(), err.std())
    coverage = float((np.abs(err) <= Z95 * np.array(se)).mean())
    assert 0.91 <= coverage <= 0.985, coverage  # 300 plans: nominal 0.95 +- 3 binomial sd
    # the reported standard error is the spread the estimates really have (within 20%: A floors the
    # variance of strata answered all right or all wrong, which errs on the wide side; 1.16 here)
    assert np.sqrt(np.mean(np.square(se))) == pytest.approx(err.std(ddof=1), rel=0.2)


def test_without_a_plan_answers_are_a_simple_random_sample_of_the_pool(world) -> None:
    pool, _, target = world
    rng = np.random.default_rng(0)
    est, se = [], []
    for _ in range(300):
        keep = rng.choice(len(pool.items), 100, replace=False)
        outcome = np.full_like(target.outcome, NO_ROW)
        outcome[keep] = target.outcome[keep]
        loc = locate_subset(pool, replace(target, outcome=outcome), method="stratified")
        assert loc.draw.design.startswith("simple random sample")
        est.append(loc.estimate)
        se.append(loc.standard_error)
    err = np.array(est) - target.reference_score
    assert abs(err.mean()) <= 3 * err.std(ddof=1) / np.sqrt(len(err))
    assert 0.91 <= float((np.abs(err) <= Z95 * np.array(se)).mean()) <= 0.985


def test_plan_is_deterministic_and_its_weights_add_up_to_the_pool(world) -> None:
    pool = world[0]
    a, b = make_plan(pool, PlanOptions(items=100, seed=7)), make_plan(pool, PlanOptions(items=100, seed=7))
    pd.testing.assert_frame_equal(a.items, b.items)
    assert not a.items["item_id"].equals(make_plan(pool, PlanOptions(items=100, seed=8)).items["item_id"])
    assert a.summary.method == "irt"  # auto: the panel has 16 models (family + 12)
    assert not a.items.duplicated(["benchmark", "item_id"]).any()
    # sum over planned items of N_h / n_h = sum over strata of N_h = the pool
    assert a.items["design_weight"].sum() == pytest.approx(len(pool.items))
    assert (a.items["inclusion_probability"] * a.items["design_weight"]).to_numpy() == pytest.approx(1.0)
    per_stratum = a.items.groupby("stratum").agg(n=("item_id", "size"), drawn=("stratum_drawn", "first"))
    assert (per_stratum["n"] == per_stratum["drawn"]).all()
    # stage 1 of an adaptive plan is this same draw, marked as stage 1
    first = make_plan(pool, PlanOptions(items=100, seed=7, method="adaptive"))
    assert first.items["item_id"].tolist() == a.items["item_id"].tolist() and (first.items["stage"] == 1).all()
    assert first.summary.method == "adaptive" and first.stage_sizes() == [100]


def test_subset_edge_cases_give_a_result_or_one_message(world) -> None:
    pool, _, target = world
    plan = make_plan(pool, PlanOptions(items=100, seed=0, method="stratified"))
    planned = _planned_only(target, plan, pool)
    has = planned.outcome != NO_ROW
    # all right / all wrong: every stratum is uniform, so its variance is the add-one floor
    # p~(1 - p~) with p~ = (k + 1)/(k + 2) (or 1/(k + 2)), k the benchmark's planned items
    strata = plan.items.groupby("stratum").agg(
        bench=("benchmark", "first"), n=("stratum_drawn", "first"), N=("stratum_size", "first")
    )
    n_b = strata.groupby("bench")["N"].transform("sum")
    k_b = strata.groupby("bench")["n"].transform("sum")
    w_b = strata["bench"].map(dict(zip(plan.summary.benchmarks, plan.summary.weights, strict=True)))
    floor = (k_b + 1) / (k_b + 2) ** 2
    expected_se = 100 * np.sqrt(
        (w_b**2 * (strata["N"] / n_b) ** 2 * (1 - strata["n"] / strata["N"]) * floor / strata["n"]).sum()
    )
    for value, position in ((1, pool.n), (0, 0)):  # all right: above every member; all wrong: below
        outcome = np.where(has, value, NO_ROW).astype(np.int8)
        notes: list[str] = []
        loc = locate_subset(pool, replace(planned, outcome=outcome), plan=plan, method="stratified", design_note=notes)
        assert loc.estimate == pytest.approx(100.0 * value)
        # the design's standard error, widened or narrowed by the panel's calibration (at the ceiling: its bound's)
        calibration = loc.draw.calibration
        assert calibration is not None
        calibrated = calibration.standard_error(expected_se, ceiling=value == 1)
        assert loc.standard_error == pytest.approx(calibrated) and 0 < loc.standard_error < 3
        assert loc.position == position and loc.confidence > 0.99
    # one answered item: in a two-benchmark pool, one message naming the benchmark without answers
    one = np.full_like(target.outcome, NO_ROW)
    first = int(np.flatnonzero(pool.bench_code == 0)[0])
    one[first] = target.outcome[first]
    with pytest.raises(EvalprismError, match="answered no item of benchmark"):
        locate_subset(pool, replace(target, outcome=one), method="stratified")
    # one item per benchmark: a result (pooled variance 0.25 stands in for the unknown spread)
    second = int(np.flatnonzero(pool.bench_code == 1)[0])
    one[second] = target.outcome[second]
    loc = locate_subset(pool, replace(target, outcome=one), method="stratified")
    assert np.isfinite(loc.estimate) and loc.standard_error > 20
    # a planned item without an answer: one message naming it
    missing = planned.outcome.copy()
    missing[np.flatnonzero(has)[0]] = NO_ROW
    with pytest.raises(EvalprismError, match="no usable answer on 1 of the 100 planned items"):
        locate_subset(pool, replace(planned, outcome=missing), plan=plan, method="stratified")
    with pytest.raises(EvalprismError, match="method paper"):
        locate_subset(pool, planned, plan=plan, method="paper")


def test_every_pool_item_answered_keeps_the_validation_view(world) -> None:
    pool, answers, target = world
    result = locate_models(
        pool, answers, LocateOptions(items=100, trials=5, seed=0, method="stratified"), progress=False
    )
    loc, trials = result.results[0]
    assert trials is not None and len(trials.positions) == 5 and loc.truth == target.truth
    entry = result.localization()[0]
    assert entry["true_position"] == target.truth and "trials" in entry
    # with a plan: the plan's items estimate the score, and the truth (known: the whole pool) is beside it
    plan = make_plan(pool, PlanOptions(items=100, seed=0, method="stratified"))
    result = locate_models(pool, answers, LocateOptions(trials=0, method="stratified"), plan=plan, progress=False)
    entry = result.localization()[0]
    assert entry["items_used"] == 100 and entry["true_position"] == target.truth
    assert entry["answered"] == entry["pool_items"] == len(pool.items)


def test_planned_answers_alone_report_no_truth(world) -> None:
    pool, answers, _ = world
    plan = make_plan(pool, PlanOptions(items=100, seed=0))
    keys = set(zip(plan.items["benchmark"], plan.items["item_id"], strict=True))
    subset = answers[[k in keys for k in zip(answers["benchmark"], answers["item_id"], strict=True)]]
    result = locate_models(pool, subset, plan=plan, progress=False)
    loc, trials = result.results[0]
    assert trials is None and loc.truth is None and loc.reference_score is None
    entry = result.localization()[0]
    assert "true_position" not in entry and "correct" not in entry and "reference_score" not in entry
    assert entry["answered"] == 100 and entry["pool_items"] == len(pool.items)
    assert entry["estimate_of"] == "full-pool weighted score" and entry["design"].startswith("plan: stratified")


@pytest.fixture(scope="module")
def numeric_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from evalprism.stem.simulate import simulate_family

    root = tmp_path_factory.mktemp("stem-plan")
    correctness, meta = simulate_family(n_items=600, seed=5)
    correctness["item_id"] = correctness["item_id"].str.lstrip("q")  # lm-eval doc ids: integers
    paths = {"correctness": root / "correctness.csv", "meta": root / "meta.csv", "root": root}
    correctness.to_csv(paths["correctness"], index=False)
    meta.to_csv(paths["meta"], index=False)
    new = correctness[correctness["model"] == "other-b"]
    new.to_csv(root / "new.csv", index=False)
    return paths


def test_cli_plan_then_locate_on_the_planned_items(numeric_files, tmp_path, capsys) -> None:
    pool_dir, plan_dir, loc_dir = tmp_path / "pool", tmp_path / "plan", tmp_path / "loc"
    pool = ["stem", "pool", numeric_files["correctness"], "--models", numeric_files["meta"], "--family", "toy"]
    code, _, err = run_cli([*pool, "--out", pool_dir, "-q"], capsys)
    assert code == 0, err
    code, _, err = run_cli(["stem", "plan", pool_dir, "--items", "60", "--seed", "3", "--out", plan_dir, "-q"], capsys)
    assert code == 0, err
    plan = pd.read_csv(plan_dir / "plan.csv")
    assert list(plan.columns) == [
        "benchmark",
        "item_id",
        "stratum",
        "members_right",
        "stratum_size",
        "stratum_drawn",
        "inclusion_probability",
        "design_weight",
        "stage",
    ]
    assert (plan["stage"] == 1).all()
    assert len(plan) == 60
    samples = json.loads((plan_dir / "lm_eval_samples.json").read_text())
    assert {b: sorted(ids) for b, ids in samples.items()} == {
        b: sorted(g["item_id"].tolist()) for b, g in plan.groupby("benchmark")
    }
    inspect_ids = json.loads((plan_dir / "inspect_sample_ids.json").read_text())
    assert {b: sorted(int(i) for i in ids.split(",")) for b, ids in inspect_ids.items()} == samples
    assert read_run(plan_dir).options["seed"] == 3
    new = pd.read_csv(numeric_files["root"] / "new.csv")
    planned = new.merge(plan[["benchmark", "item_id"]], on=["benchmark", "item_id"])
    planned.to_csv(tmp_path / "planned.csv", index=False)
    code, _, err = run_cli(
        ["stem", "locate", pool_dir, tmp_path / "planned.csv", "--plan", plan_dir, "--out", loc_dir], capsys
    )
    assert code == 0, err
    assert "answered 60 of the 600 pool items" in " ".join(err.split())
    entry = json.loads((loc_dir / "localization.json").read_text())[0]
    assert entry["answered"] == 60 and "true_position" not in entry and "trials" not in entry
    assert not (loc_dir / "trials.csv").exists()
    report = (loc_dir / "report.html").read_text()
    assert "ground truth from full-benchmark scores" not in report and "no truth to compare with" in report
    # --items / --weighting on planned answers change nothing: refused, naming the flag, nothing written
    for flag, value in (("--items", "50"), ("--seed", "5"), ("--weighting", "stratified")):
        code, _, err = run_cli(
            [
                "stem",
                "locate",
                pool_dir,
                tmp_path / "planned.csv",
                "--plan",
                plan_dir,
                flag,
                value,
                "--out",
                tmp_path / "loc3",
            ],
            capsys,
        )
        assert code != 0 and f"{flag} {value}: does not apply here" in " ".join(err.split()), err
        assert "Traceback" not in err and not (tmp_path / "loc3" / "report.html").exists()
    # a plan of another pool is refused with one message
    other = tmp_path / "pool2"
    code, _, err = run_cli([*pool, "--missing", "exclude", "--out", other, "-q"], capsys)
    assert code == 0, err
    code, _, err = run_cli(
        ["stem", "locate", other, tmp_path / "planned.csv", "--plan", tmp_path / "nope", "--out", tmp_path / "loc2"],
        capsys,
    )
    assert code == 2 and "not a plan directory" in err and "Traceback" not in err


def test_python_api_on_part_of_the_pool(world) -> None:
    from evalprism.stem import locate_model, run_trials

    pool, answers, target = world
    part = answers.sample(100, random_state=0)  # 100 answers of the 1,000 pool items
    loc = locate_model(pool, part, method="stratified")
    assert (
        loc.truth is None
        and isinstance(loc.draw, Answered)
        and loc.draw.answered == 100
        and loc.draw.design.startswith("simple random")
    )
    with pytest.raises(EvalprismError, match="answered 100 of the 1,000 pool items; trials"):
        run_trials(pool, part, items=50, trials=3)
    assert locate_model(pool, answers, items=100, method="stratified").truth == target.truth


def test_sampling_options_are_refused_where_no_sample_is_drawn(world) -> None:
    """On a plan (no trials) or on answers to part of the pool, items, weighting and design change
    nothing (seed too: it was silently ignored there): giving one is refused, naming it; with trials on a
    whole-pool model they steer the trials."""
    pool, answers, _ = world
    plan = make_plan(pool, PlanOptions(items=100, seed=0, method="stratified"))
    keys = set(zip(plan.items["benchmark"], plan.items["item_id"], strict=True))
    subset = answers[[k in keys for k in zip(answers["benchmark"], answers["item_id"], strict=True)]]
    for kwargs in ({"items": 50}, {"seed": 5}, {"weighting": "stratified"}, {"design": "stratified"}):
        name = next(iter(kwargs))
        with pytest.raises(
            EvalprismError,
            match=f"^{name} .*does not apply here: every model is located from its "
            "own answers alone \\(the plan's items\\)",
        ) as err:
            locate_models(pool, subset, LocateOptions(trials=0, **kwargs), plan=plan, progress=False)
        assert err.value.parameter == name
        with pytest.raises(EvalprismError, match="answers on part of the pool"):
            locate_models(pool, subset, LocateOptions(trials=5, **kwargs), progress=False)
        with pytest.raises(EvalprismError, match=f"^{name} "):  # whole-pool model, plan, no trials
            locate_models(pool, answers, LocateOptions(trials=0, **kwargs), plan=plan, progress=False)
    # a whole-pool model with trials: items steers them
    result = locate_models(
        pool, answers, LocateOptions(trials=3, items=60, method="stratified"), plan=plan, progress=False
    )
    assert result.results[0][1].sampling.items == 60


def test_models_on_part_of_the_pool_share_one_note_per_design() -> None:
    """38 planned checkpoints used to put 38 identical notes above the summary table: one per design now."""
    from evalprism.stem.evaluate import partial_answers_notes

    plan = "plan: stratified (benchmark x members right)"
    notes = partial_answers_notes([("a", 100, plan), ("b", 98, plan), ("c", 40, "a simple random sample")], 1521, 0)
    assert notes == [
        f"2 models answered 98-100 of the 1,521 pool items: their full-pool scores are estimated under "
        f"the design '{plan}'; no truth to compare with",
        "'c' answered 40 of the 1,521 pool items: its full-pool score is estimated under the design "
        "'a simple random sample'; no truth to compare with",
    ]
    assert partial_answers_notes([("a", 5, plan)], 10, 100)[0].endswith(
        "no truth to compare with and no trials (they need answers on the whole pool)"
    )


def test_what_the_readers_read_is_kept_in_the_result(world, tmp_path: Path) -> None:
    """What reading the answers read (the file, the reader that read it) reaches the localization's
    run record as the reader gave it; a table handed to the library carries none."""
    from evalprism.stem.from_files import locate_from_files

    pool, answers, _ = world
    plan = make_plan(pool, PlanOptions(items=60, seed=0, method="stratified"))
    keys = set(zip(plan.items["benchmark"], plan.items["item_id"], strict=True))
    subset = answers[[k in keys for k in zip(answers["benchmark"], answers["item_id"], strict=True)]]
    assert locate_models(pool, subset, LocateOptions(trials=0), plan=plan, progress=False).provenance == Provenance()
    pool.save(tmp_path / "pool")
    plan.save(tmp_path / "plan")
    subset.to_csv(tmp_path / "answers.csv", index=False)
    result = locate_from_files(
        tmp_path / "pool", tmp_path / "answers.csv", LocateOptions(trials=0), plan=tmp_path / "plan", progress=False
    )
    assert result.provenance == read_correctness(tmp_path / "answers.csv").provenance
    assert result.provenance.files == (str(tmp_path / "answers.csv"),) and result.provenance.readers == ("score table",)
    result.save(tmp_path / "located")
    saved = read_run(tmp_path / "located")
    assert saved.provenance == result.provenance
    assert [i.path for i in saved.inputs][:1] == [str(tmp_path / "answers.csv")]
