"""Every script that the README or a doc names runs, on a tiny slice of ../shared/data, and writes what its
doc says it writes (skipped with a reason where a checkout has no ../shared).

Each script runs as a user runs it (``python scripts/NAME.py ...``, this tree's ``src`` first on the path),
with the size options that make it a smoke run (``--max-models 1``, ``--seeds 1``, ``--prompts 40``, ...).
The checks are on the outputs: the files and columns named in the script's docstring and doc, rows in
them, and numbers that have a known value (a constant predictor's NLL is ln 2 or ln 4) or a possible range
(accuracies, coverages and win rates in [0, 1], budgets between the cheapest and the dearest model).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO, run_cli, run_process, shared_data

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs").glob("*/README.md"))]
ARENA_COSTS = REPO / "docs" / "p2l_heldout" / "costs_arena.csv"


def script(name: str, *args: object) -> subprocess.CompletedProcess[str]:
    """``python scripts/<name> args`` from the repository root, this tree's ``src`` first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    return run_process([sys.executable, REPO / "scripts" / name, *args], REPO, env)


def run_script(name: str, *args: object) -> str:
    """:func:`script`'s stdout, its exit status 0 asserted (its stderr shown when not)."""
    done = script(name, *args)
    assert done.returncode == 0, f"scripts/{name} exited {done.returncode}:\n{done.stderr[-4000:]}"
    return done.stdout


def arena_slice(path: Path, battles: int) -> Path:
    """A seeded sample of the human Arena battles (all four outcomes occur, so grk can be fitted)."""
    table = pd.read_json(shared_data("p2l-battles") / "arena33k_human_elobench" / "battles.jsonl", lines=True)
    table.sample(battles, random_state=0).to_json(path, orient="records", lines=True)
    return path


def in_unit_interval(values: pd.Series) -> bool:
    """Every value is a number in [0, 1]."""
    numbers = pd.to_numeric(values)
    return bool(numbers.notna().all() and numbers.between(0, 1).all())


def test_every_script_a_doc_names_exists_and_has_a_smoke_test_here() -> None:
    """The scripts named by README.md, docs/*.md and docs/*/README.md exist, and each has a test below whose
    name starts with ``test_<script>``."""
    named = {name for doc in DOCS for name in re.findall(r"scripts/(\w+)\.py", doc.read_text(encoding="utf-8"))}
    assert named, "no script named by the docs: the pattern no longer finds them"
    missing = sorted(name for name in named if not (REPO / "scripts" / f"{name}.py").is_file())
    assert not missing, f"docs name scripts that do not exist: {missing}"
    tests = [name for name in globals() if name.startswith("test_")]
    untested = sorted(name for name in named if not any(t.startswith(f"test_{name}_") for t in tests))
    assert not untested, f"scripts named by the docs without a smoke test in this file: {untested}"


# ------------------------------------------------------------------------------------------------ P2L


@pytest.mark.slow
def test_p2l_heldout_study_scores_trains_routes_and_scales(tmp_path: Path) -> None:
    """The held-out study (docs/p2l_heldout_study.md) on 300 Arena battles: the library trainer (the
    configuration that crashed on the outcome-model rename), shrinkage, an experimental ridge head, the
    Fig. 6 aggregation scaling and the routing curve of the ridge head folded into the library's P2L model."""
    battles = arena_slice(tmp_path / "battles.jsonl", 300)
    configs = "lib:minilm:adamw,shrink:minilm:adamw,ridge:minilm"
    run_script(
        "p2l_heldout_study.py",
        battles,
        "--name",
        "arena",
        "--out",
        tmp_path / "out",
        "--configs",
        configs,
        "--ridge-grid",
        "0.01",
        "--folds",
        "2",
        "--fig6",
        "lib:minilm:adamw",
        "--repeats",
        "2",
        "--route",
        "ridge:minilm",  # the study's own head, folded into the library's to route
        "--costs",
        ARENA_COSTS,
    )
    out = tmp_path / "out" / "arena"
    metrics = pd.read_csv(out / "metrics.csv").set_index("config")
    assert list(metrics.index) == ["constant", "marginal", "marginal_lib", *configs.split(",")]
    assert metrics.loc["constant", "nll"] == pytest.approx(math.log(4))  # grk: 4 outcomes, each 1/4
    assert (metrics["nll"] > 0).all() and in_unit_interval(metrics["accuracy"]) and in_unit_interval(metrics["brier"])
    assert (metrics["battles"] == metrics.loc["constant", "battles"]).all() and metrics["battles"].iloc[0] > 0
    assert np.isfinite(metrics.loc["ridge:minilm", ["vs_marginal", "se_vs_marginal"]].astype(float)).all()
    selection = pd.read_csv(out / "selection.csv")
    assert set(selection["config"]) == {"shrink:minilm:adamw", "ridge:minilm"}
    fig6 = pd.read_csv(out / "fig6.csv")
    assert set(fig6["truth"]) == {"bt", "grk"} and (fig6["l1"] >= 0).all() and fig6["prompts"].max() > 1
    curve = pd.read_csv(out / "route_curve.csv")
    costs = pd.read_csv(ARENA_COSTS)["cost"]
    assert curve["budget"].between(costs.min(), costs.max()).all() and len(curve) > 1
    assert (curve["router_cost"] <= curve["budget"] + 1e-6).all()
    for column in ("predicted_router_winrate", "marginal_router_winrate", "bt_router_winrate"):
        assert in_unit_interval(curve[column]), column


