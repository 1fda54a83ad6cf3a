"""Opening text files: the encoding rule and the messages for what breaks it.

Every text input (tables, prompt lists, qrels and topics, lm-eval samples, the router config) is
read through this module, so one rule holds everywhere: UTF-8, or UTF-8/UTF-16/UTF-32 with a
byte-order mark (read correctly). Anything else gets one :class:`EvalprismError` that names the
file, the line and the column of the first byte that is not UTF-8 (a decoder's "position 0" names
neither: it counts from the start of the decoder's buffer), or says that the file is binary or looks
like UTF-16 without a byte-order mark (text with a NUL byte in every other position).
A line of JSON Lines that does not parse is reported the same way, by line and column.
"""

from __future__ import annotations

import bz2
import errno
import gzip
import json
import lzma
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, BinaryIO

from evalprism.errors import EvalprismError

#: byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one)
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
_OPENERS: dict[str, Callable[..., Any]] = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}
_SNIFF_BYTES = 1 << 16


def _open_binary(path: Path) -> BinaryIO:
    """The file's bytes, decompressed when its name ends in .gz, .bz2 or .xz."""
    opener = _OPENERS.get(path.suffix.lower())
    return opener(path, "rb") if opener is not None else open(path, "rb")


_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def input_file(path: str | Path) -> Path:
    """``path`` when it names a regular file (through any symbolic links), else :class:`EvalprismError`:
    missing, a directory, a loop of symbolic links, or a FIFO, socket or device. Inputs are read
    whole, some more than once, so a pipe would block the run (or be half consumed) instead of failing."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise EvalprismError(f"{path}: file not found") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EvalprismError(f"{path}: is a loop of symbolic links, expected a file") from None
        raise EvalprismError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise EvalprismError(f"{path}: is a directory, expected a file")
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise EvalprismError(
            f"{path}: is {kind}, expected a regular file (evalprism reads its inputs whole and "
            "may read them twice; save the stream to a file first)"
        )
    return path


def readable_file(path: str | Path) -> Path:
    """``path`` when :func:`input_file` accepts it and it opens for reading, else :class:`EvalprismError`
    with the message its reader would give (permissions are the usual reason). A stat and an open: the
    check :mod:`evalprism.io.preflight` makes before anything heavy is imported."""
    path = input_file(path)
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    return path


def _cannot_read(path: Path, exc: BaseException) -> EvalprismError:
    """The message for a file that stats but does not open or decompress."""
    return EvalprismError(f"{path}: cannot be read ({exc})")


def text_encoding(path: str | Path) -> str:
    """The encoding to read ``path`` with: from its byte-order mark, else UTF-8.

    Raises :class:`EvalprismError` for a path that is not a regular file (:func:`input_file`) and for
    a file that holds NUL bytes without a byte-order mark: binary data, UTF-16 saved without a mark
    (which is unreadable without guessing), or a NUL anywhere later in the file (named by line and
    column; the scan reads the file once more, at disk speed)."""
    path = input_file(path)
    if path.suffix.lower() == ".zst":  # no decompressor in the standard library: pandas reads it as UTF-8
        return "utf-8"
    try:
        with _open_binary(path) as fh:
            head = fh.read(_SNIFF_BYTES)
            for bom, encoding in _BOMS:
                if head.startswith(bom):
                    return encoding
            if b"\x00" in head:
                pairs = head[: len(head) // 2 * 2]
                even, odd = pairs[0::2], pairs[1::2]
                if (
                    pairs
                    and (even.count(0) > 0.4 * len(even) or odd.count(0) > 0.4 * len(odd))
                    and min(even.count(0), odd.count(0)) < 0.05 * len(even)
                ):
                    raise EvalprismError(
                        f"{path}: looks like UTF-16 text without a byte-order mark (a NUL byte in "
                        "every other position); save it as UTF-8 (or UTF-16 with a byte-order mark)"
                    )
                raise _nul_error(path, head.index(b"\x00"))
            offset = len(head)
            while chunk := fh.read(1 << 22):
                at = chunk.find(b"\x00")
                if at >= 0:
                    raise _nul_error(path, offset + at)
                offset += len(chunk)
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise _cannot_read(path, exc) from None
    return "utf-8"


def _nul_error(path: Path, offset: int) -> EvalprismError:
    """The message for a NUL byte at byte ``offset`` of the (decompressed) file: its line and column."""
    with _open_binary(path) as fh:
        before = fh.read(offset)
    line_start = before.rfind(b"\n") + 1
    column = len(before[line_start:].decode("utf-8", errors="replace")) + 1
    line = before.count(b"\n") + 1
    return EvalprismError(
        f"{path}: line {line}, column {column}: a NUL byte; expected UTF-8 "
        "text (the file is binary, or damaged at that point)"
    )


def decode_error(path: str | Path, encoding: str = "utf-8") -> EvalprismError:
    """The message for a file that does not decode: the line and column of its first bad byte.

    Scans the file again line by line (only after a read failed), so the position is the file's own
    and not the offset into some decoder's buffer."""
    path = Path(path)
    if encoding not in ("utf-8", "utf-8-sig"):
        return EvalprismError(
            f"{path}: is not valid {encoding.upper()} text (it starts with a {encoding.upper()} "
            "byte-order mark); save it as UTF-8"
        )
    with _open_binary(path) as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                column = len(raw[: exc.start].decode("utf-8", errors="replace")) + 1
                bad = raw[exc.start : exc.end]
                try:
                    seen = f" ('{raw[exc.start : exc.start + 1].decode('cp1252')}' in Latin-1/Windows-1252)"
                except UnicodeDecodeError:
                    seen = ""
                return EvalprismError(
                    f"{path}: line {line_no}, column {column}: byte 0x{bad[0]:02x}{seen} is not valid UTF-8; "
                    "save the file as UTF-8"
                )
    return EvalprismError(f"{path}: is not valid UTF-8 text; save it as UTF-8")


