"""`evalprism ecdf`'s run record (issue 38): run.json format 2 with the options as EcdfOptions declares
them, what the run resolved and counted (EcdfSummary) as its results, and a finding that the tables
bear out on planted structure."""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
from helpers import read_run, run_cli

from evalprism.ecdf.options import EcdfOptions
from evalprism.ecdf.result import EcdfSummary

GOOD, BAD = ("good-a", "good-b"), ("bad-a", "bad-b")


def _planted_scores(n_questions: int = 20, per_setting: int = 10) -> pd.DataFrame:
    """Two quality levels: the good models' scores on every question lie in [0.7, 1], the bad
    models' in [0, 0.3]; so the settings' ECDFs form exactly two groups, the good one best."""
    rng = np.random.default_rng(7)
    rows = []
    for q in range(n_questions):
        for model in GOOD + BAD:
            low = 0.7 if model in GOOD else 0.0
            rows += [{"question_id": q, "model": model, "score": s} for s in low + 0.3 * rng.random(per_setting)]
    return pd.DataFrame(rows)


def test_run_record_layout_and_finding_match_the_tables(tmp_path: Path, capsys) -> None:
    """run.json: format 2, the command, every option of EcdfOptions (clusters as asked: "auto"), what the
    run resolved (K, the scoring) and counted as results; its finding names the K of clusters.csv and
    the settings of settings.csv, and K is the planted two quality levels with the good models best."""
    table = _planted_scores()
    path = tmp_path / "scores.csv"
    table.to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(["ecdf", path, "--by", "model", "--out", out], capsys)
    assert code == 0, err
    raw = json.loads((out / "run.json").read_text())
    record = read_run(out)
    assert raw["format"] == 2 and record.command == "ecdf"
    assert set(record.options) == {f.name for f in fields(EcdfOptions)}
    assert record.options["by"] == ["model"] and record.options["clusters"] == "auto"
    assert set(record.results) == {f.name for f in fields(EcdfSummary)}
    settings = pd.read_csv(out / "settings.csv")
    clusters = pd.read_csv(out / "clusters.csv")
    assert record.results["k"] == len(clusters) == 2
    assert record.results["n_settings"] == len(settings) == 20 * 4
    assert record.results["n_responses"] == settings["n_responses"].sum() == len(table)
    assert record.results["quality"] == "score column"
    assert record.results["score"] is None and record.results["embedder"] is None  # nothing was embedded
    assert record.findings == (f"K={len(clusters)} clusters of {len(settings)} settings",)
    best = settings.loc[settings["cluster"] == 0, "model"]
    assert set(best) == set(GOOD) and len(best) == 20 * len(GOOD)
    assert record.findings[0] in " ".join(err.split())