@pytest.mark.slow
def test_p2l_from_correctness_study_trains_on_items_and_scores_held_out_ones(tmp_path: Path) -> None:
    """docs/p2l_from_correctness_study.md's script on 4 ZeroEval models and 25 items per benchmark."""
    run_script(
        "p2l_from_correctness_study.py",
        "--data",
        shared_data("zeroeval"),
        "--models",
        "4",
        "--items",
        "25",
        "--penalty",
        "0.001",
        "--outcome-model",
        "bt",
        "grk",
        "--out",
        tmp_path,
    )
    conversion = json.loads((tmp_path / "conversion.json").read_text())
    assert len(conversion["models"]) == 4
    assert conversion["train"]["items"] + conversion["test"]["items"] == 3 * 25  # GSM8K, MATH-L5, CRUXEval
    for side in ("train", "test"):  # every item scored by the 4 models gives one battle per pair of them
        assert conversion[side]["battles"] == 6 * conversion[side]["items"]
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    constant = metrics[metrics["predictor"] == "constant"].set_index("outcome_model")["nll"]
    assert constant.to_dict() == pytest.approx({"bt": math.log(2), "grk": math.log(4)})
    assert set(metrics["predictor"]) == {"constant", "marginal", "marginal_by_benchmark", "p2l"}
    assert in_unit_interval(metrics["accuracy"]) and (metrics["penalty"] == 0.001).all()
    assert (tmp_path / "model-bt" / "config.json").is_file() and (tmp_path / "model-grk" / "config.json").is_file()


@pytest.mark.slow
def test_alpacaeval_p2l_evaluates_correlates_and_routes(tmp_path: Path) -> None:
    """The README's AlpacaEval 2 study on its first 40 prompts (57 models each against the reference)."""
    run_script(
        "alpacaeval_p2l.py",
        "--data",
        shared_data("alpacaeval"),
        "--out",
        tmp_path,
        "--prompts",
        "40",
        "--penalty",
        "0.003",
    )
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["test_prompts"] == 8  # 20% of 40
    assert summary["held_out"]["constant"]["nll"] == pytest.approx(math.log(2), abs=1e-5)
    assert set(summary["held_out"]) == {"constant", "marginal", "p2l"}
    for column in ("win_rate", "length_controlled_winrate"):
        correlation = summary["upstream_rank_correlation"][column]
        assert -1 <= correlation["spearman"] <= 1 and correlation["models"] > 10
    curve = pd.read_csv(tmp_path / "routing_curve.csv")
    assert len(curve) == 9 and curve["budget_chars"].is_monotonic_increasing
    for column in ("router_winrate", "marginal_router_winrate", "best_single_winrate"):
        assert in_unit_interval(curve[column]), column
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "evaluation" / "metrics.csv").is_file()


