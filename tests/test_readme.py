"""The README opens with exactly two commands, and CI runs the second one verbatim; its walkthroughs run as
written on the data they name (a slice of it where the whole would take minutes)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, REPO, SHARED_DATA, run_cli, shared_data


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    setup_demo, tests = blocks[0].strip(), blocks[1].strip()
    assert readme.index(blocks[0]) < readme.index("The first command")
    assert setup_demo.endswith("evalprism demo") and "torch==2.13.0" in setup_demo
    assert "pytest" in tests and "torch==2.13.0" in tests
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci


# ------------------------------------------------------------------------------------- the walkthroughs


def walkthrough(marker: str) -> list[list[str]]:
    """The commands of the first ```bash block after ``marker`` in the README, each split as a shell splits
    it (continuation lines joined, comments dropped)."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)\n```", readme[readme.index(marker) :], flags=re.S)
    assert block is not None, f"no bash block after {marker!r}"
    lines = block.group(1).replace("\\\n", " ").splitlines()
    return [shlex.split(line, comments=True) for line in lines if line.strip()]


def from_repo(args: list[str]) -> list[str]:
    """The arguments with the repository's relative paths (``../shared/data/...``, ``docs/...``, ``scripts/...``)
    made absolute, so the command runs from any directory as it runs from the repository root."""
    return [str(REPO / a) if a.startswith(("../shared/", "docs/", "scripts/")) else a for a in args]


HELD_OUT = "Held-out evaluation and routing, start to end"


def test_the_held_out_walkthrough_routes_within_what_its_costs_allow() -> None:
    """The route command's budget lies between the cheapest and the dearest model of the costs file the
    walkthrough names, and that file prices every model of the battles it names (0.6 against costs of 6-13
    was refused: other units)."""
    commands = walkthrough(HELD_OUT)
    assert [c[:3] for c in commands] == [["evalprism", "p2l", verb] for verb in ("split", "train", "evaluate", "route")]
    route = commands[-1]
    costs = pd.read_csv(REPO / route[route.index("--costs") + 1])
    budget = float(route[route.index("--budget") + 1])
    assert costs["cost"].min() <= budget <= costs["cost"].max()
    battles = Path(from_repo(commands[0])[3])
    if not battles.exists():
        pytest.skip(f"real data {battles} is not present (a fresh clone has no ../shared)")
    table = pd.read_json(battles, lines=True)
    assert set(table["model_a"]) | set(table["model_b"]) <= set(costs["model"])


@pytest.mark.slow
def test_the_held_out_walkthrough_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The four commands, as written, on 300 of the battles they name: split, train, evaluate with the
    costs, and route within the budget."""
    commands = [from_repo(c) for c in walkthrough(HELD_OUT)]
    shared_data("p2l-battles")
    named = SHARED_DATA / "p2l-battles" / "arena33k_human_elobench" / "battles.jsonl"
    assert Path(commands[0][3]).resolve() == named.resolve()
    battles = pd.read_json(named, lines=True)
    battles.sample(300, random_state=0).to_json(tmp_path / "battles.jsonl", orient="records", lines=True)
    commands[0][3] = str(tmp_path / "battles.jsonl")
    monkeypatch.chdir(tmp_path)
    for command in commands:
        code, _, err = run_cli([*command[1:], "-q"], capsys)
        assert code == 0, f"{' '.join(command)}:\n{err}"
    sides = [pd.read_json(tmp_path / "split" / f"{side}.jsonl", lines=True) for side in ("train", "test")]
    assert sum(map(len, sides)) == 300 and not set(sides[0]["prompt"]) & set(sides[1]["prompt"])
    routing = pd.read_csv(tmp_path / "out" / "eval" / "routing.csv")
    assert set(routing["policy"]) == {"p2l", "best single", "marginal router", "random mix", "oracle"}
    assert routing["value"].between(0, 1).all()
    notes = json.loads((tmp_path / "out" / "eval" / "run.json").read_text())["notes"]  # bt leaves the ties out
    assert any(note.startswith("outcome model 'bt' leaves out") for note in notes), notes
    budget = float(commands[-1][commands[-1].index("--budget") + 1])
    routes = pd.read_csv(tmp_path / "out" / "router" / "routes.csv")
    assert len(routes) == len(sides[1]) and routes["expected_winrate"].between(0, 1).all()  # a row per prompt row
    assert routes["expected_cost"].mean() <= budget + 1e-9  # the budget holds on average over the prompts
    traffic = pd.read_csv(tmp_path / "out" / "router" / "traffic.csv")
    assert traffic["share"].sum() == pytest.approx(1.0)


@pytest.mark.slow
def test_the_renze_walkthrough_converts_the_study_and_analyses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``renze.py convert`` as written gives the 146,021 responses and 149 configurations x 100 questions the
    README counts; the ``ecdf`` command as written runs on two configurations x 8 questions of its output."""
    shared_data("renze-temperature")
    convert, ecdf = (from_repo(c) for c in walkthrough("The full Renze & Guven temperature study"))
    monkeypatch.chdir(tmp_path)
    done = subprocess.run(
        [sys.executable, *convert[1:]], check=False, capture_output=True, text=True, timeout=HANG_LIMIT_S
    )
    assert done.returncode == 0, done.stderr
    table = pd.read_parquet(convert[-1])
    assert len(table) == 146_021 and table["question_id"].nunique() == 100
    assert table.groupby(["model", "agent", "temperature"]).ngroups == 149
    source = ecdf[2]
    assert source == convert[-1]
    keep = (table["model"] == "gpt-4") & table["temperature"].isin(["0.0", "1.0"]) & (table["question_id"] <= 8)
    keep &= table["agent"] == "chain_of_thought"
    table[keep].to_parquet(source, index=False)
    code, _, err = run_cli([*ecdf[1:], "-q"], capsys)
    assert code == 0, err
    out = tmp_path / ecdf[ecdf.index("--out") + 1]
    settings = pd.read_csv(out / "settings.csv")
    assert len(settings) == 2 * 8 and settings["cluster"].between(0, 7).all()
    accuracy = pd.read_csv(out / "accuracy.csv")
    assert accuracy["accuracy"].between(0, 1).all() and (out / "comparisons.csv").is_file()
