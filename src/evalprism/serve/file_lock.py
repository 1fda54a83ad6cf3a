"""An OS file lock around each append to the decision log, so that several services can share one log.

Replicas on one host, or the old and the new service of a restart without downtime (the README's
"Changing the config"), may append to the same decision log. Every append takes an exclusive
``flock(2)`` on the log for the one ``write`` of its line(s) (microseconds): lines of two processes
never interleave, and a write that fails and is cut back to where the file ended cuts only its own
bytes, never a line another process appended meanwhile. A reader that checks the file (the start-up
check :func:`~evalprism.serve.decisions.not_a_decision_log`) takes a shared lock, so it never reads half
a line. ``flock`` is advisory: it binds evalprism's writers only. Where the operating system has no
``fcntl`` (Windows) no lock is taken, and one service per log is the rule there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class HasFileno(Protocol):
    def fileno(self) -> int: ...


@contextmanager
def locked(file: HasFileno, *, shared: bool = False) -> Iterator[None]:
    """Hold ``file``'s exclusive lock (``shared``: a shared one, for reading) for the ``with`` block."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    fd = file.fileno()
    fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
