"""The demo on the packaged real slice: known properties of the data, and every report it writes
opened in a real browser (drawn, no console errors, nothing wider than the page) and checked for
what a colleague reading it needs (named clusters, routes of several models, no Python None)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S

from evalprism.demo import run_demo

pytestmark = pytest.mark.slow  # runs the whole demo and opens every page in Chromium

#: every page the demo writes (relative to its output directory) and the figures it draws at least
PAGES = {
    "index.html": 0,
    "ecdf/report.html": 3,
    "p2l/marginal/report.html": 1,
    "p2l/model/report.html": 1,
    "p2l/leaderboard/report.html": 2,
    "p2l/router/report.html": 2,
    "judges/report.html": 3,
    "stem/pool/report.html": 2,
    "stem/locate/report.html": 2,
}

#: appended to a copy of a page: after load, writes the page's and every section's and table box's
#: width against what it shows into the DOM, where --dump-dom reads it
PROBE = """<script>
window.addEventListener("load", function () { setTimeout(function () {
  var wide = [];
  document.querySelectorAll("main section, .tablewrap").forEach(function (el) {
    if (el.scrollWidth > el.clientWidth + 1) {
      var where = el.closest("section");
      wide.push((where ? where.querySelector("h2").textContent : el.className) + ": " + el.scrollWidth + " px in "
                + el.clientWidth + " px");
    }
  });
  var out = document.createElement("pre");
  out.id = "evalprism-probe";
  out.textContent = JSON.stringify({scroll: document.documentElement.scrollWidth,
                                    client: document.documentElement.clientWidth, wide: wide});
  document.body.appendChild(out);
}, 500); });
</script>"""


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> Path:
    out = tmp_path_factory.mktemp("demo") / "evalprism-demo"
    run_demo(out, cache_dir=str(cache_dir), progress=False)
    return out


def test_demo_writes_index_linking_each_report(demo_dir: Path) -> None:
    index = (demo_dir / "index.html").read_text()
    reports = [page for page in PAGES if page != "index.html"]
    for page in reports:
        assert f'href="{page}"' in index
        assert (demo_dir / page).exists()
    # a headline number per analysis, computed from its result, not only a link
    headlines = re.findall(r'<div class="headline">(.*?)</div>', index)
    assert len(headlines) == len(reports)
    assert all(re.search(r"\d", h) for h in headlines)
    assert any(re.search(r"P2L held-out NLL [\d.]+ vs marginal [\d.]+", h) for h in headlines)


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


def _visible_text(page: str) -> str:
    """The page without its scripts and styles (plotly.js and CSS), tags removed."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _table(page: str, title: str) -> pd.DataFrame:
    """The table of the section headed ``title``, as text cells."""
    section = re.search(rf"<h2>{re.escape(html.escape(title, quote=False))}</h2>(.*?)</section>", page, re.S)
    assert section, f"no section {title!r}"
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section[1], re.S)

    def cells(row: str, tag: str) -> list[str]:
        return [
            html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(rf"<{tag}[^>]*>(.*?)</{tag}>", row, re.S)
        ]

    return pd.DataFrame([cells(r, "td") for r in rows[1:]], columns=cells(rows[0], "th"))


def test_ecdf_report_counts_settings_as_its_heatmap_and_warns_about_near_misses(demo_dir: Path) -> None:
    page = (demo_dir / "ecdf" / "report.html").read_text()
    s = pd.read_csv(demo_dir / "ecdf" / "settings.csv")
    cells = s["question_id"].nunique() * s["configuration"].nunique()
    text = _visible_text(page)
    assert f"{len(s)} settings with responses" in text and f"= {cells} cells; {cells - len(s)} had no responses" in text
    assert '"name":"no responses upstream"' in page  # the heatmap's blank cells have a legend entry
    assert "Cosine similarity rewards near misses" in text


def test_judges_map_names_every_cluster(demo_dir: Path) -> None:
    page = (demo_dir / "judges" / "report.html").read_text()
    clusters = set(pd.read_csv(demo_dir / "judges" / "pairs.csv")["cluster"])
    named = {int(c) for c in re.findall(r'"name":"C(\d+) \(\d+ pairs\)', page)}
    assert named == {c for c in clusters if c >= 0} and len(named) > 1
    assert ('"name":"noise (' in page) == (-1 in clusters)


