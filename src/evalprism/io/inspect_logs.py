"""inspect_ai evaluation logs as per-item correctness.

Two log formats, the same content (https://inspect.aisi.org.uk/eval-logs.html):

- ``.eval``, inspect's default: a zstd-compressed zip archive. Read with inspect_ai's own
  ``read_eval_log`` (the optional extra ``evalprism[inspect]``): Python's ``zipfile`` cannot
  decompress zstd before 3.14, and inspect owns the archive layout.
- ``.json`` (``--log-format json``, or ``inspect log convert --to json``): one JSON object with
  ``eval`` (``task``, ``model``), ``samples`` (``id``, ``epoch``, ``scores`` {scorer: {value}},
  ``error``) and ``reductions`` ([{scorer, reducer, samples: [{sample_id, value}]}]). Read here
  with the standard library, so JSON logs need no extra; inspect_ai is not a dependency because its
  cloud-storage dependencies conflict with the rest of the stack (see pyproject.toml).

Both are turned into the same plain form (:class:`LogContent`) before any choice is made, so the
rules below exist once. Model = ``eval.model``, benchmark = ``eval.task``, item_id = sample id.
Values: ``C``/``I`` (CORRECT/INCORRECT) or 0/1 numbers or booleans; ``N`` (NOANSWER), a sample error or
no score: -1; partial credit is refused. Scorer: the user's ``--scorer`` or the log's only one.
Epochs (``--epochs``): ``mean``, the default, is the per-sample reduction inspect itself reports
(``reductions``: its default reducer is the mean; computed from the samples when a log has none),
refused where it is not 0 or 1 with a pointer to ``first`` / ``all``; ``first``: epoch 1 only;
``all``: every epoch its own item ``<id>#<epoch>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions, ReadChoices
from evalprism.io.scores import SCORE_EXPECTED, score_value
from evalprism.io.text import read_text

_VALUE_CODES = {"C": 1, "I": 0, "N": -1}


@dataclass
class LogContent:
    """What evalprism needs of one inspect log: task, model, per-sample scores, reductions."""

    source: str
    task: str
    model: str
    epochs: int
    samples: list[dict[str, Any]]  # {"id", "epoch", "scores": {scorer: value}, "error": bool}
    reductions: dict[str, dict[str, Any]] = field(default_factory=dict)  # scorer -> {sample_id: value}
    reducer: dict[str, str] = field(default_factory=dict)  # scorer -> reducer name


def looks_like_inspect_json(path: Path) -> bool:
    """True when a ``.json`` file is an inspect log (an object with ``eval.task`` and ``eval.model``)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") and b'"eval"' in head and b'"version"' in head


def _value(raw: Any) -> Any:
    return raw.get("value") if isinstance(raw, dict) else raw


def content_from_json(path: Path) -> LogContent:
    """A ``.json`` inspect log read with the standard library."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise EvalprismError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    spec = data.get("eval") if isinstance(data, dict) else None
    if not isinstance(spec, dict) or "task" not in spec or "model" not in spec:
        raise EvalprismError(f"{path}: expected an inspect_ai log (a JSON object with eval.task and eval.model)")
    samples = []
    for i, s in enumerate(data.get("samples") or [], 1):
        if not isinstance(s, dict) or "id" not in s:
            raise EvalprismError(f"{path}: samples[{i}]: expected an object with an 'id'")
        samples.append({"id": s["id"], "epoch": int(s.get("epoch", 1)), "error": bool(s.get("error")),
                        "scores": {k: _value(v) for k, v in (s.get("scores") or {}).items()}})
    reductions, reducer = {}, {}
    for r in data.get("reductions") or []:
        reductions[r["scorer"]] = {str(x["sample_id"]): x.get("value") for x in r.get("samples", [])}
        reducer[r["scorer"]] = r.get("reducer") or "mean"
    epochs = int((spec.get("config") or {}).get("epochs") or max([s["epoch"] for s in samples], default=1))
    return LogContent(str(path), str(spec["task"]), str(spec["model"]), epochs, samples, reductions, reducer)


def content_from_eval(path: Path) -> LogContent:
    """A ``.eval`` archive read with inspect_ai's ``read_eval_log``."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise EvalprismError(f"{path}: reading inspect_ai .eval logs needs the optional extra: pip install "
                             "'evalprism[inspect]' (or convert them: inspect log convert --to json)") from None
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect raises its own errors for unreadable logs
        raise EvalprismError(f"{path}: cannot be read as an inspect_ai log: {exc}") from None
    samples = [{"id": s.id, "epoch": int(s.epoch), "error": bool(s.error),
                "scores": {k: v.value for k, v in (s.scores or {}).items()}} for s in log.samples or []]
    reductions = {r.scorer: {str(x.sample_id): x.value for x in r.samples} for r in log.reductions or []}
    reducer = {r.scorer: r.reducer or "mean" for r in log.reductions or []}
    epochs = int(getattr(log.eval.config, "epochs", None) or max([s["epoch"] for s in samples], default=1))
    return LogContent(str(path), str(log.eval.task), str(log.eval.model), epochs, samples, reductions, reducer)


