"""compare for release decisions: k-sample scores, the non-inferiority gate, the runs tied for best,
the noise plan, and what CI reads — each against a hand computation or a planted world."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli

from evalprism.compare import CompareOptions, compare_runs
from evalprism.errors import EvalprismError


def _sampled(quality: dict[str, np.ndarray], samples: int, seed: int = 0) -> pd.DataFrame:
    """A score table: each model answers each item ``samples`` times, right with the item's probability."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, p in quality.items():
        right = rng.random((len(p), samples)) < p[:, None]
        rows.append(
            pd.DataFrame(
                {
                    "model": model,
                    "item_id": np.repeat(np.arange(len(p)), samples),
                    "score": right.ravel().astype(float),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def _pass_at_k(n: int, c: int, k: int) -> float:
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def test_aggregate_pass_at_k_compares_each_items_unbiased_value() -> None:
    rng = np.random.default_rng(1)
    table = _sampled({"A": rng.random(60), "B": rng.random(60)}, samples=4)
    res = compare_runs([table], CompareOptions(aggregate="pass@2", permutations=99))
    right = table.groupby(["model", "item_id"])["score"].sum().astype(int)
    by_hand = {m: np.array([_pass_at_k(4, c, 2) for c in right[m]]) for m in ("A", "B")}
    row = res.overall().iloc[0]
    assert row["difference"] == pytest.approx((by_hand["B"] - by_hand["A"]).mean())
    assert row["test"] == "sign-flip"  # pass@2 values lie between 0 and 1: no McNemar
    assert any("pass@2" in note for note in res.notes)


def test_runs_table_lists_pass_maj_and_avg_by_default_with_their_standard_errors() -> None:
    rng = np.random.default_rng(2)
    table = _sampled({"A": rng.random(50), "B": rng.random(50)}, samples=4)
    per_run = compare_runs([table], CompareOptions(permutations=99)).runs_table
    assert per_run is not None
    assert list(per_run["rule"].unique()) == ["pass@1", "pass@4", "maj@3", "avg@4"]
    right = table[table["model"] == "A"].groupby("item_id")["score"].sum().astype(int).to_numpy()
    maj3 = np.array([sum(math.comb(c, j) * math.comb(4 - c, 3 - j) for j in (2, 3)) / math.comb(4, 3) for c in right])
    row = per_run[(per_run["run"] == "A") & (per_run["rule"] == "maj@3")].iloc[0]
    assert row["value"] == pytest.approx(maj3.mean())
    assert row["se"] == pytest.approx(maj3.std(ddof=1) / math.sqrt(50))
    pass1 = per_run[(per_run["run"] == "A") & (per_run["rule"] == "pass@1")].iloc[0]["value"]
    assert pass1 == pytest.approx(right.mean() / 4)  # pass@1 is the mean accuracy


def test_k_above_the_samples_and_counting_rules_on_graded_scores_are_refused() -> None:
    table = _sampled({"A": np.full(10, 0.5), "B": np.full(10, 0.5)}, samples=3)
    with pytest.raises(EvalprismError, match="pass@4 needs at least 4 samples per item"):
        compare_runs([table], CompareOptions(aggregate="pass@4"))
    graded = table.assign(score=table["score"] * 0.5)
    with pytest.raises(EvalprismError, match="needs every score 0 or 1"):
        compare_runs([graded], CompareOptions(aggregate="pass@2"))
    with pytest.raises(EvalprismError, match="odd k"):
        CompareOptions(aggregate="maj@2")


@pytest.mark.slow  # 200 comparisons
def test_gate_type_one_error_at_the_margin_through_compare() -> None:
    """Planted nulls: the candidate is worse by exactly the margin; the gate may pass at most α of them."""
    rng = np.random.default_rng(11)
    margin, passes = 0.04, 0
    for _ in range(200):
        p = rng.uniform(0.3, 0.9, 300)
        base = (rng.random(300) < p).astype(float)
        cand = (rng.random(300) < p - margin).astype(float)
        table = pd.DataFrame(
            {"model": ["base"] * 300 + ["cand"] * 300, "item_id": np.tile(np.arange(300), 2), "score": [*base, *cand]}
        )
        res = compare_runs([table], CompareOptions(baseline="base", margin=margin, permutations=1, items_table=False))
        passes += res.gate[0].verdict == "pass"
    assert passes <= 18  # α = 5% of 200 is 10; 19 or more has probability < 1% under it


def _gate_cli(tmp_path: Path, capsys, quality: dict[str, np.ndarray], margin: str) -> tuple[int, str, Path]:
    path = tmp_path / "scores.csv"
    _sampled(quality, samples=1, seed=5).to_csv(path, index=False)
    out = tmp_path / f"out{margin}"
    code, stdout, _ = run_cli(["compare", path, "--baseline", "base", "--margin", margin, "--out", out], capsys)
    return code, stdout, out


def test_gate_exit_codes_junit_and_annotations(tmp_path: Path, capsys) -> None:
    p = np.random.default_rng(3).uniform(0.2, 0.9, 3000)
    code, stdout, out = _gate_cli(tmp_path, capsys, {"base": p, "same": p, "broken": p - 0.15}, "0.02")
    assert code == 1  # "broken" regressed
    gate = pd.read_csv(out / "gate.csv").set_index("run")
    assert gate.loc["broken", "verdict"] == "regression" and gate.loc["same", "verdict"] == "pass"
    suite = ElementTree.parse(out / "junit.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "1")
    assert [c.get("name") for c in suite.iter("testcase")] == ["same vs base", "broken vs base"]
    assert stdout.splitlines()[0].startswith("::notice title=evalprism gate::pass: same is no worse than base")
    assert stdout.splitlines()[1].startswith("::error title=evalprism gate::regression: broken is worse than base")
    assert read_run(out).results["gate_exit_code"] == 1
    small = {"base": p[:12], "same": p[:12]}
    code, _, out = _gate_cli(tmp_path, capsys, small, "0.01")
    assert code == 3 and pd.read_csv(out / "gate.csv")["verdict"].tolist() == ["cannot tell"]
    code, _, _ = _gate_cli(tmp_path, capsys, {"base": p, "same": p}, "0.05")
    assert code == 0


def test_margin_without_a_baseline_is_refused(tmp_path: Path, capsys) -> None:
    with pytest.raises(EvalprismError, match="margin 0.02: does not apply here: the release gate compares with"):
        CompareOptions(margin=0.02)


def test_confidence_set_keeps_the_planted_tie_for_best(tmp_path: Path, capsys) -> None:
    p = np.random.default_rng(8).uniform(0.2, 0.8, 2000)
    quality = {"old": p - 0.2, "best1": p + 0.1, "best2": p + 0.1, "mid": p - 0.05}
    path = tmp_path / "scores.csv"
    _sampled(quality, samples=1, seed=9).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(["compare", path, "--confidence-set", "0.9", "--no-items", "--out", out], capsys)
    assert code == 0, err
    cs = pd.read_csv(out / "confidence_set.csv")
    assert set(cs[cs["in_set"]]["run"]) == {"best1", "best2"}
    assert cs["run"].tolist()[:2] == ["old", "mid"]  # the worst eliminated first
    assert "best1, best2 are tied for best (model confidence set at 90%" in " ".join(err.split())
    assert not (out / "items.csv").exists()


def test_sign_flip_p_never_falls_below_its_floor_with_few_clusters() -> None:
    """F3: 14 clusters all favouring B: the exact p is 2 / 2**14, not a Monte Carlo 1 / (1 + B)."""
    rows = []
    for c in range(14):
        for i in range(3):
            rows += [("A", f"c{c}i{i}", 0.2, f"c{c}"), ("B", f"c{c}i{i}", 0.6 + 0.01 * c, f"c{c}")]
    table = pd.DataFrame(rows, columns=["model", "item_id", "score", "passage"])
    row = compare_runs([table], CompareOptions(cluster="passage")).overall().iloc[0]
    assert row["p_floor"] == pytest.approx(2 / 2**14)
    assert row["p"] == pytest.approx(2 / 2**14)  # every cluster positive: only the observed pattern and its mirror


def test_forest_intervals_are_drawn_in_their_colours() -> None:
    from evalprism.compare.report import _forest

    rng = np.random.default_rng(0)
    a = (rng.random(400) < 0.5).astype(float)
    table = {
        "A": a,
        "better": np.where(rng.random(400) < 0.4, 1.0, a),
        "worse": np.where(rng.random(400) < 0.4, 0.0, a),
    }
    frames = [pd.DataFrame({"model": m, "item_id": np.arange(400), "score": s}) for m, s in table.items()]
    res = compare_runs([pd.concat(frames)], CompareOptions(baseline="A"))
    fig = _forest(res.comparisons)
    colours = {
        trace.name: (trace.marker.color, trace.error_x.color) for trace in fig.data if trace.error_x.array is not None
    }
    assert colours == {
        "B better (p_adj < 0.05)": ("#1a7f37", "#1a7f37"),
        "B worse (p_adj < 0.05)": ("#cf222e", "#cf222e"),
    }
    assert fig.layout.yaxis.categoryarray[0].startswith("worse")  # rows keep their order


def test_noise_plan_line_says_what_doubling_buys(tmp_path: Path, capsys) -> None:
    from evalprism.compare.report import noise_lines

    p = np.random.default_rng(4).uniform(0.3, 0.7, 200)
    res = compare_runs([_sampled({"A": p, "B": p + 0.05}, samples=4)], CompareOptions(permutations=99))
    (line,) = noise_lines(res)
    row = res.overall().iloc[0]
    assert line.startswith(f"B vs A: MDE {100 * row['mde']:.1f} points; 4 more samples per item: ")
    assert "200 more items" in line and "resolution ratio N/N*" in line
    assert json.loads(json.dumps(float(row["resolution"]))) > 0


def test_a_pair_without_common_items_leaves_the_others_compared() -> None:
    """F8: runs A and B share items, C answered others: A-B is compared, A-C and B-C say why not."""
    rows = [("A", i, i % 2) for i in range(20)] + [("B", i, (i // 2) % 2) for i in range(20)]
    rows += [("C", 100 + i, 1) for i in range(20)]
    res = compare_runs([pd.DataFrame(rows, columns=["model", "item_id", "score"])])
    o = res.overall()
    verdicts = dict(zip(zip(o["run_a"], o["run_b"], strict=True), o["verdict"], strict=True))
    assert verdicts["A", "C"] == "no item both A and C answered" and "no difference" in verdicts["A", "B"]
    assert any("runs 'A' (table 1) and 'C' (table 1) have no item in common" in n for n in res.notes)


def test_a_verdict_on_a_minority_of_the_items_says_so() -> None:
    """F2: 40 items in common out of 140 answered by either run."""
    rng = np.random.default_rng(2)
    a = pd.DataFrame({"model": "A", "item_id": np.arange(100), "score": (rng.random(100) < 0.5).astype(float)})
    b = pd.DataFrame({"model": "B", "item_id": np.arange(60, 140), "score": (rng.random(80) < 0.5).astype(float)})
    row = compare_runs([pd.concat([a, b])]).overall().iloc[0]
    assert row["verdict"].endswith("(on 40 of the 140 items; the other 100 were answered by one run only)")


def test_one_cluster_per_benchmark_names_the_cause() -> None:
    """F11: each benchmark is one passage: its SE cannot be clustered, and the verdict says why."""
    rows = []
    for bench in ("x", "y"):
        for i in range(30):
            rows += [("A", f"{bench}{i}", float(i % 2), bench, bench), ("B", f"{bench}{i}", 1.0, bench, bench)]
    table = pd.DataFrame(rows, columns=["model", "item_id", "score", "benchmark", "passage"])
    c = compare_runs([table], CompareOptions(cluster="passage", permutations=99)).comparisons.set_index("benchmark")
    assert c.loc["x", "items"] == 30 and c.loc["x", "clusters"] == 1
    assert c.loc["x", "verdict"].startswith("cannot tell: the 30 items in common form one cluster")


def test_inspect_mean_over_epochs_is_the_items_score_in_compare() -> None:
    """F6: compare reads inspect's mean over epochs as the item's score (stem still refuses it), equal
    to the per-item mean that --epochs all gives; F7: the read line under all says each epoch is one
    sample of its item, as the note does."""
    from evalprism.io.harness_options import HarnessOptions
    from evalprism.io.items import read_correctness, read_items

    log = Path(__file__).parent / "fixtures" / "harness" / "inspect_json" / "arith_three_epochs.json"
    mean = read_items([log]).table
    every = read_items([log], harness=HarnessOptions(epochs="all"))
    per_item = every.table.groupby("item_id")["score"].mean()
    assert mean.set_index("item_id")["score"].to_dict() == pytest.approx(per_item.to_dict())
    assert ((mean["score"] > 0) & (mean["score"] < 1)).any()  # some means are fractional
    assert any("every epoch one sample of its item" in c for c in every.provenance.choices)
    assert not any("every epoch its own item" in c for c in every.provenance.choices)
    with pytest.raises(EvalprismError, match="not 0 or 1"):
        read_correctness(log)


def test_a_long_table_is_written_fast_with_the_same_values(tmp_path: Path, monkeypatch) -> None:
    """items.csv of many pairs goes through pyarrow's writer: read back, every value equals pandas' CSV."""
    import evalprism.io.outputs as outputs

    monkeypatch.setattr(outputs, "LARGE_TABLE_ROWS", 10)
    rng = np.random.default_rng(0)
    table = _sampled({"A, first": rng.random(30), "B": rng.random(30), "C": rng.random(30)}, samples=2)
    res = compare_runs([table], CompareOptions(permutations=99))
    res.save(tmp_path / "out")
    fast = pd.read_csv(tmp_path / "out" / "items.csv")
    assert len(fast) == len(res.items) > 10
    pd.testing.assert_frame_equal(fast, pd.read_csv(io.StringIO(res.items.to_csv(index=False))))


def test_the_readme_gate_example_runs_as_written_and_says_what_the_readme_says(tmp_path: Path, capsys) -> None:
    from test_readme import walkthrough

    (command,) = walkthrough("On the demo's 12 configurations")
    args = command[1:]
    args[args.index("--out") + 1] = str(tmp_path / "gate")
    args[1] = str(Path(__file__).parents[1] / args[1])
    code, _, err = run_cli(args, capsys)
    assert code == 1, err  # Llama-2 regressed
    gate = pd.read_csv(tmp_path / "gate" / "gate.csv")
    verdict = dict(zip(gate["run"], gate["verdict"], strict=True))
    assert {v for r, v in verdict.items() if r.startswith("model=claude")} == {"pass"}
    assert {v for r, v in verdict.items() if r.startswith("model=llama")} == {"regression"}
    assert {v for r, v in verdict.items() if r.startswith("model=gpt")} == {"cannot tell"}
    cs = pd.read_csv(tmp_path / "gate" / "confidence_set.csv")
    kept = set(cs[cs["in_set"]]["run"])
    assert len(kept) == 6 and sum(r.startswith("model=gpt-4") for r in kept) == 3
    assert all(r.startswith("model=llama") for r in cs["run"][:2]) and not any("llama" in r for r in kept)


def test_names_with_markup_characters_print_literally_in_terminal_and_report(tmp_path: Path, capsys) -> None:
    """F1 in the report too: a run named with brackets, underscores, asterisks and backticks is shown as given."""
    rng = np.random.default_rng(0)
    a = (rng.random(200) < 0.5).astype(float)
    b = np.where(rng.random(200) < 0.3, 1.0, a)
    names = ["ckpt_[step2000]_*x*", "run`2`_b"]
    path = tmp_path / "s.csv"
    pd.DataFrame(
        {"model": [names[0]] * 200 + [names[1]] * 200, "item_id": [*range(200)] * 2, "score": [*a, *b]}
    ).to_csv(path, index=False)
    code, _, err = run_cli(["compare", path, "--out", tmp_path / "o"], capsys)
    assert code == 0 and f"{names[1]} vs {names[0]}: {names[1]} is " in err
    page = (tmp_path / "o" / "report.html").read_text()
    assert f"<li><b>{names[1]} vs {names[0]}</b>: {names[1]} is " in page
