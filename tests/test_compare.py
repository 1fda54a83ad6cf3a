"""`evalprism compare` and `evalprism.compare.compare_runs`: planted differences with known answers,
items in one run only, several samples per item, clusters, and the real lm-eval fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import REPO, read_run, run_cli
from scipy import stats

from evalprism.compare import CompareOptions, compare_runs
from evalprism.io.response_options import ResponseOptions
from evalprism.stats.compare_tests import adjust_pvalues

LM_EVAL = REPO / "tests" / "fixtures" / "harness" / "lm_eval"


def _table(scores: dict[str, np.ndarray], benchmark: str | None = None, **extra) -> pd.DataFrame:
    frames = []
    for model, s in scores.items():
        df = pd.DataFrame({"model": model, "item_id": [f"i{k}" for k in range(len(s))], "score": s, **extra})
        if benchmark:
            df["benchmark"] = benchmark
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


def test_binary_scores_use_mcnemar_and_say_how_much_better() -> None:
    rng = np.random.default_rng(0)
    a = (rng.random(500) < 0.6).astype(int)
    b = np.where(rng.random(500) < 0.3, 1, a)  # B fixes ~30% of A's errors, never breaks one
    res = compare_runs([_table({"A": a, "B": b})])
    row = res.overall().iloc[0]
    assert row["test"] == "McNemar exact"
    assert row["difference"] == pytest.approx(b.mean() - a.mean())
    only_b = int(((b == 1) & (a == 0)).sum())
    assert row["p"] == pytest.approx(stats.binomtest(0, only_b, 0.5).pvalue)
    d = b - a
    assert row["se"] == pytest.approx(d.std(ddof=1) / np.sqrt(500))
    assert row["verdict"].startswith(f"B is {100 * d.mean():.1f} points better than A [")
    assert "p_adj = " in row["verdict"]


def test_one_response_always_right_vs_always_wrong_is_a_detected_difference() -> None:
    """The Faithful-CoT case: one response per question, one configuration always right, the other
    always wrong. The paired test tells (McNemar p = 2 / 2^10), never 'not significantly different'."""
    res = compare_runs([_table({"wrong": np.zeros(10), "right": np.ones(10)})])
    row = res.overall().iloc[0]
    assert row["p"] == pytest.approx(2 / 2**10)
    assert row["verdict"].startswith("right is 100.0 points better than wrong")
    assert "significant" not in " ".join(res.comparisons["verdict"])


def test_no_detectable_difference_names_the_mde() -> None:
    rng = np.random.default_rng(1)
    a = (rng.random(200) < 0.5).astype(int)
    b = a.copy()
    flip = rng.choice(200, 6, replace=False)
    b[flip] = 1 - b[flip]  # a few discordant items either way
    row = compare_runs([_table({"A": a, "B": b})]).overall().iloc[0]
    assert row["p_adj"] >= 0.05
    assert row["mde"] == pytest.approx(2.8015852 * row["se"], rel=1e-6)
    assert row["verdict"].startswith(f"no difference detectable: the MDE is {100 * row['mde']:.1f} points")


def test_items_in_one_run_only_are_counted_and_listed() -> None:
    a = pd.DataFrame({"model": "A", "item_id": [f"i{k}" for k in range(100)], "score": 1})
    b = pd.DataFrame({"model": "B", "item_id": [f"i{k}" for k in range(10, 105)], "score": 0})
    res = compare_runs([a, b])
    row = res.overall().iloc[0]
    assert (row["items"], row["only_a"], row["only_b"]) == (90, 10, 5)
    assert row["difference"] == -1.0
    counts = res.items["status"].value_counts().to_dict()
    assert counts == {"both": 90, "only A": 10, "only B": 5}
    assert res.items.loc[res.items["status"] == "only A", "score_b"].isna().all()


def test_continuous_scores_use_the_sign_flip_test_and_planted_difference_is_found() -> None:
    rng = np.random.default_rng(2)
    base = rng.random(1000) * 0.8
    res = compare_runs(
        [_table({"A": base, "B": np.clip(base + 0.03 + rng.normal(0, 0.1, 1000), 0, 1)})],
        CompareOptions(permutations=999),
    )
    row = res.overall().iloc[0]
    assert row["test"] == "sign-flip" and row["p"] == pytest.approx(1 / 1000)
    assert row["ci_low"] > 0 and row["verdict"].startswith("B is ")


def test_several_samples_per_item_split_the_variance() -> None:
    """Rows repeating (model, item) are samples: the item's score is their mean, and the variance of
    the item differences splits into within (sampling) and between (items) parts."""
    rng = np.random.default_rng(3)
    items, k = 400, 8
    p_a = rng.random(items)
    p_b = np.clip(p_a + rng.normal(0.05, 0.1, items), 0, 1)
    rows = []
    for model, p in (("A", p_a), ("B", p_b)):
        draws = (rng.random((items, k)) < p[:, None]).astype(int)
        for i in range(items):
            rows += [{"model": model, "item_id": i, "score": int(s)} for s in draws[i]]
    res = compare_runs([pd.DataFrame(rows)], CompareOptions(permutations=999))
    row = res.overall().iloc[0]
    assert row["test"] == "sign-flip"  # 0/1 scores, but several per item: not McNemar
    means = pd.DataFrame(rows).groupby(["model", "item_id"])["score"].agg(["mean", "var"])
    d = means.loc["B", "mean"].to_numpy() - means.loc["A", "mean"].to_numpy()
    assert row["difference"] == pytest.approx(d.mean())
    within = ((means.loc["A", "var"] + means.loc["B", "var"]) / k).mean()
    assert row["var_within"] == pytest.approx(within)
    assert row["var_total"] == pytest.approx(d.var(ddof=1))
    assert row["var_between"] == pytest.approx(d.var(ddof=1) - within)
    assert (res.items["samples_a"] == k).all()


def test_clusters_widen_the_interval_and_flip_whole_clusters() -> None:
    rng = np.random.default_rng(4)
    G, m = 40, 25
    passage = np.repeat(np.arange(G), m)
    a = rng.random(G * m)
    b = np.clip(a + rng.normal(0, 0.15, G)[passage] + rng.normal(0, 0.05, G * m), 0, 1)
    df = _table({"A": a, "B": b}, passage=np.tile(passage.astype(str), 1))
    res = compare_runs([df], CompareOptions(cluster="passage", permutations=999))
    row = res.overall().iloc[0]
    assert row["test"] == "sign-flip (clusters)" and row["clusters"] == G
    assert row["se"] > 2 * row["se_naive"]
    assert "cluster" in res.items.columns


def test_baseline_pairs_and_adjustment_across_pairs() -> None:
    rng = np.random.default_rng(5)
    base = (rng.random(300) < 0.5).astype(int)
    runs = {"base": base}
    for k, lift in enumerate((0.0, 0.1, 0.3)):
        runs[f"m{k}"] = np.where(rng.random(300) < lift, 1, base)
    for adjust in ("bh", "holm"):
        res = compare_runs([_table(runs)], CompareOptions(baseline="base", adjust=adjust))
        ov = res.overall()
        assert list(ov["run_a"]) == ["base"] * 3 and list(ov["run_b"]) == ["m0", "m1", "m2"]
        np.testing.assert_allclose(ov["p_adj"], adjust_pvalues(ov["p"].to_numpy(), adjust))
    assert len(compare_runs([_table(runs)]).overall()) == 6  # all pairs without a baseline


def test_per_benchmark_rows_and_overall() -> None:
    t1 = _table({"A": np.ones(20), "B": np.zeros(20)}, benchmark="math")
    t2 = _table({"A": np.zeros(30), "B": np.zeros(30)}, benchmark="code")
    res = compare_runs([pd.concat([t1, t2], ignore_index=True)])
    c = res.comparisons.set_index("benchmark")
    assert list(c.index) == ["math", "code", "all"]
    assert c.loc["math", "difference"] == -1.0 and c.loc["code", "difference"] == 0.0
    assert c.loc["all", "difference"] == pytest.approx(-20 / 50) and c.loc["all", "items"] == 50
    assert c.loc["code", "verdict"] == "B and A score the same on every one of the 30 items"
    assert np.isnan(c.loc["code", "mde"]) and np.isnan(c.loc["code", "items_needed"])  # no variance: no MDE


def test_cli_on_real_lm_eval_runs(tmp_path: Path, capsys) -> None:
    """Two lm-eval output directories of one model name, told apart with --model-name."""
    out = tmp_path / "cmp"
    code, _, err = run_cli(
        [
            "compare",
            LM_EVAL / "run3",
            LM_EVAL / "run4",
            "--model-name",
            "run3=first",
            "--model-name",
            "run4=second",
            "--out",
            out,
        ],
        capsys,
    )
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == ["comparisons.csv", "items.csv", "report.html", "run.json"]
    c = pd.read_csv(out / "comparisons.csv").set_index("benchmark")
    assert list(c.index) == ["gen_local", "mc_local", "all"]
    assert (c["run_a"] == "first").all() and (c["run_b"] == "second").all()
    items = pd.read_csv(out / "items.csv")
    assert len(items) == 12 and (items["status"] == "both").all()
    for bench in ("gen_local", "mc_local"):
        part = items[items["benchmark"] == bench]
        assert c.loc[bench, "difference"] == pytest.approx((part["score_b"] - part["score_a"]).mean())
    assert c.loc["all", "test"] == "McNemar exact"
    # the runs differ on one item of twelve: no data on one item can reach p < 0.05, and the verdict says so
    assert "second vs first: the items cannot tell: only 1 of the 12 items differs between first and second" in err
    assert c.loc["all", "differing"] == 1 and c.loc["all", "p_floor"] == 1.0
    html = (out / "report.html").read_text()
    assert "the items cannot tell" in html and "not significantly different" not in html
    info = json.loads((out / "run.json").read_text())
    assert info["results"]["run_names"] == ["first", "second"]


def test_comparisons_csv_columns_are_the_comparison_fields_in_order(tmp_path: Path, capsys) -> None:
    """comparisons.csv is written from :class:`Comparison`: its header is the dataclass's fields, in
    order, with rows of every shape present (a test, too few items, no item in common)."""
    from dataclasses import fields

    from evalprism.compare.comparison import Comparison

    binary = _table({"A": np.array([1, 0, 1, 1]), "B": np.array([1, 1, 1, 0])}, benchmark="bin")
    graded = _table({"A": np.array([0.2, 0.5, 0.9]), "B": np.array([0.4, 0.5, 0.1])}, benchmark="graded")
    one = _table({"A": np.array([1.0]), "B": np.array([0.0])}, benchmark="one")
    alone = _table({"A": np.array([0.3, 0.6])}, benchmark="alone")
    path = tmp_path / "scores.csv"
    pd.concat([binary, graded, one, alone], ignore_index=True).to_csv(path, index=False)
    code, _, err = run_cli(["compare", path, "--out", tmp_path / "out", "--permutations", "99", "-q"], capsys)
    assert code == 0, err
    header = (tmp_path / "out" / "comparisons.csv").read_text().splitlines()[0].split(",")
    assert header == [f.name for f in fields(Comparison)]
    c = pd.read_csv(tmp_path / "out" / "comparisons.csv").set_index("benchmark")
    assert list(c.index) == ["bin", "graded", "one", "alone", "all"]
    assert c.loc["graded", "test"] == "sign-flip" and c.loc["one", "items"] == 1 and c.loc["alone", "only_a"] == 2
    assert c.loc["alone", "verdict"] == "no item both A and B answered on this benchmark"


def test_same_seed_same_tables(tmp_path: Path) -> None:
    rng = np.random.default_rng(6)
    df = _table({"A": rng.random(300), "B": rng.random(300)})
    one = compare_runs([df], CompareOptions(permutations=499, seed=3)).comparisons
    two = compare_runs([df], CompareOptions(permutations=499, seed=3)).comparisons
    pd.testing.assert_frame_equal(one, two)


def test_score_table_file_with_true_false_and_no_answer(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    path.write_text("model,item_id,score\nA,1,true\nA,2,false\nA,3,-1\nB,1,1\nB,2,1\nB,3,1\n")
    res = compare_runs([path])
    row = res.overall().iloc[0]
    assert row["mean_a"] == pytest.approx(1 / 3) and row["mean_b"] == 1.0
    assert res.notes == (f"{path}: 1 answer(s) scored -1 (no answer) counted as 0 (wrong)",)


def test_readme_examples_print_what_the_readme_says(tmp_path: Path, capsys, monkeypatch) -> None:
    """Every `evalprism compare` command of the README section, run from the repository root as a user
    would, prints the sentence the README promises after it."""
    import re
    import shlex

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Comparing runs") : readme.index("## Embeddings and their cache")]
    blocks = section.split("```")  # code blocks at odd positions, the prose after each at the next one
    examples = [
        (blocks[i].strip(), re.search(r"prints `(.*?)`", blocks[i + 1], flags=re.S))
        for i in range(1, len(blocks) - 1, 2)
        if blocks[i].lstrip().startswith("evalprism compare tests/")
        or blocks[i].lstrip().startswith("evalprism compare src/")
    ]
    assert len(examples) == 3 and all(m is not None for _, m in examples)
    monkeypatch.chdir(REPO)
    for k, (command, match) in enumerate(examples):
        promised = match.group(1)
        args = shlex.split(command.replace("\\\n", " "))[1:]
        args[args.index("--out") + 1] = str(tmp_path / f"out{k}")
        code, _, err = run_cli(args, capsys)
        assert code == 0 and promised in " ".join(err.split()), err


def test_a_difference_hidden_only_by_the_correction_is_said_so() -> None:
    """Unadjusted p < 0.05 but p_adj >= 0.05: the sentence says the correction is what hides it."""
    rng = np.random.default_rng(7)
    base = (rng.random(400) < 0.5).astype(int)
    runs = {"base": base}
    for k in range(6):
        runs[f"m{k}"] = base.copy()
    wrong = np.flatnonzero(base == 0)[:9]
    runs["m0"][wrong] = 1  # 9 discordant items, all one way: p = 2 / 2^9 = 0.0039; Holm over 6 pairs: 0.023
    runs["m1"][np.flatnonzero(base == 0)[:6]] = 1  # 6 one way: p = 0.031, Holm keeps it above 0.05
    res = compare_runs([_table(runs)], CompareOptions(baseline="base", adjust="holm"))
    row = res.overall().set_index("run_b").loc["m1"]
    assert row["p"] == pytest.approx(2 / 2**6) and row["p_adj"] >= 0.05
    assert row["verdict"].startswith("no difference detectable after correcting for several pairs: the MDE is")
    assert f"p = {row['p']:.2g} but p_adj = {row['p_adj']:.2g}" in row["verdict"]


def test_inspect_epochs_are_samples_of_one_item(tmp_path: Path) -> None:
    """A real inspect_ai log with 3 epochs per sample, against a score table of the same task: with
    --epochs all each epoch is one sample of its item (item score = mean over epochs)."""
    log = REPO / "tests" / "fixtures" / "harness" / "inspect_json" / "arith_three_epochs.json"
    from evalprism.io.harness_options import HarnessOptions
    from evalprism.io.items import read_correctness

    epochs = read_correctness(log, harness=HarnessOptions(epochs="all")).table
    other = pd.DataFrame(
        {"model": "other", "benchmark": "arith_single", "item_id": ["q1", "q2", "q3", "q4"], "score": [0, 0, 0, 0]}
    )
    res = compare_runs([log, other], CompareOptions(harness=HarnessOptions(epochs="all"), permutations=999))
    row = res.overall().iloc[0]
    assert row["items"] == 4 and row["only_a"] == 0 and row["only_b"] == 0
    assert (res.items["samples_a"] == 3).all()
    per_item = epochs.assign(item=epochs["item_id"].str.split("#").str[0]).groupby("item")["score"].mean()
    assert row["mean_a"] == pytest.approx(per_item.mean()) and row["difference"] == pytest.approx(-per_item.mean())
    assert row["test"] == "sign-flip" and np.isfinite(row["var_within"])
    assert any("--epochs all" in n for n in res.notes)


def test_rerun_replaces_its_own_output_and_seed_gives_identical_files(tmp_path: Path, capsys) -> None:
    path = tmp_path / "scores.csv"
    rng = np.random.default_rng(9)
    _table({"A": rng.random(200).round(3), "B": rng.random(200).round(3)}).to_csv(path, index=False)
    out = tmp_path / "out"
    args = ["compare", path, "--out", out, "--permutations", "499", "--seed", "2", "-q"]
    assert run_cli(args, capsys)[0] == 0
    first = {p.name: p.read_bytes() for p in out.glob("*.csv")}
    assert run_cli(args, capsys)[0] == 0  # its own previous output is replaced
    assert {p.name: p.read_bytes() for p in out.glob("*.csv")} == first


def test_items_listed_by_benchmark_then_item_id_as_text_whatever_the_input_order() -> None:
    # items and benchmarks appear out of lexicographic order; ids 3 and 3.0 are one item; B lacks "a"
    a = pd.DataFrame(
        {
            "model": "A",
            "benchmark": ["z", "z", "y", "y", "y"],
            "item_id": ["10", "2", "b", "a", 3.0],
            "score": [0.1, 0.2, 0.3, 0.4, 0.5],
        }
    )
    b = pd.DataFrame(
        {
            "model": "B",
            "benchmark": ["y", "y", "z", "z"],
            "item_id": ["3", "b", "2", "10"],
            "score": [0.9, 0.8, 0.7, 0.6],
        }
    )
    res = compare_runs([pd.concat([a, b], ignore_index=True)], CompareOptions(permutations=99))
    items = res.items
    assert list(zip(items["benchmark"].astype(str), items["item_id"].astype(str), strict=True)) == [
        ("y", "3"),
        ("y", "a"),
        ("y", "b"),
        ("z", "10"),
        ("z", "2"),
    ]
    assert list(items["status"].astype(str)) == ["both", "only A", "both", "both", "both"]
    assert items["difference"].tolist()[:1] == [pytest.approx(0.4)] and np.isnan(items["difference"].iloc[1])
    assert items["samples_b"].isna().iloc[1] and items["samples_a"].tolist() == [1, 1, 1, 1, 1]
    assert list(res.comparisons["benchmark"]) == ["z", "y", "all"]  # benchmarks in input order
    assert res.overall().iloc[0][["items", "only_a", "only_b"]].tolist() == [4, 1, 0]


# --- what a test can tell on few differing items -------------------------------------------------


@pytest.mark.parametrize("k", range(13))
def test_sign_test_floor_is_the_smallest_binomtest_p(k: int) -> None:
    """Oracle: scipy's exact binomial test over every split of k discordant items."""
    from evalprism.stats.compare_tests import sign_test_floor

    smallest = min((stats.binomtest(j, k, 0.5).pvalue for j in range(k + 1)), default=1.0) if k else 1.0
    assert sign_test_floor(k) == pytest.approx(smallest, rel=1e-12)


