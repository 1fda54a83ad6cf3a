"""Benchmark of the judge-agreement bias map (issue 6).

1. Embedding throughput on the TREC DL 2019 + 2020 pairs (pairs/s), cold (empty cache) and cached.
2. The whole analysis (cache read, PCA, HDBSCAN, agreement overall / per cluster / per query-cluster
   cell, ΔAC1 and flags) with cached embeddings: target <= 30 s on 2 cores.
3. The AC1 kernel (value, SE, interval for every cluster in one pass) against irrCAC's ``CAC.gwet``
   called once per cluster, on 10,000 clusters; the largest difference is printed too.
4. ``--static`` (issue 43; instead of 1-3): the README's ``evalprism judges`` command on DL19 + DL20 as a
   user runs it (a subprocess) with a cold embedding cache and ``--embedder static``: wall and CPU time
   (user + sys), target <= 60 s on 2 cores. In the same run, the embedding step alone, static against
   minilm, cold, on the first ``--minilm-pairs`` pairs (MiniLM on all of them takes ~10 minutes); the
   ratio and MiniLM's time for all pairs extrapolated from it. The static model itself is distilled once
   per machine (~7 minutes for MiniLM): a model already in evalprism's cache is copied into the cold cache,
   else the first run builds it and its time says so.

Needs ``../shared/data/dl1920-llmjudge`` for 1-2 and 4 (skipped with a note when absent) and irrCAC for
the peer of 3 (``pip install --no-deps irrcac``). Always exits 0.

    python benchmarks/bench_judges.py [--quick]
    python benchmarks/bench_judges.py --static [--minilm-pairs 1000]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "dl1920-llmjudge"
JUDGES = ["gpt4o_umbrela", "gpt4_umbrela", "llama32_binary"]


def bench_pipeline(report: Report, quick: bool) -> None:
    from evalprism.io import read_table
    from evalprism.judges import DEFAULT_INSTRUCTION, JudgesOptions, analyze, pair_text
    from evalprism.judges.analysis import make_embedder

    if not DATA.exists():
        report.notes.append(f"{DATA} is absent: embedding and pipeline timings skipped")
        return
    table = read_table(DATA / "dl1920_judgments.jsonl")
    texts = [pair_text(q, d) for q, d in zip(table["query_text"], table["doc_text"], strict=True)]
    cold_texts = texts[:2000] if quick else texts
    report.section("embedding (minilm, instruction prepended)")
    with tempfile.TemporaryDirectory() as cold_dir:
        log(f"cold embedding of {len(cold_texts)} pairs")
        emb = make_embedder("minilm", DEFAULT_INSTRUCTION, cache_dir=cold_dir, progress=False)
        _, cold = timed(lambda: emb.embed(cold_texts))
        report.add(
            Row(
                "cold (empty cache)",
                f"{len(cold_texts):,}",
                fmt_s(cold),
                quality=f"{len(cold_texts) / cold:,.0f} pairs/s",
            )
        )
        _, warm = timed(
            lambda: make_embedder("minilm", DEFAULT_INSTRUCTION, cache_dir=cold_dir, progress=False).embed(cold_texts)
        )
        report.add(Row("cached", f"{len(cold_texts):,}", fmt_s(warm), quality=f"{len(cold_texts) / warm:,.0f} pairs/s"))
    cache = os.environ.get("EVALPRISM_CACHE_DIR")
    log("filling the default cache for all pairs (no-op when already cached)")
    make_embedder("minilm", DEFAULT_INSTRUCTION, cache_dir=cache, progress=True).embed(texts)
    report.section("analysis with cached embeddings")
    log(f"analyze on {len(table)} pairs")
    result, seconds = timed(
        lambda: analyze(table, JudgesOptions(human="human_label", llm=JUDGES), cache_dir=cache, progress=False)
    )
    k = int(result.pairs["cluster"].max()) + 1
    report.add(
        Row(
            "cache read + PCA + HDBSCAN + agreement + flags",
            f"{len(table):,}",
            fmt_s(seconds),
            quality=f"{k} clusters, {len(result.query_clusters):,} query-cluster cells",
            target="<= 30 s",
            status=status(seconds <= 30),
        )
    )


def _static_model_into(cache: Path) -> str:
    """Copy the static model evalprism's own cache holds (if built) into ``cache``; what the run includes."""
    from evalprism.embed.spec import parse_spec
    from evalprism.embed.static import is_complete, static_model_dir, static_source

    built = static_model_dir(static_source(parse_spec("static", kinds=("static",))))
    if not is_complete(built):
        return "the static model's distillation (none was built on this machine)"
    shutil.copytree(built, cache / built.parent.name / built.name)
    return "not the static model's one-time distillation (copied from the machine's cache)"


