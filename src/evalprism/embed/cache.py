"""Persistent, content-addressed embedding cache.

A vector is stored under ``sha256(model id, instruction, text)``, so any analysis that embeds
the same text with the same model and instruction reuses it, and a rerun encodes nothing.
Storage is one SQLite file (stdlib, safe for concurrent readers and one writer at a time,
no server), vectors as float32 blobs.

Location: the ``cache_dir`` argument, else ``$EVALPRISM_CACHE_DIR``, else
``$XDG_CACHE_HOME/evalprism`` (``~/.cache/evalprism``). :func:`cache_root` resolves and checks it, once
for every cache evalprism keeps there (these vectors, and the static models of :mod:`evalprism.embed.static`),
so a location that cannot be a directory is one message naming where it came from.

Damage is handled by whose file it is. A file that is not a readable SQLite database, or one whose
tables are not this cache's, is refused with its path and left as it is (it may be someone else's).
In evalprism's own cache, an entry that cannot be a vector of the model (a blob whose length is not
its ``dim``, another length than the model's, non-finite values) is reported by :meth:`get_many` as
bad, and the embedder recomputes and replaces it. The model's vector length is recorded per model
id (table ``models``) the first time it is known, so a lookup never needs to load the model.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from evalprism.errors import EvalprismError

CACHE_ENV = "EVALPRISM_CACHE_DIR"
CACHE_FILE = "embeddings.sqlite"
_SQLITE_MAX_VARS = 900
#: this cache's tables and their columns (anything else in the file means the file is not ours)
_TABLES = {"emb": ("key", "dim", "vec"), "models": ("model_id", "dim")}
_CREATE = (
    "CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, dim INTEGER, vec BLOB)",
    "CREATE TABLE IF NOT EXISTS models (model_id TEXT PRIMARY KEY, dim INTEGER)",
)


def default_cache_dir() -> Path:
    """The cache directory used when none is given: ``$EVALPRISM_CACHE_DIR`` or the XDG cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "evalprism"


def cache_root(cache_dir: str | Path | None = None) -> Path:
    """evalprism's cache directory, created when missing: ``cache_dir``, else :func:`default_cache_dir`.

    The one check of the location for every cache kept there (the embeddings' SQLite file, the static
    models): a path that is a file, lies under a file or cannot be created is refused with one message
    naming it and where it came from (the argument, ``$EVALPRISM_CACHE_DIR`` or the default)."""
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    try:
        root.mkdir(parents=True, exist_ok=True)
        if root.is_dir():
            return root
        reason = "it is a file, not a directory"
    except OSError as exc:
        reason = _not_a_directory(root) or f"{type(exc).__name__}: {exc.strerror or exc}"
    if cache_dir:
        where, advice = f"cache directory {root}", "choose another cache_dir"
    elif os.environ.get(CACHE_ENV):
        where, advice = f"{CACHE_ENV}={os.environ[CACHE_ENV]}", f"point {CACHE_ENV} at a directory, or unset it"
    else:
        where, advice = f"the default cache directory {root}", f"set {CACHE_ENV} to a directory evalprism may write"
    raise EvalprismError(
        f"{where}: cannot hold evalprism's caches (embeddings, static models): {reason}; {advice}",
        parameter="cache_dir" if cache_dir else None,
    )


def _not_a_directory(path: Path) -> str | None:
    """Why ``path`` cannot be a directory when it or a folder above it is a file (else None)."""
    for place in (path, *path.parents):
        if place.exists() and not place.is_dir():
            return "it is a file, not a directory" if place == path else f"{place} is a file, not a directory"
    return None


def cache_key(model_id: str, instruction: str | None, text: str) -> bytes:
    """The content address of one embedding: sha256 over model id, instruction and text."""
    h = hashlib.sha256()
    for part in (model_id, instruction or "", text):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


#: SQLite's primary result codes of a write the disk refused: SQLITE_IOERR (a write that failed, e.g. past a
#: file-size limit) and SQLITE_FULL (the disk is full); the file itself is fine, so "move it away" is no advice
_WRITE_FAILURES = (10, 13)