@pytest.mark.parametrize("k", [1, 2, 3, 5, 8])
def test_sign_flip_floor_is_the_smallest_exact_p(k: int) -> None:
    """Oracle: the exact sign-flip distribution by enumeration of all 2^k sign patterns; the smallest
    p over data is attained when every difference has one sign (and a Monte Carlo test cannot go
    below 1/(1+B))."""
    import itertools

    from evalprism.stats.compare_tests import sign_flip_floor

    rng = np.random.default_rng(k)
    smallest = 1.0
    for _ in range(20):
        d = rng.normal(size=k) * rng.choice([-1, 1], size=k)
        d[0] = abs(d[0])
        for signs in ([np.sign(d)], [np.ones(k)]):
            dd = np.abs(d) * signs[0]
            sums = [abs(np.dot(s, np.abs(dd))) for s in itertools.product([-1, 1], repeat=k)]
            p = np.mean(np.asarray(sums) >= abs(dd.sum()) - 1e-12)
            smallest = min(smallest, float(p))
    assert sign_flip_floor(k, 10**9) == pytest.approx(smallest, rel=1e-12)
    assert sign_flip_floor(k, 9) == pytest.approx(max(smallest, 0.1))
    assert sign_flip_floor(0, 9999) == 1.0


def test_too_few_differing_items_cannot_tell_and_say_so() -> None:
    """Six items, four of them won by B and none by A: McNemar's smallest possible p is 2/2^4 =
    0.125, so no data on these items could show a difference. The verdict says the items cannot
    tell (never 'no difference detectable' or 'not significantly different'), and the 95% interval
    stays within the possible range [-100, 100] points."""
    res = compare_runs([_table({"A": np.array([1, 1, 0, 0, 0, 0]), "B": np.ones(6)})])
    row = res.overall().iloc[0]
    assert row["test"] == "McNemar exact" and row["differing"] == 4
    assert row["p_floor"] == pytest.approx(0.125) and row["p"] == pytest.approx(0.125)
    assert row["verdict"].startswith("the items cannot tell: only 4 of the 6 items differ between A and B")
    assert "smallest possible p is 0.12" in row["verdict"]
    assert row["ci_high"] <= 1.0 and row["ci_low"] >= -1.0
    assert row["ci_high"] == 1.0  # the t interval (6 items) reaches past +100 points: cut to the possible range
    # two more items won by B: the floor 2/2^6 = 0.031 is below 0.05 and the exact test now decides
    res = compare_runs([_table({"A": np.array([1, 1, 0, 0, 0, 0, 0, 0]), "B": np.ones(8)})])
    row = res.overall().iloc[0]
    assert row["p"] == pytest.approx(2 / 2**6) and row["verdict"].startswith("B is 75.0 points better than A")