def _cli_run(args: list[str], env: dict[str, str]) -> tuple[int, float, float]:
    """Exit code, wall seconds and CPU seconds (user + sys of the child) of ``python -m evalprism ARGS``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    code = subprocess.run([sys.executable, "-m", "evalprism", *args], env=env, check=False).returncode
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return code, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_static(report: Report, minilm_pairs: int) -> None:
    """``evalprism judges --embedder static`` on DL19 + DL20 with a cold cache, and static vs minilm
    embedding on a subset in the same run."""
    from evalprism.io import read_table
    from evalprism.judges import DEFAULT_INSTRUCTION, pair_text
    from evalprism.judges.analysis import make_embedder

    if not DATA.exists():
        report.notes.append(f"{DATA} is absent: the static judges run is skipped")
        return
    report.section("evalprism judges, DL19 + DL20, cold embedding cache, --embedder static")
    table = read_table(DATA / "dl1920_judgments.jsonl")
    texts = [pair_text(q, d) for q, d in zip(table["query_text"], table["doc_text"], strict=True)]
    with tempfile.TemporaryDirectory(prefix="bench-judges-static-") as work:
        cache = Path(work) / "cache"
        cache.mkdir()
        includes = _static_model_into(cache)
        command = [str(DATA / "dl1920_judgments.jsonl"), "--human", "human_label", "--llm", "gpt4o_umbrela"]
        command += ["--llm", "llama32_binary", "--embedder", "static", "--out", str(Path(work) / "out"), "-q"]
        log("evalprism judges " + " ".join(command))
        code, wall, cpu = _cli_run(["judges", *command], {**os.environ, "EVALPRISM_CACHE_DIR": str(cache)})
        report.add(
            Row(
                "evalprism judges (subprocess: import, read, embed, cluster, map, agreement, write)",
                f"{len(table):,}",
                f"{fmt_s(wall)} wall, {fmt_s(cpu)} CPU",
                quality=f"exit {code}; includes {includes}",
                target="<= 60 s wall on 2 cores",
                status=status(code == 0 and wall <= 60),
            )
        )
        subset = texts[:minilm_pairs]
        report.section(f"embedding step alone, cold, the first {len(subset):,} pairs: static vs minilm")
        seconds = {}
        for spec in ("static", "minilm"):
            cold = Path(work) / f"cold-{spec}"
            cold.mkdir()
            if spec == "static":
                _static_model_into(cold)
            embedder = make_embedder(spec, DEFAULT_INSTRUCTION, cache_dir=cold, progress=False)
            log(f"{spec}: {embedder.dim}-dimensional")  # the model loaded before the clock starts
            log(f"cold {spec} embedding of {len(subset)} pairs")
            cpu_start = time.process_time()
            _, seconds[spec] = timed(lambda embedder=embedder: embedder.embed(subset))
            cpu_used = time.process_time() - cpu_start
            report.add(
                Row(
                    f"{spec}, cold",
                    f"{len(subset):,}",
                    f"{fmt_s(seconds[spec])} wall, {fmt_s(cpu_used)} CPU",
                    quality=f"{len(subset) / seconds[spec]:,.0f} pairs/s; all {len(texts):,} pairs: "
                    f"~{fmt_s(seconds[spec] * len(texts) / len(subset))} (extrapolated)",
                )
            )
        report.add(Row("static speedup over minilm (wall)", ratio=fmt_x(seconds["minilm"] / seconds["static"])))


def bench_kernel(report: Report) -> None:
    from evalprism.stats import agreement_by_group

    n_clusters = 10_000
    rng = np.random.default_rng(0)
    sizes = rng.integers(5, 41, n_clusters)
    groups = np.repeat(np.arange(n_clusters), sizes)
    rate = rng.uniform(0.05, 0.6, n_clusters)[groups]
    human = (rng.random(groups.size) < rate).astype(np.int64)
    llm = np.where(rng.random(groups.size) < 0.85, human, 1 - human)
    report.section(f"AC1 kernel, {n_clusters:,} clusters of 5-40 pairs")
    ours, t_ours = timed(lambda: agreement_by_group(human, llm, groups, n_clusters, 2))
    try:
        import pandas as pd
        from irrCAC.raw import CAC
    except ImportError:
        report.add(Row("value + SE + CI per cluster", f"{groups.size:,} pairs", fmt_s(t_ours), "irrCAC missing"))
        report.notes.append("irrCAC is not installed: pip install --no-deps irrcac")
        return
    starts = np.r_[0, np.cumsum(sizes)]

    def peer() -> np.ndarray:
        out = np.empty((n_clusters, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for c in range(n_clusters):
                s = slice(starts[c], starts[c + 1])
                est = CAC(
                    pd.DataFrame({"h": human[s].astype(float), "m": llm[s].astype(float)}),
                    categories=[0.0, 1.0],
                    digits=30,
                ).gwet()["est"]
                out[c] = est["coefficient_value"], est["se"], *est["confidence_interval"]
        return out

    log(f"irrCAC on {n_clusters} clusters, one call each")
    ref, t_peer = timed(peer)
    diff = np.nanmax(np.abs(np.c_[ours.ac1, ours.se, ours.lo, ours.hi] - ref))
    report.add(
        Row(
            "value + SE + CI per cluster",
            f"{groups.size:,} pairs",
            fmt_s(t_ours),
            fmt_s(t_peer),
            fmt_x(t_peer / t_ours),
            f"max |diff| {diff:.1e}",
            "= irrCAC to 1e-10",
            status(diff <= 1e-10),
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="cold embedding of 2,000 pairs instead of all")
    parser.add_argument("--static", action="store_true", help="only stage 4: judges with --embedder static")
    parser.add_argument("--minilm-pairs", type=int, default=1000, help="pairs of stage 4's static vs minilm")
    args = parser.parse_args()
    load = os.getloadavg()
    report = Report()
    try:
        if args.static:
            bench_static(report, args.minilm_pairs)
        else:
            bench_kernel(report)
            bench_pipeline(report, args.quick)
    except Exception as exc:  # a benchmark reports, it never fails the caller
        report.notes.append(f"stopped early: {type(exc).__name__}: {exc}")
    report.notes.append(load_note(load))
    print_table(report, "evalprism judges: bias map pipeline and AC1 kernel")


if __name__ == "__main__":
    main()
