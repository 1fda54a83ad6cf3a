"""The decision log: one JSON line per routing decision, appended and flushed as it is made.

Each line is handed to the operating system before the response goes out (one ``write`` of a
few hundred bytes, microseconds), so neither load nor a SIGTERM, nor even a crash of the process,
loses a decision that a client has seen. Prompts are logged by SHA-256 only, never as text, and
nothing of the request's headers (keys) is logged.

A write that fails (the disk is full, the file system turned read-only) leaves no half line behind:
the file is cut back to where it ended. The log then reports the reason (``error``), the service
answers 503 instead of a decision it cannot record, and the decisions made meanwhile are kept (a
bounded number) and written, marked ``late``, by the first write that succeeds again.

Each line is one :class:`DecisionLine` (its fields are documented there and in the README), written by
:func:`line_json` and read back by :func:`read_line`. A line carries ``schema_version``
(:data:`SCHEMA_VERSION`); a line without it was written before the field existed, with the same fields,
and reads as version 1. A reader reads every version up to its own and refuses a newer one.

An existing file is appended to only when every line is a decision of this log
(:func:`not_a_decision_log`, used by the output rules before the service starts). Several services may
append to one log at once (replicas, a restart without downtime): each append holds an OS file lock
(:mod:`~evalprism.serve.file_lock`), so their lines never interleave.
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
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalprism.errors import EvalprismError
from evalprism.io.outputs import describe_write_error
from evalprism.serve.affinity import Affinity, ContinuedBy, MoveReason
from evalprism.serve.file_lock import locked

log = logging.getLogger("evalprism.serve")

#: the format of the lines this service writes; a line without ``schema_version`` is version 1 (the
#: same fields as 2). Raise it with any change to the fields (one added or removed, or a change of type
#: or meaning: a reader refuses unknown fields and names a newer version), and keep :func:`read_line`
#: reading the older versions. Version 3 added the Responses and Messages endpoints, the affinity
#: fields (``affinity``, ``continued_by``, ``moved_from``, ``move_reason``), ``client_retry``, the
#: outcome ``shutting_down`` and an attempt's ``starved``; a version 1 or 2 line reads with them absent.
SCHEMA_VERSION = 3
#: the endpoints whose decisions are logged (every line names one)
Endpoint = Literal["/v1/route", "/v1/chat/completions", "/v1/responses", "/v1/messages"]
#: what a chat request came to: the upstream's answer (``completed``, or ``upstream_refused``: a 4xx
#: passed back), no answer (``upstream_failed``: 502, ``rate_limited``: 429, ``unavailable``: 503),
#: ``client_left`` (499: the client disconnected before the response started), ``shutting_down`` (503: it
#: arrived after the service began to shut down, :mod:`~evalprism.serve.drain`; also on a /v1/route line),
#: and for a stream how it ended (``completed``, ``stream_broken``, ``cut``: :data:`~evalprism.serve.upstream.StreamEnd`)
ChatOutcome = Literal[
    "completed",
    "upstream_refused",
    "upstream_failed",
    "rate_limited",
    "unavailable",
    "client_left",
    "shutting_down",
    "stream_broken",
    "cut",
]
#: the fields every line has (the others are on the lines they apply to, absent from the rest)
_ALWAYS = frozenset({"schema_version", "time", "endpoint", "prompt_sha256"})
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


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class AttemptRecord(_Record):
    """One upstream attempt of a chat line (as ``evalprism.attempts`` of the response shows it,
    :meth:`evalprism.serve.upstream.Attempt.record`)."""

    model: str
    status: int | None = None
    error: str | None = None
    latency_ms: float | None = None
    retry_after: float | None = None
    skipped: bool = False
    busy: bool = False
    starved: bool = False


class LateWrite(_Record):
    """Why a line was written late: the log could not be written when the decision was made (``reason``),
    and whether the client got its answer anyway (``answered``: a stream already relayed) or a 503."""

    answered: bool
    reason: str


class DecisionLine(_Record):
    """One line of the decision log: one routing decision. A field that does not apply to a line (the
    chat fields of a ``/v1/route`` line, the routing fields of a chat that named its model, the stream
    fields of a plain chat) is absent from it, and None here; a field that applies but has no value
    (no budget, no upstream answered, no prices) is written as null."""

    schema_version: int = Field(SCHEMA_VERSION, ge=1)
    time: str = Field(default_factory=_now)  # UTC, ISO 8601 with microseconds: when the line was made
    endpoint: Endpoint
    request_id: str | None = None  # the response's x-request-id
    client_retry: int | None = None  # an SDK's retry of an earlier call: its number (x-stainless-retry-count)
    prompt_sha256: str  # SHA-256 of the routing prompt (:func:`prompt_hash`), never the text
    # the routing decision (a /v1/route line; a chat line when ``routed``)
    chosen: str | None = None  # /v1/route: the model drawn
    routed: bool | None = None  # forwarded: whether the router decided (False: the client named a candidate)
    decided: str | None = None  # forwarded: the model decided on (drawn, kept, or named by the client)
    # conversations (forwarded lines the router decided): routed by P2L on this request, or sticky: kept
    # on the model of the conversation it continues, recognised by continued_by; a known conversation
    # routed again names the model it moved from and why
    affinity: Affinity | None = None
    continued_by: ContinuedBy | None = None
    moved_from: str | None = None
    move_reason: MoveReason | None = None
    distribution: dict[str, float | None] | None = None  # the routing distribution: model -> probability
    budget: float | None = None
    expected_winrate: float | None = None
    router_coef: float | None = None
    expected_cost: float | None = None
    routing_ms: float | None = None  # forwarded: milliseconds until the decision
    # the forwarding (lines of chat, responses and messages)
    stream: bool | None = None
    model: str | None = None  # the upstream that answered (null: none did)
    attempts: list[AttemptRecord] | None = None
    status: int | None = None  # the status the client got (499: it left before the response started)
    outcome: ChatOutcome | None = None
    realised_cost: float | None = None  # usage x the config's per-token prices
    bytes_relayed: int | None = None  # a stream's bytes whose writes to the client returned
    stream_error: str | None = None  # why a stream broke off
    latency_ms: float | None = None  # milliseconds until the line was made (a stream: its end)
    late: LateWrite | None = None  # present on a line written after the log failed


def line_json(line: DecisionLine) -> str:
    """``line`` as the decision log writes it: one line of strict JSON (:func:`json_line`), the fields
    that apply to it in declaration order, ``schema_version`` first."""
    return json_line(line.model_dump(include=line.model_fields_set | _ALWAYS))


class NotADecision(ValueError):
    """A line that is not one of this service's decisions; the message says why (to follow "line N")."""


