"""Options: declared once, checked once.

**Declared once.** A command's options are one frozen dataclass deriving from :class:`Options`, each
field declared with :func:`option` (its default and its help; where they differ from the derived
ones, its flags, metavar, the order its choices are listed in, and how command-line text becomes its
value). Everything else is derived from the field:

- its vocabulary: a ``Literal`` annotation (:mod:`evalprism.vocabularies`) lists the allowed values,
  for the check, its message and the command line's choices;
- its bounds: :data:`~evalprism.vocabularies.NUMBERS` under the field's name (or ``number=``), for the
  check, its message and the command line's typer bounds;
- its flag: ``--`` and the field's name with ``-`` for ``_``.

A field holding another options class (:func:`group`) brings that class's fields along (the harness
readers' options in every command that reads logs). :mod:`evalprism.cli_options` turns a class into
typer options and the parsed flags back into one instance, which the library takes; a notebook user
builds the same instance with keywords. A new option is one field. The anchor is scikit-learn's
``_parameter_constraints``.

**Checked once.** Constructing an :class:`Options` checks every field against its declaration
(:meth:`Options.__post_init__`), then the class's own cross-field rules (:meth:`Options.check`). The
checks are also functions for values that are not options fields: :func:`check_number` for numbers,
:func:`check_choice` for a value of a declared vocabulary, :func:`check_applies` for an option given
where it has no effect (``rounds`` without bootstrap intervals, an IRT setting without a reference
panel, a harness reader's option on a plain table).

An option is a finite number within its bounds; NaN and infinities are refused everywhere (a NaN
threshold makes every comparison false, so a rule that uses it silently never fires, and a NaN
learning rate silently trains nothing). The message names the library parameter; the CLI shows its
flag instead (:meth:`evalprism.errors.EvalprismError.naming`).

Importing this module imports nothing heavy (no numpy, no pandas): the command line builds its
options from these declarations at start-up, and ``evalprism --help`` stays fast.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal, get_args, get_origin

from evalprism.errors import EvalprismError, shorten
from evalprism.vocabularies import MAX_SEED, NUMBERS, choices

__all__ = [
    "MAX_SEED",
    "Declared",
    "Options",
    "check_applies",
    "check_choice",
    "check_number",
    "check_seed",
    "declared_fields",
    "group",
    "option",
]


# --- the checks ------------------------------------------------------------------------------------


def check_number(name: str, value: Any, **depends: Any) -> float:
    """Return ``value`` as a float when it is a finite number within the bounds :data:`NUMBERS`
    declares for ``name``, else raise :class:`EvalprismError` naming ``name`` and what was expected.
    ``depends``: the :class:`~evalprism.vocabularies.Bounds` fields that depend on another value
    (``flip_high`` above ``flip_low``: ``low=flip_low``), given at the check."""
    bounds = replace(NUMBERS[name], **depends) if depends else NUMBERS[name]
    # a number, not text that reads as one ("0.5" would pass float() and fail later) nor a bool
    x = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    if not math.isfinite(x) or not bounds.admits(x):
        raise EvalprismError(f"{name}: expected {bounds.expected()}, got {shorten(repr(value))}", parameter=name)
    return x


def check_choice(name: str, value: Any, vocabulary: Any) -> Any:
    """Return ``value`` when it is one of the ``vocabulary``'s values (a ``Literal`` of
    :mod:`evalprism.vocabularies`), else raise :class:`EvalprismError` naming ``name`` and the values."""
    allowed = choices(vocabulary)
    if not isinstance(value, str) or value not in allowed:
        raise EvalprismError(
            f"{name}: expected one of {', '.join(allowed)}, got {shorten(repr(value))}", parameter=name
        )
    return value


def check_applies(name: str, value: Any, applies: bool, why: str) -> None:
    """Refuse option ``name`` when the user gave it (``value`` is not None) but it has no effect on
    this run, with ``why`` (what it applies to and what is missing). An option that is silently
    ignored makes a user believe a result was computed the way they asked. Options that depend on
    another one take None as their default so that "not given" is visible here."""
    if value is not None and not applies:
        raise EvalprismError(f"{name} {value}: does not apply here: {why}; drop {name}", parameter=name)


def check_seed(value: Any) -> Any:
    """Return ``value`` when it is None (not given) or a whole number from 0 to :data:`MAX_SEED`, the
    seeds every random generator the toolkit uses accepts (numpy refuses negative ones, scikit-learn
    anything above 2**32 - 1); else raise :class:`EvalprismError`. The one check of every ``seed``
    option; its bounds are ``NUMBERS["seed"]``."""
    return None if value is None else int(check_number("seed", value))


# --- the declarations ------------------------------------------------------------------------------

#: the metadata key under which a field's :class:`Declared` is kept
_KEY = "evalprism.option"


@dataclass(frozen=True)
class Declared:
    """How one field of an :class:`Options` class is shown and read on the command line.

    ``help``: the flag's help; ``flags``: its spellings (default ``--name-with-dashes``); ``metavar``:
    the placeholder in the help; ``number``: the :data:`NUMBERS` entry of its bounds (default: the
    field's own name when declared there); ``order``: its choices in the help's order (default the
    vocabulary's); ``parse``: turns the command line's text (or a library user's looser value) into
    the field's value, given the value and the parameter name, and must accept a parsed value as it is;
    ``cli``: the command line's type when ``parse`` reads text (``str``, or ``list[str]`` for a
    repeatable flag); ``shown``: False for a field only the library has (no flag)."""

    help: str = ""
    flags: tuple[str, ...] = ()
    metavar: str | None = None
    number: str | None = None
    order: tuple[str, ...] | None = None
    parse: Callable[[Any, str], Any] | None = None
    cli: Any = None
    shown: bool = True

    def flag_names(self, name: str) -> tuple[str, ...]:
        """The flags of the field ``name``."""
        return self.flags or ("--" + name.replace("_", "-"),)


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str = "",
    flags: str | tuple[str, ...] = (),
    metavar: str | None = None,
    number: str | None = None,
    order: tuple[str, ...] | None = None,
    parse: Callable[[Any, str], Any] | None = None,
    cli: Any = None,
    shown: bool = True,
    factory: Callable[[], Any] | None = None,
) -> Any:
    """A field of an :class:`Options` class with its declaration (:class:`Declared`); ``factory``
    instead of ``default`` for a mutable default."""
    declared = Declared(
        help=help,
        flags=(flags,) if isinstance(flags, str) else tuple(flags),
        metavar=metavar,
        number=number,
        order=order,
        parse=parse,
        cli=cli,
        shown=shown,
    )
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={_KEY: declared})
    return dataclasses.field(default=default, metadata={_KEY: declared})


def group(kind: type[Options], **overrides: Mapping[str, Any]) -> Any:
    """A field holding another options class, whose fields become this class's flags too (the harness
    readers' options of every command that reads logs). ``overrides``: per field of ``kind``, the
    :class:`Declared` attributes this command shows differently (``epochs={"flags": ("--log-epochs",),
    "help": ...}`` where the command has an ``--epochs`` of its own)."""
    return dataclasses.field(default_factory=kind, metadata={_KEY: _Group(kind, dict(overrides))})


@dataclass(frozen=True)
class _Group:
    kind: type[Options]
    overrides: dict[str, Mapping[str, Any]]


@dataclass(frozen=True)
class Field:
    """One declared field as the command line sees it: its name, its value's type (the ``Literal`` of
    a vocabulary, ``int``, ``str | None``, ...), its declaration, its default, and the groups it sits in."""

    name: str
    annotation: Any
    declared: Declared
    default: Any
    path: tuple[str, ...]

    @property
    def vocabulary(self) -> Any:
        """The field's ``Literal`` vocabulary, or None."""
        return literal_of(self.annotation)

    @property
    def optional(self) -> bool:
        """Whether None is a value of the field (not given)."""
        return type(None) in get_args(self.annotation)

    @property
    def bounds_name(self) -> str | None:
        """The :data:`NUMBERS` entry of the field's bounds, or None."""
        name = self.declared.number or self.name
        return name if name in NUMBERS else None


def literal_of(annotation: Any) -> Any:
    """The ``Literal`` inside ``annotation`` (``Literal[...]`` or ``Literal[...] | None``), or None."""
    if get_origin(annotation) is Literal:
        return annotation
    if get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [a for a in get_args(annotation) if get_origin(a) is Literal]
        return inner[0] if inner else None
    return None


def declared_fields(kind: type[Options], path: tuple[str, ...] = ()) -> Iterator[Field | tuple[Field, type[Options]]]:
    """The fields of ``kind`` in declaration order: a :class:`Field` per option, and for a
    :func:`group` the pair (its field, its class), followed by its own fields (``path`` names the
    groups a field sits in)."""
    hints = _hints(kind)
    for f in dataclasses.fields(kind):
        meta = f.metadata.get(_KEY)
        if meta is None:
            continue
        if isinstance(meta, _Group):
            yield Field(f.name, hints[f.name], Declared(shown=False), None, path), meta.kind
            for inner in declared_fields(meta.kind, (*path, f.name)):
                if isinstance(inner, Field) and inner.name in meta.overrides:
                    inner = replace(inner, declared=replace(inner.declared, **meta.overrides[inner.name]))
                yield inner
            continue
        default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
        yield Field(f.name, hints[f.name], meta, default, path)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(kind: type[Options]) -> dict[str, Any]:
    """The evaluated annotations of an options class (its module's names resolved once per class)."""
    if kind not in _HINTS:
        _HINTS[kind] = typing.get_type_hints(kind)
    return _HINTS[kind]


class Options:
    """The base of every options class: constructing one checks every field against its declaration
    (vocabulary and bounds; a value that is None means "not given" and is not checked), turns a
    command-line or looser value into the field's own through its ``parse``, then runs the class's
    cross-field rules (:meth:`check`). Subclasses are frozen dataclasses whose fields are declared with
    :func:`option` and :func:`group`."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def __post_init__(self) -> None:
        for item in declared_fields(type(self)):
            if isinstance(item, tuple) or item.path:
                continue  # a group checked itself when it was constructed
            value = getattr(self, item.name)
            if item.declared.parse is not None:
                value = item.declared.parse(value, item.name)
                object.__setattr__(self, item.name, value)
            elif isinstance(value, list):  # a repeated flag, or a notebook's list: one immutable value
                value = tuple(value)
                object.__setattr__(self, item.name, value)
            if value is None:
                continue
            if item.vocabulary is not None:
                check_choice(item.name, value, item.vocabulary)
            elif item.bounds_name is not None and not isinstance(value, tuple):
                check_number(item.bounds_name, value)
        self.check()

    def check(self) -> None:
        """The class's rules between fields (an option that applies only with another one, ...)."""

    def record(self) -> dict[str, Any]:
        """The options as ``run.json`` records them: every field by name (a group as its own record)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = value.record() if isinstance(value, Options) else _plain(value)
        return out


def _plain(value: Any) -> Any:
    """A value as JSON holds it (tuples as lists, mappings as objects)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value
