"""`evalprism stem pool | locate | audit` end to end, and every bad input of the issue (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import read_run, run_cli

from evalprism.stem.options import PoolOptions
from evalprism.stem.simulate import simulate_family


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("stem")
    correctness, meta = simulate_family(n_items=600, seed=5)
    paths = {"correctness": root / "correctness.csv", "meta": root / "meta.csv", "root": root}
    correctness.to_csv(paths["correctness"], index=False)
    meta.to_csv(paths["meta"], index=False)
    return paths


BOTH = ("other-b", "other-d")
"""The two outside models the tests locate together."""


def _locate(
    capsys: pytest.CaptureFixture[str],
    pool: Path,
    answers: Path,
    out: Path,
    *options: object,
    models: tuple[str, ...] = ("other-b",),
) -> str:
    """`stem locate` of ``models`` (every model in ``answers`` when none) on ``pool`` into ``out``, then
    ``options``, in-process: asserted to succeed; its stderr."""
    chosen = [word for model in models for word in ("--model", model)]
    code, _, err = run_cli(["stem", "locate", pool, answers, *chosen, "--out", out, *options], capsys)
    assert code == 0, err
    return err


def test_pool_locate_audit(files, tmp_path, capsys) -> None:
    pool_dir, loc_dir, audit_dir = tmp_path / "pool", tmp_path / "loc", tmp_path / "audit"
    code, _, err = run_cli(
        ["stem", "pool", files["correctness"], "--models", files["meta"], "--family", "toy", "--out", pool_dir], capsys
    )
    assert code == 0, err
    pool = pd.read_csv(pool_dir / "pool.csv")
    assert list(pool.columns[:5]) == ["benchmark", "item_id", "irv", "ti", "anomalous"]
    assert {"anomaly_rate", "D", "weight", "easy_share", "intermediate_share", "hard_share"} <= set(
        pd.read_csv(pool_dir / "benchmarks.csv").columns
    )
    _locate(capsys, pool_dir, files["correctness"], loc_dir, "--items", "50", "--trials", "20", "-q", models=BOTH)
    entries = json.loads((loc_dir / "localization.json").read_text())
    assert [e["model"] for e in entries] == ["other-b", "other-d"]
    assert [e["true_position"] for e in entries] == [1, 3]
    assert all(0 <= e["confidence"] <= 1 and e["trials"]["n"] == 20 for e in entries)
    assert (loc_dir / "report.html").stat().st_size > 10_000
    code, _, err = run_cli(
        ["stem", "audit", files["correctness"], "--models", files["meta"], "--family", "toy", "--out", audit_dir],
        capsys,
    )
    assert code == 0, err
    anomalies = pd.read_csv(audit_dir / "anomalies.csv")
    assert len(anomalies) == pool["anomalous"].sum()


def _write(path: Path, df: pd.DataFrame) -> Path:
    df.to_csv(path, index=False)
    return path


def _expect_error(args: list, capsys, match: str, out: Path) -> None:
    code, _, err = run_cli(args, capsys)
    assert code == 2, err
    assert match in " ".join(err.split()), err
    assert "Traceback" not in err
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(f".{out.name}")]  # no partial directory


def test_bad_inputs_exit_2_with_a_clear_message(files, tmp_path, capsys) -> None:
    correctness = pd.read_csv(files["correctness"], dtype=str)
    meta = pd.read_csv(files["meta"], dtype=str)
    out = tmp_path / "out"
    good_c, good_m = files["correctness"], files["meta"]

    unknown = _write(
        tmp_path / "unknown.csv",
        pd.concat([meta, pd.DataFrame([{"model": "toy-400b", "params": "400", "family": "toy"}])]),
    )
    _expect_error(
        ["stem", "pool", good_c, "--models", unknown, "--family", "toy", "--out", out],
        capsys,
        "row 10: model 'toy-400b' is not in",
        out,
    )

    no_params = meta.copy()
    no_params.loc[1, "params"] = None
    _expect_error(
        ["stem", "pool", good_c, "--models", _write(tmp_path / "np.csv", no_params), "--family", "toy", "--out", out],
        capsys,
        "row 2: model 'toy-4b' has no params",
        out,
    )

    dup = _write(tmp_path / "dup.csv", pd.concat([correctness, correctness.iloc[[7]]]))
    _expect_error(
        ["stem", "pool", dup, "--models", good_m, "--family", "toy", "--out", out],
        capsys,
        f"rows 8 and {len(correctness) + 1} both score model 'toy-1b'",
        out,
    )

    bad_score = correctness.copy()
    bad_score.loc[4, "score"] = "2"
    _expect_error(
        ["stem", "pool", _write(tmp_path / "bs.csv", bad_score), "--models", good_m, "--family", "toy", "--out", out],
        capsys,
        "row 5, column 'score': expected 1 (right), 0 (wrong) or -1",
        out,
    )

    small = meta[meta["model"].isin(["toy-1b", "toy-70b", "other-a"])]
    _expect_error(
        ["stem", "pool", good_c, "--models", _write(tmp_path / "small.csv", small), "--family", "toy", "--out", out],
        capsys,
        "the family has 2 models (toy-1b, toy-70b); STEM needs at least 3",
        out,
    )

    flat = correctness.copy()
    flat.loc[flat["model"].str.startswith("toy"), "score"] = "1"  # every member right: no transition anywhere
    _expect_error(
        ["stem", "pool", _write(tmp_path / "flat.csv", flat), "--models", good_m, "--family", "toy", "--out", out],
        capsys,
        "no significant transition sample",
        out,
    )

    _expect_error(
        ["stem", "pool", good_c, "--models", good_m, "--out", out],
        capsys,
        "the metadata holds several families (toy, other); choose one (--family)",
        out,
    )

    pool_dir = tmp_path / "pool"
    assert run_cli(["stem", "pool", good_c, "--models", good_m, "--family", "toy", "--out", pool_dir], capsys)[0] == 0
    _expect_error(
        ["stem", "locate", pool_dir, good_c, "--model", "nobody", "--out", out],
        capsys,
        "model 'nobody' is not there",
        out,
    )
    _expect_error(
        ["stem", "locate", tmp_path, good_c, "--model", "other-a", "--out", out],
        capsys,
        "not a valid evalprism pool directory: pool.csv is missing",
        out,
    )


def test_demo_locates_the_planted_models(tmp_path) -> None:
    from evalprism.demo import run_stem_demo

    entries = run_stem_demo(tmp_path, progress=False)
    assert [e.link for e in entries] == ["stem/pool/report.html", "stem/locate/report.html"]
    located = json.loads((tmp_path / "locate" / "localization.json").read_text())
    assert [e["true_position"] for e in located] == [0, 1, 2, 3, 4]
    assert all(e["trials"]["accuracy_paper"] >= 0.95 and e["trials"]["accuracy"] >= 0.95 for e in located)
    assert (tmp_path / "pool" / "anomalies.csv").exists()


def test_equal_params_name_each_tie_group_with_its_size_models_and_rows(files, tmp_path, capsys) -> None:
    meta = pd.read_csv(files["meta"], dtype=str)
    meta.loc[meta["model"] == "toy-4b", "params"] = "1"  # ties toy-1b (row 1)
    meta.loc[meta["model"] == "toy-70b", "params"] = "14"  # ties toy-14b (row 3)
    out = tmp_path / "out"
    _expect_error(
        [
            "stem",
            "audit",
            files["correctness"],
            "--models",
            _write(tmp_path / "tie.csv", meta),
            "--family",
            "toy",
            "--out",
            out,
        ],
        capsys,
        "2 sizes are shared: 1B is shared by 'toy-1b' (row 1), 'toy-4b' (row 2); 14B is shared by "
        "'toy-14b' (row 3), 'toy-70b' (row 4); the family must be ordered strictly by size",
        out,
    )
    meta = pd.read_csv(files["meta"], dtype=str)
    meta.loc[meta["model"] == "toy-70b", "params"] = "14"
    _expect_error(
        [
            "stem",
            "pool",
            files["correctness"],
            "--models",
            _write(tmp_path / "tie1.csv", meta),
            "--family",
            "toy",
            "--out",
            out,
        ],
        capsys,
        "two models have the same params: 14B is shared by 'toy-14b' (row 3), 'toy-70b' (row 4)",
        out,
    )


def test_pool_says_which_benchmark_it_leaves_out_and_why(files, tmp_path, capsys) -> None:
    correctness = pd.read_csv(files["correctness"], dtype=str)
    extra = correctness[(correctness["benchmark"] == "bench-1") & (correctness["model"] != "toy-14b")].assign(
        benchmark="bench-3"
    )  # toy-14b has no row on bench-3
    path = _write(tmp_path / "three.csv", pd.concat([correctness, extra]))
    out = tmp_path / "pool"
    code, _, err = run_cli(["stem", "pool", path, "--models", files["meta"], "--family", "toy", "--out", out], capsys)
    assert code == 0, err
    said = (
        "benchmark 'bench-3' (300 items) is left out of the pool: toy-14b has no row for it (every pool item "
        "needs the result of every family member)"
    )
    assert f"note {said}" in " ".join(err.split())
    assert list(pd.read_csv(out / "benchmarks.csv")["benchmark"]) == ["bench-1", "bench-2"]
    assert list(read_run(out).notes) == [said]
    assert "Benchmark 'bench-3' (300 items) is left out of the pool" in (out / "report.html").read_text()
    # nothing left out: no note
    code, _, err = run_cli(
        [
            "stem",
            "pool",
            files["correctness"],
            "--models",
            files["meta"],
            "--family",
            "toy",
            "--out",
            tmp_path / "pool2",
        ],
        capsys,
    )
    assert code == 0 and "note" not in err
    # every benchmark left out: one message, not an empty pool
    only = correctness[
        ~((correctness["model"] == "toy-14b") & (correctness["benchmark"] == "bench-2"))
        & ~((correctness["model"] == "toy-4b") & (correctness["benchmark"] == "bench-1"))
    ]
    _expect_error(
        [
            "stem",
            "pool",
            _write(tmp_path / "none.csv", only),
            "--models",
            files["meta"],
            "--family",
            "toy",
            "--out",
            tmp_path / "pool3",
        ],
        capsys,
        "no item has a row from every member of the family, so the pool would be empty: benchmark "
        "'bench-1' (300 items) is left out of the pool: toy-4b has no row for it",
        tmp_path / "pool3",
    )


@pytest.fixture(scope="module")
def pool_dir(files, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from evalprism.stem.from_files import pool_from_files

    out = tmp_path_factory.mktemp("stem-pool") / "pool"
    pool_from_files(files["correctness"], files["meta"], PoolOptions(family="toy")).save(out)
    return out


def _one_model(files, name: str, score: str) -> pd.DataFrame:
    """other-b's rows renamed to ``name``, every score set to ``score``."""
    correctness = pd.read_csv(files["correctness"], dtype=str)
    return correctness[correctness["model"] == "other-b"].assign(model=name, score=score)


