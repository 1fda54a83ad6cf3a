"""Marginal leaderboards (`evalprism p2l fit`): closed forms on real AlpacaEval data, CLI end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli, shared_data

from evalprism.io import read_table
from evalprism.p2l import fit_leaderboard
from evalprism.p2l.options import FitOptions


def small_battles() -> pd.DataFrame:
    rows = []
    for a, b, wins_a, wins_b, ties, bad in (
        ("x", "y", 30, 10, 4, 1),
        ("y", "z", 12, 12, 2, 3),
        ("x", "z", 20, 5, 0, 2),
    ):
        outcomes = ["model_a"] * wins_a + ["model_b"] * wins_b + ["tie"] * ties + ["tie (bothbad)"] * bad
        rows += [{"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": w} for i, w in enumerate(outcomes)]
    return pd.DataFrame(rows)


def test_real_alpacaeval_star_design_gives_logit_of_the_win_rate() -> None:
    """With soft labels and every model against one reference, the BT MLE gap to the reference is
    exactly the logit of the upstream win rate (mean p_b): a closed form on real data."""
    root = shared_data("alpacaeval")
    board = fit_leaderboard(read_table(root / "battles_ae2_weighted_gpt4turbo.jsonl"), progress=False).leaderboard
    board = board.set_index("model")
    upstream = pd.read_csv(root / "data_AlpacaEval_2__weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", index_col=0)
    common = board.index.intersection(upstream.index).drop("gpt4_1106_preview")
    assert len(common) >= 50
    gap = board.loc[common, "coef"] - board.loc["gpt4_1106_preview", "coef"]
    rate = upstream.loc[common, "win_rate"] / 100
    np.testing.assert_allclose(gap, np.log(rate / (1 - rate)), atol=1e-4)
    assert (board["lower"] < board["coef"]).all() and (board["coef"] < board["upper"]).all()


def test_cli_fit_end_to_end_with_bootstrap(tmp_path: Path, capsys) -> None:
    path = tmp_path / "battles.jsonl"
    small_battles().to_json(path, orient="records", lines=True)
    out = tmp_path / "lb"
    code, _, err = run_cli(
        ["p2l", "fit", path, "--out", out, "--model", "bt-tie", "--ci", "bootstrap", "--rounds", "50", "-q"], capsys
    )
    assert code == 0, err
    board = pd.read_csv(out / "leaderboard.csv")
    assert board.columns.tolist() == ["rank", "model", "coef", "lower", "upper", "rating", "battles", "identified"]
    assert board["model"].tolist()[0] == "x"
    assert board["battles"].sum() == 2 * len(small_battles())
    assert read_run(out).options["ci"] == "bootstrap"
    assert (out / "report.html").exists()


def test_cli_refuses_disconnected_battles(tmp_path: Path, capsys) -> None:
    frame = pd.DataFrame(
        {
            "prompt": ["p", "q", "r", "s"],
            "model_a": ["a", "c", "a", "c"],
            "model_b": ["b", "d", "b", "d"],
            "winner": ["model_a", "model_b", "model_b", "tie"],
        }
    )
    path = tmp_path / "b.csv"
    frame.to_csv(path, index=False)
    code, _, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "lb", "-q"], capsys)
    assert code == 2 and "comparison graph is disconnected" in " ".join(err.split())
    assert not (tmp_path / "lb").exists()


@pytest.mark.parametrize("model", ["bt", "rk", "grk"])
def test_all_models_rank_the_planted_order(model: str) -> None:
    board = fit_leaderboard(small_battles(), FitOptions(outcome_model=model), progress=False).leaderboard  # type: ignore[arg-type]
    assert board["model"].tolist()[0] == "x"


def test_cli_refuses_a_model_seen_once(tmp_path: Path, capsys) -> None:
    frame = pd.concat(
        [small_battles(), pd.DataFrame([{"prompt": "p", "model_a": "x", "model_b": "w", "winner": "model_b"}])]
    )
    path = tmp_path / "b.jsonl"
    frame.to_json(path, orient="records", lines=True)
    code, _, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "lb", "-q"], capsys)
    assert code == 2 and "'w' (1)" in err and "fewer than 2 battles" in " ".join(err.split())
    assert not (tmp_path / "lb").exists()


def test_library_leaderboard_matches_the_cli_table() -> None:
    board = fit_leaderboard(small_battles(), FitOptions(outcome_model="bt-tie", ci="sandwich"), progress=False).fit
    frame = board.frame()
    assert frame.columns.tolist() == ["rank", "model", "coef", "lower", "upper", "rating", "battles"]
    # bt-tie: ties count half; x vs y (30 + 2.5 vs 10 + 2.5) etc. — coefs are mean-zero and x leads
    assert frame["coef"].sum() == pytest.approx(0.0, abs=1e-9)
    assert frame["model"].iloc[0] == "x" and (frame["lower"] < frame["coef"]).all()
    assert fit_leaderboard(small_battles(), FitOptions(ci=None), progress=False).fit.frame()["lower"].isna().all()
