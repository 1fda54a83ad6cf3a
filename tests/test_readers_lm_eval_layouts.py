"""The lm-evaluation-harness layouts users accumulate (issue 27): the flat ``--output_path
DIR/NAME.json`` layout, reruns, results without samples, ``--limit`` and ``--predict_only`` runs
(0.4.13), samples without a ``filter`` key (0.4.5) and the ``results.json`` + JSON-array layout of
0.4.2.

The fixtures under ``fixtures/harness/lm_eval_layouts`` are the harness's own output (how they were
made: ``fixtures/harness/README.md``). Known answers: the dummy model answers ``lol`` to every
generation, so ``gen_local`` scores follow from its targets (strict-match 1,0,0,1,0,1;
flexible-extract 0,1,0,0,1,0), and every per-task mean read equals lm-eval's own aggregate in the
results file of the same run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import evalprism_process, lm_eval_local_tasks, read_run, run_lm_eval_dummy

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import read_correctness

LAYOUTS = Path(__file__).parent / "fixtures" / "harness" / "lm_eval_layouts"
V13 = LAYOUTS / "v0.4.13"
STRICT = [1, 0, 0, 1, 0, 1]
FLEXIBLE = [0, 1, 0, 0, 1, 0]


def _scores(table, model: str, task: str) -> list[int]:
    rows = table[(table["model"] == model) & (table["benchmark"] == task)]
    return rows.sort_values("item_id", key=lambda s: s.astype(int))["score"].tolist()


def _mean(table, model: str, task: str) -> float:
    return float(table[(table["model"] == model) & (table["benchmark"] == task)]["score"].mean())


def _choices(read) -> str:
    return "\n".join(read.provenance.choices)


def test_flat_output_path_reads_each_model_from_its_own_results_file() -> None:
    """Item 1: two models written with --output_path flat/both.json share one directory."""
    table_read = read_correctness(V13 / "flat")
    table = table_read.table
    assert sorted(table["model"].unique()) == ["org__small", "org__tiny"]
    assert len(table) == 2 * 2 * 6  # every row of both models, none dropped
    for results_file in sorted((V13 / "flat").glob("both_*.json")):
        results = json.loads(results_file.read_text(encoding="utf-8"))
        model = results["model_name_sanitized"]
        date = results_file.stem.removeprefix("both_")
        assert _mean(table, model, "mc_local") == pytest.approx(results["results"]["mc_local"]["acc,none"])
        assert _mean(table, model, "gen_local") == pytest.approx(
            results["results"]["gen_local"]["exact_match,strict-match"]
        )
        assert (
            f"lm-eval {model}/mc_local: metric acc (first in the results file's higher_is_better), filter none "
            f"(the task's only filter), 6 items from samples_mc_local_{date}.jsonl (results file: "
            f"{results_file.name})"
        ) in _choices(table_read)
    assert _scores(table, "org__small", "gen_local") == STRICT
    # the two models' MC answers differ (random loglikelihoods): they are not one model read twice
    assert _mean(table, "org__tiny", "mc_local") == pytest.approx(1 / 6)
    assert _mean(table, "org__small", "mc_local") == pytest.approx(3 / 6)
    assert "model named after both_2026-11-25T19-17-36.267981.json's model_name_sanitized" in _choices(table_read)
    assert "neither an inspect_ai log" not in _choices(table_read)  # its results files are known for what they are
    renamed = read_correctness(V13 / "flat", harness=HarnessOptions(model_name=["org__small=small"])).table
    assert sorted(renamed["model"].unique()) == ["org__tiny", "small"]


def test_samples_without_filter_key_are_labelled_by_the_tasks_filter_order() -> None:
    """Item 6: lm-eval 0.4.5 writes each gen_local document twice (strict-match, then flexible-extract), unlabelled."""
    v045 = LAYOUTS / "v0.4.5"
    table_read = read_correctness(v045)
    table = table_read.table
    assert _scores(table, "org__tiny", "gen_local") == STRICT
    assert "no line names its filter" in _choices(table_read)
    flexible = read_correctness(v045, harness=HarnessOptions(lm_eval_filter=["gen_local=flexible-extract"])).table
    assert _scores(flexible, "org__tiny", "gen_local") == FLEXIBLE
    results = json.loads(next((v045 / "org__tiny").glob("results_*.json")).read_text(encoding="utf-8"))
    assert _mean(table, "org__tiny", "mc_local") == pytest.approx(results["results"]["mc_local"]["acc,none"])


def test_unlabelled_filters_in_another_order_are_refused_naming_the_file(tmp_path: Path) -> None:
    run = tmp_path / "org__tiny"
    shutil.copytree(LAYOUTS / "v0.4.5" / "org__tiny", run)
    samples = next(run.glob("samples_gen_local_*.jsonl"))
    lines = samples.read_text(encoding="utf-8").splitlines()
    samples.write_text("\n".join(lines[6:] + lines[:6]) + "\n", encoding="utf-8")  # flexible-extract first
    with pytest.raises(
        EvalprismError,
        match=rf"{samples.name}: task 'gen_local': no line says its filter .*'strict-match' "
        r"gives exact_match 0.333333 where the results file says 0.5: cannot tell",
    ):
        read_correctness(tmp_path)


def test_a_document_scored_twice_is_named_by_file_and_line(tmp_path: Path) -> None:
    """Item 6: a duplicate is named by its file and lines, not as rows of an internal table."""
    run = tmp_path / "org__tiny"
    shutil.copytree(V13 / "nosamples" / "org__tiny", run)
    samples = next(run.glob("samples_mc_local_*.jsonl"))
    first = samples.read_text(encoding="utf-8").splitlines()[0]
    with samples.open("a", encoding="utf-8") as fh:
        fh.write(first + "\n")
    twice = rf"{samples.name}: line 1 and line 7 both score document 0 of task 'mc_local' under filter 'none'"
    with pytest.raises(EvalprismError, match=twice):
        read_correctness(tmp_path)


def test_rerun_reads_the_newest_run_with_its_own_results_file() -> None:
    """Items 6 and 8: gen_local rerun alone; mc_norm keeps the metric of its own run's results file."""
    rerun = V13 / "rerun" / "org__tiny"
    old, new = sorted(rerun.glob("results_*.json"))
    table_read = read_correctness(V13 / "rerun")
    table = table_read.table
    choices = _choices(table_read)
    assert (
        "lm-eval org__tiny/gen_local: 2 runs; read samples_gen_local_2026-11-25T19-18-57.532859.jsonl (the newest "
        "complete run); ignored samples_gen_local_2026-11-25T19-18-36.196831.jsonl"
    ) in choices
    # mc_norm lists acc_norm first; the newest results file (gen_local only) would have given the sample's first, acc
    assert set(table.loc[table["benchmark"] == "mc_norm", "metric"]) == {"acc_norm"}
    assert (
        f"mc_norm: metric acc_norm (first in the results file's higher_is_better), filter none (the task's only "
        f"filter), 6 items from samples_mc_norm_2026-11-25T19-18-36.196831.jsonl (results file: {old.name})"
    ) in choices
    old_results = json.loads(old.read_text(encoding="utf-8"))["results"]
    new_results = json.loads(new.read_text(encoding="utf-8"))["results"]
    assert _mean(table, "org__tiny", "mc_norm") == pytest.approx(old_results["mc_norm"]["acc_norm,none"])
    assert _mean(table, "org__tiny", "gen_local") == pytest.approx(new_results["gen_local"]["exact_match,strict-match"])


