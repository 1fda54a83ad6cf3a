"""lm-evaluation-harness ``--log_samples`` output as per-item correctness.

Layouts read (each lm_eval invocation is one *run*: a results file and one samples file per task,
paired by the ``<date>`` in their names):

- directory (0.4.3 on, ``--output_path DIR``): ``DIR/<model>/results_<date>.json`` and
  ``DIR/<model>/samples_<task>_<date>.jsonl``; the model is named after its directory (lm-eval
  names it after the model: its ``pretrained`` path with ``/`` as ``__``);
- flat (``--output_path DIR/NAME.json``, documented since 0.4.9): ``DIR/NAME_<date>.json`` and
  ``DIR/samples_<task>_<date>.jsonl`` with no model directory, several models side by side: the
  model is read from the run's results file (``model_name_sanitized``, else ``model_name`` or the
  ``pretrained`` model argument with ``/`` as ``__``);
- 0.4.0-0.4.2 (``results.json`` and ``<model_args>_<task>.jsonl`` holding one JSON array): the
  model from the results file's ``config.model_args`` (``pretrained``), else ``config.model``.

Two directories whose models are named alike are told apart by their path relative to the
directory read; ``--model-name DIR=NAME`` renames. Each sample line is one (doc, filter) pair:
``doc_id``, ``filter`` and one value per metric. One run mixes tasks with different metrics and
filters, so both are chosen per task, from the results file *of the same run*:

- metric: the user's (``--metric TASK=METRIC``; ``--metric METRIC`` for every task that has it),
  else the first metric the results file lists in ``higher_is_better`` for the task (lm-eval's own
  order, the task's headline metric), else the first in its ``results``, else the first of the
  sample's ``metrics``;
- filter: the user's (``--lm-eval-filter TASK=FILTER``, or FILTER for every task that has it),
  else the task's only filter, else ``strict-match`` when present, else the first the results file
  lists. lm-eval 0.4.2-0.4.6 write no ``filter`` key: each document of a two-filter task appears
  once per filter, in the order of the task's ``filter_list``; the lines are labelled by that order
  and the labels checked against the results file's per-filter means (refused when they differ).

Item = (task, doc_id) with benchmark = task. A task run several times for one model: the newest
complete run (its results file present, no ``--limit``) is read, else the newest with a results
file, else the newest; the others are named as ignored. Every choice, every file and run not read
(a results file without samples: ``--log_samples`` forgotten) and every partial run (``--limit``:
documents read of the task's total) is one line of :class:`~evalprism.io.record.ProvenanceBuilder`.
Refused with one message naming the file: a ``--predict_only`` run (no metric computed), a
document scored twice under one filter, a value that is not 0/1.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import ANY_TASK, HarnessOptions
from evalprism.io.record import ProvenanceBuilder
from evalprism.io.scores import SCORE_EXPECTED, score_value
from evalprism.io.text import json_lines, read_text

#: sample-line keys that are not metrics
SAMPLE_FIELDS = frozenset(
    {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "filter",
        "metrics",
        "doc_hash",
        "prompt_hash",
        "target_hash",
    }
)
_DATED = re.compile(r"^(?P<stem>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d\-.:]+)$")
PREFERRED_FILTER = "strict-match"
#: the metric lm-eval records for ``--predict_only`` runs (a placeholder, nothing was scored)
PREDICT_ONLY_METRIC = "bypass"
_TOLERANCE = 1e-9


@dataclass
class Run:
    """One lm_eval invocation as found on disk: its results file (None: not found) and samples files."""

    directory: Path
    date: str  # "" for 0.4.0-0.4.2 output, which has none
    results_path: Path | None
    results: dict[str, Any]
    samples: dict[str, Path] = field(default_factory=dict)  # task -> file
    legacy: bool = False  # 0.4.0-0.4.2: results.json + JSON-array samples

    @property
    def layout(self) -> str:
        if self.legacy:
            return "lm-eval <= 0.4.2 layout"
        if self.results_path is not None and not self.results_path.name.startswith("results_"):
            return "flat layout (--output_path DIR/NAME.json)"
        return "directory layout"

    @property
    def flat(self) -> bool:
        return self.legacy or self.layout.startswith("flat")

    @property
    def version(self) -> str:
        """``lm-eval 0.4.13``, or that the results file does not say (before 0.4.7 it does not)."""
        v = self.results.get("lm_eval_version")
        return f"lm-eval {v}" if v else "lm-eval version not recorded"

    def order(self) -> tuple[str, str, float]:
        """Oldest first: by directory, date in the file names, then the results file's own ``date``."""
        stamp = self.results.get("date")
        return str(self.directory), self.date, float(stamp) if isinstance(stamp, int | float) else 0.0

    def limit(self) -> Any:
        return (self.results.get("config") or {}).get("limit")

    def counts(self, task: str) -> tuple[int | None, int | None]:
        """(original, effective) number of documents of ``task`` (lm-eval's ``n-samples``)."""
        n = (self.results.get("n-samples") or {}).get(task) or {}
        return n.get("original"), n.get("effective")

    def complete(self) -> bool:
        return self.results_path is not None and self.limit() is None

    def leaf(self, root: Path) -> tuple[str, str]:
        """The run's model name before any disambiguation, and where it came from."""
        if not self.flat:
            return (root.name if self.directory == root else self.directory.name), "its directory"
        assert self.results_path is not None
        r = self.results
        config = r.get("config") or {}
        pretrained = _model_args(config.get("model_args")).get("pretrained")
        where = f"{self.results_path.name}'s"
        if r.get("model_name_sanitized"):
            return str(r["model_name_sanitized"]), f"{where} model_name_sanitized"
        if r.get("model_name"):
            return _sanitize(str(r["model_name"])), f"{where} model_name"
        if pretrained:
            return _sanitize(pretrained), f"{where} config.model_args pretrained"
        if config.get("model"):
            return str(config["model"]), f"{where} config.model"
        return self.results_path.stem, "its results file's name"


