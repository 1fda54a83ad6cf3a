"""What the ECDF report prints: cut texts are marked, the heatmap's column labels never pile up."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli

from evalprism.ecdf import analyze
from evalprism.ecdf.options import EcdfOptions
from evalprism.ecdf.report import (
    EXAMPLE_CHARS,
    MAX_COLUMN_LABELS,
    _assignment_figure,
    build_report,
    clip,
    column_label_step,
)


def test_clip_marks_the_cut_and_escapes() -> None:
    assert clip("a < b") == "a &lt; b"
    assert clip("x" * EXAMPLE_CHARS) == "x" * EXAMPLE_CHARS  # at the limit: whole, no mark
    assert clip("x" * (EXAMPLE_CHARS + 1)) == "x" * EXAMPLE_CHARS + "…"
    assert clip("abc def", limit=4) == "abc…"  # the space before the cut is not kept


def test_a_long_reference_and_the_answer_equal_to_it_are_cut_alike(tmp_path: Path, capsys) -> None:
    long_ref = "The court held that " + "the contract was void for want of consideration, " * 8 + "and so on."
    assert len(long_ref) > EXAMPLE_CHARS
    rows = [
        {
            "question_id": q,
            "model": m,
            "response": long_ref if m == "good" else f"wrong {q} {i}",
            "references": json.dumps([long_ref]),
        }
        for q in ("q1", "q2", "q3")
        for m in ("good", "bad")
        for i in range(4)
    ]
    path = tmp_path / "long.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(
        [
            "ecdf",
            path,
            "--out",
            out,
            "--by",
            "model",
            "--score",
            "exact",
            "--clusters",
            "2",
            "--permutations",
            "9",
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    page = (out / "report.html").read_text()
    shown = clip(long_ref)
    assert shown == long_ref[:EXAMPLE_CHARS].rstrip() + "…"
    # the reference beside the cluster and the ✓ answer show the same cut text, each marked
    assert page.count(shown + "</span>") >= 1  # the reference
    assert f"<li>{shown} <b>×4</b>" in page and "✓ reference" in page  # the answer equal to it
    assert html_cut_at_200(long_ref) not in page
    assert f"longer than {EXAMPLE_CHARS} characters are cut, marked …" in page


def html_cut_at_200(text: str) -> str:
    """The old rendering of a reference: cut at 200 characters with nothing to say so."""
    return text[:200] + "</span>"


def _planted(n_configs: int) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = [
        {"question_id": f"q{q}", "config": f"temperature={c / 100:.2f}", "score": v}
        for q in range(3)
        for c in range(n_configs)
        for v in np.clip(rng.normal(c / n_configs, 0.05, 3), 0, 1)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("n_configs", "step"), [(12, 1), (MAX_COLUMN_LABELS, 1), (149, 4)])
def test_heatmap_labels_every_kth_column_past_a_count_and_says_so(n_configs: int, step: int) -> None:
    assert column_label_step(n_configs) == step
    result = analyze(_planted(n_configs), EcdfOptions(by=["config"], clusters=2, permutations=9), progress=False)
    fig = _assignment_figure(result)
    columns = [str(c) for c in result.assignment.columns]
    axis = fig.layout.xaxis
    assert list(axis.tickvals) == columns[::step]
    assert len(axis.tickvals) <= MAX_COLUMN_LABELS
    report = build_report(result)
    caption = next(sec.how_to_read for sec in report.sections if sec.title.startswith("Cluster of every question"))
    said = f"With {n_configs} configurations only every {step}th column is labelled"
    if step == 1:
        assert axis.tickangle == -45 and said not in caption and axis.title.text == "configuration"
    else:
        assert axis.tickangle == -90 and said in caption
        assert axis.title.text == f"configuration ({n_configs}: every {step}th labelled, hover for each)"


def test_clusters_help_says_k_is_chosen_by_stability(capsys) -> None:
    code, out, _ = run_cli(["ecdf", "--help"], capsys)
    assert code == 0
    text = " ".join(out.split())
    assert "K chosen by stability, the K whose clusterings of random 80% question subsets agree best" in text
    assert "among K within 0.005 of the most stable, the mean silhouette breaks the tie" in text
    assert "(silhouette)" not in text
