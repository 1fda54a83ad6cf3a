"""--out never destroys what evalprism did not write (issue 14, section 1).

Every command that writes a directory is run through the real CLI entry point. Refusals must exit 2
with one message naming the path, before any work, and leave the file system exactly as it was
(inputs byte-identical, no staging or probe directories left behind).
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, read_run, run_cli

from evalprism.io.outputs import STAGING_MARKER
from evalprism.p2l.simulate import simulate_topic_battles


def snapshot(root: Path) -> dict[str, str]:
    """Every path below ``root`` (hidden ones too) with the SHA-256 of its bytes ('dir' for folders)."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[key] = "link->" + os.readlink(path)
        elif path.is_dir():
            out[key] = "dir"
        else:
            out[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.fixture
def battles(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "battles.jsonl"
    path.parent.mkdir()
    simulate_topic_battles(120, seed=0).to_json(path, orient="records", lines=True)
    (path.parent / "NOTES.md").write_text("my notes\n")
    return path


def refused(args: list, capsys: pytest.CaptureFixture[str], root: Path, *needles: str) -> str:
    """Run the CLI, expect exit 2 with one error line containing ``needles``, and no change below ``root``."""
    before = snapshot(root)
    code, out, err = run_cli(args, capsys)
    assert code == 2, (code, out, err)
    assert "Traceback" not in err and err.strip().startswith("error:"), err
    assert len(err.strip().splitlines()) == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert snapshot(root) == before
    return err


# --- one refusal per command: --out is the directory holding the input --------------------------


def _command_cases(tmp: Path) -> dict[str, tuple[list, Path]]:
    """(argv, directory holding an input) for every command that writes a directory."""
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    for name in (
        "battles.jsonl",
        "responses.csv",
        "prompts.csv",
        "costs.csv",
        "correctness.csv",
        "models.csv",
        "judgments.csv",
        "qrels.txt",
        "topics.tsv",
        "passages.tsv",
    ):
        (data / name).write_text("placeholder: never read, the run is refused first\n")
    model, pool = tmp / "model", tmp / "pool"
    model.mkdir(exist_ok=True)
    pool.mkdir(exist_ok=True)
    return {
        "ecdf": (["ecdf", data / "responses.csv", "--out", data], data),
        "judges": (["judges", data / "judgments.csv", "--llm", "x", "--out", data], data),
        "judges-trec": (
            [
                "judges",
                "--qrels",
                f"h={data / 'qrels.txt'}",
                "--topics",
                data / "topics.tsv",
                "--passages",
                data / "passages.tsv",
                "--out",
                data,
            ],
            data,
        ),
        "p2l fit": (["p2l", "fit", data / "battles.jsonl", "--out", data], data),
        "p2l train": (["p2l", "train", data / "battles.jsonl", "--out", data], data),
        "p2l leaderboard": (["p2l", "leaderboard", model, data / "prompts.csv", "--out", data], data),
        "p2l leaderboard model": (["p2l", "leaderboard", model, data / "prompts.csv", "--out", model], model),
        "p2l evaluate": (["p2l", "evaluate", model, data / "battles.jsonl", "--out", data], data),
        "p2l route": (
            ["p2l", "route", model, data / "prompts.csv", "--costs", data / "costs.csv", "--out", data],
            data,
        ),
        "stem pool": (["stem", "pool", data / "correctness.csv", "--models", data / "models.csv", "--out", data], data),
        "stem locate": (["stem", "locate", pool, data / "correctness.csv", "--out", pool], pool),
        "stem audit": (
            ["stem", "audit", data / "correctness.csv", "--models", data / "models.csv", "--out", data],
            data,
        ),
        "stem plan": (["stem", "plan", pool, "--out", pool], pool),
        "stem plan stage": (
            ["stem", "plan", pool, "--plan", model, "--answers", data / "correctness.csv", "--out", model],
            model,
        ),
        "compare": (["compare", data / "correctness.csv", data / "battles.jsonl", "--out", data], data),
        "stem locate plan": (
            ["stem", "locate", pool, data / "correctness.csv", "--plan", model, "--out", model],
            model,
        ),
        "demo": (["demo", "--out", data], data),
    }


COMMANDS = [
    "ecdf",
    "judges",
    "judges-trec",
    "p2l fit",
    "p2l train",
    "p2l leaderboard",
    "p2l leaderboard model",
    "p2l evaluate",
    "p2l route",
    "stem pool",
    "stem locate",
    "stem audit",
    "stem plan",
    "stem plan stage",
    "stem locate plan",
    "compare",
    "demo",
]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_refuses_the_directory_holding_its_input(command: str, tmp_path: Path, capsys) -> None:
    args, holder = _command_cases(tmp_path)[command]
    (holder / "keep.txt").write_text("the user's file\n")
    refused([*args, "--overwrite"], capsys, tmp_path, str(holder))


# --- the rules, on the quickest command ---------------------------------------------------------


def test_missing_directory_is_created_with_its_parents(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "a" / "b" / "fit"
    code, _, err = run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["leaderboard.csv", "report.html", "run.json"]
    marker = json.loads((out / "run.json").read_text())["output"]
    from evalprism import __version__

    assert marker == {
        "kind": "p2l fit",
        "files": ["leaderboard.csv", "report.html", "run.json"],
        "evalprism": __version__,
        "format": 2,
    }
    assert [p.name for p in out.parent.iterdir()] == ["fit"]  # no staging directory left beside it


def test_empty_directory_is_used(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "empty"
    out.mkdir()
    assert run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)[0] == 0
    assert (out / "leaderboard.csv").is_file()


def test_previous_output_of_the_same_command_is_replaced(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    assert run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)[0] == 0
    assert read_run(out).options["ci"] == "sandwich"
    assert run_cli(["p2l", "fit", battles, "--out", out, "--ci", "bootstrap", "--rounds", "10", "-q"], capsys)[0] == 0
    assert read_run(out).options["ci"] == "bootstrap"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "fit"]  # the old copy is gone, nothing hidden


def test_output_of_another_command_needs_overwrite(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    assert run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)[0] == 0
    # relabel it as another command's output: same files, other kind
    run = json.loads((out / "run.json").read_text())
    run["output"]["kind"] = "stem audit"
    (out / "run.json").write_text(json.dumps(run))
    refused(["p2l", "fit", battles, "--out", out], capsys, tmp_path, "evalprism stem audit", "--overwrite")
    assert run_cli(["p2l", "fit", battles, "--out", out, "--overwrite", "-q"], capsys)[0] == 0
    assert json.loads((out / "run.json").read_text())["output"]["kind"] == "p2l fit"


def test_foreign_directory_is_refused_even_with_overwrite(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "exp"
    out.mkdir()
    (out / "NOTES.md").write_text("unrelated\n")
    (out / "results.csv").write_text("a,b\n1,2\n")
    refused(["p2l", "fit", battles, "--out", out, "--overwrite"], capsys, tmp_path, "not written by evalprism")


def test_file_added_to_an_earlier_output_is_never_deleted(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    assert run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)[0] == 0
    (out / "sub").mkdir()
    (out / "sub" / "analysis.ipynb").write_text("{}")
    refused(["p2l", "fit", battles, "--out", out, "--overwrite"], capsys, tmp_path, "sub/analysis.ipynb")


def test_input_inside_an_earlier_output_is_never_deleted(battles: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "fit"
    assert run_cli(["p2l", "fit", battles, "--out", out, "-q"], capsys)[0] == 0
    # the leaderboard itself is the input of the next run (a file the manifest lists)
    refused(["p2l", "fit", out / "leaderboard.csv", "--out", out], capsys, tmp_path, "holds the input")


@pytest.mark.parametrize("where", ["cwd", "home", "root"])
def test_working_home_and_root_directories_are_refused(
    where: str, battles: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    target = {"cwd": ".", "home": str(home), "root": "/"}[where]
    name = {"cwd": "working directory", "home": "home directory", "root": "root"}[where]
    refused(["p2l", "fit", battles, "--out", target], capsys, tmp_path, name)


def test_paths_that_are_not_directories_are_refused(battles: Path, tmp_path: Path, capsys) -> None:
    a_file = tmp_path / "file.txt"
    a_file.write_text("x\n")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "data")
    refused(["p2l", "fit", battles, "--out", a_file], capsys, tmp_path, "not a directory")
    refused(["p2l", "fit", battles, "--out", a_file / "sub"], capsys, tmp_path, "not a directory")
    refused(["p2l", "fit", battles, "--out", "/dev/null"], capsys, tmp_path, "/dev/null")
    refused(["p2l", "fit", battles, "--out", loop], capsys, tmp_path, "symbolic link")
    refused(["p2l", "fit", battles, "--out", link], capsys, tmp_path, "symbolic link")
    refused(["p2l", "fit", battles, "--out", ""], capsys, tmp_path, "--out ''")


def test_unwritable_parent_fails_before_the_analysis(battles: Path, tmp_path: Path, capsys) -> None:
    # /sys refuses new directories even to root: a real permission failure, not a simulated one
    err = refused(["p2l", "fit", battles, "--out", "/sys/evalprism-out"], capsys, tmp_path, "cannot write")
    assert "fitting" not in err


@pytest.mark.slow
def test_write_failure_midway_leaves_nothing_behind(battles: Path, tmp_path: Path) -> None:
    """The OS refuses a write during the save (here the file-size limit, as a full disk would): one
    message, exit 2, no partial output and no staging directory."""
    out = tmp_path / "fit"

    def limit_file_size() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write then fails with EFBIG instead of a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (64_000, 64_000))  # the report (plotly inline) is megabytes

    before = snapshot(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "evalprism", "p2l", "fit", str(battles), "--out", str(out), "-q"],
        capture_output=True,
        text=True,
        preexec_fn=limit_file_size,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "cannot write the output" in proc.stderr
    assert snapshot(tmp_path) == before


def _dead_pid() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=False
    )
    return int(proc.stdout)


def test_stale_staging_of_a_killed_run_is_removed_and_reported(battles: Path, tmp_path: Path, capsys) -> None:
    dead = _dead_pid()
    stale = tmp_path / f".fit.partial-{dead}-0123abcd"
    stale.mkdir()
    (stale / STAGING_MARKER).write_text(f"{dead}\n")
    (stale / "leaderboard.csv").write_text("half written")
    live = tmp_path / f".fit.partial-{os.getpid()}-0123abcd"  # a run still going on (this process)
    live.mkdir()
    (live / STAGING_MARKER).write_text(f"{os.getpid()}\n")
    lookalike = tmp_path / f".fit.partial-{dead}-89abcdef"  # evalprism's name, but not its marker
    lookalike.mkdir()
    (lookalike / "mine.txt").write_text("user's\n")
    code, _, err = run_cli(["p2l", "fit", battles, "--out", tmp_path / "fit"], capsys)
    assert code == 0, err
    assert not stale.exists() and f"removed {stale}" in err
    assert live.is_dir() and (lookalike / "mine.txt").read_text() == "user's\n"


def test_checkpoint_sibling_follows_the_same_rules(battles: Path, tmp_path: Path, capsys) -> None:
    checkpoint = tmp_path / "model.checkpoint"
    checkpoint.mkdir()
    (checkpoint / "weights.bin").write_text("someone else's\n")
    refused(["p2l", "train", battles, "--out", tmp_path / "model"], capsys, tmp_path, str(checkpoint))


def test_library_save_obeys_the_same_rules(battles: Path, tmp_path: Path) -> None:
    from evalprism import EvalprismError
    from evalprism.p2l import fit_leaderboard

    result = fit_leaderboard(pd.read_json(battles, lines=True), progress=False)
    with pytest.raises(EvalprismError, match="not written by evalprism"):
        result.save(battles.parent)
    assert (battles.parent / "NOTES.md").read_text() == "my notes\n"
    assert result.save(tmp_path / "lib") == tmp_path / "lib"


@pytest.mark.parametrize("case", ["corrupt", "file-for-dir", "dir-for-db", "unwritable"])
def test_broken_embedding_cache_fails_before_any_output(case: str, tmp_path: Path, capsys) -> None:
    from helpers import small_responses

    data = tmp_path / "r.csv"
    small_responses().to_csv(data, index=False)
    cache = tmp_path / "cache"
    if case == "corrupt":
        cache.mkdir()
        (cache / "embeddings.sqlite").write_bytes(b"this is not a database" * 100)
    elif case == "file-for-dir":
        cache.write_text("a file where the cache directory should be\n")
    elif case == "dir-for-db":
        (cache / "embeddings.sqlite").mkdir(parents=True)
    else:
        cache = Path("/sys/evalprism-cache")  # refuses new directories, even to root
    refused(
        ["ecdf", data, "--out", tmp_path / "out", "--by", "model", "--cache-dir", cache, "-q"],
        capsys,
        tmp_path,
        # a cache directory that cannot be one is refused by the one check of the cache directory (the
        # embedding and static-model caches share it); a broken database inside one by the embedding cache
        *(
            ("cannot hold evalprism's caches",)
            if case in ("file-for-dir", "unwritable")
            else ("embedding cache", "cannot be opened")
        ),
    )
