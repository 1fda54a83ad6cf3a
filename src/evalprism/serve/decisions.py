"""The decision log: one JSON line per routing decision, appended and flushed as it is made.

Each line is handed to the operating system before the response goes out (one ``write`` of a
few hundred bytes, microseconds), so neither load nor a SIGTERM, nor even a crash of the process,
loses a decision that a client has seen. Prompts are logged by SHA-256 only, never as text, and
nothing of the request's headers (keys) is logged.

A write that fails (the disk is full, the file system turned read-only) leaves no half line behind:
the file is cut back to where it ended. The log then reports the reason (``error``), the service
answers 503 instead of a decision it cannot record, and the decisions made meanwhile are kept (a
bounded number) and written, marked ``late``, by the first write that succeeds again.

An existing file is appended to only when every line is a decision of this log
(:func:`not_a_decision_log`, used by the output rules before the service starts).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from evalprism.errors import EvalprismError
from evalprism.io.outputs import describe_write_error

log = logging.getLogger("evalprism.serve")

#: the endpoints whose decisions are logged (every line names one)
ENDPOINTS = ("/v1/route", "/v1/chat/completions")
#: decisions kept in memory while the log cannot be written; beyond that the oldest are dropped (and counted)
MAX_UNWRITTEN = 10_000


def prompt_hash(prompt: str) -> str:
    """SHA-256 of the prompt text (UTF-8), hex: how prompts appear in logs and responses."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one line of strict JSON. Requests with non-finite numbers are refused at the
    boundary (:func:`evalprism.serve.schemas.check_values`); should one still come from elsewhere,
    it is written as null rather than as the non-JSON literal ``Infinity`` or ``NaN``."""
    try:
        return json.dumps(record, separators=(",", ":"), default=float, allow_nan=False)
    except ValueError:
        return json.dumps(_finite(record), separators=(",", ":"), default=float, allow_nan=False)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


class DecisionLogUnwritable(Exception):
    """The decision log cannot be written now; the service answers 503 (it never hands out a
    decision it cannot record)."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"the decision log {path} cannot be written ({reason})")
        self.path = path
        self.reason = reason


def _open_append(path: Path) -> BinaryIO:
    return path.open("ab", buffering=0)  # unbuffered: each line goes to the OS in the write that makes it


class DecisionLog:
    """Append-only JSONL file of decisions; ``count`` lines written by this process; ``error`` why
    writing fails now (None while it works). ``opener`` opens the file for appending in binary."""

    def __init__(self, path: str | Path, opener: Callable[[Path], BinaryIO] = _open_append) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: BinaryIO | None = opener(self.path)
        except OSError as exc:
            raise EvalprismError(f"{self.path}: cannot open the decision log ({exc.strerror})") from None
        self._lock = threading.Lock()  # lines from the event loop and from worker threads never interleave
        self.count = 0
        self.error: str | None = None
        self.dropped = 0  # decisions not kept while the log failed (beyond MAX_UNWRITTEN)
        self._unwritten: deque[bytes] = deque(maxlen=MAX_UNWRITTEN)

    @property
    def unwritten(self) -> int:
        """Decisions kept in memory until the log can be written again."""
        return len(self._unwritten)

    def write(self, record: dict[str, Any], *, answered: bool = False) -> None:
        """Append ``record`` with the current UTC time as ``time`` (ISO 8601), after any decisions kept
        while the log failed. Raises :class:`DecisionLogUnwritable` when the write fails; the record is
        then kept, marked ``late`` with the reason and whether the client got its answer anyway
        (``answered``: a stream already relayed) or was refused."""
        record = {"time": datetime.now(UTC).isoformat(timespec="microseconds"), **record}
        line = (json_line(record) + "\n").encode("utf-8")
        with self._lock:
            try:
                self._append(b"".join(self._unwritten) + line)
            except OSError as exc:
                self._failed(exc)
                late = {**record, "late": {"answered": answered, "reason": self.error}}
                self.dropped += len(self._unwritten) == MAX_UNWRITTEN
                self._unwritten.append((json_line(late) + "\n").encode("utf-8"))
                raise DecisionLogUnwritable(self.path, self.error or "") from None
            self._written(1)

    def retry(self) -> bool:
        """Whether the log can be written: while it fails, try again to write the decisions kept since."""
        with self._lock:
            if self.error is None:
                return True
            try:
                self._append(b"".join(self._unwritten))
            except OSError as exc:
                self._failed(exc)
                return False
            self._written(0)
            return True

    def require(self) -> None:
        """Raise :class:`DecisionLogUnwritable` unless the log can be written (checked before a decision
        is made, so that no upstream is paid for an answer that would be withheld)."""
        if not self.retry():
            raise DecisionLogUnwritable(self.path, self.error or "")

    def _append(self, data: bytes) -> None:
        """All of ``data`` at the end of the file, or none of it: a failed write is cut back off."""
        if self._file is None:
            raise RuntimeError("the decision log is closed")
        if not data:
            return
        start = self._file.seek(0, os.SEEK_END)
        view = memoryview(data)
        try:
            while view:
                written = self._file.write(view)
                if not written:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]
        except OSError:
            with contextlib.suppress(OSError):
                self._file.truncate(start)
            raise

    def _failed(self, exc: OSError) -> None:
        reason = describe_write_error(exc)
        if self.error is None:
            log.error("the decision log %s cannot be written (%s): routing answers 503 until it can", self.path, reason)
        self.error = reason

    def _written(self, new: int) -> None:
        if self.error is not None:
            log.warning(
                "the decision log %s is writable again; %d decision(s) kept meanwhile were written (%d dropped)",
                self.path,
                len(self._unwritten),
                self.dropped,
            )
        self.count += len(self._unwritten) + new
        self._unwritten.clear()
        self.error = None

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def not_a_decision_log(path: Path, *, sample_lines: int = 1000) -> str | None:
    """Why ``path`` is not a decision log this service wrote (None: its first and last ``sample_lines``
    lines are each one of its decisions, a JSON object with ``time``, ``endpoint`` and ``prompt_sha256``).

    Only the head and the tail are read: a foreign file (a config, a model's ``config.json``) fails on its
    first lines, and a service's log of millions of decisions must not cost seconds at every start."""
    try:
        with path.open("rb") as file:
            head = [line for _, line in zip(range(sample_lines), file, strict=False)]
            size = path.stat().st_size
            file.seek(max(0, size - 256 * 1024))
            tail = file.read().splitlines(keepends=True)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    lines: list[tuple[int | None, bytes]] = list(enumerate(head, 1))
    if tail and len(head) == sample_lines:  # a long file: check its end too (the first tail line may be cut)
        lines += [(None, raw) for raw in tail[1:][-sample_lines:]]
    for number, raw in lines:
        where = f"line {number}" if number is not None else "a line near its end"
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            return f"{where} is not a JSON object"
        if (
            not isinstance(record.get("time"), str)
            or record.get("endpoint") not in ENDPOINTS
            or "prompt_sha256" not in record
        ):
            return f"{where} is not a routing decision (expected time, endpoint and prompt_sha256)"
    return None


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a :func:`time.perf_counter` value), rounded to 0.01 ms."""
    return round((time.perf_counter() - start) * 1e3, 2)
