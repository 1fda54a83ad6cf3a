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

import numpy as np
import pandas as pd
import pytest

from helpers import HANG_LIMIT_S, small_responses

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
    train_model(battles, TrainOptions(fit="adamw", max_epochs=1, seed=0), checkpoint_dir=root / "interrupted.checkpoint",
              progress=False)
    pd.DataFrame({"prompt": ["Write a haiku about rain.", "Compute 17 * 23.", "Fix this Python loop."]}).to_csv(
        root / "prompts.csv", index=False)
    pd.DataFrame({"model": MODELS, "cost": [0.2, 0.4, 1.0, 3.0]}).to_csv(root / "costs.csv", index=False)
    small_responses().to_csv(root / "responses.csv", index=False)
    correctness, meta = simulate_family(n_items=400, seed=0)
    correctness.to_csv(root / "correctness.csv", index=False)
    meta.to_csv(root / "models.csv", index=False)
    build_pool(correctness, meta, family="toy").save(root / "pool")
    simulate_judgments(n_queries=12, docs_per_genre=7, noise=0.03, seed=0).to_csv(root / "judgments.csv", index=False)
    (root / "serve.yaml").write_text("models:\n  poet-7b: {base_url: 'http://127.0.0.1:9/v1', cost: 0.2}\n"
                                     "  calc-13b: {base_url: 'http://127.0.0.1:9/v1', cost: 0.4}\n", encoding="utf-8")
    return root


def snapshot(root: Path) -> dict[str, str]:
    """Every path under ``root`` with a hash of its bytes (directories as 'dir')."""
    out = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        out[key] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def evalprism(args: list[str], cwd: Path, timeout: float = HANG_LIMIT_S) -> subprocess.CompletedProcess[str]:
    """The real console entry point in its own process."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "evalprism.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


# ------------------------------------------------------------------------------------------ helpers that break inputs

def reencode(path: Path, encoding: str) -> None:
    path.write_bytes(path.read_text(encoding="utf-8").encode(encoding))


def put_text_on_line(path: Path, line: int, text: str, encoding: str = "latin-1") -> None:
    """Append ``text`` to the end of the first field of ``line`` (1-based) and save as ``encoding``."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = lines[line - 1].replace(",", f" {text},", 1) if "," in lines[line - 1] else text + lines[line - 1]
    path.write_bytes("".join(lines).encode(encoding))