def read_content(path: Path) -> LogContent:
    return content_from_eval(path) if path.suffix.lower() == ".eval" else content_from_json(path)


def _code(value: Any, error: bool) -> Any:
    """1 / 0 / -1 for a correctness value; any other value is returned as it is (a reduction's
    fraction is reported by the caller, the rest by :func:`_checked`)."""
    if error or value is None:
        return -1
    if isinstance(value, str) and value.strip().upper() in _VALUE_CODES:
        return _VALUE_CODES[value.strip().upper()]
    return value


def _checked(content: LogContent, item: str, scorer: str, value: Any) -> int:
    """``value`` as a score, or one message naming the log, the sample and the scorer."""
    code = score_value(value)
    if code is None:
        raise EvalprismError(f"{content.source}: sample '{item}', scorer '{scorer}': value {value!r}, expected "
                             f"C/I/N or {SCORE_EXPECTED} (partial credit is not a correctness)", parameter="scorer")
    return code


def _scorer(content: LogContent, wanted: str | None) -> str:
    names = list(dict.fromkeys(k for s in content.samples for k in s["scores"])) or list(content.reductions)
    if wanted is not None:
        if wanted not in names:
            raise EvalprismError(f"{content.source}: no scores from '{wanted}' (scorers: {', '.join(names) or 'none'})",
                                 parameter="scorer")
        return wanted
    if len(names) > 1:
        raise EvalprismError(f"{content.source}: samples have several scorers ({', '.join(names)}); choose one "
                             "(scorer NAME)", parameter="scorer")
    if not names:
        raise EvalprismError(f"{content.source}: no scored samples")
    return names[0]


def records(content: LogContent, options: HarnessOptions, choices: ReadChoices) -> list[dict[str, Any]]:
    """Rows (model, benchmark, item_id, score) of one log under ``options``' scorer and epochs."""
    scorer = _scorer(content, options.scorer)
    base = {"model": content.model, "benchmark": content.task}
    rows: list[dict[str, Any]] = []
    epochs = options.epochs if content.epochs > 1 else "first"
    if epochs in ("first", "all"):
        for s in content.samples:
            if epochs == "first" and s["epoch"] != 1:
                continue
            item = f"{s['id']}#{s['epoch']}" if epochs == "all" else str(s["id"])
            rows.append({**base, "item_id": item,
                         "score": _checked(content, item, scorer, _code(s["scores"].get(scorer), s["error"]))})
    else:
        reduced = content.reductions.get(scorer)
        reducer = content.reducer.get(scorer, "mean")
        if reduced is None:  # no reductions in the log: inspect's default reducer, the mean over epochs
            per: dict[str, list[Any]] = {}
            for s in content.samples:
                per.setdefault(str(s["id"]), []).append(_code(s["scores"].get(scorer), s["error"]))
            # as inspect's value_to_float: no answer counts 0 in the mean; -1 only when no epoch answered
            reduced = {k: (-1 if all(v == -1 for v in vals) else sum(max(v, 0) for v in vals) / len(vals))
                       for k, vals in per.items()}
        for sample_id, value in reduced.items():
            code = _code(value, False)
            if isinstance(code, float) and code not in (0.0, 1.0):
                raise EvalprismError(f"{content.source}: sample '{sample_id}' scores {code:.3g} under inspect's "
                                     f"'{reducer}' reduction over {content.epochs} runs, not 0 or 1: use epochs "
                                     "first (the first run) or epochs all (each run its own item)", parameter="epochs")
            rows.append({**base, "item_id": sample_id, "score": _checked(content, sample_id, scorer, code)})
    how = {"first": "epoch 1", "all": "every epoch its own item", "mean": "inspect's reduction over epochs"}[epochs]
    choices.add(f"inspect {Path(content.source).name}: {content.model} on {content.task}, scorer {scorer}"
                f"{'' if options.scorer else ' (the only one)'}, {content.epochs} epoch(s): {how}, {len(rows)} items")
    return rows


def read_inspect_logs(paths: Sequence[str | Path], options: HarnessOptions | None = None,
                      choices: ReadChoices | None = None) -> pd.DataFrame:
    """Rows ``model, benchmark, item_id, score`` of every log in ``paths`` (``.eval`` or ``.json``)."""
    options = options or HarnessOptions()
    choices = choices if choices is not None else ReadChoices()
    rows: list[dict[str, Any]] = []
    for path in paths:
        rows.extend(records(read_content(Path(path)), options, choices))
    if not rows:
        raise EvalprismError(f"{', '.join(map(str, paths))}: no scored samples")
    table = pd.DataFrame(rows)
    table.attrs["source"] = ", ".join(map(str, paths))
    return table


def inspect_paths(root: Path) -> tuple[list[Path], list[Path]]:
    """inspect logs under ``root`` (``.eval`` and inspect ``.json``), and the other ``.json`` files
    that are neither an inspect log nor an lm-eval results file (reported as ignored)."""
    logs = sorted(root.rglob("*.eval"))
    ignored = []
    for f in sorted(root.rglob("*.json")):
        if looks_like_inspect_json(f):
            logs.append(f)
        elif not f.name.startswith("results_"):
            ignored.append(f)
    return sorted(logs), ignored

