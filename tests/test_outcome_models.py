"""The outcome-model registry (issue 15): each pairwise model is one entry that the marginal fits,
the P2L head, training, evaluation and routing all read."""

from __future__ import annotations

from typing import get_args

import numpy as np
import pytest
from helpers import choices_of, cli_parameters

from evalprism.stats.outcome_models import (
    NUMPY_OPS,
    OUTCOME_MODEL_NAMES,
    OUTCOME_MODELS,
    OutcomeModelName,
    get_outcome_model,
)


def test_the_names_are_listed_once_for_static_checks_and_the_command_line() -> None:
    """``OutcomeModelName`` (static checks) and the CLI's choices (which must not import numpy) mirror the
    registry; a new entry that is not added there fails here."""
    assert get_args(OutcomeModelName) == OUTCOME_MODEL_NAMES == tuple(OUTCOME_MODELS)
    offered = [param for command, param in cli_parameters() if "--outcome-model" in param.opts]
    assert {command for command, param in cli_parameters() if "--outcome-model" in param.opts} == {
        "p2l fit",
        "p2l train",
    }
    for param in offered:
        assert choices_of(param) == OUTCOME_MODEL_NAMES


@pytest.mark.parametrize("model", OUTCOME_MODEL_NAMES)
def test_the_ops_formula_equals_the_hand_written_numpy_terms(model: str) -> None:
    """An entry's two forms of its log-probabilities (the formula the P2L head runs in torch, here
    run in numpy, and the hand-written terms of the marginal fit) agree; torch autograd is held to
    the derivatives in test_pairwise_oracle."""
    entry = get_outcome_model(model)
    rng = np.random.default_rng(0)
    ca, cb = rng.normal(0, 1.5, 60), rng.normal(0, 1.5, 60)
    extra = None if entry.extra is None else 0.6
    formula = entry.log_probs(NUMPY_OPS, ca, cb, None if extra is None else np.full(60, extra))
    logp, _ = entry.terms(ca, cb, extra)
    assert formula.shape == (60, 4)
    np.testing.assert_allclose(formula, logp.T, rtol=1e-12, atol=1e-12)
    assert np.isneginf(formula[:, len(entry.outcomes) :]).all()
    assert np.isfinite(formula[:, : len(entry.outcomes)]).all()


@pytest.mark.parametrize("model", [m for m in OUTCOME_MODEL_NAMES if OUTCOME_MODELS[m].extra is not None])
def test_tie_parameter_forms_round_trip(model: str) -> None:
    """raw -> reported -> raw, and raw -> the P2L head's output -> raw, inside the parameter's domain."""
    tie = get_outcome_model(model).extra
    assert tie is not None
    raw = np.array([0.05, 0.5, 2.0, 7.0]) + (0.0 if tie.lower is None else tie.lower)
    np.testing.assert_allclose(tie.unreport(tie.report(NUMPY_OPS, raw)), raw, rtol=1e-12)
    np.testing.assert_allclose([tie.from_head(NUMPY_OPS, tie.to_head(r)) for r in raw], raw, rtol=1e-12)
    assert tie.lower is None or tie.start >= tie.lower


def test_unknown_model_names_the_known_ones() -> None:
    from evalprism.errors import EvalprismError

    with pytest.raises(EvalprismError, match="unknown outcome model 'elo': expected one of bt, bt-tie, rk, grk"):
        get_outcome_model("elo")


def test_routing_value_and_shift_invariance_are_read_from_the_entry() -> None:
    """Only the grounded model has absolute coefficients, and only it is routed by σ(β)."""
    assert {m: (e.shift_invariant, e.route_by) for m, e in OUTCOME_MODELS.items()} == {
        "bt": (True, "bt"),
        "bt-tie": (True, "bt"),
        "rk": (True, "bt"),
        "grk": (False, "grk"),
    }
