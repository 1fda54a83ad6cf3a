"""Prompt-to-Leaderboard (seed 002).

- :func:`fit_leaderboard`: a battles table -> a marginal BT / Rao-Kupper leaderboard with 95%
  intervals (the outcome models are the registry :mod:`evalprism.stats.outcome_models`).
- :func:`train_p2l` -> :class:`TrainResult`; :class:`P2LModel` (``load(dir)``, ``.models``,
  ``.leaderboards(prompts)``).
- :func:`aggregate_leaderboards` (eq. 3 and appendix B.1; the kernel is
  :mod:`evalprism.stats.aggregate`), :func:`analyze_prompt_set` (per-category leaderboards and
  strengths).
- :func:`route` -> :class:`Route`: Theorem 1's optimal router and its BT coefficient (Algorithm 1).

The names load from their submodules on first use (:mod:`evalprism._lazy`): a marginal fit does not
import torch, which only the P2L model, training and prompt-set analysis need.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.p2l.aggregate import aggregate_leaderboards
    from evalprism.p2l.marginal import LeaderboardResult, fit_leaderboard
    from evalprism.p2l.model import P2LModel
    from evalprism.p2l.prompt_set import PromptSetResult, analyze_prompt_set
    from evalprism.p2l.routing import Route, route
    from evalprism.p2l.train import TrainOptions, TrainResult, train_p2l

__all__ = [
    "LeaderboardResult",
    "P2LModel",
    "PromptSetResult",
    "Route",
    "TrainOptions",
    "TrainResult",
    "aggregate_leaderboards",
    "analyze_prompt_set",
    "fit_leaderboard",
    "route",
    "train_p2l",
]

lazy_package(__name__, {
    "aggregate": ["aggregate_leaderboards"],
    "marginal": ["LeaderboardResult", "fit_leaderboard"],
    "model": ["P2LModel"],
    "prompt_set": ["PromptSetResult", "analyze_prompt_set"],
    "routing": ["Route", "route"],
    "train": ["TrainOptions", "TrainResult", "train_p2l"],
})