def test_router_report_shows_routes_to_several_models(demo_dir: Path) -> None:
    page = (demo_dir / "p2l" / "router" / "report.html").read_text()
    routes = _table(page, "Routes of sample prompts, by routed model")
    routed = pd.read_csv(demo_dir / "p2l" / "router" / "routes.csv")["model"]
    assert set(routes["model"]) == set(routed) and routes["model"].nunique() > 1
    assert '"name":"router at the chosen budget"' in page and "chosen budget 0.8" in page
    singles = pd.read_csv(demo_dir / "p2l" / "router" / "curve.csv")["best_single_model"].unique()
    assert len(singles) > 0, "curve.csv names no best single model"  # an empty curve would match an empty label
    label = re.search(r'"mode":"markers\+text","name":"best single model within budget","text":(\[.*?\])', page)
    assert label and set(json.loads(label[1])) == set(singles)  # each circle is named on the plot


def test_p2l_reports_say_what_the_average_hides(demo_dir: Path) -> None:
    fit = _visible_text((demo_dir / "p2l" / "marginal" / "report.html").read_text())
    assert "have overlapping 95% intervals" in fit or "no two 95% intervals overlap" in fit
    train = (demo_dir / "p2l" / "model" / "report.html").read_text()
    assert "<code>P2LModel.load(dir)</code>" in train and "`" not in _visible_text(train)
    # the demo trains with the default ridge head: the report shows how the penalty was chosen
    assert '"name":"chosen penalty (saved)"' in train and "Choosing the penalty" in train


def test_stem_localization_has_a_panel_per_model(demo_dir: Path) -> None:
    page = (demo_dir / "stem" / "locate" / "report.html").read_text()
    models = pd.read_csv(demo_dir / "stem" / "locate" / "summary.csv")["model"].unique()
    assert len(models) > 1, "summary.csv locates fewer than two models"  # the loop below checks each one
    for model in models:
        # the panel title: the model in bold, then its interval (plotly's JSON escapes the tags)
        title = (
            rf'"text":"\\u003cb\\u003e{re.escape(model)}\\u003c\\u002fb\\u003e\\u003cbr\\u003e(between|below|above) '
        )
        assert re.search(title, page), model


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


@pytest.fixture(scope="module")
def browser() -> str:
    found = _chromium()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium (installed by .ci/run)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


@dataclass
class Rendered:
    """A page after headless Chromium loaded it: its DOM, console lines and the probe's widths."""

    dom: str
    console: list[str]
    probe: dict


def _render(browser: str, page: Path, work: Path) -> Rendered:
    copy = work / "page.html"
    copy.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={work / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=15000",
            "--window-size=1400,4000",
            "--dump-dom",
            copy.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    probe = re.search(r'<pre id="evalprism-probe">(.*?)</pre>', proc.stdout, re.S)
    assert probe, f"the page did not finish loading: {proc.stderr[-2000:]}"
    return Rendered(
        proc.stdout,
        [line for line in proc.stderr.splitlines() if ":CONSOLE" in line],
        json.loads(html.unescape(probe[1])),
    )


@pytest.mark.parametrize("name", PAGES)
def test_page_renders_in_headless_chromium(demo_dir: Path, browser: str, tmp_path: Path, name: str) -> None:
    page = demo_dir / name
    shown = _render(browser, page, tmp_path)
    assert shown.console == [], shown.console
    figure_ids = re.findall(r'<div id="(fig-s\d+)"', page.read_text())
    assert len(figure_ids) >= PAGES[name]
    for fid in figure_ids:
        rendered = re.search(rf'<div id="{fid}"[^>]*class="[^"]*js-plotly-plot', shown.dom)
        assert rendered, f"figure {fid} was not rendered by plotly"
    assert shown.dom.count('class="main-svg"') >= 2 * len(figure_ids)
    # nothing wider than the window: no horizontal scrolling of the page, of a section or a table's box
    assert shown.probe["scroll"] <= shown.probe["client"], shown.probe
    assert shown.probe["wide"] == [], shown.probe["wide"]
    assert not re.search(r"\bNone\b", _visible_text(shown.dom)), "Python's None is printed on the page"


def test_p2l_gain_over_the_marginal_is_never_printed_as_zero_times() -> None:
    from evalprism.p2l.reports import _relative_gain

    # the RWQ model: 0.0045 nats over the marginal, which gains 0.354 over a coin flip
    assert _relative_gain(0.0045 / 0.3544) == "1.3% of what the marginal leaderboard adds over a coin flip."
    assert _relative_gain(2.5) == "2.5× what the marginal leaderboard adds over a coin flip."
