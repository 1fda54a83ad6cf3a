"""The command line's options for reading harness output, declared once.

`stem pool/locate/plan/audit`, `compare` and `p2l fit/train/split/evaluate` read lm-evaluation-harness
samples and inspect_ai logs; the five options that steer those readers (``--metric``,
``--lm-eval-filter``, ``--model-name``, ``--scorer``, ``--epochs``) are declared here and added to a
command by :func:`harness_options`, which hands the command one
:class:`~evalprism.io.harness_options.HarnessOptions`. Importing this module imports neither numpy
nor pandas (``evalprism --help`` stays fast).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated, Any

import typer

from evalprism.vocabularies import Epochs, choice_enum

HarnessEpochsChoice = choice_enum("HarnessEpochsChoice", Epochs, order=("mean", "first", "all"))

HarnessMetric = Annotated[
    list[str] | None,
    typer.Option(
        "--metric",
        help="lm-eval samples: the metric holding 0/1, as TASK=METRIC (repeat) or METRIC for every task (default per task: the first in the results file's higher_is_better).",
        metavar="[TASK=]METRIC",
    ),
]
HarnessFilter = Annotated[
    list[str] | None,
    typer.Option(
        "--lm-eval-filter",
        help="lm-eval samples: the filter, as TASK=FILTER (repeat) or FILTER for every task (default: the task's only filter, else strict-match, else the first listed).",
        metavar="[TASK=]FILTER",
    ),
]
HarnessModelName = Annotated[
    list[str] | None,
    typer.Option(
        "--model-name",
        help="lm-eval run directory (relative path or name) to model name (repeat; default: the directory's name).",
        metavar="DIR=NAME",
    ),
]
HarnessScorer = Annotated[
    str | None, typer.Option("--scorer", help="inspect_ai logs: the scorer to read (default: the only one).")
]
HarnessEpochs = Annotated[
    HarnessEpochsChoice,
    typer.Option(
        "--epochs",
        help="inspect_ai samples run several epochs: mean (inspect's reduction; must be 0 or 1), first, or all (each epoch its own item).",
    ),
]


#: the options that say how harness output (lm-eval samples, inspect_ai logs) is read, declared once for
#: every command that reads correctness: name, annotation (flag and help), default
HARNESS_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("metric", HarnessMetric, None),
    ("lm_eval_filter", HarnessFilter, None),
    ("model_name", HarnessModelName, None),
    ("scorer", HarnessScorer, None),
    ("epochs", HarnessEpochs, HarnessEpochsChoice.mean),
)


def harness_options(**annotations: Any) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator: the command's ``harness`` parameter is shown as the harness options
    (:data:`HARNESS_OPTIONS`, in its place; ``annotations`` replaces an option's flag and help) and the
    command receives them as one ``HarnessOptions``. Typer reads a command's options from
    ``inspect.signature``, which honours ``__signature__``. A message about an option whose flag
    ``annotations`` renamed (`p2l train`'s ``--log-epochs``) names the flag this command has."""
    renamed = {name: _flag(annotation) for name, annotation in annotations.items()}

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        # the annotations evaluated (typer reads Annotated options off them); harness's own annotation,
        # imported for type checking only, is replaced and never read
        signature = inspect.signature(command, eval_str=True, locals={"HarnessOptions": None})
        kind = signature.parameters["harness"].kind
        options = [
            inspect.Parameter(name, kind, default=default, annotation=annotations.get(name, annotation))
            for name, annotation, default in HARNESS_OPTIONS
        ]
        parameters = []
        for parameter in signature.parameters.values():
            parameters.extend(options if parameter.name == "harness" else [parameter])

        @functools.wraps(command)
        def with_harness(*args: Any, **kwargs: Any) -> None:
            from evalprism.errors import EvalprismError
            from evalprism.io.harness_options import HarnessOptions

            given = {name: kwargs.pop(name) for name, _, _ in HARNESS_OPTIONS}
            try:
                kwargs["harness"] = HarnessOptions.parse(**given | {"epochs": given["epochs"].value})
                command(*args, **kwargs)
            except EvalprismError as exc:
                if exc.parameter not in renamed:
                    raise
                raise EvalprismError(exc.naming(renamed[exc.parameter])) from None

        with_harness.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        # typer also resolves annotations with typing.get_type_hints, which reads __annotations__
        with_harness.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_harness

    return decorate


def _flag(annotation: Any) -> str:
    """The first flag of an ``Annotated[..., typer.Option("--flag", ...)]`` option."""
    info = next(m for m in getattr(annotation, "__metadata__", ()) if hasattr(m, "param_decls"))
    # inside Annotated, typer keeps the first flag where a default would go, the others in param_decls
    return str(info.default if isinstance(info.default, str) else info.param_decls[0])
