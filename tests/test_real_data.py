"""Checks against ../shared/data (skipped with a reason where a checkout has no ../shared)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, REPO, shared_data

from evalprism.demo import demo_data_path

pytestmark = pytest.mark.slow  # real data from ../shared


def test_packaged_demo_slice_is_rebuilt_exactly_from_the_source(tmp_path: Path) -> None:
    root = shared_data("renze-temperature")
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "renze.py"), "demo-slice", str(root), str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=HANG_LIMIT_S,
    )
    rebuilt = pd.read_csv(tmp_path / "renze_slice.csv.gz")
    shipped = pd.read_csv(demo_data_path())
    pd.testing.assert_frame_equal(rebuilt, shipped)
    assert (tmp_path / "LICENSE.renze-temperature").read_text() == demo_data_path(
        "LICENSE.renze-temperature"
    ).read_text()
    assert "BSD" in (root / "PROVENANCE.txt").read_text()
