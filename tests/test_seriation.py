"""1-D MDS seriation recovers planted row blocks and handles missing cells."""

from __future__ import annotations

import numpy as np

from evalprism.stats import mds_order


def test_recovers_planted_blocks() -> None:
    rng = np.random.default_rng(0)
    blocks = np.repeat([0, 3, 6], 8)
    rows = blocks[:, None] + rng.integers(0, 2, size=(24, 10))
    perm = rng.permutation(24)
    order = mds_order(rows[perm].astype(float))
    seen = blocks[perm][order]
    # contiguous blocks, lowest values first
    assert seen.tolist() == sorted(seen.tolist())


def test_missing_cells_and_tiny_inputs() -> None:
    m = np.array([[0, np.nan, 0, 0], [5, 5, np.nan, 5], [0, 0, 0, np.nan], [5, np.nan, 5, 5]], dtype=float)
    order = mds_order(m)
    assert sorted(order.tolist()) == [0, 1, 2, 3]
    assert set(order[:2].tolist()) == {0, 2}
    assert mds_order(np.array([[1.0, 2.0]])).tolist() == [0]
    assert mds_order(np.ones((3, 3))).tolist() == [0, 1, 2]
