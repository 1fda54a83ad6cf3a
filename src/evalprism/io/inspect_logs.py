"""inspect_ai evaluation logs as per-item correctness: which logs of a directory are read.

A log file is read by :mod:`evalprism.io.inspect_content` (``.eval`` through inspect_ai, ``.json``
with the standard library) and turned into rows by :mod:`evalprism.io.inspect_rows` (scorer,
epochs, status, sample errors). This module decides which files count:

- ``inspect eval-set`` directories: ``logs.json`` (the set's manifest) and ``eval-set.json`` are
  not logs; they are said (how many logs the manifest lists, which of them are missing, which of the
  set's tasks has no log here) and the logs themselves are read.
- Reruns (every ``./logs`` directory; an eval-set's retries): several logs of one task by one model
  would score the same items twice. The newest complete one (status ``success``, by ``eval.created``)
  is read, else the newest; the others are named as left out.
- A log of a run that did not finish and scored nothing (killed before writing a sample) is left
  out, said; the read fails only when nothing else was scored.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.inspect_content import (
    LogContent,
    eval_set_file,
    looks_like_inspect_json,
    read_content,
)
from evalprism.io.inspect_rows import records
from evalprism.io.record import ProvenanceBuilder

__all__ = ["LogContent", "inspect_paths", "looks_like_inspect_json", "read_content", "read_inspect_logs", "records"]


def _namer(paths: Sequence[Path]) -> Any:
    """Paths shown relative to the directory all of them are in (a lone file: its name)."""
    if not paths:
        return str
    base = os.path.commonpath([str(p.parent.resolve()) for p in paths])
    return lambda p: os.path.relpath(str(Path(p).resolve()), base)


def _eval_set_notes(
    sets: list[tuple[Path, str, dict[str, Any]]], contents: list[LogContent], shown: Any, provenance: ProvenanceBuilder
) -> None:
    """Say what each eval-set file holds and what of it is not here."""
    names = {Path(c.source).resolve() for c in contents}
    tasks = {c.task for c in contents}
    for path, kind, data in sets:
        if kind == "manifest":
            missing = [name for name in data if (path.parent / name).resolve() not in names]
            text = f"eval-set manifest listing {len(data)} log(s), not a log itself: the logs are read"
            if missing:
                text += f"; listed but not in the directory: {', '.join(missing)}"
        else:
            listed = [str(t.get("name")) for t in data.get("tasks") or [] if isinstance(t, dict)]
            text = f"eval-set {data.get('eval_set_id')}, tasks {', '.join(listed) or 'none listed'}"
            absent = [t for t in listed if t not in tasks]
            if absent:
                text += f"; no log here for: {', '.join(absent)}"
        provenance.choice(f"inspect {shown(path)}: {text}")


def _when(content: LogContent) -> tuple[float, str]:
    """Sort key of a log's creation (``eval.created``, ISO 8601 with its offset), then its path."""
    try:
        return datetime.fromisoformat(content.created).timestamp(), content.source
    except ValueError:
        return float("-inf"), content.source


def _newest(contents: list[LogContent], shown: Any, provenance: ProvenanceBuilder) -> list[LogContent]:
    """One log per (model, task): the newest complete one, else the newest; the others named."""
    groups: dict[tuple[str, str], list[LogContent]] = {}
    for c in contents:
        groups.setdefault((c.model, c.task), []).append(c)
    kept = []
    for (model, task), logs in groups.items():
        if len(logs) == 1:
            kept.append(logs[0])
            continue
        complete = [c for c in logs if c.status == "success"]
        pick = max(complete or logs, key=_when)
        kept.append(pick)
        which = "the newest complete one" if complete else "the newest (none of them finished)"
        others = "; ".join(
            f"{shown(c.source)} ({c.status}, created {c.created})" for c in sorted(logs, key=_when) if c is not pick
        )
        provenance.choice(
            f"inspect {model} on {task}: {len(logs)} logs (reruns); read {which}, {shown(pick.source)} "
            f"(created {pick.created}); left out: {others}"
        )
    return kept


def read_inspect_logs(
    paths: Sequence[str | Path],
    options: HarnessOptions | None = None,
    provenance: ProvenanceBuilder | None = None,
    graded: bool = False,
) -> pd.DataFrame:
    """Rows ``model, benchmark, item_id, score`` of the logs in ``paths`` (``.eval`` or ``.json``;
    eval-set manifests among them are said, reruns resolved to the newest complete log)."""
    options = options or HarnessOptions()
    provenance = provenance if provenance is not None else ProvenanceBuilder()
    files = [Path(p) for p in paths]
    shown = _namer(files)
    sets: list[tuple[Path, str, dict[str, Any]]] = []
    logs: list[Path] = []
    for path in files:
        found = eval_set_file(path)
        if found is None:
            logs.append(path)
        else:
            sets.append((path, *found))
    if not logs:
        what = ", ".join(f"{p} is an inspect eval-set {kind} file" for p, kind, _ in sets)
        raise EvalprismError(f"{what}, not a log: read the directory it is in (its logs)")
    for path in [*(p for p, _, _ in sets), *logs]:
        provenance.file(path)
    contents = [read_content(p) for p in logs]
    _eval_set_notes(sets, contents, shown, provenance)
    rows: list[dict[str, Any]] = []
    for content in _newest(contents, shown, provenance):
        rows.extend(records(content, options, provenance, shown(content.source), graded))
    if not rows:
        stopped = [f"{c.source} (status {c.status})" for c in contents if c.status != "success"]
        raise EvalprismError(
            f"{', '.join(stopped) or ', '.join(map(str, logs))}: no scored samples"
            + (": the run did not finish" if stopped else "")
        )
    table = pd.DataFrame(rows)
    table.attrs["source"] = ", ".join(map(str, paths))
    return table


def inspect_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """inspect logs under ``root`` (``.eval``, inspect ``.json``, and an eval-set's ``logs.json`` and
    ``eval-set.json``, which the reader says), and the other ``.json`` files that are neither an
    inspect file nor an lm-eval results file (reported as ignored)."""
    logs = sorted(root.rglob("*.eval"))
    ignored = []
    for f in sorted(root.rglob("*.json")):
        if looks_like_inspect_json(f):
            logs.append(f)
        elif not f.name.startswith("results_"):
            ignored.append(f)
    return sorted(logs), ignored
