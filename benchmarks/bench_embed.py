"""Benchmark of the analyses' batch embedding (issue 43): plain sentence-transformers against OpenVINO.

In one run, the same texts are embedded by the analyses' :class:`~evalprism.embed.Embedder` (longest
first, batches of 64, no cache) in each runtime ``--embed-runtime`` offers: ``torch`` (plain
sentence-transformers, the peer) and ``openvino`` (float32). Each is loaded (and, for OpenVINO, traced
and compiled) and warmed on one text first, then timed: wall time, the process's CPU time (user + sys,
less disturbed by other processes than wall time), texts/s and the ratio. Agreement with the torch
vectors: cosine min and median over the texts, the largest absolute difference, and how many vectors
are bit-identical. OpenVINO bfloat16 (the router's) is measured for agreement and speed too, for the
record; the analyses do not offer it (not exact). The last row says what ``auto`` picks here.

Texts: half DL19 + DL20 query-passage pairs (``../shared/data/dl1920-llmjudge``, judges' instruction
prepended, a seeded sample) and half the distinct Renze responses of the packaged demo slice. Always
exits 0.

    python benchmarks/bench_embed.py [--texts 2000] [--quick] [--embedder minilm]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data" / "dl1920-llmjudge"
DEMO = REPO / "src" / "evalprism" / "demo" / "data" / "renze_slice.csv.gz"


def real_texts(n: int) -> tuple[list[str], str]:
    """``n`` distinct real texts (half judges pairs as the model reads them, half Renze responses) and
    where they came from."""
    import pandas as pd

    from evalprism.judges import DEFAULT_INSTRUCTION, pair_text

    rng = np.random.default_rng(0)
    responses = list(dict.fromkeys(pd.read_csv(DEMO)["response"].astype(str)))
    pairs: list[str] = []
    if DATA.exists():
        table = pd.read_json(DATA / "dl1920_judgments.jsonl", lines=True)
        texts = [
            f"{DEFAULT_INSTRUCTION} {pair_text(q, d)}"
            for q, d in zip(table["query_text"], table["doc_text"], strict=True)
        ]
        pairs = list(dict.fromkeys(texts))
    half = n // 2 if pairs else 0
    chosen = (
        [pairs[i] for i in sorted(rng.choice(len(pairs), size=min(half, len(pairs)), replace=False))] if half else []
    )
    rest = n - len(chosen)
    chosen += [responses[i] for i in sorted(rng.choice(len(responses), size=min(rest, len(responses)), replace=False))]
    where = f"{len(chosen) - rest} DL19+DL20 pairs, {min(rest, len(responses))} Renze responses"
    return chosen, where


def cpu_seconds() -> float:
    """This process's CPU time so far (user + sys, every thread)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(fn: Callable[[], np.ndarray]) -> tuple[np.ndarray, float, float]:
    """``fn()``'s result, wall seconds and CPU seconds."""
    import time

    wall, cpu = time.perf_counter(), cpu_seconds()
    out = fn()
    return out, time.perf_counter() - wall, cpu_seconds() - cpu


def agreement(vectors: np.ndarray, reference: np.ndarray) -> str:
    """Cosine min / median against the reference rows, the largest absolute difference, bit-identical rows."""
    cos = np.sum(vectors.astype(np.float64) * reference, axis=1) / (
        np.linalg.norm(vectors.astype(np.float64), axis=1) * np.linalg.norm(reference.astype(np.float64), axis=1)
    )
    same = int(np.all(vectors == reference, axis=1).sum())
    return (
        f"cosine min 1 - {1 - cos.min():.1e}, median 1 - {1 - np.median(cos):.1e}; max |diff| "
        f"{np.abs(vectors - reference).max():.1e}; {same}/{len(vectors)} bit-identical"
    )


