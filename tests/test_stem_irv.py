"""STEM kernels on hand-made IRVs and a hand-computed discriminability table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from evalprism.errors import EvalprismError
from evalprism.stats.irv import (
    ANOMALOUS,
    EASY,
    EXCLUDED,
    HARD,
    STS,
    classify,
    inversions,
    irv_text,
    monotone,
    parse_irv,
    transition_index,
)
from evalprism.stem import build_pool
from evalprism.stem.discriminability import discriminability, reference_scores, weights
from evalprism.stem.options import PoolOptions

# the seed's own examples plus edge cases, family of 8 (rows) / 4 members
SEED_STS = [0, 0, 0, 1, 1, 1, 1, 1]
SEED_ANOMALY = [0, 0, 1, 0, 1, 1, 0, 1]


def test_seed_examples_monotonicity_and_ti() -> None:
    irv = np.array([SEED_STS, SEED_ANOMALY])
    assert monotone(irv).tolist() == [True, False]
    # the fourth model is the first to answer right: TI 4 in the 1-based convention (k in 1..n+1)
    assert transition_index(irv)[0] == 4
    kind, ti = classify(irv)
    assert kind.tolist() == [STS, ANOMALOUS]
    assert ti.tolist() == [4, 0]
    # the anomalous IRV: smaller-right/larger-wrong pairs (2,3) (2,6) (4,6) (5,6) by 0-based index
    assert inversions(irv).tolist() == [0, 4]


def test_ti_levels_all_right_all_wrong_and_missing_answers() -> None:
    irv = np.array(
        [
            [1, 1, 1, 1],  # easy: TI 1
            [0, 1, 1, 1],  # TI 2
            [0, 0, 0, 1],  # TI 4
            [0, 0, 0, 0],  # hard: TI n+1 = 5, kept as in the seed
            [1, 0, 1, 1],  # anomalous
            [-1, 0, 1, 1],  # -1 as wrong: TI 3; excluded in exclude mode
            [0, 1, -1, 1],  # -1 as wrong: anomalous; excluded in exclude mode
        ]
    )
    kind, ti = classify(irv, "wrong")
    assert kind.tolist() == [EASY, STS, STS, HARD, ANOMALOUS, STS, ANOMALOUS]
    assert ti.tolist() == [1, 2, 4, 5, 0, 3, 0]
    kind, ti = classify(irv, "exclude")
    assert kind.tolist() == [EASY, STS, STS, HARD, ANOMALOUS, EXCLUDED, EXCLUDED]
    assert ti.tolist() == [1, 2, 4, 5, 0, 0, 0]


def test_irv_text_round_trip() -> None:
    irv = np.array([[0, 1, -1], [1, 1, 1]], dtype=np.int8)
    text = irv_text(irv)
    assert text.tolist() == ["0 1 -1", "1 1 1"]
    assert (parse_irv(text, 3) == irv).all()
    with pytest.raises(EvalprismError, match="3 values"):
        parse_irv(["0 1", "1 1 1"], 3)


def _table(rows: dict[str, list[int]], bench: str = "b") -> pd.DataFrame:
    out = []
    for model, scores in rows.items():
        out += [{"model": model, "benchmark": bench, "item_id": f"i{k}", "score": s} for k, s in enumerate(scores)]
    return pd.DataFrame(out)


META = pd.DataFrame({"model": ["s", "m", "l"], "params": [1.0, 10.0, 100.0], "family": "f"})


def test_anomaly_rate_and_difficulty_shares_per_benchmark() -> None:
    # 8 items over (s, m, l): easy, 2 STS, hard, 2 anomalous, 2 with a -1
    rows = {
        "s": [1, 0, 0, 0, 1, 0, -1, 1],
        "m": [1, 0, 1, 0, 0, 1, 1, -1],
        "l": [1, 1, 1, 0, 1, 0, 1, 1],
    }
    pool = build_pool(_table(rows), META, PoolOptions(missing="wrong"))
    b = pool.benchmarks.iloc[0]
    # -1 as wrong: item 6 = (0,1,1) STS, item 7 = (1,0,1) anomalous -> anomalous items 4, 5, 7
    assert b["anomalous"] == 3 and b["anomaly_rate"] == pytest.approx(3 / 8)
    assert b["sts"] == 3
    assert (b["easy_share"], b["hard_share"]) == pytest.approx((1 / 8, 1 / 8))
    assert b["intermediate_share"] == pytest.approx(6 / 8)
    pool = build_pool(_table(rows), META, PoolOptions(missing="exclude"))
    b = pool.benchmarks.iloc[0]
    assert b["excluded"] == 2 and b["anomalous"] == 2 and b["anomaly_rate"] == pytest.approx(2 / 6)
    assert pool.pool_frame()["ti"].isna().sum() == 4  # 2 anomalous + 2 excluded have no TI
    audit = pool.anomalies()
    assert audit["item_id"].tolist() == ["i4", "i5"]
    assert audit["right_members"].tolist() == ["s, l", "m"]


def test_discriminability_by_hand() -> None:
    # scores (percent) of three members with params 1, e, e^2 (log params 0, 1, 2)
    scores = np.array(
        [
            [10.0, 20.0, 60.0],  # sd = sqrt(((-20)^2 + (-10)^2 + 30^2)/3) = sqrt(1400/3)
            [50.0, 40.0, 30.0],  # falls with size: rho = -1
            [30.0, 30.0, 30.0],
        ]
    )  # constant: D = 0
    params = np.exp([0.0, 1.0, 2.0])
    d = discriminability(scores, params)
    sd0 = np.sqrt(1400 / 3)
    rho0 = (-20 * -1 + -10 * 0 + 30 * 1) / np.sqrt(1400 * 2)  # centred log params -1, 0, 1
    assert d[0] == pytest.approx(sd0 * rho0)
    assert d[1] == pytest.approx(-np.sqrt(200 / 3))
    assert d[2] == 0.0
    w = weights(d)
    assert w.tolist() == pytest.approx([1.0, 0.0, 0.0])  # negative and zero D get no weight
    assert weights(np.array([-1.0, 0.0])).tolist() == [0.5, 0.5]
    assert weights(np.array([3.0, 1.0])).tolist() == [0.75, 0.25]
    ref = reference_scores(np.array([[80.0, 40.0], [20.0, np.nan]]), np.array([0.75, 0.25]))
    assert ref.tolist() == pytest.approx([65.0, 40.0])  # second model lacks benchmark 2: weights renormalised


def test_pool_reference_scores_weight_benchmarks_by_discriminability() -> None:
    # benchmark "x" separates the family, "y" does not vary: all weight on x
    x = _table({"s": [0, 0, 0, 0], "m": [1, 0, 0, 0], "l": [1, 1, 1, 0]}, "x")
    y = _table({"s": [1, 0], "m": [1, 0], "l": [1, 0]}, "y")
    pool = build_pool(pd.concat([x, y]), META)
    assert pool.benchmarks.set_index("benchmark")["weight"].to_dict() == {"x": 1.0, "y": 0.0}
    assert pool.members["reference_score"].tolist() == pytest.approx([0.0, 25.0, 75.0])
