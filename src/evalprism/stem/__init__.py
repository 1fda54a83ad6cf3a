"""STEM: locating an unknown model on a model family (seed 003).

- :func:`build_pool` -> :class:`Pool`: IRVs over the family ordered by params, significant
  transition samples and transition indices, per-benchmark anomaly rates, difficulty polarization,
  discriminability and weights; ``pool.audit()`` -> :class:`Audit` (the contamination report).
- :func:`locate` -> :class:`Localization`: accuracy per TI level on a balanced subset and the
  capability boundary as an interval between two family members, with a confidence.
- :func:`evaluate` -> :class:`Trials`: repeated trials of STEM, random sampling and the Bayesian
  interval posterior against the full-benchmark ground truth (``.positions`` per trial).
- :func:`locate_models` -> :class:`LocationResult`: several models at once, what the CLI writes.

The rules chosen where the paper is silent are stated in the docstrings of
:mod:`evalprism.stats.irv`, :mod:`~evalprism.stem.discriminability`, :mod:`~evalprism.stem.pool`,
:mod:`~evalprism.stem.locate` and :mod:`~evalprism.stem.baselines`.

The names load from their submodules on first use (:mod:`evalprism._lazy`): building a pool does
not import the localization and its trials.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.stem.evaluate import LocationResult, Trials, evaluate, locate_models
    from evalprism.stem.locate import Localization, locate
    from evalprism.stem.pool import Audit, Pool, build_pool

__all__ = [
    "Audit",
    "Localization",
    "LocationResult",
    "Pool",
    "Trials",
    "build_pool",
    "evaluate",
    "locate",
    "locate_models",
]

lazy_package(__name__, {
    "evaluate": ["LocationResult", "Trials", "evaluate", "locate_models"],
    "locate": ["Localization", "locate"],
    "pool": ["Audit", "Pool", "build_pool"],
})
