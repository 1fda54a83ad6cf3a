"""Freeze the peer libraries' answers into golden files, so the oracle tests also run where the
peers are not installed (tests/test_oracle_golden.py); the live-oracle tests stay beside them.

Run from the repository root with the dev extras and irrCAC installed (see the README's test command):

    python tests/golden/freeze_oracles.py

It rewrites ``tests/golden/arena_rank.json`` and ``tests/golden/irrcac.json``. Rerun it only when the
inputs below change or a peer is upgraded on purpose; a changed file is a reviewable diff.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from test_agreement import irrcac_gwet, random_table  # noqa: E402  (the live oracles' own helpers)
from test_pairwise_oracle import arena_rank_fit, battles_table  # noqa: E402

#: (name, n battles, models, tie rate, seed): the inputs of the live arena-rank tests
ARENA_CASES = [("bt-tie", 30_000, 25, 0.3, 11), ("bt", 30_000, 25, 0.0, 12)]
#: the edge cases of tests/test_agreement.py
EDGE_CASES = [
    ([0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]),
    ([1, 1, 1, 1], [1, 1, 1, 0]),
    ([0, 1], [0, 1]),
    ([1, 0], [0, 1]),
    ([0, 1, 1], [1, 1, 0]),
    ([1, 1, 0, None, 1], [1, None, 0, 1, 0]),
    ([0] * 95 + [1] * 5, [0] * 90 + [1] * 5 + [0] * 5),
]


def table_digest(df: pd.DataFrame) -> str:
    """A fingerprint of a generated battles table: the golden numbers belong to exactly this input."""
    return hashlib.sha256(pd.util.hash_pandas_object(df, index=False).to_numpy().tobytes()).hexdigest()


def freeze_arena_rank() -> dict:
    out = {}
    for model, n, m, tie_rate, seed in ARENA_CASES:
        df = battles_table(n, m, tie_rate=tie_rate, seed=seed)
        peer = arena_rank_fit(df)
        out[model] = {
            "n": n,
            "models": m,
            "tie_rate": tie_rate,
            "seed": seed,
            "digest": table_digest(df),
            "competitors": peer["competitors"],
            "ratings": peer["ratings"].tolist(),
            "half_width": ((peer["rating_upper"] - peer["rating_lower"]) / 2).tolist(),
        }
    return out


def _ac1_record(a: list, b: list, categories: list, **kw: float) -> dict:
    est = irrcac_gwet(np.array(a, dtype=float), np.array(b, dtype=float), categories, **kw)  # None -> NaN
    return {
        "a": a,
        "b": b,
        "categories": categories,
        **kw,
        **{k: float(est[k]) for k in ("coefficient_value", "pa", "pe", "se")},
        "ci": [float(x) for x in est["confidence_interval"]],
    }


def _json_ratings(values) -> list[float | None]:
    """Ratings as JSON: a missing rating (NaN or None) as null."""
    return [None if v is None or np.isnan(v) else float(v) for v in values]


def freeze_irrcac() -> list[dict]:
    """The random tables, edge cases and finite-population case of the live irrCAC tests."""
    cases = []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        n, q = int(rng.integers(5, 400)), int(rng.integers(2, 6))
        a, b = random_table(rng, n, q, agree=float(rng.uniform(0.2, 0.95)), missing=0.1 if seed % 2 else 0.0)
        cases.append(_ac1_record(_json_ratings(a), _json_ratings(b), [float(c) for c in range(q)]))
    for a, b in EDGE_CASES:
        cases.append(_ac1_record(_json_ratings(a), _json_ratings(b), [0.0, 1.0]))
    a, b = random_table(np.random.default_rng(11), 60, 3, agree=0.7, missing=0.05)
    cases.append(_ac1_record(_json_ratings(a), _json_ratings(b), [0.0, 1.0, 2.0], N=200, confidence=0.9))
    return cases


def main() -> None:
    (HERE / "arena_rank.json").write_text(json.dumps(freeze_arena_rank(), indent=1) + "\n", encoding="utf-8")
    records = ",\n ".join(json.dumps(case) for case in freeze_irrcac())  # one case a line: reviewable diffs
    (HERE / "irrcac.json").write_text(f"[{records}]\n", encoding="utf-8")
    print(f"wrote {HERE / 'arena_rank.json'} and {HERE / 'irrcac.json'}")


if __name__ == "__main__":
    main()