@pytest.mark.slow
def test_serve_token_cap_compares_capped_with_uncapped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The token-cap study on a model trained here (frozen minilm, epoch loop) and 30 Arena prompts."""
    battles = arena_slice(tmp_path / "battles.jsonl", 200)
    code, _, err = run_cli(
        ["p2l", "train", battles, "--out", tmp_path / "model", "--fit", "adamw", "--epochs", "2", "-q"], capsys
    )
    assert code == 0, err
    printed = run_script("serve_token_cap.py", tmp_path / "model", battles, "--caps", "8,64", "--limit", "30")
    assert printed.startswith("30 distinct prompts from")
    rows = {
        line.split()[0]: line.split()[1:]
        for line in printed.splitlines()
        if line.split()[:1] in (["none"], ["8"], ["64"])
    }
    assert set(rows) == {"none", "8", "64"}
    none, cap8, cap64 = ([float(v) for v in rows[k][:5]] for k in ("none", "8", "64"))
    assert none[:4] == [0.0, 1.0, 0.0, 0.0]  # uncapped: nothing cut, nothing changed
    assert 0 < cap64[0] <= cap8[0] <= 1  # a tighter cap cuts at least as many prompts
    assert 0 <= cap8[1] <= 1 and cap8[2] > 0  # 8 tokens of a prompt moves its coefficients
    for key, values in (("none", none), ("8", cap8), ("64", cap64)):  # the gate: same best model, changes <= 0.05
        assert rows[key][-1] == str(values[1] >= 0.99 and values[2] <= 0.05), key


# --------------------------------------------------------------------------------------------- judges


@pytest.mark.slow
def test_judges_real_data_maps_both_years(tmp_path: Path) -> None:
    """The TREC DL study on 3 queries x 40 passages of each year."""
    table = pd.read_json(shared_data("dl1920-llmjudge") / "dl1920_judgments.jsonl", lines=True)
    parts = []
    for _, year in table.groupby("collection"):
        queries = sorted(year["query_id"].unique())[:3]
        parts.append(year[year["query_id"].isin(queries)].groupby("query_id").head(40))
    (tmp_path / "data").mkdir()
    pd.concat(parts).to_json(tmp_path / "data" / "dl1920_judgments.jsonl", orient="records", lines=True)
    printed = run_script(
        "judges_real_data.py",
        "--data",
        tmp_path / "data",
        "--out",
        tmp_path / "out",
        "--min-cluster-size",
        "5",
        "--quiet",
    )
    assert "## Overall agreement per judge and year" in printed
    for year in ("DL19", "DL20"):
        overall = pd.read_csv(tmp_path / "out" / year / "overall.csv")
        assert len(overall) == 5 and (overall["n_pairs"] == 120).all()
        assert overall["ac1"].between(-1, 1).all() and in_unit_interval(overall["percent_agreement"])
        assert (tmp_path / "out" / year / "report.html").is_file()


def markdown_rows(printed: str, heading: str) -> list[dict[str, str]]:
    """The rows of the markdown table printed under ``## heading``, as {column: cell}."""
    block = printed.split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(header, (c.strip() for c in ln.strip("|").split("|")), strict=True)) for ln in lines[2:]]


