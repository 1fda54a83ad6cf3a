"""Killed runs (SIGKILL, no chance to clean up), resumed runs and processes sharing one embedding
cache: what held in the bad-input sweep of issue 14 stays so."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, wait_while_running

from evalprism.demo import DEMO_EXTRACT, demo_data_path
from evalprism.p2l.simulate import simulate_topic_battles

pytestmark = pytest.mark.slow


def evalprism(*args: object) -> list[str]:
    return [sys.executable, "-m", "evalprism", *map(str, args)]


def kill_when(proc: subprocess.Popen, ready) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds, however long the run takes to get there; fail if
    it finished first."""
    wait_while_running(ready, proc, "the run reaching the point to interrupt")
    proc.kill()
    proc.wait()


def test_train_killed_mid_run_resumes_bit_identical(tmp_path: Path, cache_dir: Path) -> None:
    battles = tmp_path / "battles.jsonl"
    simulate_topic_battles(400, seed=2).to_json(battles, orient="records", lines=True)
    # batch size 1: thousands of optimiser steps, so the run is still going when it is killed
    options = [
        "--fit",
        "adamw",
        "--epochs",
        "12",
        "--patience",
        "50",
        "--batch-size",
        "1",
        "-q",
        "--cache-dir",
        cache_dir,
    ]
    straight = tmp_path / "straight"
    subprocess.run(evalprism("p2l", "train", battles, "--out", straight, *options), check=True, timeout=HANG_LIMIT_S)

    out = tmp_path / "model"
    checkpoint = tmp_path / "model.checkpoint" / "checkpoint.pt"
    proc = subprocess.Popen(evalprism("p2l", "train", battles, "--out", out, *options))
    kill_when(proc, checkpoint.is_file)
    assert not out.exists()
    resumed = subprocess.run(
        evalprism("p2l", "train", battles, "--out", out, "--resume", *options),
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    for name in ("head.safetensors", "history.csv", "evaluation.csv", "marginal.csv"):
        assert (out / name).read_bytes() == (straight / name).read_bytes(), name
    assert not checkpoint.parent.exists()  # the finished run removes its checkpoints


def _ecdf_args(data: Path, out: Path, cache: Path) -> list[str]:
    return evalprism(
        "ecdf",
        data,
        "--out",
        out,
        "--by",
        "model",
        "--by",
        "temperature",
        "-k",
        "3",
        "--extract",
        DEMO_EXTRACT,
        "--choices",
        "choices",
        "-q",
        "--cache-dir",
        cache,
    )


def _cached_vectors(cache: Path) -> int:
    db = cache / "embeddings.sqlite"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1) as con:
            return int(con.execute("SELECT COUNT(*) FROM emb").fetchone()[0])
    except sqlite3.Error:
        return 0


def test_ecdf_killed_while_embedding_leaves_a_consistent_cache(tmp_path: Path) -> None:
    data = demo_data_path()
    cache = tmp_path / "cache"
    out = tmp_path / "out"
    proc = subprocess.Popen(_ecdf_args(data, out, cache))
    kill_when(proc, lambda: _cached_vectors(cache) > 0)  # killed between two cache writes
    assert not out.exists()
    with sqlite3.connect(cache / "embeddings.sqlite") as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rerun = subprocess.run(
        _ecdf_args(data, out, cache), capture_output=True, text=True, timeout=HANG_LIMIT_S, check=False
    )
    assert rerun.returncode == 0, rerun.stderr
    fresh = subprocess.run(
        _ecdf_args(data, tmp_path / "fresh", tmp_path / "fresh-cache"),
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    assert fresh.returncode == 0, fresh.stderr
    # the vectors written before the kill are the ones a clean run computes: same tables
    for name in ("settings.csv", "clusters.csv"):
        pd.testing.assert_frame_equal(pd.read_csv(out / name), pd.read_csv(tmp_path / "fresh" / name))


def test_three_processes_share_one_cache(tmp_path: Path) -> None:
    table = pd.read_csv(demo_data_path())
    cache = tmp_path / "cache"
    procs = []
    for i, model in enumerate(sorted(table["model"].unique())[:3]):
        part = tmp_path / f"part{i}.csv"
        # overlapping texts (every part holds the shared first question) so the writers collide
        table[(table["model"] == model) | (table["question_id"] == table["question_id"].iloc[0])].to_csv(
            part, index=False
        )
        procs.append(subprocess.Popen(_ecdf_args(part, tmp_path / f"out{i}", cache), stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=HANG_LIMIT_S)
        assert proc.returncode == 0, err
        assert "locked" not in err
    with sqlite3.connect(cache / "embeddings.sqlite") as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