def set_json_field(path: Path, line: int, field: str, value: object) -> None:
    """Replace ``field`` on JSONL ``line`` (1-based)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[line - 1])
    record[field] = value
    lines[line - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def all_ties(path: Path) -> None:
    table = pd.read_json(path, lines=True)
    table["winner"] = "tie"
    table.to_json(path, orient="records", lines=True)


# ------------------------------------------------------------------------------------------ the cases

Build = Callable[[Path], tuple[list[str], list[str]]]


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


def _enc_ecdf_latin1(w: Path):
    put_text_on_line(w / "responses.csv", 12, "Éclair")
    return _ecdf(), ["responses.csv", "line 12, column", "UTF-8"]


def _enc_ecdf_utf16_nobom(w: Path):
    reencode(w / "responses.csv", "utf-16-le")
    return _ecdf(), ["responses.csv", "UTF-16"]


def _enc_ecdf_binary(w: Path):
    (w / "responses.csv").write_bytes(bytes(range(256)) * 8)
    return _ecdf(), ["responses.csv", "binary"]


def _enc_fit_latin1(w: Path):
    lines = (w / "battles.jsonl").read_text(encoding="utf-8").splitlines()
    lines[6] = lines[6].replace("Explain", "Expliquez É", 1).replace('"prompt":"', '"prompt":"É ', 1)
    (w / "battles.jsonl").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    return ["p2l", "fit", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "line 7, column", "UTF-8"]


def _enc_fit_bad_jsonl(w: Path):
    lines = (w / "battles.jsonl").read_text(encoding="utf-8").splitlines()
    lines[9] = lines[9][:-1]  # line 10 loses its closing brace
    (w / "battles.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["p2l", "fit", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "line 10, column", "JSON"]


def _enc_train_binary(w: Path):
    (w / "battles.jsonl").write_bytes(b"PK\x03\x04\x14\x00\x00\x00" + bytes(range(256)) * 8)
    return ["p2l", "train", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "binary"]


def _enc_evaluate_bad_jsonl(w: Path):
    lines = (w / "battles.jsonl").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace('"model_a":', '"model_a" ', 1)  # line 3: a missing colon
    (w / "battles.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ["p2l", "evaluate", "model", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "line 3, column", "JSON"]


def _enc_leaderboard_latin1_txt(w: Path):
    (w / "prompts.txt").write_bytes("Write a haiku.\nCompute 2+2.\nRésumé of a café owner.\n".encode("latin-1"))
    return (["p2l", "leaderboard", "model", "prompts.txt", "--out", "out", "-q"],
            ["prompts.txt", "line 3, column 2", "UTF-8"])


def _enc_route_misspelled_cost(w: Path):
    text = (w / "costs.csv").read_text(encoding="utf-8").replace("calc-13b", "calc-13", 1)
    (w / "costs.csv").write_text(text, encoding="utf-8")
    return (["p2l", "route", "model", "prompts.csv", "--costs", "costs.csv", "--out", "out", "-q"],
            ["costs.csv", "line 3", "column 'model'", "calc-13"])


def _enc_route_utf16_costs(w: Path):
    reencode(w / "costs.csv", "utf-16-le")
    return (["p2l", "route", "model", "prompts.csv", "--costs", "costs.csv", "--out", "out", "-q"],
            ["costs.csv", "UTF-16"])


def _enc_stem_pool_latin1(w: Path):
    put_text_on_line(w / "correctness.csv", 40, "modèle")
    return (["stem", "pool", "correctness.csv", "--models", "models.csv", "--family", "toy", "--out", "out"],
            ["correctness.csv", "line 40, column", "UTF-8"])


def _enc_stem_locate_utf16(w: Path):
    reencode(w / "correctness.csv", "utf-16-le")
    return (["stem", "locate", "pool", "correctness.csv", "--out", "out", "--trials", "0", "-q"],
            ["correctness.csv", "UTF-16"])


def _enc_stem_audit_binary(w: Path):
    (w / "models.csv").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    return (["stem", "audit", "correctness.csv", "--models", "models.csv", "--family", "toy", "--out", "out"],
            ["models.csv", "binary"])


def _enc_judges_latin1(w: Path):
    put_text_on_line(w / "judgments.csv", 5, "naïve")
    return (["judges", "judgments.csv", "--llm", "llm_strict", "--out", "out", "-q"],
            ["judgments.csv", "line 5, column", "UTF-8"])


def _enc_judges_qrels_latin1(w: Path):
    (w / "human.qrels").write_text("1 0 d1 2\n1 0 d2 0\n", encoding="utf-8")
    (w / "llm.qrels").write_bytes("1 0 d1 2\n1 0 d2 \xe9\n".encode("latin-1"))
    (w / "topics.tsv").write_text("1\twhat is rain\n", encoding="utf-8")
    (w / "passages.tsv").write_text("d1\train falls\nd2\tsun shines\n", encoding="utf-8")
    return (["judges", "--qrels", "human=human.qrels", "--qrels", "llm=llm.qrels", "--topics", "topics.tsv",
             "--passages", "passages.tsv", "--human", "human", "--llm", "llm", "--out", "out", "-q"],
            ["llm.qrels", "line 2, column 8", "UTF-8"])


def _enc_serve_latin1(w: Path):
    text = (w / "serve.yaml").read_text(encoding="utf-8") + "router_name: routeur-é\n"
    (w / "serve.yaml").write_bytes(text.encode("latin-1"))
    return ["serve", "model", "--config", "serve.yaml"], ["serve.yaml", "line 4, column 22", "UTF-8"]


def _dir_leaderboard_truncated_head(w: Path):
    head = w / "model" / "head.safetensors"
    head.write_bytes(head.read_bytes()[:100])
    return (["p2l", "leaderboard", "model", "prompts.csv", "--out", "out", "-q"],
            ["not a valid evalprism model directory", "head.safetensors"])


def _dir_evaluate_empty_head(w: Path):
    (w / "model" / "head.safetensors").write_bytes(b"")
    return (["p2l", "evaluate", "model", "battles.jsonl", "--out", "out", "-q"],
            ["not a valid evalprism model directory", "head.safetensors"])


def _dir_route_broken_marginal(w: Path):
    (w / "model" / "marginal.csv").write_text('model,coef\n"poet-7b,0.3\n', encoding="utf-8")
    return (["p2l", "route", "model", "prompts.csv", "--costs", "costs.csv", "--out", "out", "-q"],
            ["not a valid evalprism model directory", "marginal.csv"])


def _dir_serve_broken_config(w: Path):
    (w / "model" / "config.json").write_text('{"loss": "bt", "models": ', encoding="utf-8")
    return ["serve", "model", "--config", "serve.yaml"], ["not a valid evalprism model directory", "config.json"]


def _dir_train_corrupt_checkpoint(w: Path):
    checkpoint = w / "interrupted.checkpoint" / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:5000])  # torn: a disk that filled up mid-write
    return (["p2l", "train", "battles.jsonl", "--out", "interrupted", "--resume", "--fit", "adamw", "-q"],
            ["checkpoint.pt", "not a valid evalprism checkpoint"])


def _dir_locate_string_params(w: Path):
    models = pd.read_csv(w / "pool" / "models.csv")
    models["params"] = models["params"].astype(str) + " billion"
    models.to_csv(w / "pool" / "models.csv", index=False)
    return (["stem", "locate", "pool", "correctness.csv", "--out", "out", "--trials", "0", "-q"],
            ["not a valid evalprism pool directory", "models.csv", "row 1, column 'params'"])


def _dir_locate_missing_params(w: Path):
    pd.read_csv(w / "pool" / "models.csv").drop(columns=["params"]).to_csv(w / "pool" / "models.csv", index=False)
    return (["stem", "locate", "pool", "correctness.csv", "--out", "out", "--trials", "0", "-q"],
            ["not a valid evalprism pool directory", "models.csv", "'params'"])


def _dir_locate_broken_run_json(w: Path):
    (w / "pool" / "run.json").write_text('{"family": "toy", ', encoding="utf-8")
    return (["stem", "locate", "pool", "correctness.csv", "--out", "out", "--trials", "0", "-q"],
            ["not a valid evalprism pool directory", "run.json"])


def _data_fit_all_ties(w: Path):
    all_ties(w / "battles.jsonl")
    return ["p2l", "fit", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "tie"]


def _data_evaluate_all_ties(w: Path):
    all_ties(w / "battles.jsonl")
    return ["p2l", "evaluate", "model", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "tie"]


def _data_train_all_ties(w: Path):
    all_ties(w / "battles.jsonl")
    return ["p2l", "train", "battles.jsonl", "--out", "out", "-q"], ["battles.jsonl", "tie"]


def _data_fit_nested_model(w: Path):
    set_json_field(w / "battles.jsonl", 4, "model_a", {"name": "poet-7b", "version": 2})
    return (["p2l", "fit", "battles.jsonl", "--out", "out", "-q"],
            ["battles.jsonl", "row 4, column 'model_a'", "JSON object"])


def _data_leaderboard_nested_prompt(w: Path):
    (w / "prompts.jsonl").write_text('{"prompt": "Write a haiku."}\n{"prompt": {"role": "user", "content": "Hi"}}\n',
                                     encoding="utf-8")
    return (["p2l", "leaderboard", "model", "prompts.jsonl", "--out", "out", "-q"],
            ["prompts.jsonl", "row 2, column 'prompt'", "JSON object"])


def _data_judges_nested_query(w: Path):
    table = pd.read_csv(w / "judgments.csv")
    table.to_json(w / "judgments.jsonl", orient="records", lines=True)
    set_json_field(w / "judgments.jsonl", 3, "query", {"text": "what is rain", "lang": "en"})
    return (["judges", "judgments.jsonl", "--llm", "llm_strict", "--out", "out", "-q"],
            ["judgments.jsonl", "row 3, column 'query'", "JSON object"])


def _data_stem_pool_nested_model(w: Path):
    table = pd.read_csv(w / "correctness.csv")
    table.to_json(w / "correctness.jsonl", orient="records", lines=True)
    set_json_field(w / "correctness.jsonl", 2, "model", {"name": "toy-1b"})
    return (["stem", "pool", "correctness.jsonl", "--models", "models.csv", "--family", "toy", "--out", "out"],
            ["correctness.jsonl", "row 2, column 'model'", "JSON object"])


def _data_stem_audit_list_score(w: Path):
    table = pd.read_csv(w / "correctness.csv")
    table.to_json(w / "correctness.jsonl", orient="records", lines=True)
    set_json_field(w / "correctness.jsonl", 5, "score", [1])
    return (["stem", "audit", "correctness.jsonl", "--models", "models.csv", "--family", "toy", "--out", "out"],
            ["correctness.jsonl", "row 5, column 'score'", "list"])


def _data_ecdf_list_score(w: Path):
    table = small_responses().drop(columns=["references"]).assign(score=0.5)
    table.to_json(w / "responses.jsonl", orient="records", lines=True)
    set_json_field(w / "responses.jsonl", 6, "score", [0.7])
    return _ecdf(path="responses.jsonl"), ["responses.jsonl", "row 6, column 'score'", "list"]


def _opt_train_negative_lr(w: Path):
    return ["p2l", "train", "battles.jsonl", "--out", "out", "--lr", "-1", "-q"], ["lr", "--lr", "-1"]


def _opt_train_epochs_with_ridge(w: Path):
    return (["p2l", "train", "battles.jsonl", "--out", "out", "--epochs", "5", "-q"],
            ["--epochs applies to the epoch loop", "fit 'adamw'"])


def _opt_train_nan_lr(w: Path):
    return ["p2l", "train", "battles.jsonl", "--out", "out", "--lr", "nan", "-q"], ["lr", "--lr", "nan"]


def _opt_judges_nan_tau(w: Path):
    return ["judges", "judgments.csv", "--llm", "llm_strict", "--tau", "nan", "--out", "out", "-q"], ["tau", "nan"]


def _opt_judges_components(w: Path):
    return (["judges", "judgments.csv", "--llm", "llm_strict", "--components", "400", "--out", "out", "-q"],
            ["--components 400", "the embedding dimension 384"])  # 420 pairs allow 419


def _opt_serve_log_level(w: Path):
    return (["serve", "model", "--config", "serve.yaml", "--log-level", "bogus"],
            ["--log-level", "bogus", "debug"])


def _opt_serve_decision_log(w: Path):
    return (["serve", "model", "--config", "serve.yaml", "--decision-log", "prompts.csv/decisions.jsonl"],
            ["decision log", "prompts.csv/decisions.jsonl"])


def _scale_ecdf_100k(w: Path):
    # 100,000 settings cluster without the n x n matrix (evalprism.stats.clara), but exact PAM needs it
    n = 100_000
    pd.DataFrame({"question_id": np.arange(n), "score": np.linspace(0, 1, n)}).to_csv(w / "big.csv", index=False)
    return ["ecdf", "big.csv", "--out", "out", "--method", "pam", "-q"], ["100000 x 100000", "--method 'pam'",
                                                                          "fasterpam"]


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
def test_bad_input_is_one_message_and_no_change(case: Case, base: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(base, work)
    args, fragments = case.build(work)
    before = snapshot(work)
    proc = evalprism(args, work)
    err = " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr
    message = err[err.index(errors[0][:40]):]
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in: {message}"
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
    pd.DataFrame([{"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": w} for i, (a, b, w) in enumerate(rows)]
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

    MODELS = [f"model-{c}" for c in "abcdefghij"]  # ten: more than a message lists

    def _model_dir(self, tmp_path: Path) -> Path:
        """A valid model directory whose backbone cannot load: any check that runs after loading it
        fails with the backbone's error instead of its own."""
        import torch
        from safetensors.torch import save_file

        directory = tmp_path / "model"
        if directory.is_dir():
            return directory
        directory.mkdir()
        (directory / "config.json").write_text(json.dumps(
            {"models": self.MODELS, "loss": "bt", "backbone": {"spec": f"st:{tmp_path / 'no-such-encoder'}"}}))
        save_file({"linear.weight": torch.zeros(len(self.MODELS), 4), "linear.bias": torch.zeros(len(self.MODELS))},
                  str(directory / "head.safetensors"))
        (tmp_path / "prompts.txt").write_text("Write a haiku.\nWhat is 2 + 2?\n")
        return directory

    def _route(self, tmp_path: Path, costs: Path, capsys, *extra: str) -> tuple[int, str]:
        from helpers import run_cli

        code, _, err = run_cli(["p2l", "route", self._model_dir(tmp_path), tmp_path / "prompts.txt", "--costs", costs,
                                "--out", tmp_path / "out", "-q", *extra], capsys)
        return code, " ".join(err.split())

    def test_no_routed_model_priced_says_so_and_lists_them_all_or_how_many_more(self, tmp_path: Path, capsys) -> None:
        pd.DataFrame({"model": ["gpt-4o", "claude-3-opus"], "cost": [10.0, 75.0]}).to_csv(tmp_path / "c.csv", index=False)
        code, err = self._route(tmp_path, tmp_path / "c.csv", capsys)
        assert code == 2
        assert "no routed model has a cost" in err
        assert ", ".join(self.MODELS[:8]) + " … and 2 more" in err
        assert "is not one of the models" not in err  # extra rows are ignored, not blamed
        assert "no-such-encoder" not in err and not (tmp_path / "out").exists()

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

        pd.DataFrame({"model_api_name": ["m1", "m2", "m3"], "input_usd_per_1M": ["1", "", "0.5"],
                      "output_usd_per_1M": ["4", "", "2"]}).to_csv(tmp_path / "prices.csv", index=False)
        costs = read_costs(tmp_path / "prices.csv")
        assert dict(costs) == {"m1": 4.0, "m3": 2.0} and costs.column == "output_usd_per_1M" and costs.unpriced == 1
        assert costs.locations["m3"] == "row 3 (line 4)"
        assert dict(read_costs(tmp_path / "prices.csv", "input_usd_per_1M")) == {"m1": 1.0, "m3": 0.5}
        (tmp_path / "scatter.json").write_text(json.dumps([
            {"name": "M1", "model_api_name": "m1", "input_token_price": "2.5", "output_token_price": "10"},
            {"name": "M2", "model_api_name": "m2", "input_token_price": "0.15", "output_token_price": "0.6"}]))
        assert dict(read_costs(tmp_path / "scatter.json")) == {"m1": 10.0, "m2": 0.6}