def test_a_newer_limit_run_does_not_replace_a_complete_one(tmp_path: Path) -> None:
    run = tmp_path / "org__tiny"
    shutil.copytree(V13 / "nosamples" / "org__tiny", run)  # complete, 19-19-21
    for f in (V13 / "limit" / "org__tiny").iterdir():  # --limit 3, 19-20-11
        shutil.copy(f, run / f.name)
    table_read = read_correctness(tmp_path)
    table = table_read.table
    assert len(table) == 12
    assert (
        "mc_local: 2 runs; read samples_mc_local_2026-11-25T19-19-21.154324.jsonl (the newest complete run); "
        "ignored samples_mc_local_2026-11-25T19-20-11.401896.jsonl (--limit 3)"
    ) in _choices(table_read)


def test_results_without_samples_are_said(tmp_path: Path) -> None:
    """Item 7: org__small was run without --log_samples beside org__tiny with it."""
    table_read = read_correctness(V13 / "nosamples")
    table = table_read.table
    assert set(table["model"]) == {"org__tiny"} and len(table) == 12
    assert (
        "lm-eval org__small/results_2026-11-25T19-19-43.098462.json: not read: no samples files of this run "
        "(lm_eval ran without --log_samples); model org__small, tasks gen_local, mc_local"
    ) in _choices(table_read)
    shutil.copytree(V13 / "nosamples" / "org__small", tmp_path / "org__small")
    without_samples = (
        r"lm-eval results files \(org__small/results_2026-11-25T19-19-43.098462.json\) "
        "but no samples files: per-item results need lm_eval --log_samples"
    )
    with pytest.raises(EvalprismError, match=without_samples):
        read_correctness(tmp_path)


