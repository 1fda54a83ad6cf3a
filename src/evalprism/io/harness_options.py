"""How to read evaluation-harness output: the one place the reader choices are parsed and kept.

An lm-evaluation-harness run directory can hold tasks with different metrics and filters, and an
inspect_ai log can hold several scorers and epochs. :class:`HarnessOptions` carries what the user
chose (per task where it applies); the readers (:mod:`evalprism.io.lm_eval`,
:mod:`evalprism.io.inspect_logs`) fill in a default for whatever is left open and report every
choice they made (:class:`~evalprism.io.record.ProvenanceBuilder`), so a user can see what a
directory was read as.

Each option steers one reader (:data:`READER_OF`); an option given for input that reader never
reads (``--metric`` on a CSV table, ``--scorer`` on lm-eval samples) is refused, not ignored.

Per-task choices are written ``TASK=VALUE`` (``--metric gsm8k=exact_match``); a value without ``=``
applies to every task that has it (``--metric acc``), and ``TASK=VALUE`` entries override it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from evalprism.errors import EvalprismError
from evalprism.io.options import Options, check_applies, option
from evalprism.vocabularies import Epochs

#: the key of a choice that applies to every task
ANY_TASK = "*"
LM_EVAL = "lm-eval samples"
INSPECT = "inspect_ai logs"
#: the reader each option steers (the field of :class:`HarnessOptions`)
READER_OF = {"metric": LM_EVAL, "lm_eval_filter": LM_EVAL, "model_name": LM_EVAL, "scorer": INSPECT, "epochs": INSPECT}


def parse_assignments(
    values: Iterable[str] | Mapping[str, str] | str | None,
    parameter: str,
    *,
    allow_global: bool = True,
    keyword: str = "KEY",
) -> dict[str, str]:
    """``["acc", "gsm8k=exact_match"]`` -> ``{"*": "acc", "gsm8k": "exact_match"}``; a mapping is
    taken as it is (its keys and values as text).

    ``parameter`` names the option in messages (the CLI spells it as its flag); ``keyword`` what a key is
    (``COLUMN``). Refused: an empty side of ``=``, a key given twice, or (``allow_global=False``) a
    value without ``KEY=``."""
    if values is None:
        return {}
    if isinstance(values, Mapping):
        values = [f"{k}={v}" if k != ANY_TASK else str(v) for k, v in values.items()]
    if isinstance(values, str):
        values = [values]
    out: dict[str, str] = {}
    for raw in values:
        key, sep, value = (s.strip() for s in str(raw).partition("="))
        if not sep:
            if not allow_global:
                raise EvalprismError(f"{parameter} {raw!r}: expected {keyword}=VALUE", parameter=parameter)
            key, value = ANY_TASK, key
        if not key or not value:
            raise EvalprismError(
                f"{parameter} {raw!r}: expected {'TASK=VALUE or VALUE' if allow_global else keyword + '=VALUE'} "
                "with both sides non-empty",
                parameter=parameter,
            )
        if key in out:
            what = "a value for every task" if key == ANY_TASK else f"'{key}'"
            raise EvalprismError(
                f"{parameter}: {what} is given twice ({out[key]!r} and {value!r})", parameter=parameter
            )
        out[key] = value
    return out


def _per_task(values: Any, parameter: str) -> dict[str, str]:
    return parse_assignments(values, parameter)


def _named(values: Any, parameter: str) -> dict[str, str]:
    return parse_assignments(values, parameter, allow_global=False)


@dataclass(frozen=True)
class HarnessOptions(Options):
    """What the user chose for reading harness output (empty: the readers' defaults).

    ``metric`` / ``lm_eval_filter``: per lm-eval task (key :data:`ANY_TASK`: every task that has
    that metric or filter; the others keep their default, said in the read notes, and a value that
    no task has is refused); ``model_name``: lm-eval run directory (relative to the path read, or
    its last component) or model name -> model name; ``scorer``: the inspect_ai scorer (None: the
    only one, else refused); ``epochs``: inspect_ai samples run several times: ``first`` epoch, ``mean`` over epochs
    (inspect's default reducer; refused where the mean is not 0 or 1) or ``all`` (each epoch its own
    item, ``<id>#<epoch>``). Each takes the command line's text as well (``metric=["acc",
    "gsm8k=exact_match"]``, ``model_name=["run1=llama"]``)."""

    metric: Mapping[str, str] = option(
        factory=dict,
        help="lm-eval samples: the metric holding 0/1, as TASK=METRIC (repeat) or METRIC for every task "
        "(default per task: the first in the results file's higher_is_better).",
        metavar="[TASK=]METRIC",
        parse=_per_task,
        cli=list[str],
    )
    lm_eval_filter: Mapping[str, str] = option(
        factory=dict,
        help="lm-eval samples: the filter, as TASK=FILTER (repeat) or FILTER for every task (default: the "
        "task's only filter, else strict-match, else the first listed).",
        metavar="[TASK=]FILTER",
        parse=_per_task,
        cli=list[str],
    )
    model_name: Mapping[str, str] = option(
        factory=dict,
        help="lm-eval run directory (relative path or name) to model name (repeat; default: the directory's name).",
        metavar="DIR=NAME",
        parse=_named,
        cli=list[str],
    )
    scorer: str | None = option(None, help="inspect_ai logs: the scorer to read (default: the only one).")
    epochs: Epochs = option(
        "mean",
        help="inspect_ai samples run several epochs: mean (inspect's reduction; must be 0 or 1), first, or all "
        "(each epoch its own item).",
        order=("mean", "first", "all"),
    )

    def check(self) -> None:
        if self.scorer == "":
            object.__setattr__(self, "scorer", None)

    def given(self) -> dict[str, str]:
        """The options the user set, by parameter, as they would write them (``epochs`` when not the default)."""
        shown = {"metric": self.metric, "lm_eval_filter": self.lm_eval_filter, "model_name": self.model_name}
        out = {
            name: " ".join(v if k == ANY_TASK else f"{k}={v}" for k, v in values.items())
            for name, values in shown.items()
            if values
        }
        if self.scorer is not None:
            out["scorer"] = self.scorer
        if self.epochs != "mean":
            out["epochs"] = self.epochs
        return out

    def record(self) -> dict[str, Any]:
        return dict(self.given())

    def check_applies(self, readers: Iterable[str], what: str) -> None:
        """Refuse an option whose reader (:data:`READER_OF`) did not read any of the input, ``what``
        (e.g. "x.csv is a table: its score column is read as it is")."""
        readers = set(readers)
        for name, value in self.given().items():
            check_applies(
                name, value, READER_OF[name] in readers, f"it steers the reader of {READER_OF[name]}, and {what}"
            )

    def for_task(self, choices: Mapping[str, str], task: str) -> str | None:
        """The user's choice for ``task`` from ``choices`` (its own entry, else the global one)."""
        return choices.get(task, choices.get(ANY_TASK))
