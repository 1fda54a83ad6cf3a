"""The command line's options, derived from the library's options classes.

A command declares which options class it takes (:func:`with_options`); every declared field of that
class (:mod:`evalprism.io.options`), its groups' fields included, becomes a typer option: the flag
and help from the declaration, the choices from the field's vocabulary (a ``Literal``), the bounds
from :data:`~evalprism.vocabularies.NUMBERS`, the default from the field. When the command runs, the
parsed flags are folded back into one instance of the class, which the command hands to the library.
Nothing about an option is written in ``cli.py``.

A message about an option names the library parameter (the field); inside a command it is shown with
that command's flag (``--val-fraction``; ``--log-epochs`` where a group's field is renamed).

Typer reads a command's options from ``inspect.signature`` (which honours ``__signature__``) and
resolves annotations with ``typing.get_type_hints`` (which reads ``__annotations__``): the decorator
sets both. Importing this module imports neither numpy nor pandas (``evalprism --help`` stays fast).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Optional, get_args, get_origin

import typer

from evalprism.errors import EvalprismError
from evalprism.io.options import Field, Options, declared_fields
from evalprism.vocabularies import NUMBERS, choice_enum


def with_options(
    kind: type[Options], parameter: str = "options"
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Decorator: the command's ``parameter`` is shown as the options of ``kind`` (in its place) and
    the command receives them as one ``kind``."""
    fields = [f for f in declared_fields(kind) if isinstance(f, Field) and f.declared.shown]
    names = [f.name for f in fields]
    assert len(set(names)) == len(names), f"{kind.__name__}: two options share a name: {names}"
    flags = {f.name: f.declared.flag_names(f.name)[0] for f in fields}

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        signature = inspect.signature(command, eval_str=True, locals={kind.__name__: kind})
        kind_of = signature.parameters[parameter].kind
        shown = [
            inspect.Parameter(f.name, kind_of, default=_cli_default(f), annotation=_cli_annotation(kind, f))
            for f in fields
        ]
        parameters = []
        for p in signature.parameters.values():
            parameters.extend(shown if p.name == parameter else [p])

        @functools.wraps(command)
        def with_declared(*args: Any, **kwargs: Any) -> None:
            given = {f.name: kwargs.pop(f.name) for f in fields}
            try:
                kwargs[parameter] = fold(kind, fields, given)
                command(*args, **kwargs)
            except EvalprismError as exc:
                if exc.parameter not in flags:
                    raise
                raise EvalprismError(exc.naming(flags[exc.parameter])) from None

        with_declared.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_declared.__annotations__ = {p.name: p.annotation for p in parameters}
        with_declared.flags = flags  # type: ignore[attr-defined]  # read by tests and by flag_of
        return with_declared

    return decorate


def fold(kind: type[Options], fields: list[Field], given: dict[str, Any]) -> Options:
    """One ``kind`` from the parsed flags: choices back to their values, flags not given left to the
    field's default, each group built first."""
    values: dict[tuple[str, ...], dict[str, Any]] = {}
    for f in fields:
        value = given[f.name]
        if value is None and not f.optional and f.default is not None:
            continue  # a repeatable flag not given: the field's own default
        values.setdefault(f.path, {})[f.name] = getattr(value, "value", value)
    groups = [item for item in declared_fields(kind) if isinstance(item, tuple)]
    for group_field, group_kind in reversed(groups):  # a group comes before its own groups: built bottom up
        path = (*group_field.path, group_field.name)
        values.setdefault(group_field.path, {})[group_field.name] = group_kind(**values.pop(path, {}))
    return kind(**values.get((), {}))


def _cli_default(f: Field) -> Any:
    """The typer default: the vocabulary's member for a choice, None for a repeatable flag."""
    if f.declared.cli is not None and get_origin(f.declared.cli) is list:
        return None
    if f.vocabulary is not None and f.default is not None:
        return _choices(f)(f.default)
    return f.default


@functools.cache
def _choice_type(vocabulary: Any, order: tuple[str, ...] | None, name: str) -> Any:
    return choice_enum(name, vocabulary, order=order)


def _choices(f: Field) -> Any:
    return _choice_type(f.vocabulary, f.declared.order, "".join(p.title() for p in f.name.split("_")) + "Choice")


def _cli_type(f: Field) -> Any:
    """The type typer parses the flag as."""
    if f.declared.cli is not None:
        return Optional[f.declared.cli]  # noqa: UP045  # typer reads Optional[...]
    if f.vocabulary is not None:
        return Optional[_choices(f)] if f.optional else _choices(f)  # noqa: UP045
    inner = [a for a in get_args(f.annotation) if a is not type(None)] if f.optional else [f.annotation]
    annotation = inner[0] if len(inner) == 1 else f.annotation
    if get_origin(annotation) in (tuple, list, Sequence):  # a repeatable flag
        return Optional[list[get_args(annotation)[0]]]  # type: ignore[misc]  # noqa: UP045
    return Optional[annotation] if f.optional else annotation  # noqa: UP045


def _cli_annotation(kind: type[Options], f: Field) -> Any:
    """``Annotated[type, typer.Option(...)]`` of a field: flags, help, metavar, bounds."""
    d = f.declared
    extra: dict[str, Any] = {}
    if d.metavar:
        extra["metavar"] = d.metavar
    # the bounds go in the help, and the options class checks them when the flags are folded into it
    # (before any input is read): its message names the flag and what was expected, where a typer range
    # would stop with a usage block and pydantic's words
    bounds = f" [{NUMBERS[f.bounds_name].expected()}]" if f.bounds_name is not None else ""
    return Annotated[_cli_type(f), typer.Option(*d.flag_names(f.name), help=d.help + bounds, **extra)]