def test_lm_eval_0_4_2_results_json_and_json_array_samples() -> None:
    """Item 12: lm-eval 0.4.2 wrote tiny/results.json and tiny/pretrained__org__tiny_<task>.jsonl (JSON arrays)
    with --output_path v0.4.2/tiny, and small.json beside pretrained__org__small_<task>.jsonl with
    --output_path v0.4.2/small.json."""
    run = LAYOUTS / "v0.4.2" / "tiny"
    table_read = read_correctness(LAYOUTS / "v0.4.2")
    table = table_read.table
    results = json.loads((run / "results.json").read_text(encoding="utf-8"))["results"]
    assert sorted(table["model"].unique()) == ["org__small", "org__tiny"] and len(table) == 24
    small = json.loads((LAYOUTS / "v0.4.2" / "small.json").read_text(encoding="utf-8"))["results"]
    assert _mean(table, "org__small", "mc_local") == pytest.approx(small["mc_local"]["acc,none"])
    assert _scores(table, "org__small", "gen_local") == STRICT
    assert _scores(table, "org__tiny", "gen_local") == STRICT
    assert _mean(table, "org__tiny", "mc_local") == pytest.approx(results["mc_local"]["acc,none"])
    assert _mean(table, "org__tiny", "gen_local") == pytest.approx(results["gen_local"]["exact_match,strict-match"])
    choices = _choices(table_read)
    assert "lm-eval <= 0.4.2 layout" in choices and "6 items from pretrained__org__tiny_mc_local.jsonl" in choices
    flexible = read_correctness(LAYOUTS / "v0.4.2", harness=HarnessOptions(lm_eval_filter=["flexible-extract"])).table
    assert _scores(flexible, "org__tiny", "gen_local") == FLEXIBLE


def test_global_filter_applies_to_every_task_that_has_it() -> None:
    """Item 14: --lm-eval-filter flexible-extract (no TASK=) on an MC task and a generation task."""
    table_read = read_correctness(V13 / "rerun", harness=HarnessOptions(lm_eval_filter=["flexible-extract"]))
    table = table_read.table
    assert _scores(table, "org__tiny", "gen_local") == FLEXIBLE
    assert len(_scores(table, "org__tiny", "mc_norm")) == 6
    choices = _choices(table_read)
    assert "filter flexible-extract (chosen for every task that has it)" in choices
    assert "filter none (the task's only filter; the task has no filter 'flexible-extract')" in choices
    with pytest.raises(EvalprismError, match="lm_eval_filter nosuch: no task under .* has a filter 'nosuch'"):
        read_correctness(V13 / "rerun", harness=HarnessOptions(lm_eval_filter=["nosuch"]))
    with pytest.raises(EvalprismError, match="metric f1: no task under .* has a value 'f1'"):
        read_correctness(V13 / "rerun", harness=HarnessOptions(metric=["f1"]))


def test_predict_only_run_is_said_to_have_no_metric() -> None:
    """Item 14: --predict_only samples hold a 'bypass' placeholder, not a metric."""
    with pytest.raises(
        EvalprismError,
        match=r"samples_gen_local_\S+\.jsonl: task 'gen_local' comes from an lm_eval "
        "--predict_only run: lm-eval computed no metric",
    ) as info:
        read_correctness(V13 / "predict")
    assert "choose a 0/1" not in str(info.value)