def _sanitize(name: str) -> str:
    return name.replace("/", "__")


def _model_args(value: Any) -> dict[str, str]:
    """lm-eval's ``model_args``: a dict (0.4.7 on) or ``"k=v,k2=v2"`` (before)."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    if isinstance(value, str):
        return dict(p.split("=", 1) for p in value.split(",") if "=" in p)
    return {}


def looks_like_results(path: Path) -> bool:
    """Whether ``path`` is an lm-eval results file (it opens with its ``results`` key), read cheaply."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return False
    return re.sub(rb"\s", b"", head).startswith(b'{"results":')


def _load_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise EvalprismError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected an lm-eval results file"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("results"), dict):
        raise EvalprismError(f"{path}: expected an lm-eval results file (a JSON object with 'results')")
    return data


def sample_files(root: Path) -> list[Path]:
    """Every ``samples_<task>_<date>.jsonl`` under ``root``."""
    return sorted(root.rglob("samples_*.jsonl"))


def results_files(root: Path) -> list[Path]:
    """Every lm-eval results file under ``root`` (``results_<date>.json``, ``NAME_<date>.json``, ``results.json``)."""
    return sorted(f for f in root.rglob("*.json") if looks_like_results(f))


def has_lm_eval_output(root: Path) -> bool:
    """Whether ``root`` holds any lm-eval samples or results file."""
    return bool(sample_files(root) or results_files(root))


def task_of(path: Path) -> str:
    """The task name of a samples file (``samples_<task>_<date>.jsonl``)."""
    m = _DATED.match(path.stem)
    return (m["stem"] if m else path.stem)[len("samples_") :]


def find_runs(root: Path) -> list[Run]:
    """Every run under ``root``: samples files paired with the results file of the same directory
    and date; 0.4.0-0.4.2 results files with the ``<model_args>_<task>.jsonl`` they name."""
    runs: dict[tuple[Path, str], Run] = {}
    for f in results_files(root):
        m = _DATED.match(f.stem)
        data = _load_results(f)
        if m:
            runs[(f.parent, m["date"])] = Run(f.parent, m["date"], f, data)
            continue
        run = Run(f.parent, "", f, data, legacy=True)
        prefix = re.sub("/|=", "__", str((data.get("config") or {}).get("model_args") or ""))
        for task in data.get("configs") or {}:
            candidate = f.parent / f"{prefix}_{task}.jsonl"
            if candidate.is_file():
                run.samples[task] = candidate
        runs[(f.parent, f"legacy:{f.name}")] = run
    for f in sample_files(root):
        m = _DATED.match(f.stem)
        key = (f.parent, m["date"] if m else "")
        run = runs.setdefault(key, Run(f.parent, key[1], None, {}))
        run.samples[task_of(f)] = f
    return sorted(runs.values(), key=Run.order)


