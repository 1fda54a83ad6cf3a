"""P2L training under torchrun (DistributedDataParallel, gloo on CPU processes): two processes train
the model one process trains (same global batch, per-epoch validation NLL to 1e-5), a run killed on
two processes resumes on one, and processes that read different battles stop with one message.

The backbone is a tiny random Qwen2 (no dropout: two processes draw no random masks one process would
draw differently), saved into the test's directory; nothing is downloaded."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import HANG_LIMIT_S, read_run, run_cli, run_process
from test_p2l_model import one_thread, tiny_causal_lm

from evalprism.io import read_table
from evalprism.p2l import P2LModel, TrainOptions, TrainResult, train_model
from evalprism.p2l.distributed import World
from evalprism.p2l.simulate import simulate_topic_battles

pytestmark = pytest.mark.slow  # launches torchrun worlds

EPOCHS, BATCH, MICRO = 4, 32, 8  # two processes: 16 battles each per step, in 2 micro-batches of 8
MESSAGE = "the processes of this torchrun world read different battles"


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A battles file and a tiny fine-tunable causal LM."""
    root = tmp_path_factory.mktemp("ddp")
    battles = simulate_topic_battles(300, seed=6)
    battles.to_json(root / "battles.jsonl", orient="records", lines=True)
    return root / "battles.jsonl", tiny_causal_lm(root / "lm", battles["prompt"].tolist())


#: a torchrun script doing what `p2l train` does, with a backbone learning rate large enough that a
#: wrong gradient all-reduce of the backbone shows in the validation loss (the CLI has no flag for it)
DRIVER = """
import sys
from evalprism.io import read_table
from evalprism.p2l import TrainOptions, TrainResult, checkpoint_dir_for, train_model

battles, lm, out = sys.argv[1:4]
target = TrainResult.claim(out, inputs=[battles])
options = TrainOptions(backbone=f"hf:{lm}", finetune=True, max_epochs=EPOCHS, batch_size=BATCH,
                       micro_batch_size=int(sys.argv[4]), backbone_lr=LR)
result = train_model(read_table(battles), options, checkpoint_dir=checkpoint_dir_for(target), progress=False)
result.save(target)
"""
LR = 1e-3


def _options(lm: Path, backbone_lr: float) -> TrainOptions:
    return TrainOptions(
        backbone=f"hf:{lm}", finetune=True, max_epochs=EPOCHS, batch_size=BATCH, backbone_lr=backbone_lr
    )


def _one_process(battles: Path, options: TrainOptions) -> TrainResult:
    """The reference: one process, the whole global batch per step, no interruption."""
    with one_thread():
        return train_model(read_table(battles), options, progress=False)


def _cli_args(battles: Path, lm: Path, out: Path, *extra: str) -> list[str]:
    """`p2l train` with the options of ``_options(lm, TrainOptions.backbone_lr)`` and a micro-batch."""
    return [
        "p2l",
        "train",
        str(battles),
        "--out",
        str(out),
        "--backbone",
        f"hf:{lm}",
        "--finetune",
        "--epochs",
        str(EPOCHS),
        "--batch-size",
        str(BATCH),
        "--micro-batch-size",
        str(MICRO),
        "-q",
        *extra,
    ]


def _torchrun(nproc: int, program: list[str], *rendezvous: str) -> list[str]:
    """A torchrun command line (``program``: ``-m evalprism ...`` or a script and its arguments)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        *(rendezvous or ("--standalone",)),
        f"--nproc-per-node={nproc}",
        *program,
    ]


ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def test_world_shards_every_global_batch_disjointly() -> None:
    """Each rank's micro-batches are a disjoint share of the global batch, the same number on every rank
    (some empty when the batch is smaller than the world), together the whole batch."""
    for size, n, micro in ((2, 32, 8), (3, 7, 2), (4, 2, None), (2, 1, 4)):
        batch = np.arange(100, 100 + n)
        shares = [World(rank, size).micro_batches(batch, micro) for rank in range(size)]
        assert len({len(s) for s in shares}) == 1
        assert all(p.size <= (micro or n) for s in shares for p in s)
        np.testing.assert_array_equal(np.concatenate([p for s in shares for p in s]), batch)


def test_two_processes_train_what_one_process_trains(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Same global batch (32: one step of 32 on one process, 2 x 2 micro-batches of 8 on two): the same
    per-epoch losses to 1e-5; rank 0 alone writes."""
    battles, lm = setup
    one = _one_process(battles, _options(lm, LR))
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.replace("EPOCHS", str(EPOCHS)).replace("BATCH", str(BATCH)).replace("LR", repr(LR)))
    out = tmp_path / "model"
    run = run_process(_torchrun(2, [str(driver), str(battles), str(lm), str(out), str(MICRO)]), tmp_path, ENV)
    assert run.returncode == 0, run.stderr[-3000:]
    two, history = pd.read_csv(out / "history.csv"), one.history
    assert two["epoch"].tolist() == list(range(EPOCHS + 1))
    assert abs(history["val_nll"].iloc[-1] - history["val_nll"].iloc[0]) > 1e-2  # the model moved
    np.testing.assert_allclose(two["val_nll"], history["val_nll"], rtol=0, atol=1e-5)
    np.testing.assert_allclose(two["train_nll"], history["train_nll"], rtol=0, atol=1e-5)
    # the warm start holds when fine-tuning too: epoch 0 is the marginal leaderboard
    marginal = one.evaluation.set_index("predictor").loc["marginal", "nll"]
    assert history["val_nll"].iloc[0] == pytest.approx(marginal, abs=1e-5)
    # rank 0 alone wrote: the model directory and nothing else (checkpoints removed once it was saved)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["driver.py", "model"]
    assert read_run(out).results["processes"] == 2
    assert (out / "backbone").is_dir()


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append(int(stat.parent.name))
    return out


