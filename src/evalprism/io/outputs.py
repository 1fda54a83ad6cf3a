"""Write an output directory atomically: all of it appears at once, or none of it does.

Files are written into a hidden sibling temporary directory which replaces ``out_dir`` only
when the block finishes without an exception, so a failed run never leaves a directory that
looks complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evalprism.errors import EvalprismError


@contextlib.contextmanager
def atomic_output_dir(out_dir: str | Path) -> Iterator[Path]:
    """Yield a temporary directory; on success move it to ``out_dir`` (replacing an old one)."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise EvalprismError(f"{out_dir}: exists and is not a directory")
    parent = out_dir.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.partial-", dir=parent))
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes 0700; the finished directory gets normal permissions
    except OSError as exc:
        raise EvalprismError(f"{out_dir}: cannot create the output directory ({exc.strerror})") from None
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if out_dir.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=parent))
        old.rmdir()
        out_dir.rename(old)
    tmp.rename(out_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_result_dir(out_dir: str | Path, frames: dict[str, Any], run: dict[str, Any], report: Any) -> Path:
    """An analysis output directory, atomically: ``<name>.csv`` per frame, ``run.json`` and
    ``report.html`` (``report`` has a ``write(path)`` method)."""
    with atomic_output_dir(out_dir) as tmp:
        for name, frame in frames.items():
            frame.to_csv(tmp / f"{name}.csv", index=False)
        (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str) + "\n", encoding="utf-8")
        report.write(tmp / "report.html")
    return Path(out_dir)