def read_lm_eval(
    path: str | Path,
    options: HarnessOptions | None = None,
    provenance: ProvenanceBuilder | None = None,
    *,
    allow_empty: bool = False,
) -> pd.DataFrame:
    """Rows ``model, benchmark, item_id, score, filter, metric, prompt`` (the text the model was
    given, :func:`prompt_text`) of every task of every model
    under ``path`` (see the module docstring for the layouts and choices; each one is added to
    ``provenance``). Raises :class:`EvalprismError` naming the file of a bad sample, a task without
    the chosen metric or filter, a ``--predict_only`` run, an unknown ``--model-name`` key, or two
    runs named alike that score the same item (naming both files). ``allow_empty``: results files
    without any samples give an empty table and notes (the caller reads other logs) instead of an error."""
    root = Path(path)
    options = options or HarnessOptions()
    provenance = provenance if provenance is not None else ProvenanceBuilder()
    runs = find_runs(root)
    unread = [r for r in runs if not r.samples]
    if not any(r.samples for r in runs) and not allow_empty:
        if unread:
            found = ", ".join(str(r.results_path.relative_to(root)) for r in unread if r.results_path)
            raise EvalprismError(
                f"{root}: lm-eval results files ({found}) but no samples files: per-item results need "
                "lm_eval --log_samples"
            )
        raise EvalprismError(f"{root}: no lm-eval samples_<task>_<date>.jsonl files (run lm_eval with --log_samples)")
    units = _units(root, [r for r in runs if r.samples], options.model_name)
    frames: list[pd.DataFrame] = []
    seen: dict[tuple[str, str], Path] = {}  # (model, task) -> the file that scored it
    applied: dict[str, set[str]] = {"metric": set(), "lm_eval_filter": set()}
    for (directory, _), (name, how, unit_runs) in units.items():
        tasks = sorted({t for r in unit_runs for t in r.samples})
        first = unit_runs[-1]
        provenance.choice(
            f"lm-eval {name}: {len(unit_runs)} run(s) in {_rel(root, directory)} ({first.layout}, "
            f"{first.version}), model named after {how}; tasks {', '.join(tasks)}"
        )
        for r in unit_runs:
            missing = sorted(set(r.results.get("configs") or {}) - set(r.samples))
            if missing and r.results_path is not None:
                provenance.choice(
                    f"lm-eval {name}: {r.results_path.name} lists task(s) {', '.join(missing)} with no samples "
                    "file of its run (not read)"
                )
        for task in tasks:
            run = _pick(name, task, [r for r in unit_runs if task in r.samples], provenance)
            f = run.samples[task]
            other = seen.get((name, task))
            if other is not None:
                raise EvalprismError(
                    f"model '{name}' has task '{task}' in two directories: {other} and {f}; give "
                    "them different names: model_name DIR=NAME",
                    parameter="model_name",
                )
            seen[(name, task)] = f
            provenance.file(f)
            if run.results_path is not None:
                provenance.file(run.results_path)
            frames.append(_read_task(f, task, name, run, options, provenance, applied))
    for r in unread:
        listed = ", ".join(sorted(r.results.get("configs") or r.results.get("results") or {})) or "none"
        leaf = r.leaf(root)[0] if r.results_path else "?"
        provenance.choice(
            f"lm-eval {_rel(root, r.results_path or r.directory)}: not read: no samples files of this run "
            f"(lm_eval ran without --log_samples); model {leaf}, tasks {listed}"
        )
    _check_global(options, seen, applied, root)
    if not frames:
        return pd.DataFrame(columns=["item_id", "filter", "score", "prompt", "model", "benchmark", "metric"])
    table = pd.concat(frames, ignore_index=True)
    table.attrs["source"] = str(root)
    return table


def _rel(root: Path, p: Path) -> str:
    r = p.relative_to(root).as_posix()
    return root.name if r == "." else r


