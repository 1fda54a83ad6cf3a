"""Battles readers: every supported format lands in the same canonical table; bad rows are named."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import shared_data

from evalprism.errors import EvalprismError
from evalprism.io import read_battles


def test_canonical_with_winner_spellings(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    pd.DataFrame(
        {
            "prompt": ["p1", "p2", "p3", "p4"],
            "model_a": ["x", "x", "y", "y"],
            "model_b": ["y", "z", "z", "x"],
            "winner": ["model_a", "both_bad", "TIE", "tie (bothbad)"],
            "category": ["math", "code", None, "math"],
            "extra": [1, 2, 3, 4],
        }
    ).to_csv(path, index=False)
    b = read_battles(path)
    assert b["winner"].tolist() == ["model_a", "tie (bothbad)", "tie", "tie (bothbad)"]
    assert b["category"].tolist() == ["math", "code", None, "math"]
    assert "extra" in b.columns
    assert b.attrs["battles_format"] == "canonical"


def test_fastchat_clean_battle_json(tmp_path: Path) -> None:
    rows = [
        {
            "model_a": "gpt-4",
            "model_b": "vicuna-13b",
            "winner": "tie (bothbad)",
            "conversation_a": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Write a haiku"},
                {"role": "assistant", "content": "..."},
            ],
            "conversation_b": [{"role": "user", "content": "Hi"}],
            "language": "English",
        }
    ]
    path = tmp_path / "clean_battle.json"
    path.write_text(json.dumps(rows))
    b = read_battles(path)
    assert b.attrs["battles_format"] == "fastchat"
    assert b["prompt"].tolist() == ["Hi\n\nWrite a haiku"]
    assert b["winner"].tolist() == ["tie (bothbad)"]
    assert "conversation_a" not in b.columns and b["language"].tolist() == ["English"]


def test_arena55k_csv_one_hot_winners(tmp_path: Path) -> None:
    path = tmp_path / "train.csv"
    pd.DataFrame(
        {
            "id": [1, 2, 3],
            "model_a": ["a", "b", "c"],
            "model_b": ["b", "c", "a"],
            "prompt": [json.dumps(["What is 2+2?"]), json.dumps(["Hi", "More"]), json.dumps(["Q"])],
            "response_a": ["4", "x", "y"],
            "response_b": ["5", "y", "z"],
            "winner_model_a": [1, 0, 0],
            "winner_model_b": [0, 1, 0],
            "winner_tie": [0, 0, 1],
        }
    ).to_csv(path, index=False)
    b = read_battles(path)
    assert b.attrs["battles_format"] == "arena55k"
    assert b["winner"].tolist() == ["model_a", "model_b", "tie"]
    assert b["prompt"].tolist() == ["What is 2+2?", "Hi\n\nMore", "Q"]


def test_alpacaeval_raw_annotations(tmp_path: Path) -> None:
    path = tmp_path / "annotations.json"
    path.write_text(
        json.dumps(
            [
                {
                    "instruction": "Say hi",
                    "generator_1": "ref",
                    "generator_2": "cand",
                    "preference": 1.8,
                    "output_1": "a",
                },
                {
                    "instruction": "Say bye",
                    "generator_1": "ref",
                    "generator_2": "cand",
                    "preference": 1.5,
                    "output_1": "b",
                },
                {
                    "instruction": "Count",
                    "generator_1": "ref",
                    "generator_2": "cand",
                    "preference": 1.0,
                    "output_1": "c",
                },
            ]
        )
    )
    b = read_battles(path)
    assert b.attrs["battles_format"] == "alpacaeval"
    assert b["p_b"].tolist() == pytest.approx([0.8, 0.5, 0.0])
    assert b["winner"].tolist() == ["model_b", "tie", "model_a"]
    assert b["model_a"].tolist() == ["ref"] * 3


@pytest.mark.parametrize(
    "frame,message",
    [
        (
            pd.DataFrame({"prompt": ["p"], "model_a": ["x"], "model_b": ["y"], "winner": ["draw"]}),
            "row 1, column 'winner': expected one of model_a, model_b, tie, tie (bothbad), got 'draw'",
        ),
        (
            pd.DataFrame({"prompt": ["p"], "model_a": ["x"], "model_b": ["x"], "winner": ["tie"]}),
            "row 1: model_a and model_b are the same model ('x')",
        ),
        (
            pd.DataFrame(
                {
                    "prompt": ["p", "q"],
                    "model_a": ["x", "x"],
                    "model_b": ["y", "y"],
                    "winner": ["tie", "tie"],
                    "p_b": [0.5, 1.5],
                }
            ),
            "row 2, column 'p_b': expected a probability in [0, 1], got 1.5",
        ),
        (pd.DataFrame({"prompt": ["p"], "model_a": ["x"], "winner": ["tie"]}), "missing required column 'model_b'"),
    ],
)
def test_bad_battles(tmp_path: Path, frame: pd.DataFrame, message: str) -> None:
    path = tmp_path / "b.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(EvalprismError) as info:
        read_battles(path)
    assert message in str(info.value) and "b.csv" in str(info.value)


def test_real_alpacaeval_battles() -> None:
    root = shared_data("alpacaeval")
    b = read_battles(root / "battles_ae2_weighted_gpt4turbo.jsonl")
    assert len(b) == 45_875  # PROVENANCE.txt
    assert b["prompt"].nunique() <= 805
    assert b["model_a"].unique().tolist() == ["gpt4_1106_preview"]  # star design around the reference
    assert b["model_b"].nunique() == 57
    assert b["p_b"].between(0, 1).all()
    # the hard winner agrees with the soft label wherever the label is decisive
    decisive = b[(b["p_b"] - 0.5).abs() > 1e-9]
    assert ((decisive["p_b"] > 0.5) == (decisive["winner"] == "model_b")).all()
