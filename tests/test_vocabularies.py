"""Option vocabularies are declared once (evalprism.vocabularies): the command line's choices, the
library's values and its one check all come from the same Literal (issue 31, item 3)."""

from __future__ import annotations

import typing

import pytest
from helpers import choices_of, cli_parameters

from evalprism import vocabularies
from evalprism.errors import EvalprismError
from evalprism.io.options import check_choice

VOCABULARIES = {name: value for name, value in vars(vocabularies).items() if typing.get_origin(value) is typing.Literal}
#: vocabularies no command-line option takes: the router's value follows the P2L model's outcome model
#: (its registry entry's ``route_by``); a backbone's compute precision is decided from the asked one
LIBRARY_ONLY = {"RouteValue", "ComputePrecision"}


def test_every_cli_choice_option_lists_exactly_a_declared_vocabulary() -> None:
    """Every Enum the CLI offers as choices holds the values of one vocabulary, and every vocabulary
    reaches the CLI: a value added to a Literal appears in --help with nothing else to edit."""
    declared = {frozenset(vocabularies.choices(v)): name for name, v in VOCABULARIES.items()}
    used = set()
    for command, param in cli_parameters():
        offered = choices_of(param)
        if offered is None:
            continue
        values = frozenset(offered)
        assert values in declared, f"{command} {param.opts[0]} ({sorted(values)}) is no declared vocabulary"
        used.add(declared[values])
    offered = set(VOCABULARIES) - LIBRARY_ONLY
    assert used == offered, f"vocabularies no CLI option offers: {offered - used}"


@pytest.mark.parametrize(
    "module, name, vocabulary",
    [
        ("evalprism.ecdf.scoring", "SCORE_RULES", "ScoreRule"),
        ("evalprism.stats.outcome_models", "OUTCOME_MODEL_NAMES", "OutcomeModelName"),
        ("evalprism.p2l.heldout_routing", "ROUTE_VALUE_KINDS", "RouteValueKind"),
        ("evalprism.judges.clustering", "REDUCERS", "Reduction"),
        ("evalprism.judges.clustering", "SELECTIONS", "ClusterSelection"),
        ("evalprism.stem.plan", "PLAN_METHODS", "PlanMethod"),
        ("evalprism.compare.analysis", "ADJUST", "Adjustment"),
    ],
)
def test_library_value_lists_are_the_vocabularies(module: str, name: str, vocabulary: str) -> None:
    import importlib

    assert getattr(importlib.import_module(module), name) == vocabularies.choices(VOCABULARIES[vocabulary])


def test_check_choice_names_the_parameter_and_the_values() -> None:
    assert check_choice("irt", "1pl", vocabularies.IRTKind) == "1pl"
    with pytest.raises(EvalprismError) as err:
        check_choice("irt", "3pl", vocabularies.IRTKind)
    assert str(err.value) == "irt: expected one of 2pl, 1pl, got '3pl'" and err.value.parameter == "irt"
    with pytest.raises(EvalprismError, match="got 1"):
        check_choice("design", 1, vocabularies.Design)  # not text: refused, not compared
