"""The rules that turn one inspect_ai log (:class:`~evalprism.io.inspect_content.LogContent`) into
correctness rows, each choice said in one ``read`` line.

Model = ``eval.model``, benchmark = ``eval.task``, item_id = sample id. Values: ``C``/``I``
(CORRECT/INCORRECT), 0/1 numbers or booleans; ``N`` (NOANSWER): -1; partial credit is refused.
Scorer: the user's ``--scorer`` or the log's only one.

Epochs (``--epochs``): ``mean``, the default, is the per-sample reduction inspect itself reports
(``reductions``; a log with several reducers, ``Epochs(3, ["mean", "max"])``, has one reduction per
reducer: the ``mean`` one is taken, else the only one, else refused), computed from the samples when a
log has none, refused where it is not 0 or 1 with a pointer to ``first`` / ``all``; ``first``: epoch 1
only; ``all``: every epoch its own item ``<id>#<epoch>``. A one-epoch log reads the same under all three.

Status: a log that did not finish (``cancelled``, ``error``, ``started``) is read for the samples it
scored (one that scored none is left out, said); the samples it never answered (never run, or stopped by the cancel or the failure) are left
out, never counted wrong, and the read line says ``cancelled: 2 of 6 samples scored``. Under ``mean``
only samples scored in every epoch are reduced (a "mean" of one epoch is not inspect's mean).

Sample errors in a finished log (``fail_on_error`` allowing them): -1 (no answer) under every
``--epochs``: inspect leaves a sample that failed in every epoch out of its reductions, so under
``mean`` it is added as -1; one that failed in some epochs is reduced by inspect over the others.
Each is said.

Logs without samples (``--no-log-samples``): the reductions are what is there; they are read under
``mean`` (and under any ``--epochs`` for one epoch), and ``first``/``all`` over several epochs are
refused saying the log has no samples.
"""

from __future__ import annotations

from typing import Any

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.inspect_content import DEFAULT_REDUCER, LogContent
from evalprism.io.record import ProvenanceBuilder
from evalprism.io.scores import SCORE_EXPECTED, score_value

_VALUE_CODES = {"C": 1, "I": 0, "N": -1}
#: shown in the read line for a log that did not finish
_STOPPED = {"cancelled": "cancelled", "error": "error (the run failed)", "started": "started (never finished)"}


def _code(value: Any) -> Any:
    """1 / 0 / -1 for a correctness value; any other value is returned as it is (a reduction's
    fraction is reported by the caller, the rest by :func:`_checked`)."""
    if value is None:
        return -1
    if isinstance(value, str) and value.strip().upper() in _VALUE_CODES:
        return _VALUE_CODES[value.strip().upper()]
    return value


def _checked(content: LogContent, item: str, scorer: str, value: Any) -> int:
    """``value`` as a score, or one message naming the log, the sample and the scorer."""
    code = score_value(value)
    if code is None:
        raise EvalprismError(
            f"{content.source}: sample '{item}' scored {value!r} by '{scorer}', expected C/I/N or "
            f"{SCORE_EXPECTED} (partial credit is not a correctness); choose another (scorer NAME)",
            parameter="scorer",
        )
    return code


def _scorer(content: LogContent, wanted: str | None) -> str:
    names = list(dict.fromkeys(k for s in content.samples for k in s["scores"]))
    names += [k for k in content.reducers if k not in names]
    if wanted is not None:
        if wanted not in names:
            raise EvalprismError(
                f"{content.source}: no scores from '{wanted}' (scorers: {', '.join(names) or 'none'})",
                parameter="scorer",
            )
        return wanted
    if len(names) > 1:
        raise EvalprismError(
            f"{content.source}: samples have several scorers ({', '.join(names)}); choose one (scorer NAME)",
            parameter="scorer",
        )
    if not names:
        if not content.samples:
            raise EvalprismError(
                f"{content.source}: the log has no samples and no reductions (status "
                f"{content.status}): nothing per sample to read"
            )
        raise EvalprismError(
            f"{content.source}: status {content.status}: no sample was scored "
            f"({len(content.samples)} recorded, all without a score)"
        )
    return names[0]


def _reducer(content: LogContent, scorer: str) -> str | None:
    """The reduction ``mean`` reads: inspect's mean, else the log's only reducer; None: no reduction."""
    names = content.reducers.get(scorer, [])
    if not names or DEFAULT_REDUCER in names:
        return DEFAULT_REDUCER if names else None
    if len(names) == 1:
        return names[0]
    raise EvalprismError(
        f"{content.source}: scorer '{scorer}' has several epoch reducers ({', '.join(names)}) and "
        "none is the mean: use epochs first (the first run) or epochs all (each run its own item)",
        parameter="epochs",
    )


