"""Judge-agreement bias map: the bias rules on hand-made values, planted disagreement that must be
recovered (exact clusters and the real minilm embedder), instruction choice, outputs and the CLI."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import read_run, run_cli
from sklearn.metrics import adjusted_rand_score

from evalprism.judges import BiasRules, ClusterOptions, JudgesOptions, analyze, flag_queries
from evalprism.judges.simulate import genre_embeddings, simulate_judgments

STRICT = {"q00", "q01", "q02", "q03"}  # llm_strict under-recalls in 'definition' for these
LENIENT = {"q06", "q07", "q08"}  # llm_lenient over-includes in 'news' for these
JUDGES = ["llm_strict", "llm_lenient"]


def cells(rows: list[tuple[str, int, float, int, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "cluster", "ac1", "false_negatives", "false_positives"]).assign(
        judge="j"
    )


def test_bias_rules_on_hand_made_values() -> None:
    rows = [
        ("abs", 0, 0.9, 0, 0),
        ("abs", 1, 0.3, 1, 3),  # ΔAC1 .6 >= τ; no flip (min .3 >= .2); FP > FN
        ("flip", 0, 0.85, 0, 0),
        ("flip", 1, 0.1, 4, 1),
        ("flip", 2, 0.5, 0, 0),  # ΔAC1 .75, flip, FN > FP
        ("calm", 0, 0.5, 1, 0),
        ("calm", 1, 0.45, 0, 1),  # ΔAC1 .05
        ("single", 0, 0.0, 5, 0),  # one cluster: no ΔAC1
        ("tie", 0, 0.95, 0, 0),
        ("tie", 1, 0.55, 2, 2),  # ΔAC1 .4: below τ; mixed direction
    ]
    rows += [
        (f"e{i}", c, v, 0, 0)
        for i, d in enumerate([0.1, 0.12, 0.08, 0.11, 0.09, 0.1, 0.13, 0.07])
        for c, v in ((0, 0.9), (1, 0.9 - d))
    ]
    out = flag_queries(cells(rows), BiasRules()).set_index("query_id")
    assert out.loc["abs", "dac1"] == pytest.approx(0.6)
    assert (out.loc["abs", "flag_abs"], out.loc["abs", "flag_flip"], out.loc["abs", "direction"]) == (
        True,
        False,
        "over-includes",
    )
    assert (out.loc["flip", "flag_abs"], out.loc["flip", "flag_flip"]) == (True, True)
    assert (out.loc["flip", "cluster_min"], out.loc["flip", "cluster_max"], out.loc["flip", "direction"]) == (
        1,
        0,
        "under-recalls",
    )
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
    out = flag_queries(cells([*calm, ("odd", 0, 0.9, 0, 0), ("odd", 1, 0.5, 3, 0)]), BiasRules()).set_index("query_id")
    assert (out.loc["odd", "flag_outlier"], out.loc["odd", "flag_abs"], out.loc["odd", "bias_prone"]) == (
        True,
        False,
        True,
    )
    assert out["bias_prone"].sum() == 1
    # the rule thresholds are options
    out = flag_queries(cells(rows), BiasRules(tau=0.3, flip_high=0.9)).set_index("query_id")
    assert out.loc["tie", "flag_abs"] and not out.loc["flip", "flag_flip"]


def flagged(result, judge: str) -> set[str]:
    return set(result.bias_prone(judge)["query_id"])


def test_planted_disagreement_recovered_with_exact_clusters() -> None:
    table = simulate_judgments()
    result = analyze(
        table, JudgesOptions(human="human", llm=JUDGES), embeddings=genre_embeddings(table), progress=False
    )
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
    result = analyze(table, JudgesOptions(human="human", llm=JUDGES, min_query_pairs=7), embeddings=x, progress=False)
    assert result.query_clusters.empty and result.bias_prone().empty  # 6 pairs per query and cluster
    # scattered pairs become noise: they get cluster -1, a row of their own, and no ΔAC1 cell
    rng = np.random.default_rng(1)
    far = rng.choice(len(table), 25, replace=False)
    x = x.copy()
    x[far] = rng.normal(size=(25, x.shape[1])) * 3
    result = analyze(table, JudgesOptions(human="human", llm=JUDGES), embeddings=x, progress=False)
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
    result = analyze(
        table,
        JudgesOptions(human="human", llm=JUDGES, instructions=["by genre", "by label"]),
        embeddings={"by genre": by_genre, "by label": by_label},
        progress=False,
    )
    ins = result.instructions.set_index("instruction")
    assert ins.loc["by label", "purity_p80"] == pytest.approx(1.0)
    assert ins.loc["by genre", "purity_p80"] < 1.0
    assert ins.loc["by label", "chosen"] and not ins.loc["by genre", "chosen"]
    assert result.summary.instruction == "by label"


def test_run_record_layout_and_findings_match_the_tables(tmp_path: Path) -> None:
    """run.json (format 2): the options are JudgesOptions' fields, the results the summary's, a label
    left out while reading is a read note; the headline says the tables' numbers: the clusters of
    pairs.csv, each judge's overall AC1 (overall.csv) and worst cluster (clusters.csv), and the
    bias-prone queries of queries.csv (the planted ones)."""
    import dataclasses
    import json

    from evalprism.io.record import RUN_FORMAT
    from evalprism.judges import DEFAULT_INSTRUCTION
    from evalprism.judges.summary import JudgesSummary

    table = simulate_judgments()
    table.loc[table["query_id"] == "q11", "llm_lenient"] = np.nan  # one query the lenient judge left unlabelled
    options = JudgesOptions(llm=JUDGES, cluster=ClusterOptions(min_samples=4), bias=BiasRules(tau=0.6))
    result = analyze(table, options, embeddings=genre_embeddings(table), progress=False)
    out = tmp_path / "out"
    result.save(out)
    raw = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert raw["format"] == RUN_FORMAT == 2 and raw["command"] == "judges"
    run = read_run(out)
    assert list(run.options) == [f.name for f in dataclasses.fields(JudgesOptions)]
    assert run.options["human"] == "human" and run.options["llm"] == JUDGES
    assert run.options["cluster"]["min_samples"] == 4 and run.options["bias"]["tau"] == 0.6
    assert list(run.results) == [f.name for f in dataclasses.fields(JudgesSummary)]
    assert run.results["embedder"] == "precomputed" and run.results["embedding"] == []
    assert run.results["instruction"] == DEFAULT_INSTRUCTION and set(run.results["scales"]) == {"human", *JUDGES}
    assert run.results["clustering"]["degenerate"] is False and run.results["clustering"]["by"] is None
    assert run.provenance.notes == ("column 'llm_lenient': 30 of 360 pairs have no label (left out of its agreement)",)
    pairs = pd.read_csv(out / "pairs.csv")
    k = int(pairs["cluster"].max()) + 1
    assert (run.results["n_pairs"], run.results["n_clusters"]) == (len(pairs), k) == (360, 5)
    assert run.results["noise_pairs"] == int((pairs["cluster"] < 0).sum())
    first, second = run.findings
    assert first.startswith(f"{k} clusters; ")
    overall = pd.read_csv(out / "overall.csv").set_index("judge")
    clusters = pd.read_csv(out / "clusters.csv")
    for judge in JUDGES:
        dense = clusters[(clusters["judge"] == judge) & ~clusters["is_noise"]]
        worst = dense.loc[dense["ac1"].idxmin()]
        said = f"{judge} AC1 {overall.loc[judge, 'ac1']:.2f} overall, {worst['ac1']:.2f} in C{int(worst['cluster'])}"
        assert said in first
    queries = pd.read_csv(out / "queries.csv", dtype={"query_id": str})
    prone = queries[queries["bias_prone"]]
    assert set(prone.loc[prone["judge"] == "llm_strict", "query_id"]) == STRICT
    counts = prone.groupby("judge").size()
    assert second == f"bias-prone queries llm_strict: {counts['llm_strict']}, llm_lenient: {counts['llm_lenient']}"


@pytest.mark.slow
def test_cli_end_to_end_with_minilm_recovers_planted_queries(tmp_path: Path, capsys) -> None:
    path = tmp_path / "judgments.csv"
    simulate_judgments().to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--out", out, "-q"], capsys
    )
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
    assert {"cluster", "judge", "size", "ac1", "ac1_se", "kappa", "percent_agreement", "purity"} <= set(
        clusters.columns
    )
    html = (out / "report.html").read_text()
    assert "Top 10 bias-prone queries: llm_strict" in html and "prepended to the pair text as plain text" in html
    # same input and seed: byte-identical tables, and nothing is embedded twice
    again = tmp_path / "again"
    assert (
        run_cli(
            ["judges", path, "--human", "human", "--llm", "llm_strict", "--llm", "llm_lenient", "--out", again, "-q"],
            capsys,
        )[0]
        == 0
    )
    for name in ("pairs.csv", "clusters.csv", "queries.csv", "query_clusters.csv"):
        assert (out / name).read_bytes() == (again / name).read_bytes()

    stats = read_run(again).results["embedding"][0]
    assert stats["encoded"] == 0 and stats["cached"] == stats["distinct"] > 200


@pytest.mark.slow
def test_cli_trec_layout(tmp_path: Path, capsys) -> None:
    t = simulate_judgments()
    for judge in ("human", "llm_strict"):
        (tmp_path / f"{judge}.txt").write_text(
            "".join(f"{r.query_id} Q0 {r.doc_id} {getattr(r, judge)}\n" for r in t.itertuples())
        )
    (tmp_path / "topics.tsv").write_text(
        "".join(f"{q}\t{s}\n" for q, s in t.groupby("query_id")["query"].first().items())
    )
    (tmp_path / "passages.tsv").write_text("".join(f"{d}\t{s}\n" for d, s in zip(t["doc_id"], t["doc"], strict=True)))
    out = tmp_path / "out"
    code, _, err = run_cli(
        [
            "judges",
            "--qrels",
            tmp_path / "human.txt",
            "--qrels",
            f"strict={tmp_path / 'llm_strict.txt'}",
            "--topics",
            tmp_path / "topics.tsv",
            "--passages",
            tmp_path / "passages.tsv",
            "--human",
            "human",
            "--llm",
            "strict",
            "--out",
            out,
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    q = pd.read_csv(out / "queries.csv", dtype={"query_id": str})
    assert set(q.loc[q["bias_prone"], "query_id"]) == STRICT


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda t: t.assign(llm_strict=t["llm_strict"].where(t.index != 7, 5)),
            "row 8, column 'llm_strict': label 5 is outside the declared scale",
        ),
        (lambda t: t.assign(llm_lenient=np.nan), "column 'llm_lenient': every label is missing"),
        (lambda t: t.assign(doc=t["doc"].where(t.index != 3, "  ")), "row 4, column 'doc': empty text"),
        (
            lambda t: pd.concat([t, t.iloc[[2]].assign(human=(t["human"].iat[2] + 1) % 4)], ignore_index=True),
            "rows 3 and 361 are the same pair",
        ),
    ],
)
def test_cli_bad_inputs_exit_2_without_output(tmp_path: Path, capsys, change, message) -> None:
    path = tmp_path / "bad.csv"
    change(simulate_judgments()).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--out", out, "-q"], capsys
    )
    assert code == 2
    assert message in " ".join(err.split()) and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_cli_option_errors(tmp_path: Path, capsys, monkeypatch) -> None:
    path = tmp_path / "j.csv"
    simulate_judgments().to_csv(path, index=False)
    code, _, err = run_cli(["judges", "--human", "human", "--llm", "x", "--out", tmp_path / "o"], capsys)
    assert code == 2 and "give a judgments table" in err
    code, _, err = run_cli(
        ["judges", path, "--llm", "llm_strict", "--embedder", "instructor:/no/such/model", "--out", tmp_path / "o"],
        capsys,
    )
    assert code == 2 and "is not a directory" in " ".join(err.split())
    monkeypatch.setitem(sys.modules, "umap", None)  # as without the 'umap' extra (import fails)
    code, _, err = run_cli(
        ["judges", path, "--llm", "llm_strict", "--reduce", "umap", "--out", tmp_path / "o", "-q"], capsys
    )
    assert code == 2 and "optional extra 'umap': pip install umap-learn" in " ".join(err.split())


# --- degenerate clusterings, per-collection clustering, scaled defaults (issue: the bias map on the
# --- pooled DL19 + DL20 file put 97% of the pairs in one cluster and flagged nothing, silently)


def nested_blobs(table: pd.DataFrame, far_queries: tuple[str, ...] = ("q09", "q10", "q11")) -> np.ndarray:
    """The genres as five sub-blobs of one super-blob (centres 0.05 apart per coordinate), plus the
    'news' pairs of ``far_queries`` far away: excess of mass keeps the super-blob as one cluster
    (95% of the pairs, as on the pooled TREC DL file); its leaves are the genres."""
    rng = np.random.default_rng(0)
    genres = pd.factorize(table["genre"])[0]
    centre = np.eye(16)[0]
    x = (centre + 0.05 * rng.normal(size=(5, 16)))[genres] + 0.03 * rng.normal(size=(len(table), 16))
    far = (table["genre"] == "news").to_numpy() & table["query_id"].isin(far_queries).to_numpy()
    x[far] += 3 * np.eye(16)[1]
    return x


def test_health_of_hand_made_labels() -> None:
    from evalprism.judges.degeneracy import assess

    # 4 queries x 10 pairs; cluster 0 holds 34 of 40 pairs (85%), cluster 1 four, two pairs noise
    q = np.repeat(np.arange(4), 10)
    labels = np.zeros(40, dtype=int)
    labels[[0, 1, 2, 3]] = 1
    labels[[38, 39]] = -1
    h = assess(labels, q, ClusterOptions(), min_query_pairs=2)
    assert (h.n_clusters, h.n_pairs, h.n_queries) == (2, 40, 4)
    assert h.largest_share == pytest.approx(34 / 40) and h.noise_share == pytest.approx(2 / 40)
    assert h.queries_with_dac1 == 1  # query 0: 4 pairs in C1 and 6 in C0; the others have one cluster
    assert h.degenerate and len(h.reasons) == 1 and "one cluster holds 85% of the pairs" in h.reasons[0]
    # the same labels with a laxer share are fine; with min_query_pairs 5, query 0 has no ΔAC1 either
    assert not assess(labels, q, ClusterOptions(max_cluster_share=0.9), min_query_pairs=2).degenerate
    h = assess(labels, q, ClusterOptions(max_cluster_share=0.9), min_query_pairs=5)
    assert h.queries_with_dac1 == 0 and not h.degenerate and "only 0 of 4 queries" in h.caveats[0]
    # all noise: no cluster at all
    h = assess(np.full(40, -1), q, ClusterOptions(), min_query_pairs=2)
    assert h.n_clusters == 0 and any("0 dense clusters" in r for r in h.reasons)


def test_one_blob_is_degenerate_and_said_so_everywhere(tmp_path: Path, capsys) -> None:

    table = simulate_judgments()
    x = nested_blobs(table)
    result = analyze(
        table,
        JudgesOptions(human="human", llm=JUDGES, cluster=ClusterOptions(reduce="none", cluster_selection_method="eom")),
        embeddings=x,
        progress=False,
    )
    assert result.degenerate
    group = result.summary.clustering.groups[0]
    assert (group.health.n_clusters, group.selection) == (2, "eom") and group.health.largest_share > 0.9
    assert len(group.attempts) == 1  # eom asked for explicitly: no fallback
    # the planted cells sit inside the big cluster: nothing is flagged, which is why it must be said
    assert flagged(result, "llm_strict") == set()
    err = capsys.readouterr().err
    assert "warning: degenerate clustering: one cluster holds 95% of the pairs" in " ".join(err.split())
    result.save(tmp_path / "out")
    run = read_run(tmp_path / "out").results
    assert run["clustering"]["degenerate"] is True and run["clustering"]["groups"][0]["health"]["degenerate"] is True
    html = (tmp_path / "out" / "report.html").read_text()
    summary = html[html.index('<div class="summary">') : html.index("<section")]
    first = summary[summary.index("<li>") :]
    assert first.startswith("<li><b>Warning: degenerate clustering")  # the headline's first line


def test_multi_blob_is_not_degenerate_and_excess_of_mass_is_kept(capsys) -> None:
    table = simulate_judgments()
    result = analyze(
        table, JudgesOptions(human="human", llm=JUDGES), embeddings=genre_embeddings(table), progress=False
    )
    assert not result.degenerate and result.summary.clustering.warnings == ()
    group = result.summary.clustering.groups[0]
    assert (group.selection, group.health.n_clusters, len(group.attempts)) == ("eom", 5, 1)
    assert group.health.largest_share == pytest.approx(0.2) and group.health.queries_with_dac1 == 12
    assert "warning" not in capsys.readouterr().err


def test_auto_selection_falls_back_to_leaf_and_recovers_the_planted_queries() -> None:
    table = simulate_judgments()
    result = analyze(
        table,
        JudgesOptions(human="human", llm=JUDGES, cluster=ClusterOptions(reduce="none")),
        embeddings=nested_blobs(table),
        progress=False,
    )
    group = result.summary.clustering.groups[0]
    assert [a.selection for a in group.attempts] == ["eom", "leaf"]
    assert group.attempts[0].health.degenerate and not group.health.degenerate and group.selection == "leaf"
    assert group.fell_back
    assert not result.degenerate and result.options.cluster.cluster_selection_method == "auto"
    # the leaves are the five genres and the far blob (leaf selection leaves 19 edge pairs as noise)
    far = (table["genre"] == "news") & table["query_id"].isin(["q09", "q10", "q11"])
    truth = table["genre"].where(~far, "far")
    dense = result.pairs["cluster"] >= 0
    assert result.pairs["cluster"].max() == 5 and (~dense).sum() == 19
    assert adjusted_rand_score(truth[dense], result.pairs["cluster"][dense]) == pytest.approx(1.0)
    assert flagged(result, "llm_strict") == STRICT


def two_collections() -> tuple[pd.DataFrame, np.ndarray]:
    """Two collections with the same five genres: pooled, each genre is one cluster holding both
    collections; per collection, the clusters are (collection, genre)."""
    a = simulate_judgments()
    b = simulate_judgments(seed=1)
    b = b.assign(query_id="b" + b["query_id"], doc_id="b" + b["doc_id"])
    table = pd.concat([a.assign(collection="A"), b.assign(collection="B")], ignore_index=True)
    x = genre_embeddings(table)
    x[len(a) :] += 0.02  # B's pairs a little apart from A's, much less than the genres are
    return table, x


def test_collections_are_clustered_apart() -> None:
    table, x = two_collections()
    result = analyze(table, JudgesOptions(human="human", llm=JUDGES), embeddings=x, progress=False)
    assert result.summary.clustering.by == "collection" and result.options.by == "auto"
    assert [g.group for g in result.summary.clustering.groups] == ["A", "B"]
    assert all(g.health.n_clusters == 5 and g.health.n_pairs == 360 for g in result.summary.clustering.groups)
    truth = table["collection"] + "/" + table["genre"]
    assert adjusted_rand_score(truth, result.pairs["cluster"]) == pytest.approx(1.0)
    # every cluster holds one collection, named in clusters.csv
    assert result.clusters.groupby("cluster")["collection"].nunique().max() == 1
    assert set(result.clusters.loc[~result.clusters["is_noise"], "collection"]) == {"A", "B"}
    # each query's collection in queries.csv; the planted queries of both collections are found
    assert dict(zip(result.queries["query_id"], result.queries["collection"], strict=True))["bq00"] == "B"
    assert flagged(result, "llm_strict") == STRICT | {"b" + q for q in STRICT}
    # pooled on request: the genres, each holding both collections
    pooled = analyze(table, JudgesOptions(human="human", llm=JUDGES, by=None), embeddings=x, progress=False)
    assert pooled.summary.clustering.by is None and len(pooled.summary.clustering.groups) == 1
    assert adjusted_rand_score(table["genre"], pooled.pairs["cluster"]) == pytest.approx(1.0)
    # an explicit column, and one that does not exist
    by_year = analyze(
        table.assign(year=table["collection"].map({"A": 2019, "B": 2020})).drop(columns="collection"),
        JudgesOptions(human="human", llm=JUDGES, by="year"),
        embeddings=x,
        progress=False,
    )
    assert [g.group for g in by_year.summary.clustering.groups] == ["2019", "2020"]
    from evalprism.errors import EvalprismError

    with pytest.raises(EvalprismError, match="by column 'track' not found"):
        analyze(table, JudgesOptions(human="human", llm=JUDGES, by="track"), embeddings=x, progress=False)


def test_min_cluster_size_scales_with_the_pairs() -> None:
    from evalprism.judges.clustering import scaled_min_cluster_size

    assert [scaled_min_cluster_size(n) for n in (30, 360, 9260, 10500, 11386, 20646, 70000)] == [
        15,
        15,
        15,
        15,
        16,
        29,
        100,
    ]
    assert ClusterOptions().size_for(20646) == 29 and ClusterOptions(min_cluster_size=40).size_for(20646) == 40
    # recorded per collection clustered
    table, x = two_collections()
    result = analyze(table, JudgesOptions(human="human", llm=JUDGES), embeddings=x, progress=False)
    assert [g.min_cluster_size for g in result.summary.clustering.groups] == [15, 15]
    assert result.options.cluster.min_cluster_size is None  # the scaled default was asked for
    assert result.record.options["cluster"]["min_cluster_size"] is None


def test_a_single_query_gives_a_result() -> None:
    from evalprism.stats import gwet_ac1

    table = simulate_judgments()
    one = table[table["query_id"] == "q00"].reset_index(drop=True)
    result = analyze(
        one,
        JudgesOptions(human="human", llm=JUDGES, cluster=ClusterOptions(min_cluster_size=5)),
        embeddings=genre_embeddings(one),
        progress=False,
    )
    assert result.pairs["cluster"].max() == 4  # five genres of six pairs each
    ref = gwet_ac1((one["human"] >= 2).astype(int), one["llm_strict"], categories=[0, 1])
    assert result.overall.set_index("judge").loc["llm_strict", "ac1"] == pytest.approx(ref.value, abs=1e-12)
    # with the default min_cluster_size, 30 pairs form no cluster: a result with the warning, no crash
    result = analyze(one, JudgesOptions(human="human", llm=JUDGES), embeddings=genre_embeddings(one), progress=False)
    assert result.degenerate and result.query_clusters.empty and result.bias_prone().empty


def test_counts_read_as_integers_with_thousands_separators() -> None:
    from evalprism.judges.report import counts_readable
    from evalprism.report import Report

    frame = pd.DataFrame({"judge": ["a", "b"], "n_dense": [20060, 586], "ac1_dense": [0.81234, 0.5]})
    report = Report("t").table(counts_readable(frame), "concentration", transpose=True)
    html = report.render()
    assert "20,060" in html and "586" in html and "0.8123" in html
    assert "e+04" not in html and "2.006" not in html


def test_cli_single_query_min_samples_and_empty_qrels_path(tmp_path: Path, capsys) -> None:
    table = simulate_judgments()
    path = tmp_path / "j.csv"
    table.to_csv(path, index=False)
    code, _, err = run_cli(
        [
            "judges",
            path,
            "--human",
            "human",
            "--llm",
            "llm_strict",
            "--min-samples",
            "100000",
            "--out",
            tmp_path / "o",
            "-q",
        ],
        capsys,
    )
    assert code == 2 and "Traceback" not in err
    assert "--min-samples 100000 is larger than the 360 pairs; expected at most 360" in " ".join(err.split())
    code, _, err = run_cli(
        [
            "judges",
            "--qrels",
            "human=",
            "--qrels",
            f"x={path}",
            "--topics",
            path,
            "--passages",
            path,
            "--human",
            "human",
            "--llm",
            "x",
            "--out",
            tmp_path / "o",
            "-q",
        ],
        capsys,
    )
    assert code == 2 and "qrels 'human=': the path after '=' is empty" in " ".join(err.split())
    assert not (tmp_path / "o").exists()


def test_pairs_without_a_human_label_are_said_before_the_embedding(capsys) -> None:
    """Human qrels for a few queries beside an LLM's for all: the pairs the human never judged are said on
    stderr (they are clustered but cannot enter any agreement), not only in the report's notes."""
    from evalprism.judges import analyze
    from evalprism.judges.simulate import genre_embeddings, simulate_judgments

    table = simulate_judgments()
    unjudged = table["query_id"].isin(table["query_id"].unique()[2:])
    table["human"] = table["human"].where(~unjudged)
    analyze(table, JudgesOptions(human="human", llm=["llm_strict"]), embeddings=genre_embeddings(table), progress=False)
    err = " ".join(capsys.readouterr().err.split())
    assert f"{int(unjudged.sum()):,} of {len(table):,} pairs have no human label ('human')" in err, err
