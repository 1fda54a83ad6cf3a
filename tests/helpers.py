"""Plain test helpers (imported as ``from helpers import ...``): the repository and real-data
locations, a small responses table, and the CLI run in-process. Fixtures live in conftest.py."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalprism.io.record import RunRecord

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

HANG_LIMIT_S = 1200.0
"""The tests' one wall-clock bound, on every subprocess, client request and wait: 20 minutes, which only
a hung process reaches. A slow machine never does (the suite has taken 12 times its idle time at load
16-32): tests wait on what a process signals (its exit, a file, /health answering), never on a guess
of how long that takes."""


def wait_while_running(ready: Callable[[], bool], proc: subprocess.Popen, what: str) -> None:
    """Return once ``ready()`` holds, however long that takes while ``proc`` keeps running.

    Raises :class:`ProcessExited` at once if ``proc`` exits first (the caller adds its output), and
    :class:`TimeoutError` only after :data:`HANG_LIMIT_S` of a process that runs without getting there."""
    deadline = time.monotonic() + HANG_LIMIT_S
    while not ready():
        if proc.poll() is not None:
            raise ProcessExited(f"{what}: the process exited with {proc.returncode} first")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not so after {HANG_LIMIT_S:.0f} s of the process running (a hang)")
        time.sleep(0.01)


class ProcessExited(AssertionError):
    """The process :func:`wait_while_running` waited on exited before it got ready."""


def run_process(
    argv: Sequence[object],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    preexec: Callable[[], None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``argv`` (each word as ``str``) in a child process run to its end: its stdout and stderr captured
    as text, its exit status returned (never raised), bounded by :data:`HANG_LIMIT_S`. ``env`` None
    inherits this process's environment; ``preexec`` runs in the child before it starts."""
    return subprocess.run(
        [str(word) for word in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        preexec_fn=preexec,
        check=False,
    )


def evalprism_process(args: Sequence[object]) -> subprocess.CompletedProcess[str]:
    """``python -m evalprism.cli ARGS`` in a fresh interpreter (:func:`run_process`): the console entry
    point as a user runs it, where an in-process run (:func:`run_cli`) cannot show what a process does."""
    return run_process([sys.executable, "-m", "evalprism.cli", *args])


def shared_data(name: str) -> Path:
    """A folder of ../shared/data, or skip with the reason when this checkout has none."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"real data {path} is not present (a fresh clone has no ../shared)")
    return path


def small_responses() -> pd.DataFrame:
    """3 questions x 2 models x 2 temperatures; model 'good' answers right, model 'bad' wrong.

    Setting (q3, bad, 1.0) has only 3 responses, the others 5: unequal ECDF sizes.
    """
    questions = {
        "q1": (
            ["Paris"],
            ["Paris", "Paris.", "Lyon", "Paris", "Paris"],
            ["Berlin", "Rome", "Madrid", "banana", "Berlin"],
        ),
        "q2": (
            ["Mount Fuji"],
            ["Mount Fuji", "Fuji", "Mount Fuji", "Mount Fuji,", "Mount Fuji"],
            ["computer", "Yari-ga-take", "computer", "a river", "computer"],
        ),
        "q3": (["2003"], ["2003", "2003", "2003;", "2004", "2003"], ["1999", "tomato", "1999", "1999", "1999"]),
    }
    rows = []
    for q, (refs, good, bad) in questions.items():
        for temp in ("0.0", "1.0"):
            for model, answers in (("good", good), ("bad", bad)):
                if q == "q3" and model == "bad" and temp == "1.0":
                    answers = answers[:3]
                for _i, a in enumerate(answers):
                    rows.append(
                        {
                            "question_id": q,
                            "model": model,
                            "temperature": temp,
                            "response": a,
                            "references": json.dumps(refs),
                            "group": "geo" if q != "q3" else "time",
                            "note": f"{q}-{model}",
                        }
                    )
    return pd.DataFrame(rows)


def cli_parameters() -> list[tuple[str, Any]]:
    """(command path, click parameter) of every option and argument of every evalprism command, as
    click sees them (the options typer built from the options classes' declarations)."""
    import click
    import typer.main

    from evalprism.cli import app

    found: list[tuple[str, Any]] = []

    def walk(command: click.Command, path: str) -> None:
        found.extend((path, param) for param in command.params)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return found


def choices_of(param: Any) -> tuple[str, ...] | None:
    """The values a command-line parameter offers as choices (an Enum typer lists), or None."""
    import typing
    from enum import Enum

    annotation = param.type_descriptor.annotation
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return tuple(str(m.value) for m in candidate)
    return None


def read_run(directory: str | Path) -> RunRecord:
    """The run record an output directory's ``run.json`` holds (any format evalprism reads)."""
    return RunRecord.from_json(json.loads((Path(directory) / "run.json").read_text(encoding="utf-8")))


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the evalprism console entry point in-process; return (exit code, stdout, stderr)."""
    from evalprism.cli import main

    old = sys.argv
    sys.argv = ["evalprism", *map(str, args)]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


def route_per_prompt(
    model: Path, prompts: Path, costs: Path, out: Path, capsys: pytest.CaptureFixture[str]
) -> pd.DataFrame:
    """`evalprism p2l route` at budget 1.0 held on every prompt, in-process; its routes.csv."""
    code, _, err = run_cli(
        [
            "p2l",
            "route",
            model,
            prompts,
            "--costs",
            costs,
            "--budget",
            "1.0",
            "--budget-scope",
            "prompt",
            "--out",
            out,
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    return pd.read_csv(Path(out) / "routes.csv")


class FillingDisk:
    """The decision log's file, on a disk that can fill up: while ``full``, a write puts out at most
    ``room`` more bytes (a line cut mid-way, as a real disk does) and then fails with ENOSPC."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("ab", buffering=0)
        self.full = False
        self.room = 0

    def write(self, data: bytes) -> int:
        if not self.full:
            return self.file.write(data)
        if self.room:
            written = self.file.write(bytes(data[: self.room]))
            self.room -= written
            return written
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def seek(self, offset: int, whence: int = 0) -> int:
        return self.file.seek(offset, whence)

    def truncate(self, size: int) -> int:
        return self.file.truncate(size)

    def fileno(self) -> int:
        return self.file.fileno()

    def close(self) -> None:
        self.file.close()


def run_lm_eval_dummy(
    exe: str, tasks: Path, output_path: Path, seed: str, *model: str
) -> subprocess.CompletedProcess[str]:
    """``lm_eval`` (the executable ``exe``) with its dummy model on the fixtures' local tasks mc_local and
    gen_local (``tasks``: :func:`lm_eval_local_tasks`), every sample logged to ``output_path``, offline
    and with nothing on the PATH; ``model`` adds the model's options (``--model_args ...``)."""
    args = ["--tasks", "mc_local,gen_local", "--include_path", tasks, "--log_samples", "--output_path", output_path]
    offline = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "PATH": ""}
    return run_process([exe, "--model", "dummy", *model, *args, "--seed", seed], env=offline)


def lm_eval_local_tasks(tmp_path: Path, make: Path) -> Path:
    """The fixtures' local lm-eval tasks (tests/fixtures/harness/make), their data path pointed at a
    fresh directory, so lm_eval can run them now (the tests that regenerate harness output)."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    for name in ("mc.jsonl", "gen.jsonl", "mc_local.yaml", "gen_local.yaml"):
        text = (make / name).read_text(encoding="utf-8").replace("/tmp/gen/lme/tasks", str(tasks))
        (tasks / name).write_text(text, encoding="utf-8")
    return tasks