def _units(
    root: Path, runs: list[Run], mapping: Mapping[str, str]
) -> dict[tuple[Path, str], tuple[str, str, list[Run]]]:
    """Model name per (directory, model) with its runs, oldest first: the model's own name, else
    (names shared by two directories) its path relative to ``root``; ``mapping`` renames (keys: a
    directory path relative to ``root``, its last component, or the model's name)."""
    grouped: dict[tuple[Path, str], list[Run]] = {}
    how: dict[tuple[Path, str], str] = {}
    for r in runs:
        leaf, source = r.leaf(root)
        grouped.setdefault((r.directory, leaf), []).append(r)
        how[(r.directory, leaf)] = source
    shared = {n for n, k in Counter(leaf for _, leaf in grouped).items() if k > 1}

    def default(key: tuple[Path, str]) -> str:
        d, leaf = key
        if leaf not in shared:
            return leaf
        flat = grouped[key][-1].flat
        return f"{_rel(root, d)}/{leaf}" if flat else _rel(root, d)

    names = {k: default(k) for k in grouped}
    for key_given, name in mapping.items():
        hits = [
            k
            for k in grouped
            if key_given in {_rel(root, k[0]), k[0].relative_to(root).as_posix(), k[1], names[k], default(k), k[0].name}
        ]
        if not hits:
            known = ", ".join(
                dict.fromkeys(
                    _rel(root, k[0]) if not grouped[k][-1].flat else f"{_rel(root, k[0])}/{k[1]}" for k in grouped
                )
            )
            raise EvalprismError(
                f"model_name {key_given}={name}: no lm-eval run directory '{key_given}' under {root} "
                f"(directories: {known})",
                parameter="model_name",
            )
        for k in hits:
            names[k] = name
    return {k: (names[k], how[k], grouped[k]) for k in grouped}


def _pick(model: str, task: str, runs: list[Run], provenance: ProvenanceBuilder) -> Run:
    """The run of ``task`` to read among several (oldest first): the newest complete one, else the
    newest with a results file, else the newest; the others are reported."""
    if len(runs) == 1:
        return runs[0]
    complete = [r for r in runs if r.complete()]
    with_results = [r for r in runs if r.results_path is not None]
    chosen, why = (
        (complete[-1], "the newest complete run")
        if complete
        else (with_results[-1], "the newest with a results file; none is complete")
        if with_results
        else (runs[-1], "the newest; none has a results file")
    )
    others = ", ".join(
        r.samples[task].name
        + ("" if r.results_path else " (no results file)")
        + (f" (--limit {_number(r.limit())})" if r.limit() is not None else "")
        for r in runs
        if r is not chosen
    )
    provenance.choice(
        f"lm-eval {model}/{task}: {len(runs)} runs; read {chosen.samples[task].name} ({why}); ignored {others}"
    )
    return chosen


def _check_global(
    options: HarnessOptions, seen: Mapping[tuple[str, str], Path], applied: Mapping[str, set[str]], root: Path
) -> None:
    tasks = sorted({t for _, t in seen})
    for flag, given in (("metric", options.metric), ("lm_eval_filter", options.lm_eval_filter)):
        unknown = sorted(t for t in given if t != ANY_TASK and t not in tasks)
        if unknown:
            raise EvalprismError(
                f"{flag} {unknown[0]}={given[unknown[0]]}: {root} has no task '{unknown[0]}' "
                f"(tasks: {', '.join(tasks)})",
                parameter=flag,
            )
        if ANY_TASK in given and seen and not applied[flag]:
            what = "value" if flag == "metric" else "filter"
            raise EvalprismError(
                f"{flag} {given[ANY_TASK]}: no task under {root} has a {what} "
                f"'{given[ANY_TASK]}' (tasks: {', '.join(tasks)})",
                parameter=flag,
            )


def _records(path: Path, legacy: bool) -> list[tuple[str, dict[str, Any]]]:
    """(where, sample) of a samples file: ``line N`` of JSON lines, ``sample N`` of a 0.4.0-0.4.2 JSON array."""
    if legacy:
        try:
            data = json.loads(read_text(path))
        except json.JSONDecodeError as exc:
            raise EvalprismError(
                f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected the JSON array "
                "of samples lm-eval <= 0.4.2 writes"
            ) from None
        if not isinstance(data, list):
            raise EvalprismError(f"{path}: expected a JSON array of lm-eval samples, got a JSON {type(data).__name__}")
        pairs = [(f"sample {k}", rec) for k, rec in enumerate(data, 1)]
    else:
        pairs = [(f"line {line_no}", rec) for line_no, rec in json_lines(path)]
    for where, rec in pairs:
        if not isinstance(rec, dict):
            raise EvalprismError(
                f"{path}: {where}: expected an lm-eval samples object, got a JSON {type(rec).__name__}"
            )
        if "doc_id" not in rec:
            raise EvalprismError(f"{path}: {where}: no 'doc_id' (expected an lm-eval samples line)")
    return pairs


