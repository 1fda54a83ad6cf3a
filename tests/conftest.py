"""Shared fixtures: an isolated embedding cache and a small responses file. Plain helpers (the CLI
in-process, the real-data location, the small responses table) are in helpers.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import small_responses

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the suite must never reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One embedding cache for the whole session, never the user's own."""
    path = tmp_path_factory.mktemp("embed-cache")
    os.environ["EVALPRISM_CACHE_DIR"] = str(path)
    return path


@pytest.fixture
def responses_csv(tmp_path: Path) -> Path:
    path = tmp_path / "responses.csv"
    small_responses().to_csv(path, index=False)
    return path
