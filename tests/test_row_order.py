"""Results do not depend on row order (issue 15): the same rows shuffled, with the same seed, give the
same outputs up to the order of their rows, for every command that draws at random or breaks ties.

Each test writes one input twice (as generated, and a seeded row shuffle), runs the real CLI on both
into separate output directories (and, where texts are embedded, separate embedding caches, so no
vector is shared between the runs), and compares every CSV the two runs wrote: the same rows, cell
for cell as text, once both are sorted. P2L training also compares the trained weights exactly. The
first test checks the two rules of :mod:`evalprism.keyed` themselves (and pins the hash the P2L
validation split depends on).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli

from evalprism.demo import DEMO_EXTRACT, demo_data_path

pytestmark = pytest.mark.slow  # runs each command twice end to end

SHUFFLE_SEED = 20240615


def _shuffled(frame: pd.DataFrame) -> pd.DataFrame:
    """The same rows in another (seeded) order; the shuffle must actually move rows."""
    out = frame.sample(frac=1.0, random_state=SHUFFLE_SEED).reset_index(drop=True)
    assert not out.equals(frame.reset_index(drop=True))
    return out


def _two_inputs(
    tmp_path: Path, frame: pd.DataFrame, name: str, write: Callable[[pd.DataFrame, Path], None] | None = None
) -> tuple[Path, Path]:
    """``frame`` as it is and shuffled, written to ``original/<name>`` and ``shuffled/<name>``."""
    paths = []
    for label, table in (("original", frame), ("shuffled", _shuffled(frame))):
        path = tmp_path / label / name
        path.parent.mkdir(parents=True, exist_ok=True)
        (write or (lambda t, p: t.to_csv(p, index=False)))(table, path)
        paths.append(path)
    return paths[0], paths[1]


def _rows(path: Path) -> pd.DataFrame:
    """A CSV's cells as text, rows sorted by every column: equal frames are the same rows in any order."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def assert_same_tables(first: Path, second: Path) -> list[str]:
    """Both output directories hold the same CSV files with the same rows; returns the file names."""
    names = sorted(p.name for p in first.glob("*.csv"))
    assert names and names == sorted(p.name for p in second.glob("*.csv"))
    for name in names:
        pd.testing.assert_frame_equal(_rows(first / name), _rows(second / name), obj=name)
    return names


def _run(args: list[object], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli([*args, "-q"], capsys)
    assert code == 0, err


def test_content_keyed_rules() -> None:
    from evalprism.keyed import content_order, keyed_choice, keyed_hash

    ids = ["b", "a", "c", "a", None]
    scores = [1.0, 2.0, 0.5, 1.5, 3.0]
    order = content_order(ids, scores)
    assert order.tolist() == [4, 3, 1, 0, 2]  # missing first, then by id, ties by the next key
    prompts = [f"prompt {i}" for i in range(40)]
    chosen = {prompts[i] for i in keyed_choice(prompts, 7, seed=3)}
    assert len(chosen) == 7 and chosen == {prompts[::-1][i] for i in keyed_choice(prompts[::-1], 7, seed=3)}
    assert chosen != {prompts[i] for i in keyed_choice(prompts, 7, seed=4)}
    # the hash is part of the split rule (a changed hash moves P2L validation prompts): pinned
    assert keyed_hash(["a", "b"], 0).tolist() == [15658467002787177573, 11288903118042747885]
    assert keyed_choice([f"p{i}" for i in range(10)], 3, 0).tolist() == [5, 6, 9]


def test_ecdf_ignores_row_order(tmp_path: Path, capsys) -> None:
    # the demo's Renze slice: multiple-choice answers, so eq. 6 ties (as many A's as B's) are common
    original, shuffled = _two_inputs(tmp_path, pd.read_csv(demo_data_path()), "responses.csv")
    for path in (original, shuffled):
        _run(
            [
                "ecdf",
                path,
                "--out",
                path.parent / "out",
                "--by",
                "model",
                "--by",
                "temperature",
                "--extract",
                DEMO_EXTRACT,
                "--choices",
                "choices",
                "--clusters",
                "6",
                "--cache-dir",
                path.parent / "cache",
            ],
            capsys,
        )
    names = assert_same_tables(original.parent / "out", shuffled.parent / "out")
    assert "settings.csv" in names


@pytest.mark.parametrize(
    "fit", [["--fit", "ridge"], ["--fit", "adamw", "--epochs", "4", "--batch-size", "64"]], ids=["ridge", "adamw"]
)
def test_p2l_train_ignores_row_order(tmp_path: Path, capsys, fit: list[str]) -> None:
    import torch
    from safetensors.torch import load_file

    from evalprism.p2l.simulate import simulate_topic_battles

    original, shuffled = _two_inputs(tmp_path, simulate_topic_battles(600, seed=11), "battles.csv")
    for path in (original, shuffled):
        _run(["p2l", "train", path, "--out", path.parent / "model", *fit, "--cache-dir", path.parent / "cache"], capsys)
    first, second = original.parent / "model", shuffled.parent / "model"
    assert {"history.csv", "evaluation.csv"} <= set(assert_same_tables(first, second))
    weights = [load_file(d / "head.safetensors") for d in (first, second)]
    assert weights[0].keys() == weights[1].keys()
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]), name
    # p2l evaluate (its aggregation-scaling draws pick prompts) of one model on both files
    for path in (original, shuffled):
        _run(["p2l", "evaluate", first, path, "--out", path.parent / "evaluation", "--repeats", "3"], capsys)
    assert "scaling.csv" in assert_same_tables(original.parent / "evaluation", shuffled.parent / "evaluation")


