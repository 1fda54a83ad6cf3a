"""evalprism.progress: plain progress lines at a steady interval when stderr is not a terminal (a log
file), the rich bar on a terminal, nothing with -q. Run in real processes: whether stderr is a
terminal is what is under test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import HANG_LIMIT_S, run_process

from evalprism.errors import EvalprismError
from evalprism.progress import format_duration, format_rate, progress_interval

DRIVER = textwrap.dedent("""
    import time
    from evalprism.progress import progress_bar
    with progress_bar("work items", 30) as bar:
        for _ in range(30):
            time.sleep(0.05)
            bar.update(1)
""")

ANSI = re.compile(r"\x1b\[")
BAR_GLYPHS = "━╸╺…"
PLAIN = re.compile(r"^work items: (\d+)/30 \((\d+)%\), [\d.,]+/s, \d+ s elapsed(, ~\d+ s left)?$")
FINAL = re.compile(r"^work items: 30/30 \(100%\), [\d.,]+/s, done in \d+ s$")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    return {**env, **extra}


def _python(code: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, its output captured (a pipe, not a terminal), in :func:`_env` with ``extra``."""
    return run_process([sys.executable, "-c", code], env=_env(**extra))


def test_piped_stderr_gets_plain_lines_at_the_interval_and_a_final_line() -> None:
    proc = _python(DRIVER, EVALPRISM_PROGRESS_INTERVAL="0.1")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert not ANSI.search(proc.stderr) and not any(g in proc.stderr for g in BAR_GLYPHS), proc.stderr
    periodic = [PLAIN.match(line) for line in lines[:-1]]
    assert all(periodic), lines  # every line but the last is a plain progress line
    assert len(periodic) >= 2, lines  # 30 x 50 ms of work at 0.1 s: several lines, not one at the end
    counts = [int(m.group(1)) for m in periodic]
    assert counts == sorted(counts) and 0 < counts[0] < 30, counts
    assert FINAL.match(lines[-1]), lines[-1]


def test_the_default_interval_prints_only_the_final_line_of_a_short_task() -> None:
    proc = _python(DRIVER)
    assert [FINAL.match(line) is not None for line in proc.stderr.splitlines()] == [True], proc.stderr


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_a_terminal_still_gets_the_rich_bar() -> None:
    import pty

    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", DRIVER],
            stderr=slave,
            stdout=subprocess.DEVNULL,
            timeout=HANG_LIMIT_S,
            env=_env(EVALPRISM_PROGRESS_INTERVAL="0.1", COLUMNS="100"),
            check=False,
        )
        os.close(slave)
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(master)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0
    assert "━" in out and "30/30" in out, out  # rich's bar and its M/N column
    assert "done in" not in out and "elapsed," not in out, out  # no plain lines on a terminal


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_a_real_cli_run_into_a_log_reports_its_embedding(tmp_path: Path, responses_csv: Path) -> None:
    """`evalprism ecdf` with stderr piped and a cold embedding cache: 'embedding ...' is followed by
    plain progress lines naming the counts, no bar glyphs; -q prints nothing at all."""
    args = [
        sys.executable,
        "-m",
        "evalprism",
        "ecdf",
        str(responses_csv),
        "--by",
        "model",
        "--by",
        "temperature",
        "--clusters",
        "auto",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    proc = run_process([*args, "--out", str(tmp_path / "o")], env=_env(EVALPRISM_PROGRESS_INTERVAL="0.05"))
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert not ANSI.search(err) and not any(g in err for g in BAR_GLYPHS), err
    lines = err.splitlines()
    announced = next(i for i, line in enumerate(lines) if "embedding" in line and "responses" in line)
    embedding = [line for line in lines[announced + 1 :] if line.startswith("embedding (minilm): ")]
    distinct = re.search(r"embedding \(minilm\): (\d+)/(\d+) \(100%\), .*done in", embedding[-1])
    assert distinct and distinct.group(1) == distinct.group(2), embedding
    assert any(
        re.match(r"choosing K in \d+\.\.\d+ \(stability\): \d+/\d+ \(100%\), .*done in", line) for line in lines
    ), lines
    quiet = run_process([*args, "--out", str(tmp_path / "q"), "-q"], env=_env(EVALPRISM_PROGRESS_INTERVAL="0.05"))
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_a_long_single_call_shows_it_is_alive_in_a_log() -> None:
    """working(): the status line, 'still working' lines while a step without counts runs, and a final
    line only for a step that ran longer than the interval."""
    driver = textwrap.dedent("""
        import time
        from evalprism.progress import working
        with working("slow step"):
            time.sleep(1.5)
        with working("quick step"):
            pass
        with working("silent step", enabled=False):
            time.sleep(0.3)
    """)
    proc = _python(driver, EVALPRISM_PROGRESS_INTERVAL="0.3")
    lines = proc.stderr.splitlines()
    assert proc.returncode == 0 and lines[0] == "· slow step", proc.stderr
    alive = [line for line in lines if re.fullmatch(r"slow step: still working, \d+ s elapsed", line)]
    assert len(alive) >= 2 and lines[1 : len(alive) + 1] == alive, lines
    assert re.fullmatch(r"slow step: done in \d+ s", lines[len(alive) + 1]), lines
    assert lines[len(alive) + 2 :] == ["· quick step"], lines
    assert "silent" not in proc.stderr


def test_bad_interval_is_one_clear_message(monkeypatch: pytest.MonkeyPatch) -> None:
    for bad in ("soon", "0", "-5", "inf", "nan"):
        monkeypatch.setenv("EVALPRISM_PROGRESS_INTERVAL", bad)
        with pytest.raises(EvalprismError, match=r"EVALPRISM_PROGRESS_INTERVAL=.*a number above 0"):
            progress_interval()
    monkeypatch.setenv("EVALPRISM_PROGRESS_INTERVAL", "2.5")
    assert progress_interval() == 2.5
    monkeypatch.delenv("EVALPRISM_PROGRESS_INTERVAL")
    assert progress_interval() == 15.0


def test_durations_and_rates_read_as_in_a_log() -> None:
    assert [format_duration(s) for s in (0.4, 40, 89, 180, 5399, 5400)] == [
        "0 s",
        "40 s",
        "89 s",
        "3 min",
        "90 min",
        "1.5 h",
    ]
    assert [format_rate(r) for r in (85.2, 4321.0, 2.54, 0.5, 1 / 420)] == [
        "85/s",
        "4,321/s",
        "2.5/s",
        "2 s each",
        "7 min each",
    ]
