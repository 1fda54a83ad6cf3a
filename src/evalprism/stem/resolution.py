"""What a score estimate can and cannot tell about the members around it (issue 42, item 2): the
design's resolution and abstention near a member.

A method that estimates the full-pool reference score (A, B, the adaptive estimate) gives an estimate
``m`` with a standard error ``s``, and every report shows its 95% interval ``m ± z s``
(``z`` = :data:`~evalprism.stats.pairwise.Z95` = 1.96, the interval whose coverage the studies
measure). The rules, one each:

- **Resolution** of the design: ``d = z s`` points, the smallest distance between the estimate and a
  member's reference score at which these items tell which side of the member the model lies at 95%.
  Why this number: a member at least ``d`` away lies outside the 95% interval, so the interval is on
  one side of it, and under N(m, s²) the other side has probability at most
  ``Phi(-1.96) = 0.025``; a member closer than ``d`` lies inside the interval, and placing the model
  on one side of it would contradict the interval the same report shows.
- **Abstention**: when the interval holds a member's reference score (``|m - mu_j| < d``, strictly;
  with ``s = 0`` never), the localization is "between L and U, cannot tell which side of X": ``X``
  is the nearest such member, ``L`` and ``U`` the nearest members the interval does clear (below
  and above every member it holds; an open end when there is none). The probability of each side of
  ``X`` is the normal one, ``P(below X) = Phi((mu_X - m) / s)`` and ``P(above X) = 1 - P(below X)``,
  and the wider interval's own probability is ``Phi((mu_U - m) / s) - Phi((mu_L - m) / s)``. The
  point placement (the members below ``m``) is still computed and scored in trials; the abstention is
  what the outputs lead with.
- **Items to resolve the nearest member** at distance ``g``: a design estimate's standard error falls
  as ``1 / sqrt(n)`` with the ``n`` items answered (simple or stratified random sampling with
  proportional allocation; the finite-population correction, ignored here, only makes it fall
  faster, so the count errs on the side of more items), so ``n' = ceil(n (z s / g)^2)`` items give
  ``z s' <= g``; ``n' - n`` more are needed (0 when the member is already resolved; none when
  ``g = 0``, where no number of items tells the side). For the adaptive estimate the count is an
  approximation: its calibration adds a variance measured for the plan's own size. The distance
  ``g`` is itself estimated, so the count is a guide, not a guarantee.
- **At the ceiling** (a model right on almost every planned item, :mod:`~evalprism.stem.confidence`)
  the interval is one-sided, "at or above L": every member above ``L`` is held (the items cannot tell
  whether the model is above it), ``X`` is the lowest of them, ``L``'s nearest member below is the
  lower end and there is no upper end (:func:`ceiling_abstention`); the side probabilities are the
  normal ones of the calibrated standard error, the interval's ``P(above lower end)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from evalprism.stats.pairwise import Z95


@dataclass(frozen=True)
class Resolution:
    """The design's resolution for one estimate (module docstring): the ``items`` answered, the
    ``standard_error`` and the resolvable ``distance`` ``z s`` (points); the ``nearest`` member, its
    ``gap`` (points), the items ``needed`` in all to resolve it and the ``more`` beyond ``items``
    (None when the gap is 0: no number of items tells the side)."""

    items: int
    standard_error: float
    distance: float
    nearest: str
    gap: float
    needed: int | None
    more: int | None

    @property
    def resolves_nearest(self) -> bool:
        """True when the nearest member lies outside the 95% interval (the placement is told)."""
        return self.more == 0


@dataclass(frozen=True)
class Abstention:
    """A localization that cannot tell which side of ``member`` the model lies on (module docstring):
    the nearest members the interval clears, ``lower`` and ``upper`` (None: an open end), the members
    the 95% interval holds (``straddled``, by reference score), the probability of each side of
    ``member`` (``p_below`` + ``p_above`` = 1), the wider interval's probability (``confidence``) and
    its positions (``positions``: members below ``lower``'s upper edge, up to those below ``upper``)."""

    member: str
    lower: str | None
    upper: str | None
    straddled: tuple[str, ...]
    p_below: float
    p_above: float
    confidence: float
    positions: tuple[int, int]
    bound: float | None = None  # at the ceiling: the one-sided interval's lower bound (points)

    @property
    def others(self) -> list[str]:
        """The members the interval holds besides ``member``."""
        return [m for m in self.straddled if m != self.member]

    @property
    def untold(self) -> str:
        """``member`` and any other member the interval holds, as "X or Y" (a table cell's short form)."""
        return " or ".join([self.member, *self.others])

    @property
    def also_held(self) -> str:
        """The other members the interval holds, as a clause (``" (nor of Y: the interval holds it too)"``;
        empty when it holds ``member`` alone): without it "cannot tell which side of X" would read as if the
        side of every other member were told."""
        others = self.others
        if not others:
            return ""
        return f" (nor of {', '.join(others)}: the interval holds {'it' if len(others) == 1 else 'them'} too)"

    @property
    def interval(self) -> str:
        """ "between L and U, cannot tell which side of X" (an open end: "below U" or "above L"; at the
        ceiling: "at or above B, above L, cannot tell which side of X"), naming any other member the
        interval holds (:attr:`also_held`)."""
        side = f"cannot tell which side of {self.member}{self.also_held}"
        if self.bound is not None:
            above = f", above {self.lower}" if self.lower else ""
            return f"at or above {self.bound:.1f} (the items' ceiling){above}, {side}"
        if self.lower and self.upper:
            return f"between {self.lower} and {self.upper}, {side}"
        if self.upper:
            return f"below {self.upper}, {side}"
        if self.lower:
            return f"above {self.lower}, {side}"
        return f"anywhere on the family, {side}"

    def holds(self, position: int) -> bool:
        """Whether the wider interval holds ``position`` (members below the model)."""
        return self.positions[0] <= position <= self.positions[1]


def resolution(estimate: float, se: float, items: int, names: list[str], member_scores: np.ndarray) -> Resolution:
    """The resolution of ``items`` answers whose estimate is ``estimate`` ± ``se`` (points), and what
    resolving the nearest of the members ``names`` (reference scores ``member_scores``) takes."""
    mu = np.asarray(member_scores, dtype=float)
    gaps = np.abs(mu - estimate)
    j = int(gaps.argmin())
    gap, distance = float(gaps[j]), Z95 * se
    if gap >= distance:
        needed: int | None = items
    elif gap == 0:
        needed = None
    else:
        needed = max(items, math.ceil(items * (distance / gap) ** 2))
    return Resolution(
        items=items,
        standard_error=se,
        distance=distance,
        nearest=names[j],
        gap=gap,
        needed=needed,
        more=None if needed is None else needed - items,
    )


def abstention(estimate: float, se: float, names: list[str], member_scores: np.ndarray) -> Abstention | None:
    """The abstention of an estimate ``estimate`` ± ``se`` (points) among the members ``names`` with
    reference scores ``member_scores`` (module docstring); None when its 95% interval holds none."""
    mu = np.asarray(member_scores, dtype=float)
    distance = Z95 * se
    inside = np.abs(mu - estimate) < distance
    if not inside.any():
        return None
    order = np.argsort(mu, kind="stable")
    ranked = mu[order]
    held = inside[order]
    first, last = int(np.flatnonzero(held)[0]), int(np.flatnonzero(held)[-1])
    lower = names[order[first - 1]] if first >= 1 else None
    upper = names[order[last + 1]] if last + 1 < len(mu) else None
    x = int(np.argmin(np.where(inside, np.abs(mu - estimate), np.inf)))
    p_below = float(ndtr((mu[x] - estimate) / se))
    lo = ranked[first - 1] if first >= 1 else -np.inf
    hi = ranked[last + 1] if last + 1 < len(mu) else np.inf
    return Abstention(
        member=names[x],
        lower=lower,
        upper=upper,
        straddled=tuple(names[order[k]] for k in range(first, last + 1)),
        p_below=p_below,
        p_above=1.0 - p_below,
        confidence=float(ndtr((hi - estimate) / se) - ndtr((lo - estimate) / se)),
        positions=(first, last + 1),
    )


def ceiling_abstention(
    estimate: float, se: float, bound: float, names: list[str], member_scores: np.ndarray
) -> Abstention | None:
    """At the ceiling (module docstring): the one-sided interval "at or above ``bound``" among the
    members ``names`` (reference scores ``member_scores``); None when ``bound`` clears every member
    (the model is then told above them all)."""
    mu = np.asarray(member_scores, dtype=float)
    order = np.argsort(mu, kind="stable")
    ranked = mu[order]
    first = int(np.searchsorted(ranked, bound, side="right"))  # members at or below the bound
    if first == len(mu):
        return None
    x = int(order[first])
    p_below = float(ndtr((mu[x] - estimate) / se)) if se > 0 else float(mu[x] > estimate)
    lo = ranked[first - 1] if first >= 1 else -np.inf
    return Abstention(
        member=names[x],
        lower=names[order[first - 1]] if first >= 1 else None,
        upper=None,
        straddled=tuple(names[order[k]] for k in range(first, len(mu))),
        p_below=p_below,
        p_above=1.0 - p_below,
        confidence=float(1.0 - ndtr((lo - estimate) / se)) if se > 0 else 1.0,
        positions=(first, len(mu)),
        bound=bound,
    )
