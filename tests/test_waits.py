"""The tests' own waiting (helpers.wait_while_running, serve_harness.ServiceProcess.start): they wait on
what a process signals, for as long as it runs, and fail at once, with its output, when it exits first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ProcessExited, wait_while_running


def python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code], text=True)


def test_a_ready_signal_is_waited_for_however_late_it_comes(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    proc = python(f"import time, pathlib; time.sleep(2); pathlib.Path({str(ready)!r}).touch(); time.sleep(60)")
    try:
        wait_while_running(ready.exists, proc, "the ready file")
        assert ready.exists() and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_process_that_exits_first_fails_the_wait_at_once(tmp_path: Path) -> None:
    proc = python("import sys; sys.exit(3)")
    with pytest.raises(ProcessExited, match="the ready file: the process exited with 3 first"):  # not TimeoutError
        wait_while_running((tmp_path / "never").exists, proc, "the ready file")


@pytest.mark.slow  # minutes on a loaded 2-core machine: the quick loop skips it, CI runs it
def test_a_service_that_refuses_to_start_fails_with_its_output(tmp_path: Path) -> None:
    from serve_harness import ServiceProcess

    config = tmp_path / "router.yaml"
    config.write_text("models: {a: {base_url: 'http://127.0.0.1:9/v1', cost: 1}}\nbudgett: 2\n")
    # the inputs are checked before the service loads anything: the missing model is said first
    with pytest.raises(RuntimeError, match="(?s)exited with 2 first.*no-model: no such model directory"):
        ServiceProcess(tmp_path / "no-model", config, {}).start()
