"""Option values: one check for every option of the library, so a notebook user and the CLI get the
same message. :func:`check_number` for numbers; :func:`check_choice` for a value of a declared
vocabulary (:mod:`evalprism.vocabularies`); :func:`check_applies` for an option given where it
has no effect (``rounds`` without bootstrap intervals, an IRT setting without a reference panel,
a harness reader's option on a plain table).

An option is a finite number within its bounds; NaN and infinities are refused everywhere (a NaN
threshold makes every comparison false, so a rule that uses it silently never fires, and a NaN
learning rate silently trains nothing). The message names the library parameter; the CLI shows its
flag instead (:meth:`evalprism.errors.EvalprismError.naming`).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import replace
from typing import Any

from evalprism.errors import EvalprismError, shorten
from evalprism.vocabularies import MAX_SEED, NUMBERS, choices

__all__ = ["MAX_SEED", "check_applies", "check_choice", "check_number", "check_seed"]


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
