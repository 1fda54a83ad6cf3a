"""The local limits of ``evalprism judges`` and ``evalprism ecdf`` with the static encoder (issue 43, item 6).

For each size (texts: judged query-passage pairs, or responses), a synthetic input is written and the CLI
run as a user runs it (a subprocess, cold embedding cache, ``--embedder static``); the row gives its peak
memory (max RSS of the child), CPU time (user + sys) and wall time, and where a run passes the time limit
the step its progress lines last named (that is where it stops).

Peer, in the same run: the static encoder alone on the same texts (a subprocess that reads the input and
embeds exactly the texts the analysis embeds, into its own cold cache). Every analysis has to pay for that
step, so the ratio pipeline / encoder says how much of a run is the analysis past the embeddings: near 1 the
encoder is the wall, far above 1 the analysis is (ECDF's W1 distances between settings and k-medoids, the
paired tests; judges' HDBSCAN and the 2-D map over pairs), and its growth from one size to the next says
whether that part grows faster than the texts.

Synthetic inputs (seeded, distinct texts of 12-30 words from a 5,000-word vocabulary):
- judges: one pair per text, 50 passages per query, a human label 0-3 and two LLM judges that agree with it
  80% / 65% of the time.
- ecdf: 200 questions x (texts / 2,000) configurations x 10 responses per setting, one reference per
  question; the settings (questions x configurations) grow with the texts: 10,000 at 100k, 100,000 at 1M
  (above 20,000 settings the clustering is CLARA-style, no n x n matrix).

The static model is distilled once per machine (minutes): one already in evalprism's cache is copied into
the scratch cache, else it is built there before any timing.

    nice -n 10 python benchmarks/bench_limits.py [--sizes 100000,1000000] [--only judges|ecdf] [--limit 1200]
    python benchmarks/bench_limits.py --quick [--embedder static:<dir>]  # 2,000 texts: the smoke test
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table

PAIRS_PER_QUERY = 50
QUESTIONS = 200
RESPONSES_PER_SETTING = 10
INTERVAL_S = 30  # progress lines in the children's logs: the last one says where a run stopped


@dataclass(frozen=True)
class Usage:
    """What one child process used: exit code (None: killed at the limit), peak RSS, CPU and wall seconds,
    the last line it wrote on stderr and how long before its end it wrote it (a step holding the GIL
    starves the progress timer: its log goes quiet)."""

    code: int | None
    rss_mib: float
    cpu_s: float
    wall_s: float
    last_line: str
    quiet_s: float

    def cell(self) -> str:
        return f"{fmt_s(self.cpu_s)} CPU, {fmt_s(self.wall_s)} wall, {self.rss_mib:,.0f} MiB"


def _high_water_kib(pid: int) -> int:
    """The process's peak resident memory so far (``VmHWM``, KiB; 0 once it is gone). Unlike
    ``ru_maxrss``, it starts afresh at ``exec``: it never counts the forked copy of this script."""
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def measure(command: list[str], env: dict[str, str], log_path: Path, limit_s: float) -> Usage:
    """Run ``command`` and read its own resource usage: CPU from ``os.wait4`` (this child only, not
    earlier ones), peak RSS from its ``VmHWM`` read every 0.2 s (``ru_maxrss`` where /proc is absent);
    killed after ``limit_s`` seconds of wall time."""
    start = time.perf_counter()
    peak_kib = 0
    with log_path.open("w", encoding="utf-8") as err:
        child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
        killed = False
        while True:
            peak_kib = max(peak_kib, _high_water_kib(child.pid))
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                break
            if not killed and time.perf_counter() - start > limit_s:
                child.kill()
                killed = True
            time.sleep(0.2)
    wall = time.perf_counter() - start
    quiet = time.time() - log_path.stat().st_mtime
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: keep Popen from waiting again
    lines = [line for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    return Usage(
        None if killed else child.returncode,
        (peak_kib or usage.ru_maxrss) / 1024,
        usage.ru_utime + usage.ru_stime,
        wall,
        lines[-1].strip() if lines else "",
        quiet,
    )


def _words(rng: np.random.Generator, n: int, low: int, high: int) -> list[str]:
    vocabulary = np.array([f"w{i}" for i in range(5000)])
    lengths = rng.integers(low, high + 1, n)
    flat = vocabulary[rng.integers(0, vocabulary.size, int(lengths.sum()))]
    cuts = np.cumsum(lengths)[:-1]
    return [f"{i} " + " ".join(part) for i, part in enumerate(np.split(flat, cuts))]  # the index keeps them distinct


def judges_input(n: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    queries = max(1, n // PAIRS_PER_QUERY)
    query_of = np.arange(n) % queries
    query_text = _words(rng, queries, 5, 10)
    human = rng.integers(0, 4, n)

    def judge(agree: float) -> np.ndarray:
        return np.where(rng.random(n) < agree, human, rng.integers(0, 4, n))

    pd.DataFrame(
        {
            "query_id": query_of.astype(str),
            "doc_id": np.arange(n).astype(str),
            "query_text": [query_text[q] for q in query_of],
            "doc_text": _words(rng, n, 12, 30),
            "human_label": human,
            "judge_a": judge(0.8),
            "judge_b": judge(0.65),
        }
    ).to_parquet(path)


def ecdf_input(n: int, path: Path) -> None:
    rng = np.random.default_rng(0)
    questions = min(QUESTIONS, max(2, n // (2 * RESPONSES_PER_SETTING)))
    configurations = max(2, n // (questions * RESPONSES_PER_SETTING))
    rows = questions * configurations * RESPONSES_PER_SETTING
    question = np.repeat(np.arange(questions), configurations * RESPONSES_PER_SETTING)
    configuration = np.tile(np.repeat(np.arange(configurations), RESPONSES_PER_SETTING), questions)
    references = _words(rng, questions, 3, 8)
    pd.DataFrame(
        {
            "question_id": question.astype(str),
            "model": [f"m{c}" for c in configuration],
            "response": _words(rng, rows, 12, 30),
            "references": [[references[q]] for q in question],
        }
    ).to_parquet(path)


def cli_args(kind: str, data: Path, out: Path, spec: str) -> list[str]:
    common = ["--embedder", spec, "--out", str(out)]
    if kind == "judges":
        return ["judges", str(data), "--human", "human_label", "--llm", "judge_a", "--llm", "judge_b", *common]
    return ["ecdf", str(data), "--by", "model", "--clusters", "8", *common]


def encode_only(kind: str, data: Path, cache: Path, spec: str) -> None:
    """The peer (run as a child): embed the texts ``kind``'s analysis embeds, nothing else."""
    from evalprism.embed import get_embedder
    from evalprism.judges.analysis import DEFAULT_INSTRUCTION, make_embedder, pair_text

    table = pd.read_parquet(data)
    if kind == "judges":
        texts = [pair_text(q, d) for q, d in zip(table["query_text"], table["doc_text"], strict=True)]
        make_embedder(spec, DEFAULT_INSTRUCTION, cache_dir=cache, progress=False).embed(texts)
    else:
        texts = table["response"].tolist() + sorted({r for refs in table["references"] for r in refs})
        get_embedder(spec, cache_dir=cache, progress=False).embed(texts)