def test_embedder_study_compares_two_embedders_and_one_with_itself(tmp_path: Path) -> None:
    """The study on 3 queries x 40 passages of DL19 (two tiny encoders the test builds: the sentence
    encoder and the static model distilled from it) and on the demo's Renze slice with one embedder
    against itself, where the answer is known: the same clusters (ARI 1), no setting moved, no accuracy
    changed."""
    from builders import tiny_bert

    table = pd.read_json(shared_data("dl1920-llmjudge") / "dl1920_judgments.jsonl", lines=True)
    year = table[table["collection"] == "trec-dl-2019-passage"]
    part = year[year["query_id"].isin(sorted(year["query_id"].unique())[:3])].groupby("query_id").head(40)
    (tmp_path / "data").mkdir()
    part.to_json(tmp_path / "data" / "dl1920_judgments.jsonl", orient="records", lines=True)
    words = sorted(
        {
            w
            for t in part["query_text"].tolist() + part["doc_text"].tolist()
            for w in re.findall(r"\w+|[^\w\s]", t.lower())
        }
    )
    encoder = tiny_bert(tmp_path / "bert", words)
    args = ["--data", tmp_path / "data", "--years", "DL19", "--min-cluster-size", "5", "--quiet"]
    printed = run_script("embedder_study.py", "judges", *args, "--embedders", f"st:{encoder}", f"static:{encoder}")
    (row,) = markdown_rows(printed, f"judges: st:{encoder} against static:{encoder}")
    assert row["pairs"] == "120" and -1 <= float(row["ARI (all pairs, noise a label)"]) <= 1
    judges = markdown_rows(printed, "judges: dense-vs-noise")
    assert len(judges) == 5 and all(int(r["found by both"]) <= int(r[f"bias-prone st:{encoder}"]) for r in judges)
    demo = REPO / "src" / "evalprism" / "demo" / "data" / "renze_slice.csv.gz"
    same = ["--embedders", f"static:{encoder}", f"static:{encoder}"]
    printed = run_script("embedder_study.py", "ecdf", demo, "--by", "model", "temperature", "--clusters", "2", *same)
    (row,) = markdown_rows(printed, f"ecdf: static:{encoder} against static:{encoder}")
    assert float(row["ARI of the settings' clusters"]) == 1.0
    assert row["settings in another cluster (labels matched by quality rank)"] == "0"
    assert float(row["largest change in a configuration's accuracy"]) == 0.0
    assert float(row["largest change in a (group, configuration) cell"]) == 0.0


# ----------------------------------------------------------------------------------------------- STEM


def test_stem_real_data_locates_by_every_method(tmp_path: Path) -> None:
    """The estimator study (docs/stem_estimators_study.md) on MMLU-Pro, one model per cell, 3 trials."""
    shared_data("mmlu_pro")
    run_script(
        "stem_real_data.py",
        "--out",
        tmp_path,
        "--datasets",
        "mmlu_pro",
        "--trials",
        "3",
        "--items",
        "50",
        "--max-models",
        "1",
    )
    models = pd.read_csv(tmp_path / "models_50.csv")
    assert list(models["setting"]) == ["leave-one-out", "other families"] and (models["trials"] == 3).all()
    for method in ("paper", "stratified", "irt", "random", "bayesian"):
        assert in_unit_interval(models[method]), method
    cells = pd.read_csv(tmp_path / "cells_50.csv")
    assert list(cells["setting"])[-3:] == ["leave-one-out", "other families", "all"]
    assert in_unit_interval(cells["stratified_coverage"]) and (cells["random_rmse"] >= 0).all()
    assert "### 50 items, 3 trials" in (tmp_path / "tables.md").read_text()


def test_stem_plan_study_runs_every_arm(tmp_path: Path) -> None:
    """docs/stem_plan_study.md's script on its GSM8K family (ZeroEval's folder, GSM8K rows alone; MMLU-Pro's
    folder is read by the estimator study's test above), one model per cell, one plan seed."""
    shared_data("zeroeval")
    run_script(
        "stem_plan_study.py",
        "--out",
        tmp_path,
        "--datasets",
        "gsm8k",
        "--seeds",
        "1",
        "--random-draws",
        "2",
        "--items",
        "50",
        "--max-models",
        "1",
    )
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert set(runs["arm"]) == {"plan-A", "plan-B", "random"} and not runs["traceback"].any()
    done = runs[runs["error_type"].isna()]
    assert len(done) > 0 and in_unit_interval(done["hit"]) and (done["se"] > 0).all()
    assert in_unit_interval(done["confidence"]) and set(done["abstained"].astype(str)) <= {"True", "False"}
    assert set(done["dataset"]) == {"gsm8k"} and set(done["model"]) == {"Meta-Llama-3.1-8B-Instruct", "Athene-70B"}
    cells = pd.read_csv(tmp_path / "cells.csv")
    tables = (tmp_path / "tables.md").read_text()
    assert len(cells) > 0 and "### 50 items" in tables and "| confidence bin |" in tables


