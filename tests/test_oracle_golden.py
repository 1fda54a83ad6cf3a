"""The peer libraries' answers frozen into golden files (tests/golden/, written by
tests/golden/freeze_oracles.py): arena-rank's Bradley-Terry ratings and sandwich intervals and
irrCAC's Gwet AC1. These run where the peers are not installed; the live-oracle tests
(test_pairwise_oracle.py, test_agreement.py) stay beside them and recompute the same numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from golden.freeze_oracles import ARENA_CASES, table_digest
from test_pairwise_oracle import ELO_SCALE, battles_table, centred

from evalprism.p2l.options import FitOptions
from evalprism.stats import gwet_ac1

GOLDEN = Path(__file__).resolve().parent / "golden"
ARENA = json.loads((GOLDEN / "arena_rank.json").read_text(encoding="utf-8"))
IRRCAC = json.loads((GOLDEN / "irrcac.json").read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.parametrize("model", [case[0] for case in ARENA_CASES])
def test_bt_fits_equal_frozen_arena_rank(model: str) -> None:
    from evalprism.p2l import fit_leaderboard

    frozen = ARENA[model]
    df = battles_table(frozen["n"], frozen["models"], tie_rate=frozen["tie_rate"], seed=frozen["seed"])
    assert table_digest(df) == frozen["digest"], "the generated battles changed: refreeze the golden file"
    board = (
        fit_leaderboard(df, FitOptions(outcome_model=model), progress=False)
        .leaderboard.set_index("model")
        .loc[frozen["competitors"]]
    )
    ours_rating = 1000.0 + ELO_SCALE * board["coef"].to_numpy()
    np.testing.assert_allclose(centred(ours_rating), centred(frozen["ratings"]), rtol=0, atol=1e-4)
    half_ours = ELO_SCALE * (board["upper"] - board["lower"]).to_numpy() / 2
    np.testing.assert_allclose(half_ours, frozen["half_width"], rtol=2e-3)


@pytest.mark.parametrize("case", range(len(IRRCAC)))
def test_ac1_equals_frozen_irrcac(case: int) -> None:
    frozen = IRRCAC[case]
    a = np.array([np.nan if v is None else v for v in frozen["a"]], dtype=float)
    b = np.array([np.nan if v is None else v for v in frozen["b"]], dtype=float)
    kw = {}
    if "N" in frozen:
        kw["population_size"] = frozen["N"]
    if "confidence" in frozen:
        kw["confidence"] = frozen["confidence"]
    ours = gwet_ac1(a, b, categories=frozen["categories"], **kw)
    for name, value in (("value", "coefficient_value"), ("pa", "pa"), ("pe", "pe"), ("se", "se")):
        assert getattr(ours, name) == pytest.approx(frozen[value], abs=1e-10), name
    assert ours.ci == pytest.approx(frozen["ci"], abs=1e-10)