def test_p2l_fit_ignores_row_order(tmp_path: Path, capsys) -> None:
    from evalprism.p2l.simulate import simulate_topic_battles

    battles = simulate_topic_battles(800, seed=12)
    soft = np.random.default_rng(12).random(len(battles))  # soft labels: sums of fractions, order-sensitive
    battles["p_b"] = np.where(soft < 0.5, soft, np.nan)
    original, shuffled = _two_inputs(tmp_path, battles, "battles.csv")
    for path in (original, shuffled):
        _run(["p2l", "fit", path, "--out", path.parent / "fit", "--ci", "bootstrap", "--rounds", "10"], capsys)
    assert_same_tables(original.parent / "fit", shuffled.parent / "fit")


@pytest.fixture(scope="module")
def stem_inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A simulated family's correctness as generated and shuffled, the metadata, and a pool of each."""
    from evalprism.stem.simulate import simulate_family

    root = tmp_path_factory.mktemp("stem-order")
    correctness, meta = simulate_family(n_items=400, seed=13)
    meta_path = root / "meta.csv"
    meta.to_csv(meta_path, index=False)
    original, shuffled = _two_inputs(root, correctness, "correctness.csv")
    return original, shuffled, meta_path


def test_stem_pool_ignores_row_order(stem_inputs, tmp_path: Path, capsys) -> None:
    original, shuffled, meta = stem_inputs
    for path in (original, shuffled):
        _run(["stem", "pool", path, "--models", meta, "--family", "toy", "--out", tmp_path / path.parent.name], capsys)
    assert "pool.csv" in assert_same_tables(tmp_path / "original", tmp_path / "shuffled")


def test_stem_locate_ignores_row_order(stem_inputs, tmp_path: Path, capsys) -> None:
    original, shuffled, meta = stem_inputs
    for path in (original, shuffled):
        pool = tmp_path / path.parent.name / "pool"
        _run(["stem", "pool", path, "--models", meta, "--family", "toy", "--out", pool], capsys)
        _run(
            [
                "stem",
                "locate",
                pool,
                path,
                "--model",
                "other-b",
                "--model",
                "other-d",
                "--items",
                "50",
                "--trials",
                "25",
                "--seed",
                "3",
                "--out",
                tmp_path / path.parent.name / "loc",
            ],
            capsys,
        )
    names = assert_same_tables(tmp_path / "original" / "loc", tmp_path / "shuffled" / "loc")
    assert {"subset.csv", "trials.csv"} <= set(names)


def test_judges_ignores_row_order(tmp_path: Path, capsys) -> None:
    from evalprism.judges.simulate import simulate_judgments

    judgments = simulate_judgments(n_queries=8, docs_per_genre=5, noise=0.05)
    original, shuffled = _two_inputs(tmp_path, judgments, "judgments.csv")
    for path in (original, shuffled):
        _run(
            [
                "judges",
                path,
                "--human",
                "human",
                "--llm",
                "llm_strict,llm_lenient",
                "--out",
                path.parent / "out",
                "--cache-dir",
                path.parent / "cache",
            ],
            capsys,
        )
    names = assert_same_tables(original.parent / "out", shuffled.parent / "out")
    assert {"pairs.csv", "clusters.csv", "queries.csv"} <= set(names)
