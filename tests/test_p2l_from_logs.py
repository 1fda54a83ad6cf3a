"""Battles from graded evaluation logs (evalprism.p2l.from_logs): planted score tables with known
battle counts and outcomes, the real lm-eval and inspect_ai fixtures (scores and prompt text checked
against the readers and the files), and `p2l fit` / `p2l train` reading them."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli

from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.items import read_correctness
from evalprism.io.record import Provenance
from evalprism.p2l.from_logs import battles_from_scores, read_battles_input

FIXTURES = Path(__file__).parent / "fixtures" / "harness"


def scores(rows: list[tuple[str, str, float]], prompt: bool = True) -> pd.DataFrame:
    """A score table (model, item_id, score[, prompt]) from (model, item, score) triples."""
    df = pd.DataFrame(rows, columns=["model", "item_id", "score"])
    if prompt:
        df["prompt"] = "Question " + df["item_id"]
    return df


@pytest.mark.parametrize("n", [2, 3, 4, 7])
def test_n_models_on_an_item_give_n_choose_2_battles(n: int, tmp_path: Path) -> None:
    rng = np.random.default_rng(n)
    rows = [(f"m{k}", f"i{i}", float(rng.integers(0, 2))) for i in range(5) for k in range(n)]
    rows.append(("m0", "lonely", 1.0))  # one model only: no battle
    path = tmp_path / "scores.csv"
    scores(rows).to_csv(path, index=False)
    read = read_battles_input(path)
    battles = read.table
    assert read.from_scores and len(battles) == 5 * n * (n - 1) // 2
    assert (battles.groupby("item_id").size() == n * (n - 1) // 2).all()
    assert "lonely" not in set(battles["item_id"])
    assert battles.columns.tolist()[:4] == ["prompt", "model_a", "model_b", "winner"]
    assert "scored by one model only left out" in read.provenance.notes[-1]


def test_outcomes_of_a_planted_item() -> None:
    """Scores a=1, b=1, c=0, d=0, e=0.5 on one item: a-b tie, c-d both bad, a beats c, e between."""
    rows = [("a", "q", 1.0), ("b", "q", 1.0), ("c", "q", 0.0), ("d", "q", -1.0), ("e", "q", 0.5)]
    battles, conv = battles_from_scores(scores(rows).rename(columns={"model": "run"}).assign(benchmark="all"))
    got = {(r.model_a, r.model_b): r.winner for r in battles.itertuples()}
    assert got == {
        ("a", "b"): "tie",
        ("a", "c"): "model_a",
        ("a", "d"): "model_a",
        ("a", "e"): "model_a",
        ("b", "c"): "model_a",
        ("b", "d"): "model_a",
        ("b", "e"): "model_a",
        ("c", "d"): "tie (bothbad)",
        ("c", "e"): "model_b",
        ("d", "e"): "model_b",
    }
    assert (conv.items, conv.models, conv.battles, conv.decisive, conv.ties, conv.both_bad) == (1, 5, 10, 8, 1, 1)
    assert set(battles["prompt"]) == {"Question q"}


def test_several_samples_of_an_item_are_averaged(tmp_path: Path) -> None:
    """x scores 1 and 0 on item q (mean 0.5), y scores 1 (mean 1): y wins; both 0.5 on r: a tie."""
    rows = [("x", "q", 1.0), ("x", "q", 0.0), ("y", "q", 1.0), ("x", "r", 0.5), ("y", "r", 1.0), ("y", "r", 0.0)]
    path = tmp_path / "samples.csv"
    scores(rows).to_csv(path, index=False)
    battles = read_battles_input(path).table.set_index("item_id")
    assert battles.loc["q", "winner"] == "model_b" and battles.loc["r", "winner"] == "tie"


def test_a_table_without_prompt_text_is_refused_for_training_only(tmp_path: Path, capsys) -> None:
    rows = [(m, f"i{i}", float((i + k) % 2)) for i in range(6) for k, m in enumerate(["a", "b", "c"])]
    path = tmp_path / "scores.csv"
    scores(rows, prompt=False).to_csv(path, index=False)
    with pytest.raises(EvalprismError, match="has no 'prompt' column: P2L learns from the prompt"):
        read_battles_input(path, prompts=True)
    battles = read_battles_input(path, prompts=False).table
    assert "prompt" not in battles.columns and len(battles) == 18
    code, _, err = run_cli(["p2l", "train", str(path), "--out", str(tmp_path / "model"), "-q"], capsys)
    assert code != 0 and "has no 'prompt' column" in " ".join(err.split()) and "Traceback" not in err
    assert not (tmp_path / "model").exists()
    code, _, err = run_cli(["p2l", "fit", str(path), "--out", str(tmp_path / "fit"), "--model", "rk"], capsys)
    assert code == 0, err
    assert "6 items, 3 models, 18 battles" in " ".join(err.split())
    assert any(
        "18 battles: 12 decisive, 3 ties, 3 both bad" in line for line in read_run(tmp_path / "fit").provenance.choices
    )
    # some items with text and some without: the first without is named
    partial = scores(rows)
    partial.loc[partial["item_id"] == "i4", "prompt"] = ""
    with pytest.raises(EvalprismError, match="no prompt text for 1 of 6 items .*item 'i4'"):
        battles_from_scores(partial.rename(columns={"model": "run"}).assign(benchmark="all"))


def test_lm_eval_fixture_battles_follow_the_readers_scores_and_carry_the_prompts() -> None:
    """Three runs (1, 3, 4) of the dummy model on mc_local and gen_local (6 items each): 12 items x 3
    pairs; each outcome follows the scores read_correctness gives, the prompt is the request context."""
    root = FIXTURES / "lm_eval"
    read = read_battles_input(root)
    battles = read.table
    assert len(battles) == 12 * 3
    truth = read_correctness(root).table.set_index(["model", "benchmark", "item_id"])["score"].clip(lower=0)
    for r in battles.itertuples():
        sa, sb = truth[(r.model_a, r.benchmark, r.item_id)], truth[(r.model_b, r.benchmark, r.item_id)]
        expected = "model_a" if sa > sb else "model_b" if sb > sa else "tie" if sa > 0 else "tie (bothbad)"
        assert r.winner == expected
    gen = battles[battles["benchmark"] == "gen_local"].set_index("item_id")["prompt"]
    assert gen.loc["2"].iloc[0] == "Q: Say something 2\nA:"
    mc = battles[battles["benchmark"] == "mc_local"].set_index("item_id")["prompt"]
    assert mc.loc["1"].iloc[0] == "Which number is 1?"
    # gen_local under strict-match scores 1, 0, 0, 1, 0, 1 for every run (all answer 'lol'): ties and both bad
    g = battles[battles["benchmark"] == "gen_local"]
    assert set(g.loc[g["item_id"].isin(["0", "3", "5"]), "winner"]) == {"tie"}
    assert set(g.loc[g["item_id"].isin(["1", "2", "4"]), "winner"]) == {"tie (bothbad)"}


def test_inspect_fixture_battles_carry_the_sample_inputs() -> None:
    root = FIXTURES / "inspect_layouts" / "family"
    read = read_battles_input(root)
    battles = read.table
    models = {"mockllm/small", "mockllm/medium", "mockllm/large"}
    assert len(battles) == 6 * 3 and set(battles["model_a"]) | set(battles["model_b"]) == models
    log = json.loads(next(root.glob("*5ZTC4*.json")).read_text())
    inputs = {str(s["id"]): s["input"] for s in log["samples"]}
    for r in battles.itertuples():
        assert r.prompt == inputs[r.item_id]
    truth = read_correctness(root).table.set_index(["model", "item_id"])["score"]
    for r in battles.itertuples():
        sa, sb = truth[(r.model_a, r.item_id)], truth[(r.model_b, r.item_id)]
        assert r.winner == ("model_a" if sa > sb else "model_b" if sb > sa else "tie" if sa > 0 else "tie (bothbad)")
    assert any("6 items, 3 models, 18 battles" in line for line in read.provenance.notes)


def test_p2l_train_reads_inspect_logs(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(
        [
            "p2l",
            "train",
            str(FIXTURES / "inspect_layouts" / "family"),
            "--outcome-model",
            "rk",
            "--penalty",
            "1",
            "--out",
            str(tmp_path / "model"),
        ],
        capsys,
    )
    assert code == 0, err
    run = read_run(tmp_path / "model")
    assert any("18 battles:" in line for line in run.provenance.choices)
    assert run.results["n_battles"] == 18


def test_battles_files_are_read_as_before(tmp_path: Path) -> None:
    """A battles table (it has a winner) is not mistaken for scores."""
    rows = [
        {"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": "model_a", "item_id": i, "score": 1}
        for i, (a, b) in enumerate(itertools.permutations("xyz", 2))
    ]
    path = tmp_path / "battles.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    read = read_battles_input(path)
    assert not read.from_scores and read.provenance == Provenance() and len(read.table) == 6


def test_harness_options_choose_what_the_battles_are_made_of(tmp_path: Path, capsys) -> None:
    """`--lm-eval-filter` (and the other harness options) reach the readers behind `p2l fit`/`train`:
    under gen_local's flexible-extract filter the battles follow the scores read_correctness gives
    under that filter, and the read notes say which filter was read."""
    root = FIXTURES / "lm_eval"
    flexible = HarnessOptions(lm_eval_filter="gen_local=flexible-extract")
    read = read_battles_input(root, harness=flexible)
    battles = read.table
    truth = read_correctness(root, harness=flexible).table.set_index(["model", "benchmark", "item_id"])["score"]
    strict = read_correctness(root).table.set_index(["model", "benchmark", "item_id"])["score"]
    assert not truth.equals(strict)  # the filter changes the scores, so the test can tell
    for r in battles.itertuples():
        sa = truth[(r.model_a, r.benchmark, r.item_id)].clip(min=0)
        sb = truth[(r.model_b, r.benchmark, r.item_id)].clip(min=0)
        assert r.winner == ("model_a" if sa > sb else "model_b" if sb > sa else "tie" if sa > 0 else "tie (bothbad)")
    assert any("filter flexible-extract" in line for line in read.provenance.choices)

    code, _, err = run_cli(
        ["p2l", "fit", str(root), "--out", str(tmp_path / "fit"), "--lm-eval-filter", "gen_local=flexible-extract"],
        capsys,
    )
    assert code == 0, err
    assert any("filter flexible-extract" in line for line in read_run(tmp_path / "fit").provenance.choices)


def test_harness_options_on_a_battles_file_are_refused_by_their_flag(tmp_path: Path, capsys) -> None:
    rows = [
        {"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": "model_a"}
        for i, (a, b) in enumerate(itertools.permutations("xyz", 2))
    ]
    path = tmp_path / "battles.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    code, _, err = run_cli(["p2l", "fit", str(path), "--out", str(tmp_path / "fit"), "--metric", "acc"], capsys)
    assert code == 2 and "--metric acc: does not apply here" in err and "holds battles" in err
    # p2l train's --epochs is the epoch loop's: the inspect reader's option is --log-epochs, and its
    # message says so
    code, _, err = run_cli(["p2l", "train", str(path), "--out", str(tmp_path / "m"), "--log-epochs", "all"], capsys)
    assert code == 2 and "--log-epochs all: does not apply here" in err and "drop --log-epochs" in err, err
    assert not (tmp_path / "fit").exists() and not (tmp_path / "m").exists()


@pytest.mark.slow
def test_split_train_evaluate_from_logs_holds_items_out(tmp_path: Path, capsys) -> None:
    """The held-out workflow on graded logs: `p2l split` splits the battles made from the lm-eval
    samples by item text, `p2l train` fits on one side and `p2l evaluate` scores the other side as
    held out, while evaluating on the whole log directory says the model saw some of its prompts."""
    root = FIXTURES / "lm_eval"
    split = tmp_path / "split"
    code, _, err = run_cli(["p2l", "split", str(root), "--out", str(split), "--test-fraction", "0.5"], capsys)
    assert code == 0, err
    train, test = pd.read_json(split / "train.jsonl", lines=True), pd.read_json(split / "test.jsonl", lines=True)
    assert len(train) + len(test) == 12 * 3  # 12 items, 3 pairs of runs each
    assert not set(train["prompt"]) & set(test["prompt"])  # an item's battles stay on one side
    assert {"model_a", "model_b", "winner", "item_id"} <= set(train.columns)
    code, _, err = run_cli(
        [
            "p2l",
            "train",
            str(split / "train.jsonl"),
            "--outcome-model",
            "rk",
            "--penalty",
            "1",
            "--out",
            str(tmp_path / "m"),
        ],
        capsys,
    )
    assert code == 0, err
    code, _, err = run_cli(
        ["p2l", "evaluate", str(tmp_path / "m"), str(split / "test.jsonl"), "--out", str(tmp_path / "ev")], capsys
    )
    assert code == 0, err
    assert read_run(tmp_path / "ev").results["overlap"]["fit"] == 0
    code, _, err = run_cli(["p2l", "evaluate", str(tmp_path / "m"), str(root), "--out", str(tmp_path / "all")], capsys)
    assert code == 0, err
    overlap = read_run(tmp_path / "all").results["overlap"]
    # every training prompt is among them: fitted on, or held out by training as its validation
    assert overlap["fit"] > 0 and overlap["fit"] + overlap["validation"] == train["prompt"].nunique()
    assert "NOT held out" in (tmp_path / "all" / "report.html").read_text()


def test_split_of_a_jsonl_score_table_writes_battles_not_score_rows(tmp_path: Path, capsys) -> None:
    """A JSON Lines score table with as many rows as battles: the split writes the battles made from
    it, never the file's own rows (which the split copies verbatim for a battles file)."""
    rows = [
        {"model": m, "item_id": i, "score": s, "prompt": f"question {i}"}
        for i in range(6)
        for m, s in (("x", 1), ("y", i % 2), ("z", 0))
    ]  # 18 score rows; 6 items x 3 pairs = 18 battles
    path = tmp_path / "scores.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    code, _, err = run_cli(["p2l", "split", str(path), "--out", str(tmp_path / "split")], capsys)
    assert code == 0, err
    written = pd.concat([pd.read_json(tmp_path / "split" / f, lines=True) for f in ("train.jsonl", "test.jsonl")])
    assert len(written) == 18 and "winner" in written.columns and "score" not in written.columns


def test_one_inspect_json_log_is_read_as_a_log_not_as_a_table() -> None:
    """A single inspect_ai ``.json`` log goes to the inspect reader (as a directory of them does): its
    one model gives no battle, said as such, rather than the table reader's "expected a JSON list"."""
    log = FIXTURES / "inspect_json" / "arith_two_scorers.json"
    with pytest.raises(
        EvalprismError,
        match=r"arith_two_scorers.json: no item is scored by two or more models, .* \(4 items, 1 model\(s\)\)",
    ):
        read_battles_input(log, harness=HarnessOptions(scorer="match"))
