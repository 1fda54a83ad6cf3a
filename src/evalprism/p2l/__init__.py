"""Prompt-to-Leaderboard (seed 002).

- :func:`fit_leaderboard`: a battles table -> a marginal BT / Rao-Kupper leaderboard with 95%
  intervals (the outcome models are the registry :mod:`evalprism.stats.outcome_models`).
- :func:`split_battles` -> :class:`SplitResult`: training and held-out battles by prompt, by the rule
  training uses for its validation prompts (``evalprism p2l split``).
- :func:`train_model` -> :class:`TrainResult`; :class:`P2LModel` (``load(dir)``, ``.models``,
  ``.leaderboards(prompts)``); :func:`evaluate_model` -> :class:`EvaluationResult` (held-out
  battles against the marginal and constant predictors).
- :func:`aggregate_leaderboards` (eq. 3 and appendix B.1; the kernel is
  :mod:`evalprism.stats.aggregate`), :func:`analyze_prompt_set` (per-category leaderboards and
  strengths).
- :func:`route` -> :class:`Route`: Theorem 1's optimal router and its BT coefficient (Algorithm 1)
  for one leaderboard; :func:`route_prompts` -> :class:`RoutingResult` for a prompt file.

Entry functions are named ``verb_object`` for what they do (``ecdf.analyze`` and ``judges.analyze``
where a package has a single step).

The names load from their submodules on first use (:mod:`evalprism._lazy`): a marginal fit does not
import torch, which only the P2L model, training and prompt-set analysis need.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.p2l.aggregate import aggregate_leaderboards
    from evalprism.p2l.evaluate import EvaluationResult, evaluate_model, evaluate_model_dir
    from evalprism.p2l.marginal import LeaderboardResult, fit_leaderboard
    from evalprism.p2l.model import P2LModel
    from evalprism.p2l.options import (
        EvaluateOptions,
        FitOptions,
        PromptSetOptions,
        RouteOptions,
        SplitOptions,
        TrainOptions,
    )
    from evalprism.p2l.prompt_set import PromptSetResult, analyze_prompt_set
    from evalprism.p2l.router import RoutingResult, route_model_dir, route_prompts
    from evalprism.p2l.routing import Route, route
    from evalprism.p2l.split import SplitResult, split_battles
    from evalprism.p2l.train import TrainResult, checkpoint_dir_for, train_model

__all__ = [
    "EvaluateOptions",
    "EvaluationResult",
    "FitOptions",
    "LeaderboardResult",
    "P2LModel",
    "PromptSetOptions",
    "PromptSetResult",
    "Route",
    "RouteOptions",
    "RoutingResult",
    "SplitOptions",
    "SplitResult",
    "TrainOptions",
    "TrainResult",
    "aggregate_leaderboards",
    "analyze_prompt_set",
    "checkpoint_dir_for",
    "evaluate_model",
    "evaluate_model_dir",
    "fit_leaderboard",
    "route",
    "route_model_dir",
    "route_prompts",
    "split_battles",
    "train_model",
]

lazy_package(
    __name__,
    {
        "aggregate": ["aggregate_leaderboards"],
        "evaluate": ["EvaluationResult", "evaluate_model", "evaluate_model_dir"],
        "marginal": ["LeaderboardResult", "fit_leaderboard"],
        "model": ["P2LModel"],
        "options": [
            "EvaluateOptions",
            "FitOptions",
            "PromptSetOptions",
            "RouteOptions",
            "SplitOptions",
            "TrainOptions",
        ],
        "prompt_set": ["PromptSetResult", "analyze_prompt_set"],
        "router": ["RoutingResult", "route_model_dir", "route_prompts"],
        "routing": ["Route", "route"],
        "split": ["SplitResult", "split_battles"],
        "train": ["TrainResult", "checkpoint_dir_for", "train_model"],
    },
)