def _ids(items: list[str], limit: int = 8) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _fraction(content: LogContent, sample_id: str, code: float, reducer: str, scorer: str) -> EvalprismError:
    others = [r for r in content.reducers.get(scorer, []) if r != reducer]
    also = f" (the log's other reducers: {', '.join(others)})" if others else ""
    if not content.samples:
        way = (
            "; the log has no samples (written with --no-log-samples), so epochs first / all cannot read it "
            "either: rerun without --no-log-samples"
        )
    else:
        way = ": use epochs first (the first run) or epochs all (each run its own item)"
    return EvalprismError(
        f"{content.source}: sample '{sample_id}' scores {code:.3g} under inspect's '{reducer}' "
        f"reduction over {content.epochs} runs{also}, not 0 or 1{way}",
        parameter="epochs",
    )


def records(
    content: LogContent,
    options: HarnessOptions,
    provenance: ProvenanceBuilder,
    shown: str | None = None,
    graded: bool = False,
) -> list[dict[str, Any]]:
    """Rows (model, benchmark, item_id, score, prompt: the sample's input text or None) of one log under ``options``' scorer and epochs; what
    was read and what was not goes to ``provenance`` (``shown``: the log's name there). ``graded``: the
    rows are scores in 0..1 (``compare``), so a mean over epochs between 0 and 1 is the item's score,
    and under ``all`` each epoch is one sample of its item; else they are correctness codes (``stem``)."""
    shown = shown or content.source
    if content.status != "success" and nothing_scored(content):
        provenance.choice(
            f"inspect {shown}: {content.model} on {content.task}, status {content.status}: "
            f"{_STOPPED.get(content.status, content.status)} with no scored sample, left out"
        )
        return []
    scorer = _scorer(content, options.scorer)
    mode = options.epochs if content.epochs > 1 else "first"
    stopped = content.status != "success"
    said: list[str] = []
    if not content.samples:
        values, how = _reduced_only(content, scorer, mode, said, graded)
    elif mode == "mean":
        values, how = _reduced(content, scorer, stopped, said, graded)
    else:
        values, how = _per_epoch(content, scorer, mode, stopped, said)
        if graded and mode == "all":
            how = "every epoch one sample of its item"
    base = {"model": content.model, "benchmark": content.task}
    inputs = {s["id"]: s.get("input") for s in content.samples}
    rows = [
        {
            **base,
            "item_id": item,
            "score": value if graded and _mean(value) else _checked(content, item, scorer, value),
            "prompt": inputs.get(item if item in inputs else item.rsplit("#", 1)[0]),
        }
        for item, value in values.items()
    ]
    picked = f"scorer {scorer}{'' if options.scorer else ' (the only one)'}"
    line = (
        f"inspect {shown}: {content.model} on {content.task}, {picked}, {content.epochs} epoch(s): {how}, "
        f"{len(rows)} items, status {content.status}"
    )
    if stopped:
        line += "; " + _stopped(content, scorer)
    provenance.choice(line)
    for extra in said:
        provenance.choice(f"inspect {shown}: {extra}")
    return rows


def nothing_scored(content: LogContent) -> bool:
    """True when a log holds no score at all (a run killed before writing a sample, or cancelled at once)."""
    return not content.reductions and not any(s["scores"] and s["error"] is None for s in content.samples)


def _stopped(content: LogContent, scorer: str) -> str:
    """``cancelled: 2 of 6 samples scored ...``: what a log that did not finish holds and leaves out."""
    size = content.dataset_size or (len(content.dataset_ids) if content.dataset_ids else None)
    if not content.samples:  # --no-log-samples: the reduction is what was scored
        reduced = next((r for (k, _), r in content.reductions.items() if k == scorer), {})
        return (
            f"{_STOPPED.get(content.status, content.status)}: {len(reduced)}{f' of {size}' if size else ''} "
            "samples in inspect's reduction, the others never answered (left out, not counted wrong)"
        )
    scored = [s for s in content.samples if s["error"] is None and s["scores"].get(scorer) is not None]
    expected = size * content.epochs if size else None
    unit = "samples" if content.epochs == 1 else "sample-epochs"
    of = f" of {expected}" if expected else ""
    text = f"{_STOPPED.get(content.status, content.status)}: {len(scored)}{of} {unit} scored"
    if content.error:
        text += f" (stopped by {content.error})"
    answered = {s["id"] for s in scored}
    missing = [i for i in (content.dataset_ids or []) if i not in answered]
    if missing:
        text += f"; never answered, left out (not counted wrong): {_ids(missing)}"
    return text


def _per_epoch(
    content: LogContent, scorer: str, mode: str, stopped: bool, said: list[str]
) -> tuple[dict[str, Any], str]:
    """``first``/``all`` from the samples; a sample error is -1 in a finished log, left out of one that stopped."""
    values: dict[str, Any] = {}
    errored, left = [], []
    for s in content.samples:
        if mode == "first" and s["epoch"] != 1:
            continue
        item = f"{s['id']}#{s['epoch']}" if mode == "all" else s["id"]
        value = s["scores"].get(scorer)
        if stopped and (s["error"] is not None or value is None):
            left.append(item)
            continue
        if s["error"] is not None or value is None:
            errored.append(f"{item} ({s['error'] or 'no score'})")
            value = None
        values[item] = _code(value)
    if errored:
        said.append(
            f"{len(errored)} sample error(s) read as -1 (no answer; stem counts it wrong unless --missing "
            f"exclude): {_ids(errored, 4)}"
        )
    if left and (content.epochs > 1 or not content.dataset_ids):  # else the status line names them
        said.append(f"not answered before the run stopped, left out (not counted wrong): {_ids(left)}")
    return values, ("epoch 1" if mode == "first" else "every epoch its own item")


