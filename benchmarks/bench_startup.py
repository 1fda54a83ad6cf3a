"""Benchmark command start-up: wall time of small CLI runs against the import chain they used to pay for.

What is compared, and why:

* **The commands.** ``evalprism --help``, ``evalprism --version`` (``evalprism version`` in trees
  older than the root option), ``evalprism p2l fit`` on 120 simulated battles and ``evalprism stem
  pool`` on a 300-item simulated family, each run as a user runs it: a fresh process of the
  installed console script, output into a new directory. On inputs this small nearly all of the
  time is start-up, i.e. imports.
* **Refused inputs** (issue 38), beside ``--help``: ``evalprism ecdf nosuch.csv`` (a missing file) and
  ``evalprism p2l leaderboard nosuch_model prompts.txt`` (a missing model directory, the command with
  the heaviest stack); each must exit 2 with its message. They used to import scipy, scikit-learn (and
  for P2L torch) before the input was checked; now they should cost about what ``--help`` does.
* **The peer.** ``python -c "import torch, sklearn"``: what every ``p2l`` command imported before
  the packages became lazy (``evalprism.p2l`` pulled in torch through the pairwise models and
  scikit-learn plus kmedoids through ``evalprism.stats``). A command that is faster than this
  peer alone cannot be paying for that chain any more.

Each command and the peer run ``--repeats`` times (default 5), in rounds of one run each so that
load changes hit all alike; the table shows medians of wall time, the notes medians of CPU time
(user + sys of the process), which other processes on a busy machine disturb less. Run ``python benchmarks/bench_startup.py`` from the
repository root inside the project virtualenv (a few minutes on a loaded machine).
``--baseline-src DIR`` adds the same commands with evalprism imported from another tree's ``src``
folder, run in the same rounds: a before/after comparison under the same load. The script prints
one table and always exits 0; there are no targets, only the ratios.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table

PEER = [sys.executable, "-c", "import torch, sklearn"]


def children_cpu() -> float:
    """CPU seconds (user + sys) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(argv: list[str], env: dict[str, str] | None = None, code: int = 0) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``argv``; a run that does not exit with ``code`` (0, or 2 for a
    refused input) is an error, not a fast time."""
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != code:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}, expected {code}:\n{done.stderr}")
    return seconds, children_cpu() - cpu


def wall(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one successful run of ``argv``."""
    return timed_run(argv, env)[0]


def make_inputs(work: Path) -> tuple[Path, Path, Path]:
    """120 simulated battles and a 300-item simulated family (correctness + model metadata); and a
    prompt list for the refused ``p2l leaderboard`` (its model directory is what is missing)."""
    from evalprism.p2l.simulate import simulate_topic_battles
    from evalprism.stem.simulate import simulate_family

    battles = work / "battles.jsonl"
    simulate_topic_battles(120, seed=0).to_json(battles, orient="records", lines=True)
    correctness, meta = simulate_family(n_items=300, seed=0)
    corr_path, meta_path = work / "correctness.csv", work / "models.csv"
    correctness.to_csv(corr_path, index=False)
    meta.to_csv(meta_path, index=False)
    (work / "prompts.txt").write_text("What is 2 + 2?\n")
    return battles, corr_path, meta_path


def tree_env(src: Path | None) -> dict[str, str] | None:
    """The environment that makes the console script import evalprism from ``src`` (None: as installed)."""
    if src is None:
        return None
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(src.resolve()), os.environ.get("PYTHONPATH", "")])}