def test_limit_run_is_partial_in_the_read_line_and_run_json(tmp_path: Path) -> None:
    """Item 15: --limit 3 of 6 documents, said per task, kept in run.json."""
    table_read = read_correctness(V13 / "limit")
    table = table_read.table
    assert len(table) == 6
    results = json.loads(next((V13 / "limit" / "org__tiny").glob("results_*.json")).read_text(encoding="utf-8"))
    assert _mean(table, "org__tiny", "mc_local") == pytest.approx(results["results"]["mc_local"]["acc,none"])
    assert _scores(table, "org__tiny", "gen_local") == STRICT[:3]
    for task in ("gen_local", "mc_local"):
        assert any(
            line.startswith(f"lm-eval org__tiny/{task}:")
            and line.endswith("PARTIAL run (lm_eval --limit 3): 3 of the task's 6 documents")
            for line in table_read.provenance.choices
        )
    runs = tmp_path / "runs"  # a STEM family needs three models: the partial one beside two complete ones
    for name, source in (("a", V13 / "limit"), ("b", V13 / "nosamples"), ("c", LAYOUTS / "v0.4.5")):
        shutil.copytree(source / "org__tiny", runs / name / "org__tiny")
    models = tmp_path / "models.csv"
    models.write_text("model,params,family\na/org__tiny,1,f\nb/org__tiny,2,f\nc/org__tiny,3,f\n", encoding="utf-8")
    done = evalprism_process(["stem", "audit", runs, "--models", models, "--out", tmp_path / "audit"])
    assert done.returncode == 0, done.stderr
    assert "PARTIAL run (lm_eval --limit 3)" in " ".join(done.stderr.split())
    read = [line for line in read_run(tmp_path / "audit").provenance.choices if "PARTIAL" in line]
    assert len(read) == 2 and all(
        line.startswith("lm-eval a/org__tiny/")
        and line.endswith("PARTIAL run (lm_eval --limit 3): 3 of the task's 6 documents")
        for line in read
    )


def test_a_broken_results_file_is_one_message_naming_it(tmp_path: Path) -> None:
    run = tmp_path / "org__tiny"
    shutil.copytree(V13 / "limit" / "org__tiny", run)
    results = next(run.glob("results_*.json"))
    results.write_text(results.read_text(encoding="utf-8")[:200], encoding="utf-8")
    with pytest.raises(EvalprismError, match=rf"{results.name}: not valid JSON .*expected an lm-eval results file"):
        read_correctness(tmp_path)


def test_results_without_samples_beside_inspect_logs_are_said_not_refused(tmp_path: Path) -> None:
    """Item 7 in a mixed directory: the inspect log is read, the lm-eval results file is said not read."""
    shutil.copytree(V13 / "nosamples" / "org__small", tmp_path / "runs" / "org__small")
    shutil.copy(LAYOUTS.parent / "inspect_json" / "arith_two_scorers.json", tmp_path / "runs" / "arith.json")
    table_read = read_correctness(tmp_path / "runs", harness=HarnessOptions(scorer="match"))
    table = table_read.table
    assert set(table["model"]) == {"mockllm/small"} and len(table) == 4
    choices = _choices(table_read)
    assert "lm-eval org__small/results_2026-11-25T19-19-43.098462.json: not read: no samples files" in choices
    assert "ignored" not in choices


@pytest.mark.slow
def test_flat_layout_generated_now_reads_each_model(tmp_path: Path) -> None:
    """Where lm-eval >= 0.4.9 is installed: write two models with --output_path out/both.json now and read them."""
    exe = shutil.which("lm_eval")
    if exe is None:
        pytest.skip("lm-eval is not installed (the fixtures above are its real output)")
    tasks = lm_eval_local_tasks(tmp_path, LAYOUTS.parent / "make")
    for model, seed in (("org/tiny", "3"), ("org/small", "5")):
        done = run_lm_eval_dummy(
            exe, tasks, tmp_path / "out" / "both.json", seed, "--model_args", f"pretrained={model}"
        )
        assert done.returncode == 0, done.stderr[-2000:]
    table = read_correctness(tmp_path / "out").table
    assert sorted(table["model"].unique()) == ["org__small", "org__tiny"] and len(table) == 24
    for results_file in (tmp_path / "out").glob("both_*.json"):
        results = json.loads(results_file.read_text(encoding="utf-8"))
        model = results["model_name_sanitized"]
        assert _mean(table, model, "mc_local") == pytest.approx(results["results"]["mc_local"]["acc,none"])
        assert _scores(table, model, "gen_local") == STRICT


def test_a_task_of_the_results_file_without_its_samples_file_is_said(tmp_path: Path) -> None:
    shutil.copytree(V13 / "nosamples" / "org__tiny", tmp_path / "org__tiny")
    next((tmp_path / "org__tiny").glob("samples_mc_local_*.jsonl")).unlink()
    table_read = read_correctness(tmp_path)
    table = table_read.table
    assert set(table["benchmark"]) == {"gen_local"}
    assert (
        "lm-eval org__tiny: results_2026-11-25T19-19-21.154324.json lists task(s) mc_local with no samples file "
        "of its run (not read)"
    ) in _choices(table_read)