@pytest.mark.slow
def test_stem_adaptive_study_runs_every_arm(tmp_path: Path) -> None:
    """docs/stem_adaptive_study.md's script on ZeroEval's gemma-2 family, one model per setting, one seed."""
    shared_data("zeroeval")
    run_script(
        "stem_adaptive_study.py",
        "--out",
        tmp_path,
        "--datasets",
        "zeroeval",
        "--families",
        "gemma-2-it",
        "--seeds",
        "1",
        "--max-models",
        "1",
    )
    runs = pd.read_csv(tmp_path / "runs.csv", dtype={"error": "string"})
    arms = {"adaptive 30", "adaptive 40", "adaptive 50", "adaptive 50, 5 stages", "B plan 50", "B plan 100"}
    assert set(runs["arm"]) == arms | {"random 50", "random 100"}
    assert set(runs["setting"]) == {"leave-one-out", "other families"} and runs["model"].nunique() == 2
    assert not runs["error"].fillna("").str.startswith("traceback").any()
    adaptive = runs[~runs["arm"].str.startswith("random")]
    assert (adaptive["se"] > 0).all() and adaptive["estimate"].between(0, 100).all()
    cells = pd.read_csv(tmp_path / "cells.csv")
    assert in_unit_interval(cells["adaptive 50 accuracy"]) and in_unit_interval(cells["random 100 accuracy"])
    assert "Placement accuracy" in (tmp_path / "tables.md").read_text()


def test_stem_coverage_bands_gives_coverage_per_band(tmp_path: Path) -> None:
    """The README's coverage-by-band script, 2 models per pool and 5 trials."""
    data = shared_data("zeroeval")
    printed = run_script(
        "stem_coverage_bands.py", "--data", data, "--trials", "5", "--models", "2", "--out", tmp_path / "bands.csv"
    )
    bands = pd.read_csv(tmp_path / "bands.csv")
    assert len(bands) == 4 and set(bands["bench"]) == {"crux,math-l5", "gsm"}  # 2 models on each pool
    assert bands["score"].between(0, 100).all()
    assert np.allclose(bands["coverage"] * 5, np.round(bands["coverage"] * 5)) and in_unit_interval(bands["coverage"])
    assert "count" in printed and "mean" in printed


# ---------------------------------------------------------------------------------------------- ECDF


def test_renze_converts_the_study_and_refuses_another_folder(tmp_path: Path) -> None:
    """``renze.py convert`` on two response files of the study (the exam as shipped); a folder without
    them is one message, not a traceback."""
    root = shared_data("renze-temperature")
    (tmp_path / "root" / "responses").mkdir(parents=True)
    (tmp_path / "root" / "exams").symlink_to(root / "exams")
    for temperature in ("0.0", "1.0"):
        name = f"gpt-4 - chain_of_thought - comprehensive-100 - temp-{temperature}.csv"
        responses = pd.read_csv(root / "responses" / name, dtype=str, keep_default_na=False)
        responses[responses["Problem ID"].astype(int) <= 8].to_csv(tmp_path / "root" / "responses" / name, index=False)
    printed = run_script("renze.py", "convert", tmp_path / "root", tmp_path / "renze.csv")
    table = pd.read_csv(tmp_path / "renze.csv")
    assert printed.strip() == f"{tmp_path / 'renze.csv'}: {len(table)} responses" and len(table) > 0
    assert set(table["temperature"]) == {0.0, 1.0} and set(table["question_id"]) == set(range(1, 9))
    references = table["references"].map(json.loads)
    choices = table["choices"].map(json.loads)
    assert all(r == [c[g]] for r, c, g in zip(references, choices, table["gold"], strict=True))
    refused = script("renze.py", "convert", tmp_path, tmp_path / "x.csv")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert refused.stderr.strip() == f"{tmp_path / 'exams' / 'comprehensive-100.jsonl'}: not found (give the " + (
        "renze-temperature folder, e.g. ../shared/data/renze-temperature)"
    )


