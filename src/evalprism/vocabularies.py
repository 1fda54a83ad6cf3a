"""Option vocabularies, each declared once: the allowed values of every enumerated option.

Each vocabulary is a ``Literal`` type. The library annotates its parameters with it, checks values
with :func:`evalprism.io.options.check_choice` (which names the allowed values from it), and the
command line builds its choices from it (:func:`choice_enum`): a value added here reaches the three at
once. The anchor is scikit-learn's ``_parameter_constraints`` (one declaration per parameter, checks
and messages derived). Importing this module imports nothing heavy, so ``evalprism --help`` stays fast.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal, get_args

#: k-medoids algorithm (`ecdf --method`)
KMedoidsMethod = Literal["fasterpam", "pam"]
#: a setting's final answer: eq. 6's medoid, or the self-consistency vote (`ecdf --final`)
FinalRule = Literal["medoid", "majority"]
#: a response's quality against its references (`ecdf --score`, `compare --score`)
ScoreRule = Literal["cosine", "exact", "contains"]
#: pairwise outcome models (the registry of :mod:`evalprism.stats.outcome_models`; `p2l train`/`p2l fit` `--outcome-model`)
OutcomeModelName = Literal["bt", "bt-tie", "rk", "grk"]
#: confidence intervals of a marginal leaderboard (`p2l fit --ci`)
CiMethod = Literal["sandwich", "bootstrap"]
#: aggregating per-prompt leaderboards over a prompt set (`p2l leaderboard --aggregation`)
Aggregation = Literal["bt", "mean"]
#: how the router values a model's coefficients: BT win rate, or grk's σ(β) (an outcome model's
#: ``route_by``; :func:`evalprism.p2l.route`'s ``value``)
RouteValue = Literal["bt", "grk"]
#: the routing value a held-out router evaluation uses (`p2l evaluate --value`)
RouteValueKind = Literal["score", "own"]
#: where a routing budget holds: on average over prompts, or on every prompt (`--budget-scope`)
BudgetScope = Literal["prompt", "average"]
#: dimension reduction before HDBSCAN (`judges --reduce`)
Reduction = Literal["none", "pca", "umap"]
#: HDBSCAN's cluster selection (`judges --selection`)
ClusterSelection = Literal["auto", "eom", "leaf"]
#: what a -1 (no answer) counts as in STEM (`--missing`)
Missing = Literal["wrong", "exclude"]
#: STEM's per-level weighting (`stem locate --weighting`)
Weighting = Literal["balanced", "stratified"]
#: STEM localization method (`stem locate --method`)
LocateMethod = Literal["auto", "paper", "stratified", "irt"]
#: the IRT estimator's sample design (`stem locate --design`)
Design = Literal["random", "stratified"]
#: inspect_ai samples over several epochs (`--epochs`)
Epochs = Literal["first", "mean", "all"]
#: the item-response model of a STEM reference panel (`stem pool --irt`)
IRTKind = Literal["2pl", "1pl"]
#: how `stem plan` chooses items (`stem plan --method`)
PlanMethod = Literal["auto", "stratified", "irt", "adaptive"]
#: multiple-comparison correction across pairs (`compare --adjust`)
Adjustment = Literal["bh", "holm"]


def choices(vocabulary: Any) -> tuple[str, ...]:
    """The values of a vocabulary, in their declared order."""
    return tuple(get_args(vocabulary))


def choice_enum(name: str, vocabulary: Any, order: tuple[str, ...] | None = None) -> Any:
    """A ``str`` Enum of the vocabulary for the command line's choices (typer lists Enum values);
    members are named after their values made identifiers (``bt-tie`` -> ``bt_tie``, ``2pl`` ->
    ``_2pl``) and looked up by value (``Enum("bt")``). ``order``: the help's order, the same values."""
    values = order if order is not None else choices(vocabulary)
    assert sorted(values) == sorted(choices(vocabulary)), f"{name}: the order must list the vocabulary"
    members = [(("_" + v if v[0].isdigit() else v).replace("-", "_"), v) for v in values]
    return Enum(name, members, type=str)  # type: ignore[misc]  # a functional Enum: members known at run time