def test_more_items_than_answered_is_a_clamp_that_is_said(files, pool_dir, tmp_path, capsys) -> None:
    available = len(pd.read_csv(pool_dir / "pool.csv"))  # other-b has a row for every item; A and B use them all
    out = tmp_path / "loc"
    err = _locate(capsys, pool_dir, files["correctness"], out, "--items", "1000000", "--trials", "3")
    said = (
        f"'other-b' can be scored on {available:,} pool items, fewer than the 1,000,000 asked (items): every "
        "method drew all it could, so the estimates are its full-benchmark score (standard error 0) and the "
        f"trials repeat one another; ask for fewer than {available:,} items to test a sample"
    )
    assert f"note {said}" in " ".join(err.split()) and "Traceback" not in err
    entry = json.loads((out / "localization.json").read_text())[0]
    assert entry["standard_error"] == 0 and entry["items_used"] == available
    assert entry["estimate"] == pytest.approx(entry["reference_score"], abs=1e-6)
    assert list(read_run(out).notes) == [said]
    page = (out / "report.html").read_text()
    assert f"Every one of the {available:,} pool items it can be scored on was drawn" in page
    # exactly as many as it answered: nothing clamped, no note, the same sentence for the standard error 0
    err = _locate(
        capsys, pool_dir, files["correctness"], tmp_path / "exact", "--items", str(available), "--trials", "0"
    )
    assert "note" not in err
    assert "(standard error 0)" in (tmp_path / "exact" / "report.html").read_text()


