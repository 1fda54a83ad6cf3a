"""The demo on the packaged real slice: known properties of the data, and the report in a real browser."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from evalprism.demo import run_demo


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("demo") / "evalprism-demo"
    run_demo(out, cache_dir=str(cache_dir), progress=False)
    return out


def test_demo_writes_index_linking_each_report(demo_dir: Path) -> None:
    index = (demo_dir / "index.html").read_text()
    assert 'href="ecdf/report.html"' in index
    assert (demo_dir / "ecdf" / "report.html").exists()


def test_demo_results_show_known_properties_of_the_data(demo_dir: Path) -> None:
    s = pd.read_csv(demo_dir / "ecdf" / "settings.csv")
    assert len(s) == 231  # 20 questions x 12 configurations, minus cells missing upstream
    assert s["n_responses"].min() < 10  # unequal ECDF sizes occur in the real data
    acc = s.groupby("model")["correct"].mean()
    # GPT-4 and Claude 3 Opus are far more accurate than Llama-2-7B on this exam (Renze & Guven, table 2)
    assert acc["gpt-4"] > acc["llama-2-7b-chat"] + 0.2
    assert acc["claude-3-opus-20240229"] > acc["llama-2-7b-chat"] + 0.2
    # a setting whose responses all pick the gold option scores 1 everywhere and sits in the best cluster
    perfect = s[s["mean_score"] > 1 - 1e-6]
    assert len(perfect) > 20 and (perfect["cluster"] == 0).all() and perfect["correct"].all()
    clusters = pd.read_csv(demo_dir / "ecdf" / "clusters.csv")
    # numbered by wins (eq. 7): the medoid ECDFs are ordered by their integral, i.e. their mean
    assert clusters["medoid_mean_score"].is_monotonic_decreasing
    assert clusters["wins"].tolist() == list(range(len(clusters) - 1, -1, -1))


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def test_report_renders_in_headless_chromium(demo_dir: Path, tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium (installed by .ci/run)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    report = demo_dir / "ecdf" / "report.html"
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         "--virtual-time-budget=15000", "--window-size=1400,4000", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=180,
    )
    dom = proc.stdout
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    figure_ids = re.findall(r'<div id="(fig-s\d+)"', report.read_text())
    assert len(figure_ids) >= 3
    for fid in figure_ids:
        rendered = re.search(rf'<div id="{fid}"[^>]*class="[^"]*js-plotly-plot', dom)
        assert rendered, f"figure {fid} was not rendered by plotly"
    assert dom.count('class="main-svg"') >= 2 * len(figure_ids)