def _kill_tree(pid: int) -> None:
    """SIGKILL the process ``pid`` started and its descendants, as a crash would: torchrun starts each
    worker in a session of its own, so killing torchrun's process group alone leaves them running."""
    pids, todo = [], [pid]
    while todo:
        pids.append(todo.pop())
        todo.extend(_children(pids[-1]))
    for p in reversed(pids):
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGKILL)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds torchrun's workers in /proc")
def test_a_run_killed_on_two_processes_resumes_on_one(setup: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    """`torchrun -m evalprism p2l train` on two processes, killed after a checkpoint, resumed by
    `p2l train --resume` on one: the model of an uninterrupted run."""
    battles, lm = setup
    out, checkpoint = tmp_path / "model", tmp_path / "model.checkpoint" / "checkpoint.pt"
    proc = subprocess.Popen(
        _torchrun(2, ["-m", "evalprism", *_cli_args(battles, lm, out)]),
        cwd=tmp_path,
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        while not checkpoint.exists() and proc.poll() is None:  # epoch 1 finished
            time.sleep(0.005)
    finally:
        _kill_tree(proc.pid)
        _, err = proc.communicate(timeout=HANG_LIMIT_S)
    assert checkpoint.exists(), err.decode()[-3000:]
    killed_at = torch.load(checkpoint, weights_only=False)["epoch"]
    assert 1 <= killed_at < EPOCHS and not (out / "history.csv").exists()

    with one_thread():
        code, _, err = run_cli(_cli_args(battles, lm, out, "--resume"), capsys)  # one process
    assert code == 0, err
    one = _one_process(battles, _options(lm, TrainOptions.backbone_lr))
    np.testing.assert_allclose(pd.read_csv(out / "history.csv")["val_nll"], one.history["val_nll"], rtol=0, atol=1e-5)
    prompts = read_table(battles)["prompt"].tolist()[:8]
    np.testing.assert_allclose(
        P2LModel.load(out).leaderboards(prompts), one.model.leaderboards(prompts), rtol=0, atol=1e-5
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_processes_reading_different_battles_stop_with_one_message(setup: tuple[Path, Path], tmp_path: Path) -> None:
    """Two nodes of one rank each (torchrun's multi-node rendezvous), each with its own copy of the data,
    and the copies differ: every rank exits 2 with the same message and no traceback of its own, and
    nothing is written."""
    battles, lm = setup
    other = tmp_path / "other.jsonl"
    simulate_topic_battles(300, seed=7).to_json(other, orient="records", lines=True)
    port, procs = _free_port(), []
    for node, data in enumerate((battles, other)):
        logs = tmp_path / f"logs{node}"
        rendezvous = (
            "--nnodes=2",
            f"--node-rank={node}",
            "--master-addr=127.0.0.1",
            f"--master-port={port}",
            f"--log-dir={logs}",
            "--redirects=3",
        )
        program = ["-m", "evalprism", *_cli_args(data, lm, tmp_path / "model")]
        procs.append(
            subprocess.Popen(
                _torchrun(1, program, *rendezvous),
                cwd=tmp_path,
                env=ENV,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    for node, proc in enumerate(procs):
        _, launcher = proc.communicate(timeout=HANG_LIMIT_S)
        assert proc.returncode != 0 and "exitcode  : 2" in launcher, launcher[-3000:]
        rank_err = next((tmp_path / f"logs{node}").rglob("stderr.log")).read_text()
        assert rank_err.count(MESSAGE) == 1 and "Traceback" not in rank_err, rank_err
        assert "other.jsonl" in rank_err and "battles.jsonl" in rank_err
    assert not (tmp_path / "model").exists() and not (tmp_path / "model.checkpoint").exists()
