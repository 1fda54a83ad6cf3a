"""One place that decides how progress is shown (rich bars on stderr, silent when disabled)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

_console = Console(stderr=True)


class _Silent:
    def update(self, advance: int = 1) -> None:
        pass


class _Bar:
    def __init__(self, progress: Progress, task: int) -> None:
        self._progress, self._task = progress, task

    def update(self, advance: int = 1) -> None:
        self._progress.advance(self._task, advance)


@contextlib.contextmanager
def progress_bar(description: str, total: int, enabled: bool = True) -> Iterator[_Bar | _Silent]:
    """A progress bar on stderr for ``total`` units of work; call ``.update(n)`` as work completes."""
    if not enabled or total <= 0:
        yield _Silent()
        return
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=_console, transient=False) as progress:
        yield _Bar(progress, progress.add_task(description, total=total))


def status(message: str, enabled: bool = True) -> None:
    """Print one status line on stderr (the user sees what step a long run is in)."""
    if enabled:
        _console.print(f"[dim]·[/dim] {message}", soft_wrap=True, highlight=False)