@contextmanager
def open_text(path: str | Path, newline: str | None = None) -> Iterator[IO[str]]:
    """Open ``path`` for reading text by the encoding rule; a decoding failure anywhere in the
    ``with`` block becomes :func:`decode_error`'s message."""
    path = Path(path)
    encoding = text_encoding(path)
    opener = _OPENERS.get(path.suffix.lower())
    try:
        if opener is not None:
            with opener(path, "rt", encoding=encoding, newline=newline) as fh:
                yield fh
        else:
            with open(path, encoding=encoding, newline=newline) as fh:
                yield fh
    except UnicodeDecodeError:
        raise decode_error(path, encoding) from None


def read_text(path: str | Path) -> str:
    """The whole text of ``path`` by the encoding rule (:func:`open_text`)."""
    with open_text(path) as fh:
        return fh.read()


def json_line_error(path: str | Path, line_no: int, exc: json.JSONDecodeError) -> EvalprismError:
    """The message for JSON Lines line ``line_no`` that does not parse: where, and what the parser expected."""
    return EvalprismError(f"{path}: line {line_no}, column {exc.colno}: not valid JSON ({exc.msg})")


def json_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, value)`` of every non-blank line of the JSON Lines file ``path`` (1-based, read
    with :mod:`json`, which keeps a lone surrogate for the caller to mend); a line that does not parse
    is :func:`json_line_error`'s message."""
    with open_text(path) as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                yield line_no, json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise json_line_error(path, line_no, exc) from None


def jsonl_error(path: str | Path) -> EvalprismError | None:
    """The first line of the JSON Lines file ``path`` that is not a JSON object, as a message (None when
    every line is one); used to explain a failed bulk read by line and column."""
    with open_text(path) as fh:
        for line_no, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                return json_line_error(path, line_no, exc)
            if not isinstance(record, dict):
                return EvalprismError(
                    f"{path}: line {line_no}: expected one JSON object per line, got a JSON {type(record).__name__}"
                )
    return None


def mend_surrogates(text: str) -> str:
    """``text`` with every lone UTF-16 surrogate (a half of a pair, which JSON's ``\\ud83d`` escapes can
    carry and no UTF-8 writer accepts) replaced by U+FFFD; a high and a low half side by side become the
    character they encode. Text without surrogates comes back unchanged (the same object)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text
