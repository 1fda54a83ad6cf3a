"""Benchmark of the Ray engine (issue 43, item 4): the same texts embedded in process (``--engine local``)
and through a Ray Data actor pool on a local Ray instance with 2 CPUs (``--engine ray``), each with a cold
cache, in one run.

Texts: the first ``--n`` TREC DL 2019 + 2020 query-passage pairs as ``evalprism judges`` embeds them (the
default instruction prepended), minilm. Rows: the in-process encoding; Ray's start (``ray.init`` with 2
CPUs, paid once per process); the Ray encoding (two actors of one CPU each, each loading the model, then
the batches); the ratio of the two encodings; and whether the vectors are the same to the bit (they must
be). Wall times: Ray's workers are processes of the Ray instance, not of this one, so this process's CPU
time does not count their work; the load average in the footer says how busy the machine was.

Needs ``../shared/data/dl1920-llmjudge`` and ``pip install 'evalprism[ray]'``. Always exits 0.

    python benchmarks/bench_ray.py [--n 1000] [--quick]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dl1920-llmjudge"
CPUS = 2


def pair_texts(n: int) -> list[str]:
    """The first ``n`` distinct judges pairs as they are embedded (query and passage in one text)."""
    from evalprism.io import read_table
    from evalprism.judges import pair_text

    table = read_table(DATA / "dl1920_judgments.jsonl")
    texts = [pair_text(q, d) for q, d in zip(table["query_text"], table["doc_text"], strict=True)]
    return list(dict.fromkeys(texts))[:n]


def bench(report: Report, n: int) -> None:
    import ray

    from evalprism.embed import Embedder
    from evalprism.io.embed_options import EngineOptions
    from evalprism.judges import DEFAULT_INSTRUCTION

    if not DATA.exists():
        report.notes.append(f"{DATA} is absent: nothing timed")
        return
    texts = pair_texts(n)
    report.section(f"minilm, {len(texts):,} judges pairs, cold cache each")

    def embed(engine: str, cache: str) -> np.ndarray:
        embedder = Embedder(
            "minilm", instruction=DEFAULT_INSTRUCTION, cache_dir=cache, progress=True, engine=EngineOptions(engine)
        )
        return embedder.embed(texts)

    with tempfile.TemporaryDirectory() as local_cache, tempfile.TemporaryDirectory() as ray_cache:
        log(f"in process: {len(texts)} texts")
        local, local_s = timed(lambda: embed("local", local_cache))
        report.add(
            Row(
                "--engine local (this process, torch on 2 threads)",
                f"{len(texts):,}",
                fmt_s(local_s),
                quality=f"{len(texts) / local_s:,.1f} texts/s",
            )
        )
        log(f"ray.init(num_cpus={CPUS})")
        _, start_s = timed(
            lambda: ray.init(num_cpus=CPUS, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
        )
        report.add(Row(f"Ray start (local instance, {CPUS} CPUs; once per process)", "", fmt_s(start_s)))
        log(f"on Ray: {len(texts)} texts")
        on_ray, ray_s = timed(lambda: embed("ray", ray_cache))
        ray.shutdown()
    same = bool(np.array_equal(on_ray, local))
    report.add(
        Row(
            f"--engine ray ({CPUS} actors x 1 CPU: actor start, model load per actor, encoding)",
            f"{len(texts):,}",
            fmt_s(ray_s),
            peer=fmt_s(local_s),
            ratio=fmt_x(local_s / ray_s),
            quality=f"{len(texts) / ray_s:,.1f} texts/s; vectors {'identical' if same else 'DIFFERENT'} to the bit",
            target="same vectors to the bit",
            status=status(same),
        )
    )
    report.notes.append(
        f"Ray / local wall time of the encoding: {ray_s / local_s:.2f} (speedup column: local / Ray, "
        f"> 1: Ray faster); with Ray's start: {(ray_s + start_s) / local_s:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1000, help="judges pairs to embed (default 1,000)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 64 pairs")
    args = parser.parse_args()
    load = os.getloadavg()
    report = Report()
    try:
        bench(report, 64 if args.quick else args.n)
    except Exception as exc:  # a benchmark reports, it never fails the caller
        report.notes.append(f"stopped early: {type(exc).__name__}: {exc}")
    report.notes.append(load_note(load))
    print_table(report, "evalprism embedding: --engine ray against in process", quality="throughput, vectors")


if __name__ == "__main__":
    main()
