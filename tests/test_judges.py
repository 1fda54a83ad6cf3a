"""Judge-agreement bias map: the bias rules on hand-made values, planted disagreement that must be
recovered (exact clusters and the real minilm embedder), instruction choice, outputs and the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import adjusted_rand_score

from evalprism.judges import BiasRules, analyze, flag_queries
from evalprism.judges.simulate import genre_embeddings, simulate_judgments

from helpers import run_cli

STRICT = {"q00", "q01", "q02", "q03"}  # llm_strict under-recalls in 'definition' for these
LENIENT = {"q06", "q07", "q08"}  # llm_lenient over-includes in 'news' for these
JUDGES = ["llm_strict", "llm_lenient"]


def cells(rows: list[tuple[str, int, float, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "cluster", "ac1", "false_negatives", "false_positives"]).assign(judge="j")


def test_bias_rules_on_hand_made_values() -> None:
    rows = [
        ("abs", 0, 0.9, 0, 0), ("abs", 1, 0.3, 1, 3),  # ΔAC1 .6 >= τ; no flip (min .3 >= .2); FP > FN
        ("flip", 0, 0.85, 0, 0), ("flip", 1, 0.1, 4, 1), ("flip", 2, 0.5, 0, 0),  # ΔAC1 .75, flip, FN > FP
        ("calm", 0, 0.5, 1, 0), ("calm", 1, 0.45, 0, 1),  # ΔAC1 .05
        ("single", 0, 0.0, 5, 0),  # one cluster: no ΔAC1
        ("tie", 0, 0.95, 0, 0), ("tie", 1, 0.55, 2, 2),  # ΔAC1 .4: below τ; mixed direction
    ]
    rows += [(f"e{i}", c, v, 0, 0) for i, d in enumerate([0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.13, 0.07])
             for c, v in ((0, 0.9), (1, 0.9 - d))]
    out = flag_queries(cells(rows), BiasRules()).set_index("query_id")
    assert out.loc["abs", "dac1"] == pytest.approx(0.6)
    assert (out.loc["abs", "flag_abs"], out.loc["abs", "flag_flip"], out.loc["abs", "direction"]) == (True, False, "over-includes")
    assert (out.loc["flip", "flag_abs"], out.loc["flip", "flag_flip"]) == (True, True)
    assert (out.loc["flip", "cluster_min"], out.loc["flip", "cluster_max"], out.loc["flip", "direction"]) == (1, 0, "under-recalls")
    assert not out.loc["calm", "bias_prone"]
    assert np.isnan(out.loc["single", "dac1"]) and not out.loc["single", "bias_prone"]
    assert out.loc["single", "direction"] == ""
    # the 12 ΔAC1 values sorted: .05 .07 .08 .09 .1 .1 .11 .12 .13 .4 .6 .75 -> Q1 = .0875, Q3 = .1975
    # (linear interpolation), fence = .1975 + 1.5 * .11 = .3625: 'abs', 'flip' and 'tie' are outliers
    assert out["outlier_fence"].iat[0] == pytest.approx(0.3625)
    assert set(out.index[out["flag_outlier"]]) == {"abs", "flip", "tie"}
    assert out.loc["tie", "direction"] == "mixed"
    assert (out.loc["tie", "flag_abs"], out.loc["tie", "bias_prone"]) == (False, True)
    assert set(out.index[out["bias_prone"]]) == {"abs", "flip", "tie"}
    # a lone outlier below τ among calm queries is flagged by the outlier rule only
    calm = [(f"e{i}", c, v, 0, 0) for i in range(10) for c, v in ((0, 0.9), (1, 0.8 + 0.01 * i))]
    out = flag_queries(cells(calm + [("odd", 0, 0.9, 0, 0), ("odd", 1, 0.5, 3, 0)]), BiasRules()).set_index("query_id")
    assert (out.loc["odd", "flag_outlier"], out.loc["odd", "flag_abs"], out.loc["odd", "bias_prone"]) == (True, False, True)
    assert out["bias_prone"].sum() == 1
    # the rule thresholds are options
    out = flag_queries(cells(rows), BiasRules(tau=0.3, flip_high=0.9)).set_index("query_id")
    assert out.loc["tie", "flag_abs"] and not out.loc["flip", "flag_flip"]


def flagged(result, judge: str) -> set[str]:
    return set(result.bias_prone(judge)["query_id"])


def test_planted_disagreement_recovered_with_exact_clusters() -> None:
    table = simulate_judgments()
    result = analyze(table, "human", JUDGES, embeddings=genre_embeddings(table), progress=False)
    assert adjusted_rand_score(table["genre"], result.pairs["cluster"]) == pytest.approx(1.0)
    genre_of = dict(zip(result.pairs["cluster"], table["genre"], strict=True))
    assert flagged(result, "llm_strict") == STRICT
    assert flagged(result, "llm_lenient") == LENIENT
    q = result.queries.set_index(["judge", "query_id"])
    for qid in STRICT:
        row = q.loc[("llm_strict", qid)]
        assert genre_of[row["cluster_min"]] == "definition" and row["direction"] == "under-recalls"
        assert row["dac1"] == pytest.approx(2.0) and row["flag_flip"]
    for qid in LENIENT:
        row = q.loc[("llm_lenient", qid)]
        assert genre_of[row["cluster_min"]] == "news" and row["direction"] == "over-includes"
    # the planted cluster has the lowest AC1 of its judge, with an interval below every other cluster's
    c = result.clusters.assign(genre=result.clusters["cluster"].map(genre_of))
    strict = c[c["judge"] == "llm_strict"].set_index("genre")
    assert strict["ac1"].idxmin() == "definition"
    assert strict.loc["definition", "ac1_hi"] < strict.drop(index="definition")["ac1_lo"].min()
    assert strict.loc["definition", "false_negatives"] > 0 == strict.loc["definition", "false_positives"]
    # overall agreement equals the kernel on all pairs
    from evalprism.stats import gwet_ac1

    ov = result.overall.set_index("judge").loc["llm_strict"]
    ref = gwet_ac1((table["human"] >= 2).astype(int), table["llm_strict"], categories=[0, 1])
    assert ov["ac1"] == pytest.approx(ref.value, abs=1e-12) and ov["ac1_se"] == pytest.approx(ref.se, abs=1e-12)


def test_min_query_pairs_and_noise_handling() -> None:
    table = simulate_judgments()
    x = genre_embeddings(table)
    result = analyze(table, "human", JUDGES, embeddings=x, min_query_pairs=7, progress=False)
    assert result.query_clusters.empty and result.bias_prone().empty  # 6 pairs per query and cluster
    # scattered pairs become noise: they get cluster -1, a row of their own, and no ΔAC1 cell
    rng = np.random.default_rng(1)
    far = rng.choice(len(table), 25, replace=False)
    x = x.copy()
    x[far] = rng.normal(size=(25, x.shape[1])) * 3
    result = analyze(table, "human", JUDGES, embeddings=x, progress=False)
    assert (result.pairs["cluster"].to_numpy()[far] == -1).all()
    noise = result.clusters[result.clusters["is_noise"]]
    assert set(noise["judge"]) == set(JUDGES) and (noise["cluster"] == -1).all()
    assert (result.query_clusters["cluster"] >= 0).all()
    conc = result.concentration.set_index("judge")
    assert conc.loc["llm_strict", "n_noise"] == int((result.pairs["cluster"] == -1).sum())


def test_instruction_choice_by_purity() -> None:
    table = simulate_judgments()
    by_genre = genre_embeddings(table)
    # an "instruction" whose space separates relevant from non-relevant pairs: purity 1
    by_label = genre_embeddings(table.assign(genre=(table["human"] >= 2).map({True: "rel", False: "non"})), seed=3)
    result = analyze(table, "human", JUDGES, instructions=["by genre", "by label"],
                     embeddings={"by genre": by_genre, "by label": by_label}, progress=False)
    ins = result.instructions.set_index("instruction")
    assert ins.loc["by label", "purity_p80"] == pytest.approx(1.0)
    assert ins.loc["by genre", "purity_p80"] < 1.0
    assert ins.loc["by label", "chosen"] and not ins.loc["by genre", "chosen"]
    assert result.options["instruction"] == "by label"


@pytest.mark.slow
def test_cli_end_to_end_with_minilm_recovers_planted_queries(tmp_path: Path, capsys) -> None:
    path = tmp_path / "judgments.csv"
    simulate_judgments().to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--out", out, "-q"], capsys)
    assert code == 0, err
    for name in ("pairs.csv", "clusters.csv", "queries.csv", "report.html", "run.json"):
        assert (out / name).exists()
    queries = pd.read_csv(out / "queries.csv", dtype={"query_id": str})
    for judge, planted, way in (("llm_strict", STRICT, "under-recalls"), ("llm_lenient", LENIENT, "over-includes")):
        q = queries[(queries["judge"] == judge) & queries["bias_prone"]]
        assert set(q["query_id"]) == planted
        assert (q["direction"] == way).all()
    pairs = pd.read_csv(out / "pairs.csv")
    assert {"query_id", "doc_id", "cluster", "human", "llm_strict", "llm_lenient", "genre"} <= set(pairs.columns)
    clusters = pd.read_csv(out / "clusters.csv")
    assert {"cluster", "judge", "size", "ac1", "ac1_se", "kappa", "percent_agreement", "purity"} <= set(clusters.columns)
    html = (out / "report.html").read_text()
    assert "Top 10 bias-prone queries: llm_strict" in html and "prepended to the pair text as plain text" in html
    # same input and seed: byte-identical tables, and nothing is embedded twice
    again = tmp_path / "again"
    assert run_cli(["judges", path, "--human", "human", "--llm", "llm_strict", "--llm", "llm_lenient", "--out", again, "-q"], capsys)[0] == 0
    for name in ("pairs.csv", "clusters.csv", "queries.csv", "query_clusters.csv"):
        assert (out / name).read_bytes() == (again / name).read_bytes()
    import json

    run = json.loads((again / "run.json").read_text())
    stats = next(iter(run["embedding"].values()))
    assert stats["encoded"] == 0 and stats["cached"] == stats["distinct"] > 200


@pytest.mark.slow
def test_cli_trec_layout(tmp_path: Path, capsys) -> None:
    t = simulate_judgments()
    for judge in ("human", "llm_strict"):
        (tmp_path / f"{judge}.txt").write_text("".join(f"{r.query_id} Q0 {r.doc_id} {getattr(r, judge)}\n" for r in t.itertuples()))
    (tmp_path / "topics.tsv").write_text("".join(f"{q}\t{s}\n" for q, s in t.groupby("query_id")["query"].first().items()))
    (tmp_path / "passages.tsv").write_text("".join(f"{d}\t{s}\n" for d, s in zip(t["doc_id"], t["doc"], strict=True)))
    out = tmp_path / "out"
    code, _, err = run_cli(["judges", "--qrels", tmp_path / "human.txt", "--qrels", f"strict={tmp_path / 'llm_strict.txt'}",
                            "--topics", tmp_path / "topics.tsv", "--passages", tmp_path / "passages.tsv",
                            "--human", "human", "--llm", "strict", "--out", out, "-q"], capsys)
    assert code == 0, err
    q = pd.read_csv(out / "queries.csv", dtype={"query_id": str})
    assert set(q.loc[q["bias_prone"], "query_id"]) == STRICT


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t.assign(llm_strict=t["llm_strict"].where(t.index != 7, 5)), "row 8, column 'llm_strict': label 5 is outside the declared scale"),
        (lambda t: t.assign(llm_lenient=np.nan), "column 'llm_lenient': every label is missing"),
        (lambda t: t.assign(doc=t["doc"].where(t.index != 3, "  ")), "row 4, column 'doc': empty text"),
        (lambda t: pd.concat([t, t.iloc[[2]].assign(human=(t["human"].iat[2] + 1) % 4)], ignore_index=True),
         "rows 3 and 361 are the same pair"),
    ],
)
def test_cli_bad_inputs_exit_2_without_output(tmp_path: Path, capsys, change, message) -> None:
    path = tmp_path / "bad.csv"
    change(simulate_judgments()).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--out", out, "-q"], capsys)
    assert code == 2
    assert message in " ".join(err.split()) and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_cli_option_errors(tmp_path: Path, capsys, monkeypatch) -> None:
    path = tmp_path / "j.csv"
    simulate_judgments().to_csv(path, index=False)
    code, _, err = run_cli(["judges", "--human", "human", "--llm", "x", "--out", tmp_path / "o"], capsys)
    assert code == 2 and "give a JUDGMENTS table" in err
    code, _, err = run_cli(["judges", path, "--llm", "llm_strict", "--embedder", "instructor:/no/such/model",
                            "--out", tmp_path / "o"], capsys)
    assert code == 2 and "is not a directory" in " ".join(err.split())
    monkeypatch.setitem(sys.modules, "umap", None)  # as without the 'umap' extra (import fails)
    code, _, err = run_cli(["judges", path, "--llm", "llm_strict", "--reduce", "umap", "--out", tmp_path / "o", "-q"], capsys)
    assert code == 2 and "optional extra 'umap': pip install umap-learn" in " ".join(err.split())
