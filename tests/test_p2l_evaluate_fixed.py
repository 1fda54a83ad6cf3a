"""``evaluate_model`` on fixed planted models (bt, rk, grk; with a marginal leaderboard and its tie
parameter, costs and soft labels) gives the tables frozen in ``golden/p2l_evaluate_fixed.json``, to
1e-7: the evaluation path may be rewritten (numpy in place of torch, the marginal as one object),
its numbers may not move. Regenerate only for an intended change:
``PYTHONPATH=src python tests/test_p2l_evaluate_fixed.py``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import save_file
from test_p2l_reports import DIM, MODELS, HashFeatures, truth_battles

from evalprism.errors import EvalprismError
from evalprism.p2l import P2LModel, evaluate_model
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.model import CoefficientHead, read_model_files
from evalprism.p2l.options import EvaluateOptions

GOLDEN = Path(__file__).parent / "golden" / "p2l_evaluate_fixed.json"
COSTS = dict(zip(MODELS, [4.0, 2.0, 1.0, 0.5], strict=True))
#: per case: the loss, the head's bias (coefficients [+ the tie output]), the marginal's reported tie
#: parameter, and whether the head's tie output depends on the prompt. In case ``grk`` it does not:
#: its raw value 0 (λ = 2) is exact in float32, the form the earlier path rounded λ through.
PLANTED = {
    "bt": ("bt", [0.8, 0.3, -0.2, -0.9], None, False),
    "rk": ("rk", [0.8, 0.3, -0.2, -0.9, -1.0], 0.4, True),
    "grk": ("grk", [2.0, 1.5, 1.0, 0.5, 0.0], 1.7, False),
    "grk-varying-tie": ("grk", [2.0, 1.5, 1.0, 0.5, 0.0], 1.7, True),
}
#: how far a number may move: the head computes in float32, whose last bits depend on the CPU's
#: kernels (the tables were frozen on an AVX2 machine; on an AVX512 one the NLL moves by up to 6e-9 and
#: the scaling's L1 by 2e-8), so 1e-7 absolute; a change of the evaluation's arithmetic moves them by
#: orders of magnitude more. Also, where the head's grk tie parameter varies, the frozen tables rounded
#: each prompt's λ = 1 + exp(s) to float32 and took s back from it (a relative error up to
#: 2^-24 λ / (λ - 1) in s); evaluation now reads the head's own s.
TOLERANCE = 1e-7


def planted(case: str) -> P2LModel:
    """A P2L model with prompt-dependent weights and a marginal leaderboard off its mean."""
    loss, bias, marginal_extra, varying_tie = PLANTED[case]
    head = CoefficientHead(DIM, len(MODELS), loss)
    weights = 0.4 * np.random.default_rng(7).standard_normal((len(bias), DIM))
    if len(bias) > len(MODELS) and not varying_tie:
        weights[len(MODELS)] = 0.0
    with torch.no_grad():
        head.linear.bias.copy_(torch.tensor(bias))
        head.linear.weight.copy_(torch.tensor(weights, dtype=torch.float32))
    marginal = pd.DataFrame({"model": MODELS, "coef": np.array(bias[: len(MODELS)]) + np.array([0.1, -0.2, 0.05, 0.0])})
    return P2LModel(
        SavedHash(),
        head,
        MODELS,
        {"outcome_model": loss},
        MarginalBaseline.from_reported(loss, marginal, marginal_extra),
    )


def battles(loss: str) -> pd.DataFrame:
    """Battles with ties of both kinds (for grk) and some soft labels."""
    table = truth_battles(700, prompts=150, seed=11)
    if loss == "grk":
        table.loc[table.index[::7], "winner"] = "tie (bothbad)"
    rng = np.random.default_rng(2)
    table["p_b"] = np.where(rng.random(len(table)) < 0.15, rng.random(len(table)).round(3), np.nan)
    return table


def tables(case: str) -> dict[str, list[dict[str, object]]]:
    result = evaluate_model(
        planted(case), battles(PLANTED[case][0]), EvaluateOptions(repeats=3, seed=4), costs=COSTS, progress=False
    )
    return {
        name: json.loads(frame.to_json(orient="records", double_precision=15))
        for name, frame in result.frames().items()
    }


@pytest.mark.parametrize("case", list(PLANTED))
def test_evaluation_of_a_fixed_model_matches_the_frozen_tables(case: str) -> None:
    want = json.loads(GOLDEN.read_text())[case]
    got = tables(case)
    tolerance = TOLERANCE
    assert sorted(got) == sorted(want)
    for name, rows in want.items():
        assert len(got[name]) == len(rows), name
        for mine, theirs in zip(got[name], rows, strict=True):
            assert mine.keys() == theirs.keys(), name
            for key, value in theirs.items():
                if isinstance(value, float):
                    assert mine[key] == pytest.approx(value, rel=0, abs=tolerance), (name, key)
                else:
                    assert mine[key] == value, (name, key)


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({case: tables(case) for case in PLANTED}, indent=1) + "\n")


# ---------------------------------------------------------------------------------------------
# the marginal baseline in a model directory: one object, read from the new entry and the old one
# ---------------------------------------------------------------------------------------------


class SavedHash(HashFeatures):
    """HashFeatures that a model directory records as the packaged encoder (its files are not read here)."""

    def save_weights(self, directory: Path) -> str:
        return "minilm"


def test_the_marginal_and_its_raw_tie_parameter_are_saved_as_one_object(tmp_path: Path) -> None:
    model = planted("grk-varying-tie")
    assert model.marginal is not None
    model.save(tmp_path / "model")
    config, _, baseline = read_model_files(tmp_path / "model")
    assert baseline is not None and baseline.tie == model.marginal.tie  # the raw value, exactly
    assert config["marginal"] == {"file": "marginal.csv", "tie_raw": model.marginal.tie, "extra": pytest.approx(1.7)}
    assert baseline.coefs(MODELS) == pytest.approx(model.marginal.coefs(MODELS), abs=1e-15)


def write_old_model_dir(directory: Path, loss: str, training: dict[str, object]) -> None:
    """A model directory as evalprism wrote it before config.json had a ``marginal`` entry: the
    marginal's reported tie parameter only in ``training.marginal_extra``."""
    directory.mkdir()
    head = CoefficientHead(DIM, len(MODELS), loss)
    save_file({k: v.contiguous() for k, v in head.state_dict().items()}, str(directory / "head.safetensors"))
    config = {"models": MODELS, "loss": loss, "backbone": {"spec": "minilm"}, "training": training}
    (directory / "config.json").write_text(json.dumps(config))
    table = pd.DataFrame({"model": MODELS, "coef": [2.0, 1.5, 1.0, 0.5], "identified": True})
    table.to_csv(directory / "marginal.csv", index=False)


def test_an_older_model_directory_reads_the_marginal_tie_parameter_from_its_training_record(tmp_path: Path) -> None:
    write_old_model_dir(tmp_path / "old", "grk", {"marginal_extra": 1.7, "loss": "grk"})
    _, _, baseline = read_model_files(tmp_path / "old")
    assert baseline is not None
    assert baseline.tie == pytest.approx(np.log(0.7), abs=1e-15)  # λ = 1 + exp(s)
    assert baseline.extra == pytest.approx(1.7, abs=1e-15)
    assert baseline.coefs(MODELS[::-1]) == pytest.approx([0.5, 1.0, 1.5, 2.0])
    assert "identified" in baseline.table.columns  # the table is kept as written
    write_old_model_dir(tmp_path / "bt", "bt", {})
    assert read_model_files(tmp_path / "bt")[2].tie is None  # type: ignore[union-attr]


def test_a_model_directory_without_the_marginal_tie_parameter_is_refused(tmp_path: Path) -> None:
    write_old_model_dir(tmp_path / "rk", "rk", {"loss": "rk"})
    with pytest.raises(EvalprismError, match=r"rk: not a valid evalprism model directory: config.json records no tie"):
        read_model_files(tmp_path / "rk")
