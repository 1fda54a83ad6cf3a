"""`evalprism p2l split`: battles split by prompt into train and test files, by training's own rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli

from evalprism.io import read_table
from evalprism.p2l import TrainOptions, split_battles
from evalprism.p2l.options import SplitOptions
from evalprism.p2l.split import split_prompts
from evalprism.p2l.train import prepare_battles


def _battles(n: int = 300, prompts: int = 60, seed: int = 1) -> pd.DataFrame:
    """Battles over ``prompts`` distinct prompts (several battles each), with an extra column and a
    nullable integer column (a JSON Lines copy must keep it an integer)."""
    rng = np.random.default_rng(seed)
    models = ["m-a", "m-b", "m-c", "m-d"]
    a = rng.integers(0, 4, n)
    b = (a + rng.integers(1, 4, n)) % 4
    return pd.DataFrame(
        {
            "prompt": [f"prompt number {i}\n\nsecond line" for i in rng.integers(0, prompts, n)],
            "model_a": np.array(models)[a],
            "model_b": np.array(models)[b],
            "winner": rng.choice(["model_a", "model_b", "tie", "tie (bothbad)"], n),
            "row_id": np.arange(n),
            "hf_row": [None if i % 7 == 0 else int(i) for i in range(n)],
        }
    )


def _write_jsonl(frame: pd.DataFrame, path: Path) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for rec in frame.to_dict(orient="records"):
            fh.write(json.dumps(rec) + "\n")
    return path


def test_split_round_trip_by_prompt_and_fraction(tmp_path: Path, capsys) -> None:
    src = _write_jsonl(_battles(), tmp_path / "battles.jsonl")
    code, _, err = run_cli(
        ["p2l", "split", src, "--out", tmp_path / "s", "--test-fraction", "0.25", "--seed", "3"], capsys
    )
    assert code == 0, err
    train_lines = (tmp_path / "s" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    test_lines = (tmp_path / "s" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    # train ∪ test = the input, line for line (verbatim copies: hf_row stays an integer or null)
    assert sorted(train_lines + test_lines) == sorted(src.read_text(encoding="utf-8").splitlines())
    train, test = (pd.DataFrame([json.loads(x) for x in lines]) for lines in (train_lines, test_lines))
    assert not set(train["prompt"]) & set(test["prompt"])  # no prompt on both sides
    n_prompts = train["prompt"].nunique() + test["prompt"].nunique()
    assert test["prompt"].nunique() == round(0.25 * n_prompts)
    run = json.loads((tmp_path / "s" / "run.json").read_text())
    assert run["output"]["kind"] == "p2l split"
    assert run["options"] == {"test_fraction": 0.25, "seed": 3, "harness": SplitOptions().harness.record()}
    assert run["results"]["battles"] == {"train": len(train), "test": len(test)}
    assert run["results"]["prompts"] == {"train": train["prompt"].nunique(), "test": test["prompt"].nunique()}
    assert run["results"]["files"] == {"train": "train.jsonl", "test": "test.jsonl"}


def test_split_is_deterministic_in_seed_and_file_order(tmp_path: Path) -> None:
    battles = _battles()
    first = split_battles(battles, SplitOptions(test_fraction=0.2, seed=5))
    again = split_battles(battles, SplitOptions(test_fraction=0.2, seed=5))
    assert np.array_equal(first.test, again.test)
    other = split_battles(battles, SplitOptions(test_fraction=0.2, seed=6))
    assert set(battles["prompt"].iloc[other.test]) != set(battles["prompt"].iloc[first.test])
    shuffled = battles.sample(frac=1.0, random_state=0).reset_index(drop=True)
    moved = split_battles(shuffled, SplitOptions(test_fraction=0.2, seed=5))
    assert set(shuffled["row_id"].iloc[moved.test]) == set(battles["row_id"].iloc[first.test])


@pytest.mark.parametrize(("fraction", "seed"), [(0.1, 0), (0.3, 7)])
def test_split_equals_the_validation_split_of_training(fraction: float, seed: int) -> None:
    battles = _battles()
    split = split_battles(battles, SplitOptions(test_fraction=fraction, seed=seed))
    data = prepare_battles(battles, TrainOptions(val_fraction=fraction, seed=seed))
    validated = set(data.prompts[data.prompt_codes[data.val_idx]])
    held_out = set(battles["prompt"].iloc[split.test])
    # training validates on the held-out prompts' decisive battles (bt drops ties): the same prompts
    decisive = battles.iloc[split.test]
    assert validated == set(decisive.loc[decisive["winner"].isin(["model_a", "model_b"]), "prompt"])
    assert validated <= held_out
    assert np.array_equal(
        split_prompts(battles["prompt"], fraction, seed), np.isin(np.arange(len(battles)), split.test)
    )


@pytest.mark.parametrize("ext", ["csv", "json", "parquet"])
def test_split_writes_the_input_format(tmp_path: Path, ext: str) -> None:
    battles = _battles(80, 20).drop(columns="hf_row")
    src = tmp_path / f"battles.{ext}"
    if ext == "csv":
        battles.to_csv(src, index=False)
    elif ext == "json":
        src.write_text(json.dumps(battles.to_dict(orient="records")), encoding="utf-8")
    else:
        battles.to_parquet(src, index=False)
    split_battles(read_table(src), SplitOptions(test_fraction=0.2, seed=0)).save(tmp_path / "s")
    parts = [read_table(tmp_path / "s" / f"{side}.{ext}") for side in ("train", "test")]
    back = pd.concat(parts).astype({"row_id": int}).sort_values("row_id").reset_index(drop=True)
    pd.testing.assert_frame_equal(back[battles.columns], battles, check_dtype=False)


def test_split_refuses_bad_fraction_and_one_prompt(tmp_path: Path, capsys) -> None:
    src = _write_jsonl(_battles(), tmp_path / "battles.jsonl")
    code, _, err = run_cli(["p2l", "split", src, "--out", tmp_path / "s", "--test-fraction", "1"], capsys)
    assert code == 2 and "--test-fraction" in err and "< 1" in err
    one = _battles(10, 1)
    src1 = _write_jsonl(one, tmp_path / "one.jsonl")
    code, _, err = run_cli(["p2l", "split", src1, "--out", tmp_path / "s"], capsys)
    assert code == 2 and "one.jsonl" in err and "1 distinct prompt" in err
    assert not (tmp_path / "s").exists()