class EmbeddingCache:
    """Vectors by content key in ``<dir>/embeddings.sqlite``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = cache_root(directory)
        self.path = self.directory / CACHE_FILE
        try:
            self._db = sqlite3.connect(self.path, timeout=60)
        except (OSError, sqlite3.Error) as exc:
            raise EvalprismError(f"embedding cache {self.directory}: cannot be opened ({exc})") from None
        # closed when the cache is dropped, or at exit if it is still alive then: a connection left to the
        # shutdown's garbage collection (skipped, evalprism.shutdown) would leave its -wal and -shm files behind
        self._closer = weakref.finalize(self, self._db.close)
        with self._guard():
            self._check_tables()
            self._db.execute("PRAGMA journal_mode=WAL")
            for statement in _CREATE:
                self._db.execute(statement)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """SQLite failures as one message naming the file; the file is never changed or removed."""
        try:
            yield
        except EvalprismError:
            self._db.close()
            raise
        except sqlite3.DatabaseError as exc:  # includes OperationalError: locked, malformed, not a database
            self._db.close()
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _WRITE_FAILURES:
                raise EvalprismError(
                    f"embedding cache {self.path}: the disk refused the cache's read or write ({exc}): it may be "
                    "full, or the file may not grow (a file-size limit); the cache is left as it was: free space, "
                    "or choose another cache_dir",
                    parameter="cache_dir",
                ) from None
            raise EvalprismError(
                f"embedding cache {self.path}: cannot be opened as evalprism's SQLite cache ({exc}); evalprism leaves "
                "it as it is: move it away (evalprism then builds a new cache and recomputes the vectors) or "
                "choose another cache_dir",
                parameter="cache_dir",
            ) from None

    def _check_tables(self) -> None:
        """Refuse a database that holds tables this cache did not create (another program's file)."""
        tables = [name for (name,) in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for name in tables:
            columns = tuple(row[1] for row in self._db.execute(f"PRAGMA table_info('{name}')"))
            if _TABLES.get(name) != columns:
                raise EvalprismError(
                    f"embedding cache {self.path}: is not evalprism's embedding cache (it holds a table '{name}' with "
                    f"columns {', '.join(columns) or 'none'}; expected tables emb(key, dim, vec) and "
                    "models(model_id, dim)); evalprism leaves it as it is: choose another cache_dir",
                    parameter="cache_dir",
                )

    def model_dim(self, model_id: str) -> int | None:
        """The vector length recorded for ``model_id`` (None when this cache has not recorded it)."""
        with self._guard():
            row = self._db.execute("SELECT dim FROM models WHERE model_id = ?", (model_id,)).fetchone()
        return None if row is None else int(row[0])

    def record_model(self, model_id: str, dim: int) -> None:
        """Record the vector length of ``model_id`` (what :meth:`get_many` checks entries against)."""
        with self._guard(), self._db:
            self._db.execute("INSERT OR REPLACE INTO models (model_id, dim) VALUES (?, ?)", (model_id, int(dim)))

    def get_many(self, keys: Sequence[bytes], dim: int | None = None) -> tuple[dict[bytes, np.ndarray], list[bytes]]:
        """The cached vectors among ``keys``, and the keys whose entries are damaged: a blob that does
        not hold ``dim`` float32 values as its row says, another length than ``dim`` (the model's), or
        a value that is not finite. Damaged entries are to be recomputed (:meth:`put_many` replaces them)."""
        found: dict[bytes, np.ndarray] = {}
        bad: list[bytes] = []
        with self._guard():
            for start in range(0, len(keys), _SQLITE_MAX_VARS):
                chunk = keys[start : start + _SQLITE_MAX_VARS]
                marks = ",".join("?" * len(chunk))
                for key, row_dim, blob in self._db.execute(
                    f"SELECT key, dim, vec FROM emb WHERE key IN ({marks})", chunk
                ):
                    vec = _vector(blob, row_dim, dim)
                    if vec is None:
                        bad.append(bytes(key))
                    else:
                        found[bytes(key)] = vec
        return found, bad

    def put_many(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under ``keys[i]``, replacing what is there (keys are content addresses:
        a replaced entry was either the same vector or a damaged one)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(k, vectors.shape[1], v.tobytes()) for k, v in zip(keys, vectors, strict=True)]
        with self._guard(), self._db:
            self._db.executemany("INSERT OR REPLACE INTO emb (key, dim, vec) VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._guard():
            return int(self._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._closer()


def _vector(blob: object, row_dim: object, dim: int | None) -> np.ndarray | None:
    """The float32 vector in ``blob`` when it is whole and finite (and ``dim`` long, if given), else None."""
    if not isinstance(blob, bytes) or not isinstance(row_dim, int) or row_dim <= 0 or len(blob) != 4 * row_dim:
        return None
    if dim is not None and row_dim != dim:
        return None
    vec = np.frombuffer(blob, dtype=np.float32)
    return vec if np.isfinite(vec).all() else None
