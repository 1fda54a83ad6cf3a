"""The decision log: one JSON line per routing decision, appended and flushed as it is made.

Each line is handed to the operating system before the response goes out (one ``write`` of a
few hundred bytes, microseconds), so neither load nor a SIGTERM, nor even a crash of the process,
loses a decision that a client has seen. Prompts are logged by SHA-256 only, never as text, and
nothing of the request's headers (keys) is logged.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from evalprism.errors import EvalprismError


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


class DecisionLog:
    """Append-only JSONL file of decisions; ``count`` lines written by this process."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file: TextIO | None = self.path.open("a", encoding="utf-8")
        except OSError as exc:
            raise EvalprismError(f"{self.path}: cannot open the decision log ({exc.strerror})") from None
        self._lock = threading.Lock()  # lines from the event loop and from worker threads never interleave
        self.count = 0

    def write(self, record: dict[str, Any]) -> None:
        """Append ``record`` with the current UTC time as ``time`` (ISO 8601) and flush it."""
        line = json_line({"time": datetime.now(UTC).isoformat(timespec="microseconds"), **record})
        with self._lock:
            if self._file is None:
                raise RuntimeError("the decision log is closed")
            self._file.write(line + "\n")
            self._file.flush()
            self.count += 1

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a :func:`time.perf_counter` value), rounded to 0.01 ms."""
    return round((time.perf_counter() - start) * 1e3, 2)
