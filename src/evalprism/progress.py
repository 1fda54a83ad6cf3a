"""One place that decides what is shown on stderr, and whether at all: progress and the lines a run says.

- Lines (:func:`say`): an error, a note, what a reader chose, what a run found, what it wrote, the
  step a run is in (:func:`status`). Each is labelled by its kind in colour, and the text after the
  label is printed literally: a file ``run[v2].csv``, a run ``ckpt[step2000]`` or a message quoting
  ``pip install 'evalprism[umap]'`` keeps its brackets (rich would read them as markup).

- Interactive (stderr is a terminal, or a Jupyter notebook): a rich progress bar.
- Not a terminal (a log file, a pipe, CI): a rich bar would print nothing until the end and then one
  line cropped to 80 columns, so a long step looks hung. Instead a plain line every
  ``EVALPRISM_PROGRESS_INTERVAL`` seconds (default 15) from a background timer, so a step whose
  units are slow (an epoch, a chunk of 512 texts) still reports, and one final line:
  ``embedding (minilm): 4,000/20,646 (19%), 85/s, 47 s elapsed, ~3 min left``.
- Disabled (``-q``, ``progress=False``): nothing.

Every long loop reports through :func:`progress_bar`; a step that learns its size only once it has
planned its work (a distance matrix in blocks, k-medoids over its starts or swap chunks) through
:func:`counted`; a single library call that cannot count (PCA, HDBSCAN, UMAP) through :func:`working`,
which says the phase and the time it has taken; :func:`status` prints the step a run is in.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from evalprism.errors import EvalprismError

INTERVAL_ENV = "EVALPRISM_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 15.0  # seconds between plain lines in a log

_console = Console(stderr=True)


class _Silent:
    def update(self, advance: int = 1) -> None:
        pass


class _Bar:
    def __init__(self, progress: Progress, task: TaskID) -> None:
        self._progress, self._task = progress, task

    def update(self, advance: int = 1) -> None:
        self._progress.advance(self._task, advance)


class _Lines:
    """Plain progress lines for a non-terminal stderr: a timer thread writes the state every
    ``interval`` seconds; :meth:`close` writes the final line. ``update`` only counts (cheap).
    ``total=None`` is a step of unknown size (one library call): its lines say how long it has run,
    and a final line only if it ran long enough to have printed one."""

    def __init__(self, description: str, total: int | None, interval: float, write: Callable[[str], None]) -> None:
        self.description, self.total, self.interval, self._write = description, total, interval, write
        self.done = 0
        self.ticks = 0
        self.quiet = False
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="evalprism-progress", daemon=True)
        self._thread.start()

    def update(self, advance: int = 1) -> None:
        self.done += advance

    def _tick(self) -> None:
        while not self._stop.wait(self.interval):
            self.ticks += 1
            self._write(self.line())

    def stop(self) -> None:
        """Stop the timer for good, with no final line (the step goes on under another display)."""
        self.quiet = True
        self._stop.set()
        self._thread.join()

    def close(self, finished: bool) -> None:
        quiet = self.quiet
        self.stop()
        if not quiet and (self.total is not None or self.ticks):
            self._write(self.line(final=True, finished=finished))

    def line(self, final: bool = False, finished: bool = True) -> str:
        """The state in words: done/total, percent, rate, elapsed, and the time left (or the total time)."""
        elapsed = time.monotonic() - self._start
        done, total = self.done, self.total
        if total is None:
            ended = "done" if finished else "stopped"
            return (
                f"{self.description}: {ended} in {format_duration(elapsed)}"
                if final
                else f"{self.description}: still working, {format_duration(elapsed)} elapsed"
            )
        parts = [f"{self.description}: {done:,}/{total:,} ({100 * done / total:.0f}%)"]
        rate = done / elapsed if elapsed > 0 and done > 0 else None
        if rate is not None:
            parts.append(format_rate(rate))
        if final:
            parts.append(f"{'done' if finished and done >= total else 'stopped'} in {format_duration(elapsed)}")
        else:
            parts.append(f"{format_duration(elapsed)} elapsed")
            if rate is not None and done < total:
                parts.append(f"~{format_duration((total - done) / rate)} left")
        return ", ".join(parts)


@contextlib.contextmanager
def _lines(description: str, total: int | None) -> Iterator[_Lines]:
    lines = _Lines(description, total, progress_interval(), _write_line)
    finished = False
    try:
        yield lines
        finished = True
    finally:
        lines.close(finished)


def format_duration(seconds: float) -> str:
    """A duration as a person reads it in a log: ``40 s``, ``3 min``, ``1.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def format_rate(per_second: float) -> str:
    """Items per second (``85/s``, ``2.5/s``), or the time per item when slower than one a second."""
    if per_second >= 10:
        return f"{per_second:,.0f}/s"
    if per_second >= 1:
        return f"{per_second:.1f}/s"
    return f"{format_duration(1 / per_second)} each"


