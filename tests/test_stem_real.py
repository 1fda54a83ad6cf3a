"""Real data: STEM's anomaly rates and transition histograms recomputed against the numbers shipped
with the data (``family_sts_stats.json`` of ../shared/data/zeroeval and mmlu_pro).

The JSON's ``anomaly_rate``, ``all_wrong`` and ``all_right`` count a -1 as wrong (``missing="wrong"``);
its ``STS_strict`` and ``TI_hist`` count only items without any -1 (``missing="exclude"``), with the
0-based index of the first right member as key (our TI minus 1).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import shared_data

from evalprism.io.correctness import encode_correctness, read_models
from evalprism.io.items import read_correctness
from evalprism.stats.irv import EASY, HARD
from evalprism.stem import build_pool
from evalprism.stem.options import PoolOptions

ZEROEVAL = {
    "qwen2.5 (3,7,32,72B)": [
        "Qwen2.5-3B-Instruct",
        "Qwen2.5-7B-Instruct",
        "Qwen2.5-32B-Instruct",
        "Qwen2.5-72B-Instruct",
    ],
    "llama-3.1 (8,70,405B)": [
        "Meta-Llama-3.1-8B-Instruct",
        "Meta-Llama-3.1-70B-Instruct",
        "Meta-Llama-3.1-405B-Instruct@hyperbolic",
    ],
    "gemma-2 (2,9,27B)": ["gemma-2-2b-it", "gemma-2-9b-it", "gemma-2-27b-it"],
    "qwen2 (7,72B)": ["Qwen2-7B-Instruct", "Qwen2-72B-Instruct"],
}
MMLU_PRO = {
    "llama-2 (7,13,70B)": ["Llama-2-7b-hf", "Llama-2-13b-hf", "Llama-2-70b-hf"],
    "qwen1.5 (7B-Chat,72B-Chat,110B)": ["Qwen1.5-7B-Chat", "Qwen1.5-72B-Chat", "Qwen1.5-110B"],
    "llama-3 base (8,70B)": ["Meta-Llama-3-8B", "Meta-Llama-3-70B"],
}


def _check(pool_wrong, pool_exclude, expected: dict) -> None:
    b = pool_wrong.benchmarks.iloc[0]
    assert b["items"] == expected["n_items"]
    assert b["anomaly_rate"] == pytest.approx(expected["anomaly_rate"], abs=6e-5)  # JSON rounds to 4 places
    assert (pool_wrong.kind == HARD).sum() == expected["all_wrong"]
    assert (pool_wrong.kind == EASY).sum() == expected["all_right"]
    assert (pool_wrong.irv == -1).any(axis=1).sum() == expected["items_with_minus1"]
    assert pool_exclude.benchmarks["sts"].iloc[0] == expected["STS_strict"]
    n = pool_exclude.n
    hist = np.bincount(pool_exclude.ti[pool_exclude.ti > 0], minlength=n + 2)
    assert {str(k - 1): int(hist[k]) for k in range(2, n + 1) if hist[k]} == expected["TI_hist"]


def _pools(enc, meta, members):
    rows = meta[meta["model"].isin(members)]
    return (
        build_pool(enc, rows, PoolOptions(missing="wrong", min_models=2)),
        build_pool(enc, rows, PoolOptions(missing="exclude", min_models=2)),
    )


def test_zeroeval_anomaly_rates_match_family_sts_stats() -> None:
    root = shared_data("zeroeval")
    expected = json.loads((root / "family_sts_stats.json").read_text())
    table = read_correctness(root / "scores_long.csv").table
    meta = read_models(root / "model_meta.csv")
    checked = 0
    for key, stats in expected.items():
        family, bench = key.split("|")
        enc = encode_correctness(table[table["benchmark"] == bench])
        _check(*_pools(enc, meta, ZEROEVAL[family]), stats)
        checked += 1
    assert checked == 10


def test_mmlu_pro_anomaly_rates_match_family_sts_stats() -> None:
    root = shared_data("mmlu_pro")
    expected = json.loads((root / "family_sts_stats.json").read_text())
    enc = encode_correctness(read_correctness(root / "scores_long.csv").table)
    meta = read_models(root / "model_meta.csv")
    assert set(expected) == set(MMLU_PRO)  # an empty or renamed stats file must not pass by checking nothing
    for family, stats in expected.items():
        _check(*_pools(enc, meta, MMLU_PRO[family]), stats)


def test_zeroeval_matrix_csv_gives_the_same_pool_as_the_long_table() -> None:
    root = shared_data("zeroeval")
    meta = read_models(root / "model_meta.csv")
    members = ZEROEVAL["gemma-2 (2,9,27B)"]
    wide = build_pool(
        read_correctness(root / "matrix_crux.csv", benchmark="crux").table, meta[meta["model"].isin(members)]
    )
    table = read_correctness(root / "scores_long.csv").table
    long = build_pool(table[table["benchmark"] == "crux"], meta[meta["model"].isin(members)])
    assert wide.irv.shape == long.irv.shape and wide.irv.shape[0] > 0
    assert (wide.irv == long.irv).all() and wide.benchmarks.equals(long.benchmarks)