def _mean(value: Any) -> bool:
    """A mean over epochs strictly between 0 and 1 (a score, not a correctness code)."""
    return isinstance(value, float) and 0.0 < value < 1.0


def _reduced(
    content: LogContent, scorer: str, stopped: bool, said: list[str], graded: bool = False
) -> tuple[dict[str, Any], str]:
    """``mean``: inspect's reduction (or the mean of the samples), sample errors said."""
    reducer = _reducer(content, scorer)
    by_id: dict[str, list[dict[str, Any]]] = {}
    for s in content.samples:
        by_id.setdefault(s["id"], []).append(s)
    ok = {i: [s for s in ss if s["error"] is None and s["scores"].get(scorer) is not None] for i, ss in by_id.items()}
    reduced = content.reductions.get((scorer, reducer)) if reducer else None
    how = (
        f"inspect's '{reducer}' reduction over epochs"
        if reducer
        else "the mean over epochs (the log has no reductions)"
    )
    several = content.reducers.get(scorer, [])
    if len(several) > 1:
        how += f" (reducers {', '.join(several)} in the log: {reducer} taken)"
    if reduced is None:
        reducer = reducer or DEFAULT_REDUCER
        # as inspect: errored epochs are left out; NOANSWER counts 0 in the mean
        reduced = {i: sum(max(_code(s["scores"][scorer]), 0) for s in ss) / len(ss) for i, ss in ok.items() if ss}
    values: dict[str, Any] = {}
    if stopped:
        whole = [i for i in by_id if len(ok[i]) == content.epochs]
        cut = [i for i in by_id if i not in whole]
        if not whole:
            raise EvalprismError(
                f"{content.source}: status {content.status}: no sample was scored in all "
                f"{content.epochs} of its runs, so there is no reduction over runs to read: use epochs "
                "first (the first run) or epochs all (each run its own item)",
                parameter="epochs",
            )
        if cut:
            said.append(
                f"scored in fewer than {content.epochs} epochs before the run stopped, left out (not counted "
                f"wrong): {_ids(cut)}"
            )
        ids = whole
    else:
        ids = list(by_id)
        failed = [i for i in ids if not ok[i]]
        partly = [
            f"{i} (epochs {', '.join(str(s['epoch']) for s in by_id[i] if s not in ok[i])})"
            for i in ids
            if ok[i] and len(ok[i]) < len(by_id[i])
        ]
        if failed:
            said.append(
                f"{len(failed)} sample(s) errored (or unscored) in every epoch, absent from inspect's reduction, read as -1 "
                f"(no answer; stem counts it wrong unless --missing exclude): {_ids(failed)}"
            )
        if partly:
            said.append(f"sample(s) errored in some epochs, reduced by inspect over the others: {_ids(partly)}")
    for i in ids:
        if not ok[i]:
            values[i] = -1
            continue
        code = _code(reduced.get(i))
        if isinstance(code, float) and code not in (0.0, 1.0) and not (graded and _mean(code)):
            raise _fraction(content, i, code, reducer or DEFAULT_REDUCER, scorer)
        values[i] = code
    return values, how


def _reduced_only(
    content: LogContent, scorer: str, mode: str, said: list[str], graded: bool = False
) -> tuple[dict[str, Any], str]:
    """A log without samples (``--no-log-samples``): its reductions are all there is."""
    reducer = _reducer(content, scorer)
    if reducer is None:
        raise EvalprismError(f"{content.source}: the log has no samples and no reductions for scorer '{scorer}'")
    if content.epochs > 1 and mode != "mean":
        raise EvalprismError(
            f"{content.source}: the log has no samples (written with --no-log-samples): epochs "
            f"{mode} needs them; what is there is inspect's '{reducer}' reduction over "
            f"{content.epochs} runs (epochs mean)",
            parameter="epochs",
        )
    values: dict[str, Any] = {}
    for i, value in content.reductions[(scorer, reducer)].items():
        code = _code(value)
        if isinstance(code, float) and code not in (0.0, 1.0) and not (graded and _mean(code)):
            raise _fraction(content, i, code, reducer, scorer)
        values[i] = code
    said.append(
        "no per-sample records (written with --no-log-samples): inspect's reduction read; sample errors "
        "cannot be seen in it"
    )
    how = "inspect's reduction (one epoch)" if content.epochs == 1 else f"inspect's '{reducer}' reduction over epochs"
    return values, how