def read_line(raw: str | bytes) -> DecisionLine:
    """One line of a decision log as a :class:`DecisionLine`, of any version up to :data:`SCHEMA_VERSION`
    (a line without ``schema_version`` is version 1). Raises :class:`NotADecision` saying why not."""
    try:
        record = json.loads(raw)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        raise NotADecision("is not a JSON object")
    version = record.get("schema_version", 1)
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise NotADecision(
            f"was written by a newer evalprism (decision log schema_version {version}; this one reads up to "
            f"{SCHEMA_VERSION})"
        )
    try:
        return DecisionLine.model_validate({"schema_version": 1, **record})
    except ValidationError as exc:
        first = exc.errors()[0]
        if first["loc"] and first["loc"][0] in ("time", "endpoint", "prompt_sha256"):
            raise NotADecision("is not a routing decision (expected time, endpoint and prompt_sha256)") from None
        where = ".".join(str(part) for part in first["loc"])
        raise NotADecision(f"is not a routing decision of this log ({where}: {first['msg']})") from None


def read_log(path: Path) -> list[DecisionLine]:
    """Every line of the decision log at ``path`` (:func:`read_line`); an error names the line."""
    lines = []
    with path.open("rb") as file:
        for number, raw in enumerate(file, 1):
            try:
                lines.append(read_line(raw))
            except NotADecision as exc:
                raise EvalprismError(f"{path}: line {number} {exc}") from None
    return lines


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

    def write(self, line: DecisionLine, *, answered: bool = False) -> None:
        """Append ``line``, after any decisions kept while the log failed. Raises
        :class:`DecisionLogUnwritable` when the write fails; the line is then kept, marked ``late`` with
        the reason and whether the client got its answer anyway (``answered``: a stream already relayed)
        or was refused."""
        data = (line_json(line) + "\n").encode("utf-8")
        with self._lock:
            try:
                self._append(b"".join(self._unwritten) + data)
            except OSError as exc:
                self._failed(exc)
                late = line.model_copy(update={"late": LateWrite(answered=answered, reason=self.error or "")})
                self.dropped += len(self._unwritten) == MAX_UNWRITTEN
                self._unwritten.append((line_json(late) + "\n").encode("utf-8"))
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
        """All of ``data`` at the end of the file, or none of it: a failed write is cut back off. Under
        the file's lock (:mod:`~evalprism.serve.file_lock`), as another service may append to it too."""
        if self._file is None:
            raise RuntimeError("the decision log is closed")
        if not data:
            return
        with locked(self._file):
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
    lines are each one of its decisions, :func:`read_line`, of this version or an earlier one).

    Only the head and the tail are read: a foreign file (a config, a model's ``config.json``) fails on its
    first lines, and a service's log of millions of decisions must not cost seconds at every start."""
    try:
        with path.open("rb") as file, locked(file, shared=True):  # a running service's line is never half read
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
        try:
            read_line(raw)
        except NotADecision as exc:
            return f"{f'line {number}' if number is not None else 'a line near its end'} {exc}"
    return None


def elapsed_ms(start: float) -> float:
    """Milliseconds since ``start`` (a :func:`time.perf_counter` value), rounded to 0.01 ms."""
    return round((time.perf_counter() - start) * 1e3, 2)
