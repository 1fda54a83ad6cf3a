"""What a new user meets first (issue 14, sections 4 and 5): one CLI vocabulary, and runs that say
what they did with the data."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import typer
from helpers import read_run, run_cli, run_process, small_responses

from evalprism.cli import app
from evalprism.ecdf.analysis import pooled_configuration_columns
from evalprism.p2l.simulate import simulate_topic_battles

# the commands that write an output directory: each takes --out, --overwrite and --quiet
WRITING = {"ecdf", "judges", "demo", "compare"}
WRITING |= {f"p2l {name}" for name in ("fit", "train", "leaderboard", "evaluate", "route")}
WRITING |= {f"stem {name}" for name in ("pool", "locate", "audit", "plan")}


def _commands() -> dict:
    root = typer.main.get_command(app)
    found = {}
    for name, cmd in root.commands.items():  # type: ignore[attr-defined]
        if hasattr(cmd, "commands"):  # a group (typer vendors its own click: no isinstance check)
            found.update({f"{name} {sub}": c for sub, c in cmd.commands.items()})
        else:
            found[name] = cmd
    return found


def test_every_command_speaks_one_vocabulary() -> None:
    commands = _commands()
    assert set(commands) >= WRITING
    for name, cmd in commands.items():
        opts = {o for p in cmd.params for o in getattr(p, "opts", [])}
        if name in WRITING:
            assert {"--out", "-o", "--overwrite", "--quiet", "-q"} <= opts, name
            out = next(p for p in cmd.params if "--out" in getattr(p, "opts", []))
            assert out.required or name == "demo", f"{name}: --out must be required"
        if name == "serve":
            assert {"--quiet", "-q"} <= opts
        help_text = cmd.help or ""
        assert not re.search(r"seed 00\d", help_text), f"{name}: cites an internal seed file"


def test_help_shows_no_bool_metavar_and_keeps_literal_brackets(capsys) -> None:
    code, out, err = run_cli(["judges", "--help"], capsys)
    assert code == 0, err
    assert "<bool>" not in out
    assert "evalprism[umap]" in out  # rich markup must not swallow the extra's name
    code, out, _ = run_cli(["p2l", "train", "--help"], capsys)
    assert "<bool>" not in out and "unlike --embedder" in " ".join(out.split())


def test_version_on_the_root_command(capsys) -> None:
    from evalprism import __version__

    code, out, _ = run_cli(["--version"], capsys)
    assert code == 0 and out.strip() == __version__


def test_route_and_leaderboard_take_prompts_the_same_way() -> None:
    commands = _commands()
    for name in ("p2l route", "p2l leaderboard"):
        args = [p.name for p in commands[name].params if p.param_type_name == "argument"]
        assert args == ["model_dir", "prompts"], (name, args)


@pytest.mark.slow
def test_fit_and_train_say_how_many_ties_bt_leaves_out(tmp_path: Path, capsys) -> None:
    battles = simulate_topic_battles(200, seed=1)
    battles.loc[::5, "winner"] = "tie"
    battles.loc[1::9, "winner"] = "tie (bothbad)"
    n_ties = int(battles["winner"].isin(["tie", "tie (bothbad)"]).sum())
    path = tmp_path / "b.jsonl"
    battles.to_json(path, orient="records", lines=True)
    code, _, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "fit"], capsys)
    assert code == 0, err
    assert f"leaves out {n_ties} of 200 battles" in err
    code, _, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "fit-tie", "--outcome-model", "bt-tie"], capsys)
    assert code == 0 and "leaves out" not in err  # bt-tie uses every battle
    # --model, the flag's older name, still chooses the outcome model
    code, _, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "fit-tie-old", "--model", "bt-tie"], capsys)
    assert code == 0 and "leaves out" not in err
    tie_fit = pd.read_csv(tmp_path / "fit-tie" / "leaderboard.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "fit-tie-old" / "leaderboard.csv"), tie_fit)
    assert read_run(tmp_path / "fit-tie").options["outcome_model"] == "bt-tie"
    code, _, err = run_cli(["p2l", "train", path, "--out", tmp_path / "model"], capsys)
    assert code == 0, err
    assert f"leaves out {n_ties} of 200 battles" in err


def test_ecdf_names_configuration_columns_it_pools() -> None:
    table = small_responses()
    table["response_id"] = table.groupby(["question_id", "model", "temperature"]).cumcount()
    table["latency_ms"] = range(len(table))  # a per-response measure, not a configuration
    assert pooled_configuration_columns(table, []) == ["model", "temperature", "note"]
    assert pooled_configuration_columns(table, ["model"], ignore=["group"]) == ["temperature", "note"]
    assert pooled_configuration_columns(table, ["model", "temperature", "note"]) == []


def test_ecdf_prints_the_pooling_note(tmp_path: Path, cache_dir: Path, capsys) -> None:
    path = tmp_path / "r.csv"
    small_responses().drop(columns=["note"]).to_csv(path, index=False)
    code, _, err = run_cli(["ecdf", path, "--out", tmp_path / "o", "-k", "2"], capsys)
    assert code == 0, err
    assert "pooled within each setting: model, temperature" in " ".join(err.split())


@pytest.mark.slow
def test_st_embedder_that_is_not_local_fails_at_once(tmp_path: Path) -> None:
    """No Hugging Face download attempt (its retries took ~45 s): the message comes before any load."""
    path = tmp_path / "r.csv"
    small_responses().to_csv(path, index=False)
    ecdf = ["ecdf", path, "--out", tmp_path / "o", "--by", "model", "--embedder", "st:no-such-org/no-such-model"]
    proc = run_process([sys.executable, "-m", "evalprism", *ecdf])
    assert proc.returncode == 2
    err = " ".join(proc.stderr.split())
    assert "not a local directory" in err and "never downloads" in err
    assert "Retrying" not in proc.stderr and "huggingface.co" not in proc.stderr.replace("huggingface-cli", "")
    assert not (tmp_path / "o").exists()


def test_demo_default_output_directory_goes_through_the_same_rules(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evalprism demo` with no --out (the README's first command): the default is parsed like a given
    --out, and a foreign 'evalprism-demo' directory is refused before any work."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "evalprism-demo").mkdir()
    (tmp_path / "evalprism-demo" / "mine.txt").write_text("not evalprism's\n")
    code, _, err = run_cli(["demo"], capsys)
    assert code == 2 and "evalprism-demo" in err and "not written by evalprism" in " ".join(err.split())
    assert (tmp_path / "evalprism-demo" / "mine.txt").read_text() == "not evalprism's\n"