def test_every_item_right_still_has_a_standard_error(files, pool_dir, tmp_path, capsys) -> None:
    """All 60 sampled answers right: every stratum's s_h^2 is 0, but A floors it (add-one), so the
    report gives a positive standard error instead of claiming certainty."""
    path = _write(tmp_path / "perfect.csv", _one_model(files, "perfect", "1"))
    out = tmp_path / "loc"
    _locate(capsys, pool_dir, path, out, "--items", "60", "--trials", "5", models=())
    entry = json.loads((out / "localization.json").read_text())[0]
    assert entry["estimate"] == 100 and entry["position"] == 4 and 0 < entry["standard_error"] < 10
    page = (out / "report.html").read_text()
    assert "standard error is 0" not in page and "With 60 items the resolution is" in page


def test_a_model_that_answered_nothing_is_one_message_naming_it(files, pool_dir, tmp_path, capsys) -> None:
    path = _write(tmp_path / "nothing.csv", _one_model(files, "silent", "-1"))
    n_rows = len(pd.read_csv(pool_dir / "pool.csv"))
    out = tmp_path / "loc"
    _expect_error(
        ["stem", "locate", pool_dir, path, "--out", out],
        capsys,
        f"nothing.csv: model 'silent' answered none of the pool's items: all its {n_rows:,} rows on them are "
        "-1 (no answer); there is nothing to locate it by",
        out,
    )


