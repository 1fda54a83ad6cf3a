"""Persistent, content-addressed embedding cache.

A vector is stored under ``sha256(model id, instruction, text)``, so any analysis that embeds
the same text with the same model and instruction reuses it, and a rerun encodes nothing.
Storage is one SQLite file (stdlib, safe for concurrent readers and one writer at a time,
no server), vectors as float32 blobs.

Location: the ``cache_dir`` argument, else ``$EVALPRISM_CACHE_DIR``, else
``$XDG_CACHE_HOME/evalprism`` (``~/.cache/evalprism``).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from evalprism.errors import EvalprismError

CACHE_ENV = "EVALPRISM_CACHE_DIR"
_SQLITE_MAX_VARS = 900


def default_cache_dir() -> Path:
    """The cache directory used when none is given: ``$EVALPRISM_CACHE_DIR`` or the XDG cache."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base).expanduser() / "evalprism"


def cache_key(model_id: str, instruction: str | None, text: str) -> bytes:
    """The content address of one embedding: sha256 over model id, instruction and text."""
    h = hashlib.sha256()
    for part in (model_id, instruction or "", text):
        data = part.encode("utf-8")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.digest()


class EmbeddingCache:
    """Vectors by content key in ``<dir>/embeddings.sqlite``."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.directory / "embeddings.sqlite", timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS emb (key BLOB PRIMARY KEY, dim INTEGER, vec BLOB)")
        except (OSError, sqlite3.Error) as exc:
            raise EvalprismError(f"embedding cache {self.directory}: cannot be opened ({exc})") from None

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Return the cached vectors among ``keys``."""
        found: dict[bytes, np.ndarray] = {}
        for start in range(0, len(keys), _SQLITE_MAX_VARS):
            chunk = keys[start : start + _SQLITE_MAX_VARS]
            marks = ",".join("?" * len(chunk))
            for key, _dim, blob in self._db.execute(f"SELECT key, dim, vec FROM emb WHERE key IN ({marks})", chunk):
                found[bytes(key)] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store ``vectors[i]`` under ``keys[i]`` (existing keys are left as they are)."""
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        rows = [(k, vectors.shape[1], v.tobytes()) for k, v in zip(keys, vectors, strict=True)]
        with self._db:
            self._db.executemany("INSERT OR IGNORE INTO emb (key, dim, vec) VALUES (?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM emb").fetchone()[0])

    def close(self) -> None:
        self._db.close()
