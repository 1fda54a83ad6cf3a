"""Long ECDF steps report done/total and an ETA (issue 43, item 3): the W1 matrix over its blocks, k-medoids
over its FasterPAM runs, the CLARA-style search over its samples and swap passes; and listening changes no
result. The display runs in a real process whose stderr is a pipe (a log), as in test_progress.py."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from test_progress import ANSI, _python

from evalprism.ecdf import analyze
from evalprism.ecdf.options import EcdfOptions
from evalprism.stats import w1_matrix
from evalprism.stats.clara import CLARA_SAMPLES, SWAP_PASSES, SortedEcdfs, clara_ecdfs
from evalprism.stats.kmedoids import RANDOM_STARTS, kmedoids

#: 600 ECDFs of sizes 5, 6 and 7: one block per pair of sizes (6), each far below the block's memory cap
DRIVER = textwrap.dedent("""
    import time
    import numpy as np
    from evalprism.progress import counted
    from evalprism.stats import w1_matrix
    from evalprism.stats.clara import SortedEcdfs, clara_ecdfs
    from evalprism.stats.kmedoids import kmedoids

    class Slow:
        '''The real listener, with each unit made 0.15 s longer: the step outlasts several intervals.'''
        def __init__(self, inner):
            self.inner = inner
        def start(self, total):
            self.inner.start(total)
        def update(self, advance=1):
            time.sleep(0.15)
            self.inner.update(advance)

    rng = np.random.default_rng(0)
    samples = [rng.random(5 + i % 3) for i in range(600)]
    with counted("distances between 600 ECDFs", "blocks") as steps:
        dist = w1_matrix(samples, steps=Slow(steps))
    with counted("k-medoids (fasterpam) with K=3", "runs") as steps:
        kmedoids(dist, 3, steps=Slow(steps))
    with counted("k-medoids (CLARA-style) with K=3", "samples and swap passes") as steps:
        clara_ecdfs(SortedEcdfs(samples), 3, steps=Slow(steps))
""")


def _estimates(lines: list[str], step: str, total: int) -> tuple[list[int], list[str]]:
    """The counts of ``step``'s periodic lines that carry an ETA, and its final lines."""
    prefix = re.escape(step)
    periodic = re.compile(rf"^{prefix}: (\d+)/{total} \(\d+%\), [^,]+, \d+ s elapsed, ~\d+ s left$")
    final = re.compile(rf"^{prefix}: {total}/{total} \(100%\), [^,]+, done in \d+ s$")
    counts = [int(m.group(1)) for m in map(periodic.match, lines) if m]
    return counts, [line for line in lines if final.match(line)]


def test_blocked_distances_and_kmedoids_print_done_total_and_an_eta_in_a_log() -> None:
    proc = _python(DRIVER, EVALPRISM_PROGRESS_INTERVAL="0.05")
    assert proc.returncode == 0, proc.stderr
    assert not ANSI.search(proc.stderr), proc.stderr
    lines = proc.stderr.splitlines()
    steps = [
        ("distances between 600 ECDFs (blocks)", 6),  # sizes 5, 6, 7: 6 pairs of sizes, one block each
        ("k-medoids (fasterpam) with K=3 (runs)", 1 + RANDOM_STARTS),  # BUILD and the random starts (n <= 2000)
        ("k-medoids (CLARA-style) with K=3 (samples and swap passes)", CLARA_SAMPLES + SWAP_PASSES),
    ]
    for step, total in steps:
        counts, final = _estimates(lines, step, total)
        assert counts and all(0 < c < total for c in counts), (step, lines)
        assert counts == sorted(counts), (step, counts)
        assert len(final) == 1, (step, lines)
    assert lines[0] == "· distances between 600 ECDFs", lines  # the phase is named before its first count


def test_listening_to_the_kernels_changes_no_result() -> None:
    class Tally:
        """Counts what a kernel announces and reports."""

        def __init__(self) -> None:
            self.total, self.done = 0, 0

        def start(self, total: int) -> None:
            self.total = total

        def update(self, advance: int = 1) -> None:
            self.done += advance

    rng = np.random.default_rng(1)
    samples = [rng.normal(i % 4, 1, 3 + i % 5) for i in range(2500)]  # 2,500 > 2,000: no BUILD start
    tally = Tally()
    dist = w1_matrix(samples, steps=tally)
    assert np.array_equal(dist, w1_matrix(samples)) and tally.done == tally.total == 15  # 5 sizes: 15 pairs
    for n in (600, 2500):
        heard = Tally()
        a, b = kmedoids(dist[:n, :n], 4, seed=3, steps=heard), kmedoids(dist[:n, :n], 4, seed=3)
        assert np.array_equal(a.medoids, b.medoids) and np.array_equal(a.labels, b.labels) and a.loss == b.loss
        assert heard.done == heard.total == RANDOM_STARTS + (n <= 2000)
    heard = Tally()
    ecdfs = SortedEcdfs(samples)
    (a, to_a), (b, to_b) = clara_ecdfs(ecdfs, 4, seed=2, steps=heard), clara_ecdfs(ecdfs, 4, seed=2)
    assert np.array_equal(a.medoids, b.medoids) and np.array_equal(to_a, to_b) and a.loss == b.loss
    assert heard.done == heard.total == CLARA_SAMPLES + SWAP_PASSES  # an early stop reports the passes left


def test_an_ecdf_run_writes_the_same_files_with_and_without_progress(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EVALPRISM_PROGRESS_INTERVAL", "0.01")
    rng = np.random.default_rng(0)
    table = pd.DataFrame(
        [
            {"question_id": q, "cfg": c, "score": v}
            for q in range(30)
            for c, base in (("a", 0.2), ("b", 0.5), ("c", 0.8), ("d", 0.5))
            for v in base + rng.normal(0, 0.1, 3 + q % 4)
        ]
    )
    for progress in (True, False):
        analyze(table, EcdfOptions(by=["cfg"], clusters="auto", seed=1), progress=progress).save(
            tmp_path / str(progress)
        )
    written = sorted(p.name for p in (tmp_path / "True").iterdir())
    assert "clusters.csv" in written and "report.html" in written, written
    for name in written:
        assert (tmp_path / "True" / name).read_bytes() == (tmp_path / "False" / name).read_bytes(), name