# --- ECDF responses files as runs ----------------------------------------------------------------


def _responses(tmp_path: Path) -> tuple[Path, dict[tuple[str, str], float]]:
    """Two models x two temperatures, 30 questions with numeric references, 3 responses each; the
    right/wrong pattern is planted, with answers written as numbers the exact rule must read
    (``$7.0`` is ``7``)."""
    rng = np.random.default_rng(3)
    rows, truth = [], {}
    rate = {("a", "0.0"): 0.3, ("a", "1.0"): 0.4, ("b", "0.0"): 0.9, ("b", "1.0"): 0.8}
    for (model, temp), p in rate.items():
        right = rng.random((30, 3)) < p
        truth[(model, temp)] = right
        for q in range(30):
            for r in range(3):
                answer = f"so the answer is ${q + 7}.0" if right[q, r] else f"{q + 100}"
                rows.append(
                    {
                        "question_id": q,
                        "model": model,
                        "temperature": temp,
                        "response": answer,
                        "references": json.dumps([str(q + 7)]),
                    }
                )
    path = tmp_path / "responses.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return path, truth


def test_an_ecdf_responses_file_is_one_run_per_configuration(tmp_path: Path) -> None:
    path, truth = _responses(tmp_path)
    res = compare_runs(
        [path],
        CompareOptions(
            baseline="temperature=0.0 , model=a",
            responses=ResponseOptions(by=("model", "temperature"), extract=r"\$?([\d.]+)\s*$"),
        ),
    )
    rows = res.overall().set_index("run_b")
    assert set(rows["run_a"]) == {"model=a · temperature=0.0"}
    for (model, temp), right in truth.items():
        if (model, temp) == ("a", "0.0"):
            continue
        row = rows.loc[f"model={model} · temperature={temp}"]
        # each response one sample of its question: the item score is the question's mean over 3 responses
        expected = right.mean(axis=1) - truth[("a", "0.0")].mean(axis=1)
        assert row["difference"] == pytest.approx(expected.mean())
        assert row["se"] == pytest.approx(expected.std(ddof=1) / np.sqrt(30))
        assert row["test"] == "sign-flip" and row["items"] == 30
        assert np.isfinite(row["var_within"])
    assert rows.loc["model=b · temperature=0.0", "p_adj"] < 0.05
    assert any("an ECDF responses file: runs by model, temperature (4)" in n for n in res.notes)