@pytest.mark.slow
def test_p2l_bench_study_values_every_router_on_held_out_items(tmp_path: Path) -> None:
    """docs/p2l_bench_study.md's script on 4 priced ZeroEval models and 12 items per benchmark (no P2L)."""
    run_script(
        "p2l_bench_study.py",
        "--data",
        shared_data("zeroeval"),
        "--prices",
        shared_data("pricing") / "arena_catalog_prices.csv",
        "--items",
        "12",
        "--max-models",
        "4",
        "--rounds",
        "50",
        "--no-p2l",
        "--out",
        tmp_path,
    )
    costs = pd.read_csv(tmp_path / "costs.csv")
    assert len(costs) == 4 and (costs["cost"] > 0).all()
    train, held = pd.read_csv(tmp_path / "train.csv"), pd.read_csv(tmp_path / "heldout.csv")
    keys = ["benchmark", "item_id"]
    assert train[keys].drop_duplicates().merge(held[keys].drop_duplicates()).empty  # split by item
    assert len(train[keys].drop_duplicates()) + len(held[keys].drop_duplicates()) == 3 * 12
    policies = pd.read_csv(tmp_path / "bench" / "policies.csv")
    expected = {"knn", "mlp", "mf", "benchmark leaderboard", "best single", "random mix", "oracle"}
    assert set(policies["policy"]) == expected
    assert in_unit_interval(policies["value"]) and in_unit_interval(policies["p_adj"].dropna())
    assert (policies["cost"] <= policies["budget"] + 1e-9).all()
    assert policies["budget"].min() == pytest.approx(costs["cost"].min())  # budgets from the cheapest model up
    oracle = policies[policies["policy"] == "oracle"].set_index("budget")["value"]
    assert (policies.groupby("budget")["value"].max() <= oracle + 1e-12).all()  # nothing beats the oracle
    assert "| policy | AIQ" in (tmp_path / "table.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_p2l_bench_study_battles_values_every_router_by_held_out_win_rate(tmp_path: Path) -> None:
    """docs/p2l_bench_study.md's pairwise study (``--battles``) on 300 human Arena battles (no P2L)."""
    battles = arena_slice(tmp_path / "battles.jsonl", 300)
    out = tmp_path / "out"
    run_script(
        "p2l_bench_study.py", "--battles", battles, "--costs", ARENA_COSTS, "--rounds", "50", "--no-p2l", "--out", out
    )
    train = pd.read_json(out / "split" / "train.jsonl", lines=True)
    test = pd.read_json(out / "split" / "test.jsonl", lines=True)
    assert set(train["prompt"]).isdisjoint(test["prompt"]) and len(train) + len(test) == 300  # split by prompt
    policies = pd.read_csv(out / "bench" / "policies.csv")
    expected = {"knn", "mlp", "mf", "benchmark leaderboard", "best single", "random mix", "oracle"}
    assert set(policies["policy"]) == expected
    assert in_unit_interval(policies["value"]) and in_unit_interval(policies["p_adj"].dropna())
    assert (policies["prompts_scored"] + policies["prompts_excluded"] == test["prompt"].nunique()).all()
    assert (policies["cost"] <= policies["budget"] + 1e-9).all()
    run = json.loads((out / "bench" / "run.json").read_text(encoding="utf-8"))
    assert "win rate" in json.dumps(run)
    assert "prompts excluded" in (out / "table.md").read_text(encoding="utf-8")


@pytest.mark.slow  # four subprocesses on 2,000 texts: ~1 min on a quiet 2-core machine, 5 under load
def test_bench_limits_quick_measures_judges_and_ecdf_against_the_encoder_alone(tmp_path: Path) -> None:
    """benchmarks/bench_limits.py --quick (2,000 synthetic texts) with a static model distilled from a tiny
    encoder the test builds: both commands exit 0 and write what the synthetic input implies (2,000 pairs;
    100 questions x 2 configurations = 200 settings), each row beside its peer, the encoder alone."""
    from builders import tiny_bert

    encoder = tiny_bert(tmp_path / "bert", [f"w{i}" for i in range(100)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    env["EVALPRISM_CACHE_DIR"] = str(tmp_path / "cache")
    work = tmp_path / "work"
    command = [sys.executable, REPO / "benchmarks" / "bench_limits.py", "--quick", "--embedder", f"static:{encoder}"]
    done = run_process([*command, "--keep", work], REPO, env)
    assert done.returncode == 0, done.stderr[-4000:]
    for kind in ("judges", "ecdf"):
        row = next(line for line in done.stdout.splitlines() if f"│ evalprism {kind} " in line)
        assert "2,000" in row and row.count("MiB") == 2 and "exit 0" in row, row  # the run and its peer
    assert len(pd.read_csv(work / "out-judges-2000" / "pairs.csv")) == 2000
    assert len(pd.read_csv(work / "out-ecdf-2000" / "settings.csv")) == 200
