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
from typing import Any

from evalprism.errors import EvalprismError, shorten
from evalprism.vocabularies import choices


def check_number(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    integer: bool = False,
) -> float:
    """Return ``value`` as a float when it is a finite number in the interval from ``low`` to ``high``
    (open at an end with ``low_open``/``high_open``; ``integer``: a whole number), else raise
    :class:`EvalprismError` naming ``name`` and what was expected."""
    kind = "a whole number" if integer else "a finite number"
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        bounds.append(f"{'<' if high_open else '<='} {high:g}")
    expected = kind + (" " + " and ".join(bounds) if bounds else "")
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    ok = (
        not isinstance(value, bool)
        and math.isfinite(x)
        and (not integer or x.is_integer())
        and (low is None or (x > low if low_open else x >= low))
        and (high is None or (x < high if high_open else x <= high))
    )
    if not ok:
        raise EvalprismError(f"{name}: expected {expected}, got {value!r}", parameter=name)
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


#: the largest seed: numpy's and scikit-learn's ``random_state`` take 0 .. 2**32 - 1
MAX_SEED = 2**32 - 1


def check_seed(value: Any, name: str = "seed") -> Any:
    """Return ``value`` when it is None (not given) or a whole number from 0 to :data:`MAX_SEED`, the
    seeds every random generator the toolkit uses accepts (numpy refuses negative ones, scikit-learn
    anything above 2**32 - 1); else raise :class:`EvalprismError` naming ``name``. The one check of
    every ``seed`` option."""
    if value is None:
        return value
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and float(value).is_integer()
        and 0 <= value <= MAX_SEED
    )
    if not ok:
        raise EvalprismError(
            f"{name}: expected a whole number from 0 to {MAX_SEED}, got {shorten(repr(value))}", parameter=name
        )
    return int(value)
