"""``evaluate_model`` on fixed planted models (bt, rk, grk; with a marginal leaderboard and its tie
parameter, costs and soft labels) gives the tables frozen in ``golden/p2l_evaluate_fixed.json``, to
1e-12: the evaluation path may be rewritten (numpy in place of torch, the marginal as one object),
its numbers may not move. Regenerate only for an intended change:
``PYTHONPATH=src python tests/test_p2l_evaluate_fixed.py``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from test_p2l_reports import DIM, MODELS, HashFeatures, truth_battles

from evalprism.p2l import P2LModel, evaluate_model
from evalprism.p2l.model import CoefficientHead

GOLDEN = Path(__file__).parent / "golden" / "p2l_evaluate_fixed.json"
COSTS = dict(zip(MODELS, [4.0, 2.0, 1.0, 0.5], strict=True))
#: per loss: the head's bias (coefficients [+ the tie output]) and the marginal's reported tie parameter
PLANTED = {
    "bt": ([0.8, 0.3, -0.2, -0.9], None),
    "rk": ([0.8, 0.3, -0.2, -0.9, -1.0], 0.4),
    "grk": ([2.0, 1.5, 1.0, 0.5, 0.0], 1.7),
}


def planted(loss: str) -> P2LModel:
    """A P2L model with prompt-dependent weights and a marginal leaderboard off its mean."""
    bias, marginal_extra = PLANTED[loss]
    head = CoefficientHead(DIM, len(MODELS), loss)
    with torch.no_grad():
        head.linear.bias.copy_(torch.tensor(bias))
        head.linear.weight.copy_(
            0.4 * torch.tensor(np.random.default_rng(7).standard_normal((len(bias), DIM)), dtype=torch.float32)
        )
    marginal = pd.DataFrame({"model": MODELS, "coef": np.array(bias[: len(MODELS)]) + np.array([0.1, -0.2, 0.05, 0.0])})
    config = {"loss": loss, "training": {"marginal_extra": marginal_extra}}
    return P2LModel(HashFeatures(), head, MODELS, config, marginal)


def battles(loss: str) -> pd.DataFrame:
    """Battles with ties of both kinds (for grk) and some soft labels."""
    table = truth_battles(700, prompts=150, seed=11)
    if loss == "grk":
        table.loc[table.index[::7], "winner"] = "tie (bothbad)"
    rng = np.random.default_rng(2)
    table["p_b"] = np.where(rng.random(len(table)) < 0.15, rng.random(len(table)).round(3), np.nan)
    return table


def tables(loss: str) -> dict[str, list[dict[str, object]]]:
    result = evaluate_model(planted(loss), battles(loss), repeats=3, seed=4, costs=COSTS, progress=False)
    return {
        name: json.loads(frame.to_json(orient="records", double_precision=15))
        for name, frame in result.frames().items()
    }


@pytest.mark.parametrize("loss", list(PLANTED))
def test_evaluation_of_a_fixed_model_matches_the_frozen_tables(loss: str) -> None:
    want = json.loads(GOLDEN.read_text())[loss]
    got = tables(loss)
    assert sorted(got) == sorted(want)
    for name, rows in want.items():
        assert len(got[name]) == len(rows), name
        for mine, theirs in zip(got[name], rows, strict=True):
            assert mine.keys() == theirs.keys(), name
            for key, value in theirs.items():
                if isinstance(value, float):
                    assert mine[key] == pytest.approx(value, rel=0, abs=1e-12), (name, key)
                else:
                    assert mine[key] == value, (name, key)


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({loss: tables(loss) for loss in PLANTED}, indent=1) + "\n")