def static_model_into(cache: Path, spec: str) -> str:
    """The static model ``spec`` names in ``cache``: copied from evalprism's own cache, else built there
    (not timed)."""
    from evalprism.embed import get_embedder
    from evalprism.embed.spec import parse_spec
    from evalprism.embed.static import is_complete, static_model_dir, static_source

    built = static_model_dir(static_source(parse_spec(spec, kinds=("static",))))
    if is_complete(built):
        shutil.copytree(built, cache / built.parent.name / built.name)
        return "copied from this machine's cache"
    log("building the static model into the scratch cache (once; minutes)")
    os.environ["EVALPRISM_CACHE_DIR"] = str(cache)
    get_embedder(spec, cache_dir=cache, progress=True).embed(["warm-up"])
    return "built for this run"


def fresh_cache(model: Path, into: Path) -> Path:
    """A cold embedding cache holding only the static model."""
    shutil.copytree(model, into, ignore=shutil.ignore_patterns("embeddings.sqlite*"))
    return into


def bench_size(report: Report, kind: str, n: int, work: Path, model: Path, limit_s: float, spec: str) -> None:
    data = work / f"{kind}-{n}.parquet"
    log(f"{kind}: writing {n:,} synthetic texts")
    (judges_input if kind == "judges" else ecdf_input)(n, data)
    base = {**os.environ, "EVALPRISM_PROGRESS_INTERVAL": str(INTERVAL_S)}
    run: dict[str, Usage] = {}
    for role in ("pipeline", "encoder"):
        cache = fresh_cache(model, work / f"cache-{kind}-{n}-{role}")
        env = {**base, "EVALPRISM_CACHE_DIR": str(cache)}
        if role == "pipeline":
            command = [sys.executable, "-m", "evalprism", *cli_args(kind, data, work / f"out-{kind}-{n}", spec)]
        else:
            command = [sys.executable, __file__, "--encode-only", kind, str(data), str(cache), spec]
        log(f"{kind} {n:,}: {role}: {' '.join(command[1:])}")
        run[role] = measure(command, env, work / f"{kind}-{n}-{role}.log", limit_s)
        log(f"{kind} {n:,}: {role}: exit {run[role].code}, {run[role].cell()}")
        shutil.rmtree(cache, ignore_errors=True)
    pipeline, encoder = run["pipeline"], run["encoder"]
    ended = (
        f"stopped at the {fmt_s(limit_s)} limit; last line ({fmt_s(pipeline.quiet_s)} before): {pipeline.last_line}"
        if pipeline.code is None
        else f"exit {pipeline.code}" + ("" if pipeline.code == 0 else f": {pipeline.last_line}")
    )
    report.add(
        Row(
            f"evalprism {kind}",
            f"{n:,}",
            pipeline.cell(),
            encoder.cell() if encoder.code is not None else f"stopped at the limit, {encoder.cell()}",
            fmt_x(pipeline.cpu_s / encoder.cpu_s) if encoder.cpu_s > 0 else "",
            ended,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,000 texts only (the smoke test)")
    parser.add_argument("--sizes", default="100000,1000000", help="texts per run, comma-separated")
    parser.add_argument("--only", choices=["judges", "ecdf"], help="one analysis only")
    parser.add_argument("--limit", type=float, default=1200.0, help="seconds of wall time per run before it is stopped")
    parser.add_argument("--keep", type=Path, help="write inputs, outputs and logs here (kept) instead of a temp dir")
    parser.add_argument("--embedder", default="static", help="a static model: static (default) or static:<dir>")
    parser.add_argument("--encode-only", nargs=4, metavar=("KIND", "INPUT", "CACHE", "SPEC"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.encode_only:
        kind, data, cache, spec = args.encode_only
        encode_only(kind, Path(data), Path(cache), spec)
        return
    sizes = [2000] if args.quick else [int(s) for s in args.sizes.split(",")]
    kinds = [args.only] if args.only else ["judges", "ecdf"]
    load = os.getloadavg()
    report = Report()
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as scratch:
        work = args.keep or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        model = work / "model-cache"
        model.mkdir(exist_ok=True)
        built = static_model_into(model, args.embedder)
        report.notes.append(f"--embedder {args.embedder}; the static model was {built}, not in any timing")
        try:
            for kind in kinds:
                report.section(f"{kind}: CPU (user + sys), wall and peak RSS of the child; peer: the encoder alone")
                for n in sizes:
                    bench_size(report, kind, n, work, model, args.limit, args.embedder)
        except Exception as exc:  # a benchmark reports, it never fails the caller
            report.notes.append(f"stopped early: {type(exc).__name__}: {exc}")
    report.notes.append(load_note(load))
    print_table(
        report,
        "evalprism judges / ecdf with the static encoder: local limits",
        quality="how it ended",
        footer="speedup column = pipeline CPU / encoder CPU: how many times the encoding step the whole run costs.",
    )


if __name__ == "__main__":
    main()
