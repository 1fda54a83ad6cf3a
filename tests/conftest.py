"""Shared fixtures: an isolated embedding cache, a small responses file and the service tests' fake upstreams. Plain helpers (the CLI
in-process, the real-data location, the small responses table) are in helpers.py."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import small_responses

if TYPE_CHECKING:
    from serve_harness import FakeUpstreams

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


@pytest.fixture(scope="module")
def upstreams() -> Iterator[FakeUpstreams]:
    """OpenAI-compatible fake upstreams on loopback (tests/serve_harness.py), one set per test module."""
    from serve_harness import FakeUpstreams

    with FakeUpstreams() as fake:
        yield fake


@pytest.fixture()
def fake(upstreams: FakeUpstreams) -> Iterator[FakeUpstreams]:
    """The module's fake upstreams, reset for one test; whatever hangs is released at its end."""
    upstreams.reset()
    yield upstreams
    upstreams.released.set()
