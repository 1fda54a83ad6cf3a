"""lm-evaluation-harness ``--log_samples`` output as per-item correctness.

``lm_eval --tasks A,B --output_path OUT --log_samples`` writes, per model, a directory holding
``results_<date>.json`` and one ``samples_<task>_<date>.jsonl`` per task. Each sample line is one
(doc, filter) pair: ``doc_id``, ``filter`` and one value per metric (``acc``, ``acc_norm``,
``exact_match``, ...). One output directory mixes tasks with different metrics and filters (an MC
task scored ``acc``/``acc_norm`` under filter ``none``, a generation task scored ``exact_match``
under ``strict-match`` and ``flexible-extract``), so metric and filter are chosen per task:

- metric: the user's (``--metric TASK=METRIC`` or ``--metric METRIC`` for every task), else the
  first metric the results file lists in ``higher_is_better`` for the task (lm-eval's own order,
  the task's headline metric), else the first of the sample's ``metrics``;
- filter: the user's (``--lm-eval-filter TASK=FILTER``), else the task's only filter, else
  ``strict-match`` when present, else the first the results file lists for the task;
- model name: from the directory layout (lm-eval names the directory after the model, its
  ``pretrained`` path with ``/`` as ``__``): the directory's name, or its path relative to the
  directory read when two run directories share a name; ``--model-name DIR=NAME`` renames. The
  results file's ``model_name`` is not used: it is a local path or, for the dummy model, a random id,
  and the same model in two run directories would collide.

Item = (task, doc_id) with benchmark = task. A task logged twice in one directory (two dates):
the newest file wins and the older one is reported.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import ANY_TASK, HarnessOptions, ReadChoices
from evalprism.io.scores import SCORE_EXPECTED, score_value
from evalprism.io.text import json_line_error, open_text, read_text

#: sample-line keys that are not metrics
SAMPLE_FIELDS = frozenset({"doc_id", "doc", "target", "arguments", "resps", "filtered_resps", "filter", "metrics",
                           "doc_hash", "prompt_hash", "target_hash"})
_DATE = re.compile(r"_\d{4}-\d{2}-\d{2}T[\d\-.:]+$")
PREFERRED_FILTER = "strict-match"


def sample_files(root: Path) -> list[Path]:
    """Every ``samples_<task>_<date>.jsonl`` under ``root``."""
    return sorted(root.rglob("samples_*.jsonl"))


def task_of(path: Path) -> str:
    """The task name of a samples file (``samples_<task>_<date>.jsonl``)."""
    return _DATE.sub("", path.stem[len("samples_"):])


def read_lm_eval(path: str | Path, options: HarnessOptions | None = None,
                 choices: ReadChoices | None = None) -> pd.DataFrame:
    """Rows ``model, benchmark, item_id, score, filter, metric`` of every task of every model
    directory under ``path`` (see the module docstring for the choices; each one is added to
    ``choices``). Raises :class:`EvalprismError` naming the file and line of a bad sample, a task
    without the chosen metric or filter, an unknown ``--model-name`` directory, or two directories
    named alike that score the same item (naming both files)."""
    root = Path(path)
    options = options or HarnessOptions()
    choices = choices if choices is not None else ReadChoices()
    files = sample_files(root)
    if not files:
        raise EvalprismError(f"{root}: no lm-eval samples_<task>_<date>.jsonl files (run lm_eval with --log_samples)")
    names = model_names(root, sorted({f.parent for f in files}), options.model_names)
    frames = []
    seen: dict[tuple[str, str], Path] = {}  # (model, task) -> the file that scored it
    for directory, name in names.items():
        results = _results(directory)
        for task, f in _latest_per_task(directory, choices).items():
            other = seen.get((name, task))
            if other is not None:
                raise EvalprismError(f"model '{name}' has task '{task}' in two directories: {other} and {f}; give "
                                     "them different names: model_name DIR=NAME", parameter="model_name")
            seen[(name, task)] = f
            frames.append(_read_task(f, task, name, results, options, choices))
    tasks = sorted({t for _, t in seen})
    for flag, given in (("metric", options.metric), ("lm_eval_filter", options.lm_eval_filter)):
        unknown = sorted(t for t in given if t != ANY_TASK and t not in tasks)
        if unknown:
            raise EvalprismError(f"{flag} {unknown[0]}={given[unknown[0]]}: {root} has no task '{unknown[0]}' "
                                 f"(tasks: {', '.join(tasks)})", parameter=flag)
    table = pd.concat(frames, ignore_index=True)
    table.attrs["source"] = str(root)
    return table


def model_names(root: Path, directories: list[Path], mapping: Mapping[str, str]) -> dict[Path, str]:
    """Model name per run directory: ``mapping`` (keys: a path relative to ``root``, or a
    directory's own name), else the directory's name, else (names shared) its relative path."""
    def rel(d: Path) -> str:
        r = d.relative_to(root).as_posix()
        return root.name if r == "." else r

    leaf = {d: (root.name if d == root else d.name) for d in directories}
    shared = {n for n, k in Counter(leaf.values()).items() if k > 1}
    out = {d: rel(d) if leaf[d] in shared else leaf[d] for d in directories}
    for key, name in mapping.items():
        hits = [d for d in directories if key in (rel(d), d.relative_to(root).as_posix(), leaf[d])]
        if not hits:
            known = ", ".join(rel(d) for d in directories)
            raise EvalprismError(f"model_name {key}={name}: no lm-eval run directory '{key}' under {root} "
                                 f"(directories: {known})", parameter="model_name")
        for d in hits:
            out[d] = name
    return out


def _results(directory: Path) -> dict[str, Any]:
    """The newest readable ``results_<date>.json`` of a run directory ({} without one)."""
    for f in sorted(directory.glob("results_*.json"), reverse=True):
        try:
            data = json.loads(read_text(f))
        except (EvalprismError, json.JSONDecodeError):
            continue
        if isinstance(data, dict):
            return data
    return {}


def _latest_per_task(directory: Path, choices: ReadChoices) -> dict[str, Path]:
    latest: dict[str, Path] = {}
    for f in sorted(directory.glob("samples_*.jsonl")):  # dates sort: the newest run of a task wins
        task = task_of(f)
        if task in latest:
            choices.add(f"lm-eval {directory.name}/{task}: {f.name} is newer than {latest[task].name} (ignored)")
        latest[task] = f
    return latest


def _lines(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    with open_text(path) as fh:
        for line_no, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line.rstrip("\r\n"))
            except json.JSONDecodeError as exc:
                raise json_line_error(path, line_no, exc) from None
            if not isinstance(rec, dict):
                raise EvalprismError(f"{path}: line {line_no}: expected an lm-eval samples object, got a JSON "
                                     f"{type(rec).__name__}")
            if "doc_id" not in rec:
                raise EvalprismError(f"{path}: line {line_no}: no 'doc_id' (expected an lm-eval samples line)")
            yield line_no, rec


def _default_metric(task: str, results: dict[str, Any], first: dict[str, Any]) -> tuple[str | None, str]:
    listed = (results.get("higher_is_better") or {}).get(task) or {}
    present = [m for m in listed if m in first]
    if present:
        return present[0], "first in the results file's higher_is_better"
    metrics = first.get("metrics")
    if isinstance(metrics, list) and metrics and str(metrics[0]) in first:
        return str(metrics[0]), "first of the sample's metrics"
    return None, ""


def _default_filter(task: str, filters: list[str], results: dict[str, Any]) -> tuple[str, str]:
    if len(filters) == 1:
        return filters[0], "the task's only filter"
    if PREFERRED_FILTER in filters:
        return PREFERRED_FILTER, f"of {', '.join(filters)}"
    listed = [k.partition(",")[2] for k in ((results.get("results") or {}).get(task) or {}) if "," in k]
    order = [f for f in dict.fromkeys(listed) if f in filters] or filters
    return order[0], f"first listed of {', '.join(filters)}"


def _read_task(path: Path, task: str, model: str, results: dict[str, Any], options: HarnessOptions,
               choices: ReadChoices) -> pd.DataFrame:
    records = list(_lines(path))
    if not records:
        raise EvalprismError(f"{path}: no samples")
    first = records[0][1]
    metric = options.for_task(options.metric, task)
    how = "chosen"
    if metric is None:
        metric, how = _default_metric(task, results, first)
        if metric is None:
            have = [k for k in first if k not in SAMPLE_FIELDS]
            raise EvalprismError(f"{path}: line {records[0][0]}: nothing says which value scores task '{task}' "
                                 f"(values present: {', '.join(have) or 'none'}); choose: metric {task}=NAME",
                                 parameter="metric")
    rows = []
    for line_no, rec in records:
        if metric not in rec:
            have = [k for k in rec if k not in SAMPLE_FIELDS]
            raise EvalprismError(f"{path}: line {line_no}: no '{metric}' value for task '{task}' (values present: "
                                 f"{', '.join(have) or 'none'}); choose: metric {task}=NAME",
                                 parameter="metric")
        if score_value(rec[metric]) is None:
            raise EvalprismError(f"{path}: line {line_no}: '{metric}' is {rec[metric]!r} for task '{task}': expected "
                                 f"{SCORE_EXPECTED} (choose a 0/1 value: metric {task}=NAME)", parameter="metric")
        rows.append((str(rec["doc_id"]), str(rec.get("filter", "none")), rec[metric]))
    table = pd.DataFrame(rows, columns=["item_id", "filter", "score"])
    filters = list(dict.fromkeys(table["filter"]))
    chosen_filter = options.for_task(options.lm_eval_filter, task)
    filter_how = "chosen"
    if chosen_filter is None:
        chosen_filter, filter_how = _default_filter(task, filters, results)
    elif chosen_filter not in filters:
        raise EvalprismError(f"{path}: task '{task}' has no filter '{chosen_filter}' (filters: {', '.join(filters)}); "
                             f"choose: lm_eval_filter {task}=FILTER", parameter="lm_eval_filter")
    table = table[table["filter"] == chosen_filter]
    choices.add(f"lm-eval {model}/{task}: metric {metric} ({how}), filter {chosen_filter} ({filter_how}), "
                f"{len(table)} items")
    return table.assign(model=model, benchmark=task, metric=metric)
