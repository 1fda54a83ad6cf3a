"""Benchmark of the judge-agreement bias map (issue 6).

1. Embedding throughput on the TREC DL 2019 + 2020 pairs (pairs/s), cold (empty cache) and cached.
2. The whole analysis (cache read, PCA, HDBSCAN, agreement overall / per cluster / per query-cluster
   cell, ΔAC1 and flags) with cached embeddings: target <= 30 s on 2 cores.
3. The AC1 kernel (value, SE, interval for every cluster in one pass) against irrCAC's ``CAC.gwet``
   called once per cluster, on 10,000 clusters; the largest difference is printed too.

Needs ``../shared/data/dl1920-llmjudge`` for 1-2 (skipped with a note when absent) and irrCAC for the
peer of 3 (``pip install --no-deps irrcac``). Always exits 0.

    python benchmarks/bench_judges.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
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
    args = parser.parse_args()
    load = os.getloadavg()
    report = Report()
    try:
        bench_kernel(report)
        bench_pipeline(report, args.quick)
    except Exception as exc:  # a benchmark reports, it never fails the caller
        report.notes.append(f"stopped early: {type(exc).__name__}: {exc}")
    report.notes.append(load_note(load))
    print_table(report, "evalprism judges: bias map pipeline and AC1 kernel")


if __name__ == "__main__":
    main()