def test_responses_file_cli_default_by_model_and_greedy_mcnemar(tmp_path: Path, capsys) -> None:
    """One response per question and model (greedy): 0/1 items, the exact McNemar test; --by defaults
    to the model column; cosine is refused (a closeness is not a correctness)."""
    rows = [
        {"question_id": q, "model": m, "response": "yes" if (m == "good" or q < 5) else "no", "references": '["yes"]'}
        for q in range(20)
        for m in ("good", "bad")
    ]
    path = tmp_path / "greedy.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    out = tmp_path / "cmp"
    code, _, err = run_cli(["compare", path, "--out", out], capsys)
    assert code == 0, err
    row = pd.read_csv(out / "comparisons.csv").iloc[0]
    assert row["test"] == "McNemar exact" and row["differing"] == 15
    assert row["p"] == pytest.approx(2 / 2**15)
    assert "good is 75.0 points better than bad" in err or "bad is 75.0 points worse than good" in err
    assert read_run(out).options["responses"] == ResponseOptions().record()  # defaults only
    code, _, err = run_cli(["compare", path, "--score", "cosine", "--out", tmp_path / "c2"], capsys)
    assert code == 2 and "cosine similarity is a closeness" in err and not (tmp_path / "c2").exists()


def test_response_options_need_a_responses_file(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(
        [
            "compare",
            LM_EVAL / "run3",
            LM_EVAL / "run4",
            "--model-name",
            "run3=A",
            "--model-name",
            "run4=B",
            "--by",
            "model",
            "--out",
            tmp_path / "o",
        ],
        capsys,
    )
    assert code == 2 and "--by: applies to ECDF responses files" in err
    assert not (tmp_path / "o").exists()


def test_a_bad_choices_cell_is_named_by_its_source_row_after_empty_responses_are_left_out(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text('question_id,model,response,references,choices\n1,a,,["x"],{}\n1,b,"Answer(A)",["x"],not json\n')
    from evalprism.errors import EvalprismError
    from evalprism.io.response_options import ResponseOptions

    with pytest.raises(EvalprismError, match=r"r.csv: row 2, column 'choices': expected a JSON object"):
        compare_runs([path], CompareOptions(responses=ResponseOptions(extract=r"Answer\(([A-E])", choices="choices")))


def test_run_record_layout_and_finding_match_the_tables(tmp_path: Path, capsys) -> None:
    """run.json: format 2, the command, every option of CompareOptions, what the run decided
    (CompareSummary) as results; its finding is the ``all`` row's verdict of comparisons.csv."""
    from dataclasses import fields

    from evalprism.compare.result import CompareSummary

    rng = np.random.default_rng(4)
    a = (rng.random(300) < 0.5).astype(float)
    b = np.where(rng.random(300) < 0.3, 1.0, a)
    path = tmp_path / "scores.csv"
    _table({"base": a, "cand": b}).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(["compare", path, "--baseline", "base", "--out", out], capsys)
    assert code == 0, err
    raw = json.loads((out / "run.json").read_text())
    record = read_run(out)
    assert raw["format"] == 2 and record.command == "compare"
    assert set(record.options) == {f.name for f in fields(CompareOptions)}
    assert set(record.results) == {f.name for f in fields(CompareSummary)}
    assert record.results["baseline"] == "base" and record.results["scores"] == "0/1"
    row = pd.read_csv(out / "comparisons.csv").query("benchmark == 'all'").iloc[0]
    assert record.findings == (f"cand vs base: {row['verdict']}",)
    assert f"{100 * row['difference']:.1f} points better" in row["verdict"]
    assert record.findings[0] in " ".join(err.split())
