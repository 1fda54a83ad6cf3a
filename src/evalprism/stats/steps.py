"""How a long kernel reports its progress without knowing who shows it.

A kernel that plans its work in units (blocks of a distance matrix, k-medoids starts, swap chunks)
takes an optional :class:`Steps`: it calls ``start(total)`` once the plan is made and
``update(n)`` as units finish, from the calling thread. :func:`evalprism.progress.counted` is the
implementation the analyses pass; the kernels stay free of any display code, and their results do
not depend on whether anyone listens.
"""

from __future__ import annotations

from typing import Protocol


class Steps(Protocol):
    """A listener for a kernel's progress: the number of units, then units done."""

    def start(self, total: int) -> None: ...

    def update(self, advance: int = 1) -> None: ...