def _listed_metrics(task: str, results: dict[str, Any]) -> list[str]:
    listed = list((results.get("higher_is_better") or {}).get(task) or {})
    in_results = [
        k.partition(",")[0] for k in ((results.get("results") or {}).get(task) or {}) if "," in k and "_stderr" not in k
    ]
    return list(dict.fromkeys(listed + in_results))


def _default_metric(task: str, run: Run, first: dict[str, Any]) -> tuple[str | None, str]:
    hib = [m for m in (run.results.get("higher_is_better") or {}).get(task) or {} if m in first]
    if hib:
        return hib[0], "first in the results file's higher_is_better"
    present = [m for m in _listed_metrics(task, run.results) if m in first]
    if present:
        return present[0], "first in the results file's results"
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


def _choose_metric(
    path: Path,
    task: str,
    run: Run,
    first: tuple[str, dict[str, Any]],
    options: HarnessOptions,
    applied: dict[str, set[str]],
) -> tuple[str, str]:
    where, rec = first
    values = [k for k in rec if k not in SAMPLE_FIELDS]
    if PREDICT_ONLY_METRIC in values and options.metric.get(task) in (None, PREDICT_ONLY_METRIC):
        raise EvalprismError(
            f"{path}: task '{task}' comes from an lm_eval --predict_only run: lm-eval computed no "
            "metric (its samples hold responses only), so there is no correctness to read; rerun "
            "lm_eval without --predict_only"
        )
    if task in options.metric:
        return options.metric[task], "chosen"
    note = ""
    if ANY_TASK in options.metric:
        wanted = options.metric[ANY_TASK]
        if wanted in rec:
            applied["metric"].add(task)
            return wanted, "chosen for every task that has it"
        note = f"; the task has no '{wanted}' value"
    metric, how = _default_metric(task, run, rec)
    if metric is None:
        raise EvalprismError(
            f"{path}: {where}: nothing says which value scores task '{task}' (values present: "
            f"{', '.join(values) or 'none'}); choose: metric {task}=NAME",
            parameter="metric",
        )
    return metric, how + note


