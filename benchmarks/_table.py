"""What every benchmark script shares: wall-clock timing, progress lines and the results table.

The scripts run as ``python benchmarks/bench_<x>.py``, so this module is importable as ``_table``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from rich.console import Console
from rich.table import Table

T = TypeVar("T")
_T0 = time.perf_counter()


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """Run ``fn()`` and return ``(result, wall seconds)``."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def best_of(fn: Callable[[], T], repeats: int) -> tuple[T, float]:
    """The result of ``fn()`` and its fastest wall time over ``repeats`` runs."""
    runs = [timed(fn) for _ in range(max(1, repeats))]
    return runs[-1][0], min(seconds for _, seconds in runs)


def log(message: str) -> None:
    """Progress line on stderr (the results table goes to stdout)."""
    print(f"[{time.perf_counter() - _T0:7.1f} s] {message}", file=sys.stderr, flush=True)


@dataclass
class Row:
    """One line of the results table."""

    what: str
    n: str = ""
    ours: str = ""
    peer: str = ""
    ratio: str = ""
    quality: str = ""
    target: str = ""
    status: str = ""


@dataclass
class Report:
    """Rows of the results table plus free-text notes printed under it."""

    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def section(self, title: str) -> None:
        self.rows.append(Row(what=f"[bold]{title}[/bold]"))


def status(ok: bool | None) -> str:
    """PASS / MISS, or n/a when the target does not apply to this run."""
    if ok is None:
        return "n/a"
    return "[green]PASS[/green]" if ok else "[red]MISS[/red]"


def fmt_s(seconds: float) -> str:
    if seconds < 0.1:
        return f"{seconds * 1000:,.1f} ms"
    return f"{seconds:,.2f} s" if seconds < 1000 else f"{seconds:,.0f} s"


def fmt_x(ratio: float) -> str:
    return f"{ratio:,.1f}x" if ratio < 1000 else f"{ratio:,.0f}x"


def fmt_load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def print_table(
    report: Report,
    title: str,
    quality: str = "quality vs peer",
    with_n: bool = True,
    footer: str = "speedup = peer time / evalprism time (> 1: evalprism is faster).",
    width: int = 200,
) -> None:
    """The results table, then the footer and the notes."""
    console = Console(width=width)
    table = Table(title=title, show_lines=False)
    columns = (
        [("what", "left")]
        + ([("n", "right")] if with_n else [])
        + [
            ("evalprism", "right"),
            ("peer", "right"),
            ("speedup", "right"),
            (quality, "left"),
            ("target", "left"),
            ("status", "left"),
        ]
    )
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for r in report.rows:
        cells = [r.what] + ([r.n] if with_n else []) + [r.ours, r.peer, r.ratio, r.quality, r.target, r.status]
        table.add_row(*cells)
    console.print(table)
    console.print(footer)
    for note in report.notes:
        console.print(f"note: {note}", markup=False, highlight=False)


def load_note(load_before: tuple[float, float, float]) -> str:
    """The machine's load average at the start and end of a run (shared machines are noisy)."""
    import os

    return (
        f"load average (1, 5, 15 min) at start {fmt_load(load_before)}, at end {fmt_load(os.getloadavg())} "
        f"on {os.cpu_count()} cores: other processes running meanwhile slow every timing above."
    )