def runtime_rows(report: Report, spec: str, texts: list[str]) -> None:
    """The torch and openvino float32 rows, and openvino bfloat16 for the record."""
    from evalprism.embed import Embedder, parse_spec
    from evalprism.embed.runtime import resolve_embed_runtime

    results: dict[str, tuple[np.ndarray, float, float]] = {}
    for runtime in ("torch", "openvino"):
        emb = Embedder(spec, cache_dir=False, progress=False, runtime=runtime)
        _, load_wall, _ = measure(lambda emb=emb: emb.embed(["a warm-up text, not among the timed ones"]))
        log(f"{runtime}: loaded in {load_wall:.1f} s; embedding {len(texts)} texts")
        results[runtime] = measure(lambda emb=emb: emb.embed(texts))
        report.notes.append(f"{runtime}: load (and trace, compile) and one warm-up text took {fmt_s(load_wall)}")
    reference, torch_wall, torch_cpu = results["torch"]
    report.add(
        Row("torch float32 (sentence-transformers)", f"{len(texts):,}", peer=_speed(len(texts), torch_wall, torch_cpu))
    )
    peer = (reference, torch_wall, torch_cpu)
    add_against_torch(report, "openvino float32", "(--embed-runtime openvino)", results["openvino"], peer)
    add_against_torch(report, "openvino bfloat16", "(router only, not offered)", bf16_row(spec, texts), peer)
    report.notes.append(f"auto picks {resolve_embed_runtime('auto', parse_spec(spec), 'cpu')} here")


def add_against_torch(
    report: Report,
    name: str,
    label: str,
    measured: tuple[np.ndarray, float, float],
    torch: tuple[np.ndarray, float, float],
) -> None:
    """One runtime's row against torch float32 (vectors, wall, CPU each): its speed, the ratio and the
    agreement, also as a note."""
    (vectors, wall, cpu), (reference, torch_wall, torch_cpu) = measured, torch
    report.notes.append(f"{name} against torch float32: {agreement(vectors, reference)}")
    report.add(
        Row(
            f"{name} {label}",
            f"{len(vectors):,}",
            ours=_speed(len(vectors), wall, cpu),
            ratio=f"{fmt_x(torch_wall / wall)} wall, {fmt_x(torch_cpu / cpu)} CPU",
            quality=agreement(vectors, reference),
        )
    )


def bf16_row(spec: str, texts: list[str]) -> tuple[np.ndarray, float, float]:
    """OpenVINO bfloat16 vectors of ``texts`` in the Embedder's batches (longest first, 64 a batch), timed."""
    from evalprism.embed import Embedder
    from evalprism.embed.backends import SentenceTransformerBackend, unit_rows
    from evalprism.embed.openvino_runtime import OpenVINOEncoder

    backend = Embedder(spec, cache_dir=False, progress=False).backend
    assert isinstance(backend, SentenceTransformerBackend)
    encoder = OpenVINOEncoder(backend.load(), precision="bfloat16")
    encoder.encode(["a warm-up text, not among the timed ones"])
    order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), texts[i]))

    def run() -> np.ndarray:
        out = np.empty((len(texts), backend.dimension()), dtype=np.float32)
        for start in range(0, len(order), 64):
            rows = order[start : start + 64]
            out[rows] = unit_rows(encoder.encode([texts[i] for i in rows]))
        return out

    return measure(run)


def _speed(n: int, wall: float, cpu: float) -> str:
    return f"{n / wall:,.1f} texts/s ({fmt_s(wall)} wall, {fmt_s(cpu)} CPU)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", type=int, default=2000, help="how many real texts to embed")
    parser.add_argument("--quick", action="store_true", help="64 texts: a smoke run")
    parser.add_argument("--embedder", default="minilm", help="the sentence encoder (minilm or st:<dir>)")
    args = parser.parse_args()
    load = os.getloadavg()
    report = Report()
    try:
        texts, where = real_texts(64 if args.quick else args.texts)
        report.notes.append(f"texts: {where}; mean length {np.mean([len(t) for t in texts]):,.0f} characters")
        report.section(f"embedding ({args.embedder}, batches of 64, no cache)")
        runtime_rows(report, args.embedder, texts)
    except Exception as exc:  # a benchmark reports, it never fails the caller
        report.notes.append(f"stopped early: {type(exc).__name__}: {exc}")
    report.notes.append(f"torch threads {__import__('torch').get_num_threads()}; OpenVINO: one per physical core")
    report.notes.append(load_note(load))
    print_table(
        report,
        "evalprism embedding: OpenVINO against plain sentence-transformers",
        quality="agreement with torch float32",
        footer="speedup = torch time / openvino time (> 1: openvino is faster).",
    )


if __name__ == "__main__":
    main()
