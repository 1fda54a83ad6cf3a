"""inspect_ai layouts users accumulate (issue 27, items 2-6 and 13): eval-set directories, several
epoch reducers, cancelled and failed runs, sample errors, reruns in one log directory, logs written
with ``--no-log-samples``.

The fixtures (tests/fixtures/harness/inspect_layouts/) are real output of inspect_ai 0.3.285 with
a scripted solver (make/inspect_layouts_task.py, make/inspect_layouts_gen.py): every answer is
known per sample and epoch, and each known answer below is checked against the log's own
``reductions`` and ``results`` too. The ``.json`` logs are read without inspect_ai; the ``.eval``
twins only where it is installed (the optional extra).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import evalprism_process, read_run

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.inspect_content import read_content
from evalprism.io.items import read_correctness

LAYOUTS = Path(__file__).parent / "fixtures" / "harness" / "inspect_layouts"
ONE = {"q1": 1, "q2": 1, "q3": 0, "q4": 1, "q5": 1, "q6": 1}  # one epoch: q3 answered 7


def _log(folder: str, task: str = "arith", ext: str = "json") -> Path:
    (path,) = list((LAYOUTS / folder).glob(f"*_{task.replace('_', '-')}_*.{ext}"))
    return path


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _scores(table, task: str | None = None) -> dict[str, int]:
    rows = table if task is None else table[table["benchmark"] == task]
    return dict(zip(rows["item_id"], rows["score"].astype(int), strict=True))


def _reduction(log: dict, reducer: str | None = None) -> dict[str, float]:
    (red,) = [r for r in log["reductions"] if (r.get("reducer") or "mean") == (reducer or "mean")]
    return {s["sample_id"]: {"C": 1.0, "I": 0.0}.get(s["value"], s["value"]) for s in red["samples"]}


def _choices(read) -> str:
    return "\n".join(read.provenance.choices)


def _eval_twin_available() -> None:
    pytest.importorskip("inspect_ai.log", reason="inspect_ai is the optional extra evalprism[inspect]")


# ---------------------------------------------------------------- item 2: eval-set directories


def test_eval_set_directory_reads_every_task_and_says_the_manifest() -> None:
    table_read = read_correctness(LAYOUTS / "eval_set_json")
    table = table_read.table
    assert _scores(table, "arith") == ONE
    assert _scores(table, "arith_epochs") == ONE  # three steady epochs: inspect's mean is 0/1
    for task in ("arith", "arith_epochs"):  # the harness's own numbers
        log = _json(_log("eval_set_json", task))
        assert _scores(table, task) == {k: int(v) for k, v in _reduction(log).items()}
        rows = table[table["benchmark"] == task]
        assert rows["score"].mean() == pytest.approx(log["results"]["scores"][0]["metrics"]["accuracy"]["value"])
    said = _choices(table_read)
    assert "inspect logs.json: eval-set manifest listing 2 log(s), not a log itself: the logs are read" in said
    assert "inspect eval-set.json: eval-set Rzp5oyysGb2gpATbsubjF9, tasks arith, arith_epochs" in said


def test_eval_set_manifest_alone_or_incomplete_set_is_said(tmp_path: Path) -> None:
    with pytest.raises(
        EvalprismError,
        match=r"logs.json is an inspect eval-set manifest file, not a log: read the "
        r"directory it is in",
    ):
        read_correctness(LAYOUTS / "eval_set_json" / "logs.json")
    shutil.copytree(LAYOUTS / "eval_set_json", tmp_path / "set")
    gone = _log("eval_set_json", "arith").name
    (tmp_path / "set" / gone).unlink()  # a set one of whose logs is missing: read what is there, say what is not
    table_read = read_correctness(tmp_path / "set")
    table = table_read.table
    assert set(table["benchmark"]) == {"arith_epochs"}
    said = _choices(table_read)
    assert f"listed but not in the directory: {gone}" in said
    assert "tasks arith, arith_epochs; no log here for: arith" in said


def test_eval_set_of_eval_archives_reads_like_the_json_set() -> None:
    _eval_twin_available()
    a, b = read_correctness(LAYOUTS / "eval_set_eval").table, read_correctness(LAYOUTS / "eval_set_json").table
    key = ["benchmark", "item_id", "score"]
    assert a.sort_values(key)[key].values.tolist() == b.sort_values(key)[key].values.tolist()


# ---------------------------------------------------------------- item 3: several epoch reducers


def test_several_reducers_are_kept_apart_and_mean_is_the_mean() -> None:
    path = _log("reducers", "arith_epochs")
    log = _json(path)
    content = read_content(path)
    assert content.reducers == {"match": ["mean", "max"]}
    mean, top = _reduction(log, "mean"), _reduction(log, "max")
    assert content.reductions[("match", "mean")] == pytest.approx(mean)
    assert mean["q2"] == pytest.approx(1 / 3) and top["q2"] == 1.0  # q2 right in epoch 1 only
    # the default reads inspect's mean (q2 1/3, q4 2/3: refused), not the max that came after it in the log
    with pytest.raises(
        EvalprismError,
        match=r"sample 'q2' scores 0.333 under inspect's 'mean' reduction over 3 runs "
        r"\(the log's other reducers: max\), not 0 or 1",
    ):
        read_correctness(path)
    every = read_correctness(path, harness=HarnessOptions(epochs="all")).table
    per = every.assign(sample=every["item_id"].str.split("#").str[0]).groupby("sample")["score"]
    assert per.mean().to_dict() == pytest.approx(mean)  # both reductions follow from the epochs read
    assert per.max().to_dict() == pytest.approx(top)
    accuracy = {s["reducer"]: s["metrics"]["accuracy"]["value"] for s in log["results"]["scores"]}
    assert per.mean().mean() == pytest.approx(accuracy["mean"]) and per.max().mean() == pytest.approx(accuracy["max"])


def test_a_log_whose_reducers_are_not_the_mean_reads_its_only_one_or_is_refused() -> None:
    only = _log("reducers_max", "arith_epochs")
    table_read = read_correctness(only)
    table = table_read.table  # Epochs(3, "max"): the reduction inspect reports is the max, said
    assert _scores(table) == {k: int(v) for k, v in _reduction(_json(only), "max").items()}
    assert _scores(table) == ONE | {"q2": 1, "q4": 1}  # right in at least one epoch
    assert "3 epoch(s): inspect's 'max' reduction over epochs, 6 items" in _choices(table_read)
    with pytest.raises(
        EvalprismError,
        match=r"scorer 'match' has several epoch reducers \(max, at_least_2\) and none is "
        "the mean: use epochs first",
    ):
        read_correctness(_log("reducers_no_mean", "arith_epochs"))


# ---------------------------------------------------------------- item 4: log status


@pytest.mark.parametrize("ext", ["json", "eval"])
def test_cancelled_run_reads_what_it_scored_and_says_the_rest(ext: str) -> None:
    if ext == "eval":
        _eval_twin_available()
    path = _log(f"cancelled_{ext}", "arith", ext)
    for epochs in ("first", "mean", "all"):
        table_read = read_correctness(path, harness=HarnessOptions(epochs=epochs))
        table = table_read.table
        assert _scores(table) == {"q1": 1, "q2": 1}  # q3 was running at Ctrl-C, q4-q6 never ran: no -1 rows
        said = _choices(table_read)
        assert "status cancelled; cancelled: 2 of 6 samples scored" in said
        assert "never answered, left out (not counted wrong): q3, q4, q5, q6" in said
    if ext == "json":
        results = _json(path)["results"]
        assert (results["total_samples"], results["completed_samples"]) == (6, 2)
        assert results["scores"][0]["metrics"]["accuracy"]["value"] == 1.0


@pytest.mark.parametrize("ext", ["json", "eval"])
def test_failed_run_reads_its_scored_epochs_and_refuses_a_mean_of_one(ext: str) -> None:
    if ext == "eval":
        _eval_twin_available()
    path = _log(f"error_{ext}", "arith_epochs", ext)
    first_read = read_correctness(path, harness=HarnessOptions(epochs="first"))
    first = first_read.table
    assert _scores(first) == ONE  # epoch 1 finished before q5 failed in epoch 2
    assert (
        "status error; error (the run failed): 10 of 18 sample-epochs scored (stopped by "
        "ValueError('scripted failure on q5 epoch 2'))"
    ) in _choices(first_read)
    every_read = read_correctness(path, harness=HarnessOptions(epochs="all"))
    every = every_read.table
    assert _scores(every) == {f"{k}#1": v for k, v in ONE.items()} | {"q1#2": 1, "q2#2": 1, "q3#2": 0, "q4#2": 1}
    assert "not answered before the run stopped, left out (not counted wrong): q5#2, q6#2" in _choices(every_read)
    with pytest.raises(EvalprismError, match=r"status error: no sample was scored in all 3 of its runs"):
        read_correctness(path)


# ---------------------------------------------------------------- item 5: sample errors


def test_sample_errors_are_no_answer_under_every_epochs_choice() -> None:
    path = _log("sample_errors", "arith_epochs")
    log = _json(path)
    reduced = _reduction(log)
    assert "q4" not in reduced  # inspect leaves a sample that failed in every epoch out of its reduction
    mean_read = read_correctness(path)
    mean = mean_read.table
    assert _scores(mean) == ONE | {"q4": -1}
    assert {k: v for k, v in _scores(mean).items() if k != "q4"} == {k: int(v) for k, v in reduced.items()}
    # inspect's accuracy is over the samples it scored: the -1 is not in it
    assert mean[mean["score"] >= 0]["score"].mean() == pytest.approx(
        log["results"]["scores"][0]["metrics"]["accuracy"]["value"]
    )
    said = _choices(mean_read)
    assert (
        "1 sample(s) errored (or unscored) in every epoch, absent from inspect's reduction, read as -1 (no answer"
        in said
    )
    assert "errored in some epochs, reduced by inspect over the others: q2 (epochs 2)" in said
    first_read = read_correctness(path, harness=HarnessOptions(epochs="first"))
    first = first_read.table
    assert _scores(first) == ONE | {"q4": -1}
    assert "1 sample error(s) read as -1 (no answer" in _choices(first_read)
    every_read = read_correctness(path, harness=HarnessOptions(epochs="all"))
    every = every_read.table
    errored = {k for k, v in _scores(every).items() if v == -1}
    assert errored == {"q4#1", "q4#2", "q4#3", "q2#2"}
    assert "4 sample error(s) read as -1" in _choices(every_read)


# ---------------------------------------------------------------- item 6: reruns in one log directory


def test_reruns_read_the_newest_complete_log_and_name_the_others(tmp_path: Path) -> None:
    table_read = read_correctness(LAYOUTS / "reruns")
    table = table_read.table
    newest = "2026-11-25T19-17-09-00-00_arith_9k6FfNsgMnHVAdNBWqdYTw.json"
    older = "2026-11-25T19-17-06-00-00_arith_DZfJvoVE6pMbj5SGTNXFZ7.json"
    cancelled = "2026-11-25T19-17-10-00-00_arith_MtQTA8DvSA9RwhBg5UBHce.json"
    assert _scores(table, "arith") == ONE | {"q3": 1, "q5": 0}  # the rerun's answers, not the first run's
    assert _scores(table, "arith") == {k: int(v) for k, v in _reduction(_json(LAYOUTS / "reruns" / newest)).items()}
    assert _scores(table, "arith_epochs") == ONE
    said = _choices(table_read)
    assert (
        f"inspect mockllm/model on arith: 3 logs (reruns); read the newest complete one, {newest} (created "
        f"2026-11-25T19:17:09+00:00); left out: {older} (success, created 2026-11-25T19:17:06+00:00); {cancelled} "
        "(cancelled, created 2026-11-25T19:17:10+00:00)"
    ) in said
    # without the complete rerun, the first complete run is read, not the newer cancelled one
    shutil.copytree(LAYOUTS / "reruns", tmp_path / "logs")
    (tmp_path / "logs" / newest).unlink()
    table_read = read_correctness(tmp_path / "logs")
    table = table_read.table
    assert _scores(table, "arith") == ONE
    assert f"read the newest complete one, {older}" in _choices(table_read)


# ---------------------------------------------------------------- item 13: --no-log-samples


def test_logs_without_samples_read_their_reductions_and_say_so() -> None:
    one, three = _log("no_samples", "arith"), _log("no_samples", "arith_epochs")
    for path in (one, three):
        assert _json(path)["eval"]["config"]["log_samples"] is False and not _json(path).get("samples")
    table_read = read_correctness(LAYOUTS / "no_samples")
    table = table_read.table
    assert _scores(table, "arith") == ONE == {k: int(v) for k, v in _reduction(_json(one)).items()}
    assert _scores(table, "arith_epochs") == ONE == {k: int(v) for k, v in _reduction(_json(three)).items()}
    assert "no per-sample records (written with --no-log-samples): inspect's reduction read" in _choices(table_read)
    for epochs in ("first", "all"):  # one epoch: the reduction is the sample
        assert _scores(read_correctness(one, harness=HarnessOptions(epochs=epochs)).table) == ONE
        with pytest.raises(
            EvalprismError,
            match=rf"the log has no samples \(written with --no-log-samples\): epochs "
            rf"{epochs} needs them; what is there is inspect's 'mean' reduction "
            r"over 3 runs \(epochs mean\)",
        ):
            read_correctness(three, harness=HarnessOptions(epochs=epochs))


def test_cancelled_log_without_samples_reads_its_reduction_and_says_the_status() -> None:
    path = _log("no_samples_cancelled", "arith")
    assert _json(path)["results"]["completed_samples"] == 2
    table_read = read_correctness(path)
    table = table_read.table
    assert _scores(table) == {"q1": 1, "q2": 1} == {k: int(v) for k, v in _reduction(_json(path)).items()}
    assert (
        "status cancelled; cancelled: 2 of 6 samples in inspect's reduction, the others never answered (left "
        "out, not counted wrong)"
    ) in _choices(table_read)


# ---------------------------------------------------------------- the CLI: one message naming the file


def test_cli_refuses_a_manifest_and_a_failed_runs_mean_naming_the_file(tmp_path: Path) -> None:
    models = tmp_path / "models.csv"
    models.write_text("model,params,family\na,1,f\nb,2,f\nc,3,f\n", encoding="utf-8")
    for source, expected in (
        (LAYOUTS / "eval_set_json" / "logs.json", "logs.json is an inspect eval-set manifest file"),
        (
            LAYOUTS / "error_json",
            (f"{_log('error_json', 'arith_epochs').name}: status error: no sample was scored in all 3 of its runs"),
        ),
    ):
        done = evalprism_process(["stem", "audit", source, "--models", models, "--out", tmp_path / "audit"])
        assert done.returncode == 2
        message = " ".join(done.stderr.split())
        assert expected in message and "Traceback" not in done.stderr
        assert "use --epochs first" in message or "manifest" in message
        assert not (tmp_path / "audit").exists()


def test_killed_run_with_nothing_scored_is_left_out_and_said() -> None:
    killed = _log("killed", "arith")
    assert _json(killed)["status"] == "started" and not _json(killed).get("samples")  # the process died mid-run
    table_read = read_correctness(LAYOUTS / "killed")
    table = table_read.table
    assert set(table["benchmark"]) == {"arith_epochs"} and _scores(table) == ONE
    assert (
        f"inspect {killed.name}: mockllm/model on arith, status started: started (never finished) with no scored "
        "sample, left out"
    ) in _choices(table_read)
    with pytest.raises(
        EvalprismError,
        match=rf"{killed.name} \(status started\): no scored samples: the run did not "
        "finish",
    ):
        read_correctness(killed)


def test_cli_keeps_what_was_read_in_run_json(tmp_path: Path) -> None:
    """A family read by ``stem audit`` from one inspect log directory: the rerun choice and, once only a
    cancelled log is left for a model, its status are printed and kept in run.json."""
    models = tmp_path / "models.csv"
    models.write_text(
        "model,params,family\nmockllm/small,1,f\nmockllm/medium,2,f\nmockllm/large,3,f\n", encoding="utf-8"
    )
    complete = "2026-11-25T19-24-59-00-00_arith_ZgVcKFjyb4B9MDsuix2Ydw.json"
    cancelled = "2026-11-25T19-25-00-00-00_arith_mkWTuqXKfM26me98PFCtVm.json"
    shutil.copytree(LAYOUTS / "family", tmp_path / "logs")
    for step, expected in (
        ("all", f"read the newest complete one, {complete}"),
        (
            "cancelled only",
            (
                "status cancelled; cancelled: 3 of 6 samples scored; never answered, "
                "left out (not counted wrong): q4, q5, q6"
            ),
        ),
    ):
        if step == "cancelled only":
            (tmp_path / "logs" / complete).unlink()
        out = tmp_path / f"audit {step}"
        done = evalprism_process(["stem", "audit", tmp_path / "logs", "--models", models, "--out", out])
        assert done.returncode == 0, done.stderr
        assert expected in " ".join(done.stderr.split())
        read = read_run(out).provenance.choices
        assert any(expected in line for line in read)
        named = f"left out: {cancelled} (cancelled" if step == "all" else f"inspect {cancelled}: mockllm/large on arith"
        assert any(named in line for line in read)


def test_partial_credit_is_refused_naming_sample_and_scorer(tmp_path: Path) -> None:
    """The README's reader matrix row "partial-credit values: refused, naming sample and scorer": a real
    log with one sample's value turned into partial credit (a model-graded scorer's 0.5)."""
    log = json.loads(
        (Path(__file__).parent / "fixtures" / "harness" / "inspect_json" / "arith_two_scorers.json").read_text(
            encoding="utf-8"
        )
    )
    sample = log["samples"][1]
    sample["scores"]["match"]["value"] = 0.5
    path = tmp_path / "partial.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    with pytest.raises(
        EvalprismError,
        match=rf"partial.json: sample '{sample['id']}' scored 0.5 by 'match', "
        r"expected C/I/N .*partial credit is not a correctness",
    ):
        read_correctness(path, harness=HarnessOptions(scorer="match"))
    assert len(read_correctness(path, harness=HarnessOptions(scorer="includes")).table) == len(log["samples"])