def version_flag(exe: str, env: dict[str, str] | None) -> str:
    """``--version`` if the root command has it, else the older ``version`` subcommand."""
    probe = subprocess.run([exe, "--version"], capture_output=True, text=True, env=env, check=False)
    return "--version" if probe.returncode == 0 else "version"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command (median reported)")
    parser.add_argument(
        "--baseline-src",
        type=Path,
        default=None,
        help="also time the commands with evalprism imported from this src folder, e.g. of "
        "`git archive <rev> src | tar -x -C /tmp/base` (/tmp/base/src): before and after in one run",
    )
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    exe = str(Path(sys.executable).with_name("evalprism"))
    trees = {"": None} | ({" (before)": tree_env(args.baseline_src)} if args.baseline_src else {})
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        battles, correctness, meta = make_inputs(work)
        runs = iter(range(1_000_000))

        def out() -> str:
            return str(work / f"out-{next(runs)}")  # a fresh directory per run: outputs are never overwritten

        # name -> (command line, environment, the exit code it must end with)
        commands: dict[str, tuple[Callable[[], list[str]], dict[str, str] | None, int]] = {}
        for tag, env in trees.items():
            version = version_flag(exe, env)
            commands |= {
                f"evalprism --help{tag}": (lambda: [exe, "--help"], env, 0),
                f"evalprism {version}{tag}": (lambda version=version: [exe, version], env, 0),
                f"evalprism ecdf nosuch.csv (refused: no such file){tag}": (
                    lambda: [exe, "ecdf", str(work / "nosuch.csv"), "--out", out()],
                    env,
                    2,
                ),
                f"evalprism p2l leaderboard (refused: no such model){tag}": (
                    lambda: [
                        exe,
                        "p2l",
                        "leaderboard",
                        str(work / "nosuch_model"),
                        str(work / "prompts.txt"),
                        "--out",
                        out(),
                    ],
                    env,
                    2,
                ),
                f"evalprism p2l fit (120 battles){tag}": (
                    lambda: [exe, "p2l", "fit", str(battles), "--out", out(), "--quiet"],
                    env,
                    0,
                ),
                f"evalprism stem pool (300 items){tag}": (
                    lambda: [
                        exe,
                        "stem",
                        "pool",
                        str(correctness),
                        "--models",
                        str(meta),
                        "--family",
                        "toy",
                        "--out",
                        out(),
                    ],
                    env,
                    0,
                ),
            }
        times: dict[str, list[float]] = {name: [] for name in [*commands, "peer"]}
        cpus: dict[str, list[float]] = {name: [] for name in [*commands, "peer"]}
        wall(PEER)  # warm the file cache for every side once
        for make, env, code in commands.values():
            timed_run(make(), env, code)
        for r in range(args.repeats):
            log(f"round {r + 1}/{args.repeats}")
            for name, (make, env, code) in commands.items():
                seconds, cpu = timed_run(make(), env, code)
                times[name].append(seconds)
                cpus[name].append(cpu)
            seconds, cpu = timed_run(PEER)
            times["peer"].append(seconds)
            cpus["peer"].append(cpu)
    peer = statistics.median(times["peer"])
    report = Report()
    for name in commands:
        ours = statistics.median(times[name])
        report.add(
            Row(
                what=name, ours=fmt_s(ours), peer=fmt_s(peer), ratio=fmt_x(peer / ours), quality="import torch, sklearn"
            )
        )
    report.notes += [
        f"medians of {args.repeats} runs each; every run a fresh process, in rounds of one run of "
        f"each command; python {sys.version.split()[0]}",
        load_note(load_before),
        "CPU (user + sys), medians: "
        + ", ".join(f"{name}: {fmt_s(statistics.median(cpus[name]))}" for name in [*commands, "peer"]),
    ]
    if args.baseline_src:
        gains = ", ".join(
            f"{name}: {fmt_x(statistics.median(times[name + ' (before)']) / statistics.median(times[name]))}"
            for name in commands
            if name + " (before)" in times
        )
        report.notes.append(
            f"(before): evalprism imported from {args.baseline_src.resolve()}; speedup of this tree over it: {gains}"
        )
    print_table(
        report,
        "Command start-up (fresh process, tiny inputs)",
        quality="peer command",
        with_n=False,
        footer="speedup = peer time / command time (> 1: the whole command is faster than the old import chain).",
    )


if __name__ == "__main__":
    main()