def progress_interval() -> float:
    """Seconds between plain progress lines: ``EVALPRISM_PROGRESS_INTERVAL`` or 15."""
    raw = os.environ.get(INTERVAL_ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise EvalprismError(f"{INTERVAL_ENV}={raw!r}: expected the seconds between progress lines, a number above 0")
    return value


def interactive() -> bool:
    """True where a live bar can be drawn: stderr is a terminal (as rich sees it) or a notebook."""
    return bool(_console.is_terminal or _console.is_jupyter)


def _write_line(line: str) -> None:
    stream = sys.stderr
    stream.write(line + "\n")  # one write per line: lines from two threads never interleave mid-line
    stream.flush()


@contextlib.contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[_Bar | _Lines | _Silent]:
    """Progress of ``total`` units of work on stderr; call ``.update(n)`` as work completes. A rich bar
    on a terminal, plain lines at a steady interval otherwise, nothing when disabled."""
    if not enabled or total <= 0:
        yield _Silent()
        return
    if not interactive():
        with _lines(description, total) as lines:
            yield lines
        return
    columns = (
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_console, transient=False) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))


#: how each kind of line is labelled: its label and the label's style (a finding has none)
LABELS = {
    "error": ("error:", "bold red"),
    "note": ("note", "yellow"),
    "warning": ("warning:", "yellow"),
    "read": ("read", "dim"),
    "found": ("", ""),
    "wrote": ("wrote", "green"),
    "open": ("open", "green"),
    "status": ("·", "dim"),
    "interrupted": ("interrupted", "yellow"),
}


def say(kind: str, text: str, enabled: bool = True) -> None:
    """Print one line on stderr: its kind's label (:data:`LABELS`), then ``text`` exactly as given."""
    if not enabled:
        return
    label, style = LABELS[kind]
    line = Text.assemble((label, style), *((" ", text) if text else ())) if label else Text(text)
    _console.print(line, soft_wrap=True, highlight=False)


def warn(message: str) -> None:
    """A warning on stderr, shown even without progress output (the result may mislead, or is incomplete)."""
    say("warning", message)


def status(message: str, enabled: bool = True) -> None:
    """Print one status line on stderr (the user sees what step a long run is in)."""
    say("status", message, enabled)


@contextlib.contextmanager
def working(message: str, enabled: bool = True) -> Iterator[None]:
    """A step of unknown length (one library call: a distance matrix, k-medoids, clustering): its
    :func:`status` line, and when stderr is not a terminal a ``still working, 2 min elapsed`` line at
    the progress interval, so a log shows the run is alive, and how long the step took if it was long."""
    status(message, enabled)
    if not enabled or interactive():
        yield
        return
    with _lines(message, None):
        yield


class _Counted:
    """What :func:`counted` yields: until :meth:`start`, the phase and its elapsed time (as
    :func:`working`); from :meth:`start`, a :func:`progress_bar` of the announced total."""

    def __init__(self, description: str, unit: str, enabled: bool, stack: contextlib.ExitStack) -> None:
        self.description, self.unit, self.enabled, self._stack = description, unit, enabled, stack
        self.waiting: _Lines | None = None
        self._bar: _Bar | _Lines | _Silent | None = None

    def start(self, total: int) -> None:
        """The step's size is known: ``total`` units from now on."""
        if self._bar is not None:
            return
        if self.waiting is not None:
            self.waiting.stop()
            self.waiting = None
        self._bar = self._stack.enter_context(progress_bar(f"{self.description} ({self.unit})", total, self.enabled))

    def update(self, advance: int = 1) -> None:
        if self._bar is not None:
            self._bar.update(advance)


@contextlib.contextmanager
def counted(description: str, unit: str, enabled: bool = True) -> Iterator[_Counted]:
    """A step that knows its size only once it has planned its work (a distance matrix in blocks,
    k-medoids over its starts): its :func:`status` line, then ``still working`` lines as
    :func:`working` until the callee calls ``start(total)``, then done/total and an ETA as
    :func:`progress_bar` (``description (unit): 3/12 (25%), ..., ~2 min left``). A callee that never
    starts (a step that cannot count) reads as :func:`working`."""
    status(description, enabled)
    with contextlib.ExitStack() as stack:
        steps = _Counted(description, unit, enabled, stack)
        if enabled and not interactive():
            steps.waiting = stack.enter_context(_lines(description, None))
        yield steps