def _label_filters(path: Path, task: str, metric: str, run: Run, table: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """Filters of a samples file without ``filter`` keys (lm-eval <= 0.4.6): one document per line
    is read as is; k lines per document are the task's k filters in ``filter_list`` order,
    checked against the results file's per-filter means."""
    per_doc = Counter(table["item_id"])
    k = max(per_doc.values())
    names = [
        str(f.get("name"))
        for f in ((run.results.get("configs") or {}).get(task) or {}).get("filter_list") or []
        if isinstance(f, dict)
    ]
    if k == 1:
        return table.assign(filter=names[0] if len(names) == 1 else "none"), ""
    if len(names) != k or set(per_doc.values()) != {k}:
        raise EvalprismError(
            f"{path}: task '{task}': documents appear {', '.join(map(str, sorted(set(per_doc.values()))))}"
            f" times and no line says its filter (lm-eval <= 0.4.6 writes no 'filter' key), while the "
            f"results file lists {len(names)} filter(s): cannot tell the filters apart"
        )
    table = table.assign(filter=[names[i] for i in table.groupby("item_id").cumcount()])
    aggregates = (run.results.get("results") or {}).get(task) or {}
    checked = []
    for name in names:
        expected = aggregates.get(f"{metric},{name}")
        if isinstance(expected, int | float):
            got = table.loc[table["filter"] == name, "score"].astype(float).mean()
            if abs(got - float(expected)) > _TOLERANCE:
                raise EvalprismError(
                    f"{path}: task '{task}': no line says its filter (lm-eval <= 0.4.6 writes no 'filter' "
                    f"key); read in the order of the task's filters ({', '.join(names)}), '{name}' "
                    f"gives {metric} {got:.6g} where the results file says {float(expected):.6g}: "
                    "cannot tell the filters apart"
                )
            checked.append(name)
    if not checked:
        raise EvalprismError(
            f"{path}: task '{task}': each document appears {k} times and no line says its filter "
            f"(lm-eval <= 0.4.6 writes no 'filter' key), and the results file has no per-filter {metric} "
            "to check an order against: cannot tell the filters apart"
        )
    return table, (
        f"; no line names its filter (lm-eval <= 0.4.6): lines labelled {', '.join(names)} in the task's order, "
        f"checked against the results file's means"
    )


def _read_task(
    path: Path,
    task: str,
    model: str,
    run: Run,
    options: HarnessOptions,
    provenance: ProvenanceBuilder,
    applied: dict[str, set[str]],
) -> pd.DataFrame:
    records = _records(path, run.legacy)
    if not records:
        raise EvalprismError(f"{path}: no samples")
    metric, how = _choose_metric(path, task, run, records[0], options, applied)
    rows = []
    for where, rec in records:
        if metric not in rec:
            have = [k for k in rec if k not in SAMPLE_FIELDS]
            raise EvalprismError(
                f"{path}: {where}: no '{metric}' value for task '{task}' (values present: "
                f"{', '.join(have) or 'none'}); choose: metric {task}=NAME",
                parameter="metric",
            )
        if score_value(rec[metric]) is None:
            raise EvalprismError(
                f"{path}: {where}: '{metric}' is {rec[metric]!r} for task '{task}': expected "
                f"{SCORE_EXPECTED} (choose a 0/1 value: metric {task}=NAME)",
                parameter="metric",
            )
        rows.append((str(rec["doc_id"]), rec.get("filter"), rec[metric], where, prompt_text(rec)))
    table = pd.DataFrame(rows, columns=["item_id", "filter", "score", "where", "prompt"])
    labelled = ""
    if table["filter"].isna().all():
        table, labelled = _label_filters(path, task, metric, run, table)
    table["filter"] = table["filter"].fillna("none").astype(str)
    filters = list(dict.fromkeys(table["filter"]))
    chosen_filter, filter_how = options.lm_eval_filter.get(task), "chosen"
    if chosen_filter is None and ANY_TASK in options.lm_eval_filter:
        wanted = options.lm_eval_filter[ANY_TASK]
        if wanted in filters:
            chosen_filter, filter_how = wanted, "chosen for every task that has it"
            applied["lm_eval_filter"].add(task)
        else:
            chosen_filter, filter_how = _default_filter(task, filters, run.results)
            filter_how += f"; the task has no filter '{wanted}'"
    elif chosen_filter is None:
        chosen_filter, filter_how = _default_filter(task, filters, run.results)
    elif chosen_filter not in filters:
        raise EvalprismError(
            f"{path}: task '{task}' has no filter '{chosen_filter}' (filters: {', '.join(filters)}); "
            f"choose: lm_eval_filter {task}=FILTER",
            parameter="lm_eval_filter",
        )
    table = table[table["filter"] == chosen_filter]
    dup = table["item_id"].duplicated(keep=False)
    if dup.any():
        a, b = table.loc[dup].head(2).itertuples()
        raise EvalprismError(
            f"{path}: {a.where} and {b.where} both score document {a.item_id} of task '{task}' under "
            f"filter '{chosen_filter}': expected one line per document and filter"
        )
    provenance.choice(
        f"lm-eval {model}/{task}: metric {metric} ({how}), filter {chosen_filter} ({filter_how}), "
        f"{len(table)} items from {path.name} (results file: "
        f"{run.results_path.name if run.results_path else 'none of its date'}){labelled}{_partial(task, run)}"
    )
    return table.drop(columns="where").assign(model=model, benchmark=task, metric=metric)


def prompt_text(rec: dict[str, Any]) -> str | None:
    """The text the model was given for a sample: the context (first argument) of its first request,
    in the dict form of lm-eval >= 0.4.3 (``{"gen_args_0": {"arg_0": ...}}``) or the list form of
    earlier versions (``[[context, continuation], ...]``); None when the sample does not carry it."""
    args = rec.get("arguments")
    first: Any = None
    if isinstance(args, dict) and args:
        first = next(iter(args.values()))
        first = first.get("arg_0") if isinstance(first, dict) else None
    elif isinstance(args, list) and args:
        first = args[0][0] if isinstance(args[0], list | tuple) and args[0] else args[0]
    return first if isinstance(first, str) and first.strip() else None


def _number(value: Any) -> Any:
    """3.0 -> 3 (lm-eval records ``--limit 3`` as a float)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _partial(task: str, run: Run) -> str:
    """``--limit`` as lm-eval recorded it: the documents read of the task's total."""
    limit = run.limit()
    if limit is None:
        return ""
    original, effective = run.counts(task)
    shown = _number(limit)
    if original is not None and effective is not None and effective < original:
        return f"; PARTIAL run (lm_eval --limit {shown}): {effective} of the task's {original} documents"
    return f"; lm_eval --limit {shown} (covers all {original if original is not None else '?'} documents)"