def test_a_truncated_pool_csv_is_one_message_naming_the_file_and_row(files, pool_dir, tmp_path, capsys) -> None:
    import shutil

    lines = (pool_dir / "pool.csv").read_text().splitlines(keepends=True)
    cut = tmp_path / "cut"
    shutil.copytree(pool_dir, cut)
    out = tmp_path / "loc"
    # cut at a line end: parses cleanly, but holds fewer items than benchmarks.csv lists
    (cut / "pool.csv").write_text("".join(lines[:31]))
    last = lines[30].split(",")
    bench = pd.read_csv(pool_dir / "benchmarks.csv")
    listed = ", ".join(f"{b} {n:,}" for b, n in zip(bench["benchmark"], bench["items"], strict=True))
    _expect_error(
        ["stem", "locate", cut, files["correctness"], "--model", "other-b", "--out", out],
        capsys,
        f"{cut}: not a valid evalprism pool directory: pool.csv holds 30 items ",
        out,
    )
    _expect_error(
        ["stem", "locate", cut, files["correctness"], "--model", "other-b", "--out", out],
        capsys,
        f"but benchmarks.csv lists {bench['items'].sum():,} ({listed}): pool.csv is truncated or was edited "
        f"(its last row, 30, is {last[0]}, {last[1]})",
        out,
    )
    # cut inside a row's IRV: the row is named
    (cut / "pool.csv").write_text("".join(lines[:41]) + lines[41][: lines[41].index(",", lines[41].index(",") + 1) + 4])
    _expect_error(
        ["stem", "locate", cut, files["correctness"], "--model", "other-b", "--out", out],
        capsys,
        "pool.csv: row 41, column 'irv': expected 4 values in {1, 0, -1} (one per family member), got",
        out,
    )


