"""One inspect_ai log as plain data (:class:`LogContent`), from either of its two formats.

Two log formats, the same content (https://inspect.aisi.org.uk/eval-logs.html):

- ``.eval``, inspect's default: a zstd-compressed zip archive. Read with inspect_ai's own
  ``read_eval_log`` (the optional extra ``evalprism[inspect]``): Python's ``zipfile`` cannot
  decompress zstd before 3.14, and inspect owns the archive layout.
- ``.json`` (``--log-format json``, or ``inspect log convert --to json``): one JSON object with
  ``status`` (``success``, ``cancelled``, ``error``, ``started``), ``eval`` (``task``, ``model``,
  ``created``, ``dataset.samples``/``sample_ids``, ``config.epochs``/``log_samples``), ``samples``
  (``id``, ``epoch``, ``scores`` {scorer: {value}}, ``error``) and ``reductions`` ([{scorer, reducer,
  samples: [{sample_id, value}]}], one entry per scorer and epoch reducer). Read here with the standard
  library, so JSON logs need no extra; inspect_ai is not a dependency because its cloud-storage
  dependencies conflict with the rest of the stack (see pyproject.toml).

``inspect eval-set`` directories also hold two JSON files that are not logs: ``logs.json`` (a
manifest: log file name -> that log's header) and ``eval-set.json`` (the set's id and tasks);
:func:`eval_set_file` recognises them.

Both log formats become the same :class:`LogContent` before any choice is made, so the reading rules
(:mod:`evalprism.io.inspect_rows`) exist once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalprism.errors import EvalprismError
from evalprism.io.text import read_text

#: inspect's name for the mean reducer is its default; a reduction without a reducer name is the mean
DEFAULT_REDUCER = "mean"


@dataclass
class LogContent:
    """What evalprism needs of one inspect log.

    ``samples``: ``{"id", "epoch", "scores": {scorer: value}, "error": message or None, "input": the
    sample's input text or None}``;
    ``reductions``: ``(scorer, reducer) -> {sample_id: value}`` (several reducers per scorer are kept
    apart); ``reducers``: scorer -> its reducer names in log order; ``status``: inspect's run status;
    ``dataset_ids``: the sample ids the run was to score (None when the log does not list them)."""

    source: str
    task: str
    model: str
    epochs: int
    samples: list[dict[str, Any]]
    reductions: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    reducers: dict[str, list[str]] = field(default_factory=dict)
    status: str = "success"
    created: str = ""
    dataset_ids: list[str] | None = None
    dataset_size: int | None = None
    log_samples: bool = True
    error: str | None = None


def looks_like_inspect_json(path: Path) -> bool:
    """True when a ``.json`` file is an inspect log or an eval-set's ``logs.json``/``eval-set.json``
    (so the inspect reader, not the table reader, says what it is)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    if not head.lstrip().startswith(b"{"):
        return False
    return (b'"eval"' in head and b'"version"' in head) or (b'"eval_set_id"' in head and b'"tasks"' in head)


def eval_set_file(path: Path) -> tuple[str, dict[str, Any]] | None:
    """``("manifest", {log name: header})`` for an eval-set's ``logs.json``, ``("eval-set", {...})`` for
    its ``eval-set.json``, None for anything else (a log)."""
    if path.suffix.lower() != ".json" or path.name not in ("logs.json", "eval-set.json"):
        return None
    try:
        data = json.loads(read_text(path))
    except (json.JSONDecodeError, EvalprismError):
        return None
    if not isinstance(data, dict):
        return None
    if path.name == "eval-set.json" and "eval_set_id" in data:
        return "eval-set", data
    if (
        path.name == "logs.json"
        and data
        and all(isinstance(v, dict) and "eval" in v for v in data.values())
        and all(str(k).endswith((".eval", ".json")) for k in data)
    ):
        return "manifest", data
    return None


def _value(raw: Any) -> Any:
    return raw.get("value") if isinstance(raw, dict) else raw


def _error(raw: Any) -> str | None:
    if not raw:
        return None
    message = raw.get("message") if isinstance(raw, dict) else str(raw)
    return str(message or "error").splitlines()[0][:120]


def input_text(raw: Any) -> str | None:
    """A sample's input as text: the string, or the text of its chat messages (dicts from JSON, or
    inspect_ai's message objects) joined by newlines; None when there is none."""
    if isinstance(raw, str):
        return raw if raw.strip() else None
    if not isinstance(raw, list):
        return None
    parts = []
    for message in raw:
        content = message.get("content") if isinstance(message, dict) else getattr(message, "text", None)
        if isinstance(content, list):  # content parts: keep the text ones
            content = "\n".join(
                str(c.get("text") if isinstance(c, dict) else getattr(c, "text", ""))
                for c in content
                if (c.get("type") if isinstance(c, dict) else getattr(c, "type", "")) == "text"
            )
        if isinstance(content, str) and content.strip():
            parts.append(content)
    return "\n".join(parts) or None


def content_from_json(path: Path) -> LogContent:
    """A ``.json`` inspect log read with the standard library."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise EvalprismError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    spec = data.get("eval") if isinstance(data, dict) else None
    if not isinstance(spec, dict) or "task" not in spec or "model" not in spec:
        raise EvalprismError(f"{path}: expected an inspect_ai log (a JSON object with eval.task and eval.model)")
    samples: list[dict[str, Any]] = []
    for i, s in enumerate(data.get("samples") or [], 1):
        if not isinstance(s, dict) or "id" not in s:
            raise EvalprismError(f"{path}: samples[{i}]: expected an object with an 'id'")
        samples.append(
            {
                "id": str(s["id"]),
                "epoch": int(s.get("epoch", 1)),
                "error": _error(s.get("error")),
                "scores": {k: _value(v) for k, v in (s.get("scores") or {}).items()},
                "input": input_text(s.get("input")),
            }
        )
    reductions: dict[tuple[str, str], dict[str, Any]] = {}
    reducers: dict[str, list[str]] = {}
    for i, r in enumerate(data.get("reductions") or [], 1):
        if not isinstance(r, dict) or "scorer" not in r:
            raise EvalprismError(f"{path}: reductions[{i}]: expected an object with a 'scorer'")
        name = r.get("reducer") or DEFAULT_REDUCER
        reductions[(r["scorer"], name)] = {str(x["sample_id"]): x.get("value") for x in r.get("samples") or []}
        reducers.setdefault(r["scorer"], []).append(name)
    config = spec.get("config") or {}
    dataset = spec.get("dataset") or {}
    epochs = int(config.get("epochs") or max([s["epoch"] for s in samples], default=1))
    ids = dataset.get("sample_ids")
    return LogContent(
        str(path),
        str(spec["task"]),
        str(spec["model"]),
        epochs,
        samples,
        reductions,
        reducers,
        status=str(data.get("status") or "success"),
        created=str(spec.get("created") or ""),
        dataset_ids=[str(x) for x in ids] if ids else None,
        dataset_size=dataset.get("samples"),
        log_samples=config.get("log_samples") is not False,
        error=_error(data.get("error")),
    )


def content_from_eval(path: Path) -> LogContent:
    """A ``.eval`` archive read with inspect_ai's ``read_eval_log``."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise EvalprismError(
            f"{path}: reading inspect_ai .eval logs needs the optional extra: pip install "
            "'evalprism[inspect]' (or convert them: inspect log convert --to json)"
        ) from None
    try:
        log = read_eval_log(str(path))
    except Exception as exc:
        raise EvalprismError(f"{path}: cannot be read as an inspect_ai log: {exc}") from None
    samples: list[dict[str, Any]] = [
        {
            "id": str(s.id),
            "epoch": int(s.epoch),
            "error": _error(s.error.message if s.error else None),
            "scores": {k: v.value for k, v in (s.scores or {}).items()},
            "input": input_text(s.input),
        }
        for s in log.samples or []
    ]
    reductions: dict[tuple[str, str], dict[str, Any]] = {}
    reducers: dict[str, list[str]] = {}
    for r in log.reductions or []:
        name = r.reducer or DEFAULT_REDUCER
        reductions[(r.scorer, name)] = {str(x.sample_id): x.value for x in r.samples}
        reducers.setdefault(r.scorer, []).append(name)
    config, dataset = log.eval.config, log.eval.dataset
    epochs = int(getattr(config, "epochs", None) or max([s["epoch"] for s in samples], default=1))
    ids = getattr(dataset, "sample_ids", None)
    return LogContent(
        str(path),
        str(log.eval.task),
        str(log.eval.model),
        epochs,
        samples,
        reductions,
        reducers,
        status=str(log.status or "success"),
        created=str(log.eval.created or ""),
        dataset_ids=[str(x) for x in ids] if ids else None,
        dataset_size=getattr(dataset, "samples", None),
        log_samples=getattr(config, "log_samples", None) is not False,
        error=_error(log.error.message if log.error else None),
    )


def read_content(path: Path) -> LogContent:
    """One log, ``.eval`` or ``.json``."""
    return content_from_eval(path) if path.suffix.lower() == ".eval" else content_from_json(path)
