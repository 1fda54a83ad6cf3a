"""Reading what harnesses really write (issue 19): lm-evaluation-harness multi-task runs with
per-task metric and filter, model names from the directory layout, inspect_ai scorers, epochs and
JSON logs, directories mixing both.

The fixtures are real output of lm-eval 0.4.13 and inspect_ai 0.3.285 (tests/fixtures/harness/
README.md says how they were made). Known answers come from how they were made (lm-eval's dummy
model answers ``lol`` to every generation, so ``gen_local``'s scores follow from its targets;
inspect's mockllm answered preset strings) and from the tools' own aggregates in the same files
(lm-eval's ``results_*.json`` means, inspect's ``results`` accuracy and ``reductions``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest
from helpers import evalprism_process, lm_eval_local_tasks, read_run, run_lm_eval_dummy, run_process

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions, parse_assignments
from evalprism.io.items import read_correctness

FIXTURES = Path(__file__).parent / "fixtures" / "harness"
LM_EVAL = FIXTURES / "lm_eval"
STRICT = [1, 0, 0, 1, 0, 1]  # gen_local targets lol, l, x, lol, l, lol against the dummy's "lol"
FLEXIBLE = [0, 1, 0, 0, 1, 0]  # regex (l+) extracts "l"


def _scores(table, model: str, task: str) -> list[int]:
    rows = table[(table["model"] == model) & (table["benchmark"] == task)]
    return rows.sort_values("item_id", key=lambda s: s.astype(int))["score"].tolist()


def _lm_eval_mean(run_dir: Path, task: str, key: str) -> float:
    results = json.loads(next(run_dir.glob("results_*.json")).read_text(encoding="utf-8"))
    return results["results"][task][key]


def test_lm_eval_multi_task_directory_reads_with_per_task_defaults(tmp_path: Path) -> None:
    shutil.copytree(LM_EVAL / "run1", tmp_path / "run1")
    table_read = read_correctness(tmp_path / "run1")
    table = table_read.table
    model = "3ykv54sv"  # the dummy model's directory (its random id): the directory layout names it
    assert set(table["model"]) == {model}
    # gen_local: exact_match under strict-match (two filters, strict-match preferred)
    assert _scores(table, model, "gen_local") == STRICT
    # mc_local: acc, the first metric lm-eval lists in higher_is_better; its mean is lm-eval's own
    mc = _scores(table, model, "mc_local")
    assert len(mc) == 6 and set(mc) <= {0, 1}
    assert sum(mc) / 6 == pytest.approx(_lm_eval_mean(LM_EVAL / "run1" / model, "mc_local", "acc,none"))
    choices = "\n".join(table_read.provenance.choices)
    assert (
        "gen_local: metric exact_match (first in the results file's higher_is_better), filter strict-match" in choices
    )
    assert (
        "mc_local: metric acc (first in the results file's higher_is_better), filter none (the task's only filter)"
        in choices
    )


def test_lm_eval_per_task_overrides() -> None:
    options = HarnessOptions(metric=["mc_local=acc_norm"], lm_eval_filter=["gen_local=flexible-extract"])
    table_read = read_correctness(LM_EVAL / "run1", harness=options)
    table = table_read.table
    assert _scores(table, "3ykv54sv", "gen_local") == FLEXIBLE
    norm = _scores(table, "3ykv54sv", "mc_local")
    assert sum(norm) / 6 == pytest.approx(_lm_eval_mean(LM_EVAL / "run1" / "3ykv54sv", "mc_local", "acc_norm,none"))
    assert "metric acc_norm (chosen)" in "\n".join(table_read.provenance.choices)
    with pytest.raises(
        EvalprismError, match=r"metric bogus=acc: .* has no task 'bogus' \(tasks: gen_local, mc_local\)"
    ):
        read_correctness(LM_EVAL / "run1", harness=HarnessOptions(metric=["bogus=acc"]))
    with pytest.raises(EvalprismError, match="task 'gen_local' has no filter 'none'"):
        read_correctness(LM_EVAL / "run1", harness=HarnessOptions(lm_eval_filter=["gen_local=none"]))
    with pytest.raises(
        EvalprismError, match=r"no 'exact_match' value for task 'mc_local' \(values present: acc, acc_norm\)"
    ):
        read_correctness(LM_EVAL / "run1", harness=HarnessOptions(metric=["mc_local=exact_match"]))
    # a value without TASK= applies to every task that has it (issue 27, item 14): mc_local keeps its default
    every_read = read_correctness(LM_EVAL / "run1", harness=HarnessOptions(metric=["exact_match"]))
    every = every_read.table
    assert _scores(every, "3ykv54sv", "gen_local") == STRICT
    assert (
        "mc_local: metric acc (first in the results file's higher_is_better; the task has no 'exact_match' value)"
        in "\n".join(every_read.provenance.choices)
    )


def test_same_model_in_two_run_directories_is_named_by_the_layout() -> None:
    table = read_correctness(LM_EVAL).table  # run1/3ykv54sv, run3/org__tiny, run4/org__tiny
    assert sorted(table["model"].unique()) == ["3ykv54sv", "run3/org__tiny", "run4/org__tiny"]
    for run in ("run3", "run4"):  # each directory's rows are its own file's, against lm-eval's mean
        mc = _scores(table, f"{run}/org__tiny", "mc_local")
        assert sum(mc) / 6 == pytest.approx(_lm_eval_mean(LM_EVAL / run / "org__tiny", "mc_local", "acc,none"))
    renamed = read_correctness(
        LM_EVAL, harness=HarnessOptions(model_name=["run3/org__tiny=tiny-seed3", "3ykv54sv=dummy"])
    ).table
    assert sorted(renamed["model"].unique()) == ["dummy", "run4/org__tiny", "tiny-seed3"]
    with pytest.raises(
        EvalprismError,
        match=r"model 'tiny' has task '\w+' in two directories: .*run3/org__tiny/"
        r"samples_\S+\.jsonl and .*run4/org__tiny/samples_\S+\.jsonl",
    ):
        read_correctness(LM_EVAL, harness=HarnessOptions(model_name=["run3/org__tiny=tiny", "run4/org__tiny=tiny"]))
    with pytest.raises(
        EvalprismError,
        match=r"no lm-eval run directory 'run9' .*directories: run1/3ykv54sv, "
        "run3/org__tiny, run4/org__tiny",
    ):
        read_correctness(LM_EVAL, harness=HarnessOptions(model_name=["run9=x"]))


def test_assignment_parser() -> None:
    assert parse_assignments(["acc", "gsm8k=exact_match"], "metric") == {"*": "acc", "gsm8k": "exact_match"}
    with pytest.raises(EvalprismError, match="'gsm8k' is given twice"):
        parse_assignments(["gsm8k=acc", "gsm8k=exact_match"], "metric")
    with pytest.raises(EvalprismError, match="expected KEY=VALUE"):
        parse_assignments(["run1"], "model_name", allow_global=False)
    with pytest.raises(EvalprismError, match="both sides non-empty"):
        parse_assignments(["=acc"], "metric")


def test_inspect_json_scorers_and_epochs() -> None:
    two = FIXTURES / "inspect_json" / "arith_two_scorers.json"
    with pytest.raises(EvalprismError, match=r"several scorers \(match, includes\); choose one \(scorer NAME\)"):
        read_correctness(two)
    for scorer in ("match", "includes"):  # q3 answered 7: wrong; inspect's own accuracy 0.75
        table = read_correctness(two, harness=HarnessOptions(scorer=scorer)).table
        assert table.sort_values("item_id")["score"].tolist() == [1, 1, 0, 1]
        assert set(table["model"]) == {"mockllm/small"} and set(table["benchmark"]) == {"arith"}
    with pytest.raises(EvalprismError, match="no scores from 'f1'"):
        read_correctness(two, harness=HarnessOptions(scorer="f1"))

    three = FIXTURES / "inspect_json" / "arith_three_epochs.json"
    log = json.loads(three.read_text(encoding="utf-8"))
    with pytest.raises(EvalprismError, match=r"sample 'q2' scores 0.333 under inspect's 'mean' reduction over 3 runs"):
        read_correctness(three)  # the default: inspect's reduction, which is not 0/1 here
    first = read_correctness(three, harness=HarnessOptions(epochs="first")).table
    assert first.sort_values("item_id")["score"].tolist() == [1, 1, 1, 1]  # epoch 1 answered 2, 4, 6, 8
    every = read_correctness(three, harness=HarnessOptions(epochs="all")).table
    assert len(every) == 12 and every["item_id"].str.fullmatch(r"q\d#[123]").all()
    per_sample = every.assign(sample=every["item_id"].str.split("#").str[0]).groupby("sample")["score"].mean()
    reduced = {s["sample_id"]: s["value"] for s in log["reductions"][0]["samples"]}
    assert per_sample.to_dict() == pytest.approx(reduced)  # inspect's own mean per sample
    assert every["score"].mean() == pytest.approx(log["results"]["scores"][0]["metrics"]["accuracy"]["value"])


def test_eval_archives_read_like_their_json_conversion() -> None:
    pytest.importorskip("inspect_ai.log", reason="inspect_ai is the optional extra evalprism[inspect]")
    for name, options in (
        ("arith_two_scorers", HarnessOptions(scorer="match")),
        ("arith_three_epochs", HarnessOptions(epochs="all")),
    ):
        a = read_correctness(FIXTURES / "inspect_eval" / f"{name}.eval", harness=options).table
        b = read_correctness(FIXTURES / "inspect_json" / f"{name}.json", harness=options).table
        key = ["model", "benchmark", "item_id"]
        assert (
            a.sort_values(key)[[*key, "score"]].values.tolist() == b.sort_values(key)[[*key, "score"]].values.tolist()
        )


def test_eval_archive_without_inspect_says_how_to_read_it() -> None:
    if importlib.util.find_spec("inspect_ai") is None:
        with pytest.raises(
            EvalprismError,
            match=r"pip install 'evalprism\[inspect\]' \(or convert them: inspect log "
            "convert --to json\\)",
        ):
            read_correctness(FIXTURES / "inspect_eval" / "arith_two_scorers.eval")
    else:
        pytest.skip(
            "inspect_ai is installed: .eval archives are read (test_eval_archives_read_like_their_json_conversion)"
        )


def test_directory_mixing_lm_eval_and_inspect_is_read_whole(tmp_path: Path) -> None:
    shutil.copytree(LM_EVAL / "run1", tmp_path / "runs" / "run1")
    shutil.copy(FIXTURES / "inspect_json" / "arith_two_scorers.json", tmp_path / "runs" / "arith.json")
    (tmp_path / "runs" / "notes.json").write_text('{"owner": "me"}', encoding="utf-8")
    table_read = read_correctness(tmp_path / "runs", harness=HarnessOptions(scorer="match"))
    table = table_read.table
    assert table.groupby("model")["benchmark"].unique().map(sorted).to_dict() == {
        "3ykv54sv": ["gen_local", "mc_local"],
        "mockllm/small": ["arith"],
    }
    assert len(table) == 6 + 6 + 4
    choices = "\n".join(table_read.provenance.choices)
    assert "inspect arith.json: mockllm/small on arith, scorer match" in choices
    assert "ignored notes.json: neither an inspect_ai log nor an lm-eval results file" in choices
    # an option for one harness that the other cannot satisfy stops the whole read, not half of it
    with pytest.raises(EvalprismError, match="several scorers"):
        read_correctness(tmp_path / "runs")


def test_cli_reports_choices_and_refuses_bad_options(tmp_path: Path) -> None:
    models = tmp_path / "models.csv"
    models.write_text("model,params,family\n3ykv54sv,1,f\nrun3/org__tiny,2,f\nrun4/org__tiny,3,f\n", encoding="utf-8")
    audit = ["stem", "audit", LM_EVAL, "--models", models]
    done = evalprism_process([*audit, "--out", tmp_path / "audit"])
    assert done.returncode == 0, done.stderr
    assert "read lm-eval run3/org__tiny/gen_local: metric exact_match" in " ".join(done.stderr.split())
    assert any("filter strict-match" in line for line in read_run(tmp_path / "audit").provenance.choices)
    bad = evalprism_process([*audit, "--out", tmp_path / "bad", "--metric", "nosuch=acc"])
    assert bad.returncode == 2
    assert "--metric nosuch=acc:" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_lm_eval_generated_now_reads_like_the_fixture(tmp_path: Path) -> None:
    """Where lm-eval is installed: run it now (dummy model, the fixture's tasks) and read its output."""
    exe = shutil.which("lm_eval")
    if exe is None:
        pytest.skip("lm-eval is not installed (the fixtures above are its real output)")
    tasks = lm_eval_local_tasks(tmp_path, FIXTURES / "make")
    done = run_lm_eval_dummy(exe, tasks, tmp_path / "out", "1")
    assert done.returncode == 0, done.stderr[-2000:]
    table = read_correctness(tmp_path / "out").table
    (model,) = table["model"].unique()
    assert _scores(table, model, "gen_local") == STRICT


@pytest.mark.slow
def test_inspect_generated_now_reads_like_the_fixture(tmp_path: Path) -> None:
    """Where inspect_ai is installed: run the fixture's tasks with mockllm now and read the logs."""
    if importlib.util.find_spec("inspect_ai") is None:
        pytest.skip("inspect_ai is not installed (the fixtures above are its real output)")
    for name in ("inspect_task.py", "inspect_gen.py"):
        shutil.copy(FIXTURES / "make" / name, tmp_path / name)
    done = run_process([sys.executable, "inspect_gen.py"], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    table = read_correctness(tmp_path / "logs", harness=HarnessOptions(scorer="match", epochs="all")).table
    small = table[table["model"] == "mockllm/small"].sort_values("item_id")["score"].tolist()
    assert small == [1, 1, 0, 1]  # answered 2, 4, 7, "The answer is 8"
    large = table[table["model"] == "mockllm/large"]
    assert len(large) == 12 and large[large["item_id"].str.endswith("#1")]["score"].tolist() == [1, 1, 1, 1]
