"""Lazy package namespaces: a package's public names are imported from their submodules on first use.

Why: ``from evalprism.p2l import fit_leaderboard`` used to execute every submodule of
``evalprism.p2l`` and with them torch, scikit-learn and kmedoids, although a marginal fit needs none
of them; on a loaded machine a tiny ``evalprism p2l fit`` spent 33 of its 36 seconds importing.
A lazy package keeps the same import paths, ``__all__`` and ``dir()``, and imports a submodule
only when one of its names is asked for (PEP 562 ``__getattr__`` / ``__dir__``).

One detail makes this more than a module ``__getattr__``: where a public function shares its
submodule's name (``evalprism.stats.kmedoids``), the import system binds the *submodule* as the package attribute
whenever anything imports that submodule, and a module ``__getattr__`` is never consulted for an
attribute that exists. The eager ``from .kmedoids import kmedoids`` rebound the function
afterwards; :class:`LazyPackage` does the same by resolving such a binding to the function.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["LazyPackage", "lazy_package"]


class LazyPackage(types.ModuleType):
    """A package module whose exported names load from their submodules on first access.

    ``_lazy_exports`` maps each exported name to the submodule (relative name) that defines it.
    """

    _lazy_exports: dict[str, str]

    def __getattr__(self, name: str) -> Any:
        """Called only for names not yet in the package: import the defining submodule (PEP 562)."""
        submodule = self.__dict__.get("_lazy_exports", {}).get(name)
        if submodule is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{self.__name__}.{submodule}"), name)
        setattr(self, name, value)  # later lookups are plain attribute reads
        return value

    def __dir__(self) -> list[str]:
        """What is loaded plus what would load on access, so ``dir()`` and completion see every name."""
        return sorted(set(self.__dict__) | set(self.__dict__.get("_lazy_exports", {})))

    def __setattr__(self, name: str, value: Any) -> None:
        """Keep a public function bound when the import system binds its same-named submodule."""
        exports = self.__dict__.get("_lazy_exports", {})
        if (
            isinstance(value, types.ModuleType)
            and exports.get(name) == name
            and value.__name__ == f"{self.__name__}.{name}"
        ):
            value = getattr(value, name)
        super().__setattr__(name, value)


def lazy_package(package: str, exports: Mapping[str, Sequence[str]]) -> None:
    """Make the package ``package`` (call with ``__name__`` from its ``__init__``) load lazily.

    ``exports`` maps each submodule (relative name) to the names it provides, e.g.
    ``{"marginal": ["LeaderboardResult", "fit_leaderboard"]}``. A name listed under two submodules
    is a mistake and raises ``ValueError`` at import.
    """
    module = sys.modules[package]
    by_name: dict[str, str] = {}
    for submodule, names in exports.items():
        for name in names:
            if name in by_name:
                raise ValueError(f"{package}: {name!r} is exported twice")
            by_name[name] = submodule
    module.__class__ = LazyPackage
    module.__dict__["_lazy_exports"] = by_name