def test_report_has_one_summary_table_sorted_by_estimate_then_per_model_paragraphs(
    files, pool_dir, tmp_path, capsys
) -> None:
    out = tmp_path / "loc"
    options = ["--items", "50", "--trials", "0", "--method", "stratified"]
    _locate(capsys, pool_dir, files["correctness"], out, *options, models=BOTH)
    located = pd.read_csv(out / "located.csv")
    entries = {e["model"]: e for e in json.loads((out / "localization.json").read_text())}
    # one row per model, highest estimate first, the columns the summary promises
    assert list(located.columns) == [
        "model",
        "interval",
        "cannot tell side of",
        "p below",
        "p above",
        "estimate ± se",
        "confidence",
        "nearest member",
        "distance (pp)",
        "resolution (pp)",
        "more items for nearest",
        "items",
    ]
    order = sorted(entries, key=lambda m: -entries[m]["estimate"])
    assert located["model"].tolist() == order
    top = entries[order[0]]
    assert located["estimate ± se"].iat[0] == f"{top['estimate']:.1f} ± {top['standard_error']:.1f}"
    assert located["nearest member"].iat[0] == top["nearest_member"]["model"] and located["items"].iat[0] == 50
    page = (out / "report.html").read_text()
    assert "2 models located on family toy" in page
    assert page.index("Located models") < page.index("Per model") < page.index("Localizations in detail")
    assert page.index(f"<p>{order[0]}:") < page.index(f"<p>{order[1]}:")
    # the per-model curve panels follow the table's order too (titles inside plotly's escaped JSON)
    title = "\\u003cb\\u003e{}\\u003c\\u002fb\\u003e"
    assert page.index(title.format(order[0])) < page.index(title.format(order[1]))


def test_paper_rule_shows_a_rule_strength_not_a_confidence(files, pool_dir, tmp_path, capsys) -> None:
    out = tmp_path / "loc"
    _locate(capsys, pool_dir, files["correctness"], out, "--items", "50", "--trials", "5", "--method", "paper")
    entry = json.loads((out / "localization.json").read_text())[0]
    assert "confidence" not in entry and 0 <= entry["rule_strength"] <= 1
    assert "not a probability of being right" in entry["rule_strength_note"]
    trials = pd.read_csv(out / "trials.csv")
    assert "paper_rule_strength" in trials.columns and "paper_confidence" not in trials.columns
    assert "stratified_confidence" in trials.columns  # A's is calibrated: still a confidence
    located = pd.read_csv(out / "located.csv")
    assert "confidence" not in located.columns and located["rule strength"].iat[0] == round(entry["rule_strength"], 3)
    page = (out / "report.html").read_text()
    assert "is not calibrated" in page and "right 39% of the time" in page
    assert "confidence 1" not in page and "rule strength" in page


def test_weighting_beside_another_method_is_refused_with_or_without_trials(files, tmp_path, capsys) -> None:
    """--weighting steers the paper's rule alone: beside --method stratified it is refused in one message,
    trials or not (in trials it would change the paper rule's column alone), and nothing is written;
    with --method paper it is taken."""
    pool_dir, out = tmp_path / "pool", tmp_path / "out"
    args = ["stem", "pool", files["correctness"], "--models", files["meta"], "--family", "toy", "--out", pool_dir]
    assert run_cli(args, capsys)[0] == 0
    locate = ["stem", "locate", pool_dir, files["correctness"], "--model", "other-b", "--out", out]
    for trials in ("3", "0"):
        _expect_error(
            [*locate, "--method", "stratified", "--weighting", "stratified", "--trials", trials],
            capsys,
            "--weighting stratified: does not apply here: it weights the TI levels of the paper's rule, and "
            "method 'stratified' is located without it",
            out,
        )
    _locate(
        capsys, pool_dir, files["correctness"], out, "--method", "paper", "--weighting", "stratified", "--trials", "3"
    )
    assert read_run(out).results["weighting"] == "stratified"
