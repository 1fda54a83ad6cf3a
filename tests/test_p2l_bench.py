"""`evalprism p2l bench`: each baseline router held to a planted world where it must win, the pointwise
valuation to hand-computed values, AIQ to a closed-form hull, and the command end to end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli

from evalprism.errors import EvalprismError
from evalprism.p2l.bench import bench_routers
from evalprism.p2l.options import BenchOptions
from evalprism.p2l.routers import get_router
from evalprism.stats.aiq import aiq, nondecreasing_hull

MODELS = ("a", "b", "c", "d")
COSTS = {"a": 0.1, "b": 1.0, "c": 1.0, "d": 2.0}


def clustered_world(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit-norm features in two clusters; cluster 0's best model is b, cluster 1's is c (0.9 right, the
    others 0.2, d 0.6 everywhere); returns features, cluster, 0/1 scores (n, 4)."""
    rng = np.random.default_rng(seed)
    cluster = rng.integers(0, 2, n)
    centres = rng.normal(size=(2, 16))
    x = centres[cluster] + 0.3 * rng.normal(size=(n, 16))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    p = np.full((n, 4), 0.2)
    p[cluster == 0, 1] = 0.9
    p[cluster == 1, 2] = 0.9
    p[:, 3] = 0.6
    return x, cluster, (rng.random((n, 4)) < p).astype(float)


class LookupEmbedder:
    """Features planted per prompt ("prompt <i>" -> row i): the embedder is not what these tests test."""

    def __init__(self, features: np.ndarray) -> None:
        self.features = features

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.features[[int(t.split()[1]) for t in texts]]


def score_table(scores: np.ndarray, items: range, benchmark: np.ndarray | None = None) -> pd.DataFrame:
    rows = [
        {
            "model": MODELS[m],
            "item_id": f"i{i}",
            "benchmark": "all" if benchmark is None else benchmark[i],
            "score": scores[i, m],
            "prompt": f"prompt {i}",
        }
        for i in items
        for m in range(scores.shape[1])
    ]
    return pd.DataFrame(rows)


def test_knn_recovers_a_planted_per_cluster_best_model() -> None:
    x, cluster, scores = clustered_world(1200)
    knn = get_router("knn").build(0).fit(x[:900], scores[:900], np.full(900, "all"))
    best = knn.predict(x[900:], np.full(300, "all")).argmax(axis=1)
    assert np.mean(best == np.where(cluster[900:] == 0, 1, 2)) > 0.97
    assert knn.k_ in knn.cv_errors_ and knn.k_ >= 10  # noisy 0/1 scores: CV prefers averaging many neighbours


def test_mf_recovers_planted_low_rank_quality() -> None:
    rng = np.random.default_rng(1)
    n, d, m = 1500, 12, 5
    x = rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    logits = 4.0 * (x @ rng.normal(size=(d, 2))) @ rng.normal(size=(2, m)) / np.sqrt(2)  # rank 2
    truth = 1 / (1 + np.exp(-logits))
    scores = (rng.random((n, m)) < truth).astype(float)
    mf = get_router("mf").build(0).fit(x[:1200], scores[:1200], np.full(1200, "all"))
    pred = mf.predict(x[1200:], np.full(300, "all"))
    corr = [np.corrcoef(pred[i], truth[1200 + i])[0, 1] for i in range(300)]
    assert np.median(corr) > 0.8
    assert np.mean(pred.argmax(axis=1) == truth[1200:].argmax(axis=1)) > 0.6  # chance: 0.2


def test_benchmark_leaderboard_recovers_the_planted_best_per_benchmark() -> None:
    rng = np.random.default_rng(2)
    bench = np.array(["math", "code", "chat"])[rng.integers(0, 3, 900)]
    p = np.select(
        [bench[:, None] == "math", bench[:, None] == "code"], [[0.9, 0.3, 0.3], [0.3, 0.9, 0.3]], [0.3, 0.3, 0.9]
    )
    scores = (rng.random(p.shape) < p).astype(float)
    board = get_router("benchmark leaderboard").build(0).fit(np.zeros((900, 1)), scores, bench)
    pred = board.predict(np.zeros((3, 1)), np.array(["math", "code", "unseen"]))
    assert pred[:2].argmax(axis=1).tolist() == [0, 1]
    np.testing.assert_allclose(pred[2], scores.mean(axis=0))  # an unseen benchmark: the overall means


@pytest.fixture(scope="module")
def clustered_bench() -> tuple[pd.DataFrame, np.ndarray]:
    x, _, scores = clustered_world(600)
    result = bench_routers(
        score_table(scores, range(400)),
        score_table(scores, range(400, 600)),
        COSTS,
        BenchOptions(rounds=200),
        embedder=LookupEmbedder(x),
        progress=False,
    )
    return result.policies, scores


def test_best_single_is_valued_at_its_held_out_accuracy(clustered_bench: tuple[pd.DataFrame, np.ndarray]) -> None:
    policies, scores = clustered_bench
    train_best = int(np.argmax(scores[:400].mean(axis=0)))
    top = policies[(policies["policy"] == "best single") & (policies["budget"] == 2.0)].iloc[0]
    assert top["value"] == pytest.approx(scores[400:, train_best].mean())
    assert top["cost"] == pytest.approx(COSTS[MODELS[train_best]])
    sd = scores[400:, train_best].std(ddof=1)
    assert top["se"] == pytest.approx(sd / np.sqrt(200))  # one prompt per item: the textbook SE


def test_items_own_costs_decide_by_training_means_and_charge_each_item(tmp_path: Path) -> None:
    """A cost column (each item's cost per model, e.g. its tokens at the model's prices) with no costs
    table: the budget rule reads each model's mean training cost, and a policy is charged each held-out
    item's own cost; by hand for the best single model. A split without the column is refused."""
    x, _, scores = clustered_world(600)
    rng = np.random.default_rng(3)
    base = np.array([COSTS[m] for m in MODELS])
    item_cost = base * rng.uniform(0.5, 1.5, size=(600, 4))  # per item: the same model costs more or less

    def priced(items: range) -> pd.DataFrame:
        table = score_table(scores, items)
        table["cost"] = [item_cost[i, m] for i in items for m in range(4)]
        return table

    result = bench_routers(
        priced(range(400)),
        priced(range(400, 600)),
        None,
        BenchOptions(rounds=50),
        embedder=LookupEmbedder(x),
        progress=False,
    )
    assert result.summary.costs == pytest.approx(dict(zip(MODELS, item_cost[:400].mean(axis=0), strict=True)))
    assert "each held-out item's own cost" in result.summary.cost_source
    train_best = int(np.argmax(scores[:400].mean(axis=0)))
    rows = result.policies[result.policies["policy"] == "best single"].set_index("budget")
    top = rows.loc[max(rows.index)]
    assert top["value"] == pytest.approx(scores[400:, train_best].mean())
    assert top["cost"] == pytest.approx(item_cost[400:, train_best].mean())  # charged, not the training mean
    with pytest.raises(EvalprismError, match="HELDOUT: no 'cost' column: give costs"):
        bench_routers(priced(range(400)), score_table(scores, range(400, 600)), None, embedder=LookupEmbedder(x))
    bad = priced(range(400))
    bad.loc[5, "cost"] = -1.0
    with pytest.raises(
        EvalprismError,
        match=r"table 1: row 6, column 'cost': expected a non-negative number \(the cost of answering the item\), got -1.0",
    ):
        bench_routers(bad, priced(range(400, 600)), None, embedder=LookupEmbedder(x), progress=False)


def test_standard_errors_clustered_by_benchmark_when_asked() -> None:
    """--se-by benchmark: each benchmark is one unit. By hand for the best single model: the SE of a
    mean over benchmark clusters (the items of a benchmark summed, CR0 with the G/(G-1) correction, as
    statsmodels' cluster-robust SE of a constant), and a note that few units make rough intervals."""
    import statsmodels.api as sm

    x, _, scores = clustered_world(600)
    bench = np.array([f"b{i % 4}" for i in range(600)])
    result = bench_routers(
        score_table(scores, range(400), bench),
        score_table(scores, range(400, 600), bench),
        COSTS,
        BenchOptions(rounds=50, se_by="benchmark"),
        embedder=LookupEmbedder(x),
        progress=False,
    )
    top = result.policies[result.policies["policy"] == "best single"].set_index("budget").loc[2.0]
    train_best = int(np.argmax(scores[:400].mean(axis=0)))
    held = scores[400:, train_best]
    groups = pd.factorize(pd.Series(bench[400:]))[0]
    fit = sm.OLS(held, np.ones((200, 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    assert top["se"] == pytest.approx(float(fit.bse[0]), rel=1e-9)
    assert any("clustered by benchmark over 4 benchmarks" in note for note in result.notes)


def test_oracle_is_the_mean_of_the_per_item_best_within_budget(
    clustered_bench: tuple[pd.DataFrame, np.ndarray],
) -> None:
    policies, scores = clustered_bench
    oracle = policies[policies["policy"] == "oracle"].set_index("budget")
    assert oracle.loc[2.0, "value"] == pytest.approx(scores[400:].max(axis=1).mean())
    assert oracle.loc[0.1, "value"] == pytest.approx(scores[400:, 0].mean())  # only model a fits


def test_routers_beat_the_prompt_blind_policies_where_the_prompt_decides(
    clustered_bench: tuple[pd.DataFrame, np.ndarray],
) -> None:
    policies, _ = clustered_bench
    budget = sorted(policies["budget"].unique())[3]  # the 4th of 5 default budgets: b or c affordable on most items
    rows = policies[policies["budget"] == budget].set_index("policy")
    for router in ("knn", "mlp", "mf"):
        assert rows.loc[router, "value"] > rows.loc["best single", "value"] + 0.2
        assert rows.loc[router, "value"] > rows.loc["benchmark leaderboard", "value"] + 0.1
    assert (policies["p_adj"].dropna() >= policies["p"].dropna()).all()


def test_aiq_on_a_closed_form_hull() -> None:
    cost, value = np.array([0.0, 1.0, 2.0, 3.0]), np.array([0.0, 0.8, 0.9, 0.85])
    xs, ys = nondecreasing_hull(cost, value)
    assert xs.tolist() == [0.0, 1.0, 2.0] and ys.tolist() == [0.0, 0.8, 0.9]  # flat after the top
    assert aiq(cost, value, 0.0, 3.0) == pytest.approx((0.4 + 0.85 + 0.9) / 3)
    assert aiq(np.array([0.0, 1.0, 2.0]), np.array([0.0, 0.2, 1.0]), 0.0, 2.0) == pytest.approx(
        0.5
    )  # (1,0.2) under the chord
    assert aiq(np.array([0.0, 2.0]), np.array([0.0, 1.0]), 0.0, 4.0) == pytest.approx(0.75)


def write_split(tmp_path: Path) -> tuple[Path, Path, Path]:
    _, cluster, scores = clustered_world(40)
    texts = ["Solve for x in the equation {} x + 3 = 7.", "Write a short poem about the sea number {}."]
    table = score_table(scores, range(40))
    table["prompt"] = [texts[cluster[int(i[1:])]].format(i[1:]) for i in table["item_id"]]
    train, held = tmp_path / "train.csv", tmp_path / "held.csv"
    table[table["item_id"].isin([f"i{i}" for i in range(30)])].to_csv(train, index=False)
    table[~table["item_id"].isin([f"i{i}" for i in range(30)])].to_csv(held, index=False)
    costs = tmp_path / "costs.csv"
    pd.DataFrame({"model": list(COSTS), "cost": list(COSTS.values())}).to_csv(costs, index=False)
    return train, held, costs


def test_the_command_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train, held, costs = write_split(tmp_path)
    out = tmp_path / "out"
    args = ["p2l", "bench", train, held, "--costs", costs, "--out", out, "--rounds", "50"]
    code, _, err = run_cli([*args, "--cache-dir", tmp_path / "cache", "--quiet"], capsys)
    assert code == 0, err
    policies = pd.read_csv(out / "policies.csv")
    assert list(policies.columns) == [
        "policy",
        "budget",
        "value",
        "se",
        "cost",
        "diff_vs_ref",
        "low",
        "high",
        "p",
        "p_adj",
        "mde",
    ]
    assert set(policies["policy"]) == {
        "knn",
        "mlp",
        "mf",
        "benchmark leaderboard",
        "best single",
        "random mix",
        "oracle",
    }
    assert (policies["cost"] <= policies["budget"] + 1e-9).all()
    assert set(pd.read_csv(out / "aiq.csv")["policy"]) == set(policies["policy"])
    assert "held-out quality" in (out / "report.html").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("battles", "holds pairwise battles"),
        ("models", "score different models"),
        ("overlap", "also in"),
        ("no cost", "no cost for 1 of the 4 models"),
    ],
)
def test_bad_input_is_refused_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: str, expected: str
) -> None:
    train, held, costs = write_split(tmp_path)
    if change == "battles":
        pd.DataFrame({"prompt": ["p"], "model_a": ["a"], "model_b": ["b"], "winner": ["model_a"]}).to_csv(
            held, index=False
        )
    elif change == "models":
        table = pd.read_csv(held)
        table[table["model"] != "d"].to_csv(held, index=False)
    elif change == "overlap":
        pd.concat([pd.read_csv(held), pd.read_csv(train).head(4)]).to_csv(held, index=False)
    else:
        pd.DataFrame({"model": ["a", "b", "c"], "cost": [0.1, 1, 1]}).to_csv(costs, index=False)
    code, _, err = run_cli(["p2l", "bench", train, held, "--costs", costs, "--out", tmp_path / "o", "-q"], capsys)
    assert code == 2
    assert expected in err and "Traceback" not in err
    assert err.count("error") == 1


def test_a_p2l_model_is_the_reference_and_must_know_every_scored_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.from_logs import read_battles_input

    train, held, costs = write_split(tmp_path)
    cache = tmp_path / "cache"
    model = train_model(read_battles_input(train), TrainOptions(penalty=1e-3), cache_dir=cache, progress=False)
    model_dir = model.save(tmp_path / "p2l")
    out = tmp_path / "out"
    args = ["p2l", "bench", train, held, "--costs", costs, "--rounds", "50", "--cache-dir", cache, "-q"]
    code, _, err = run_cli([*args, "--model", model_dir, "--out", out], capsys)
    assert code == 0, err
    policies = pd.read_csv(out / "policies.csv")
    assert policies["policy"].iloc[0] == "p2l" and policies.loc[policies["policy"] == "p2l", "diff_vs_ref"].isna().all()
    assert policies.loc[policies["policy"] != "p2l", "diff_vs_ref"].notna().all()
    table = pd.read_csv(held)
    table.loc[table["model"] == "d", "model"] = "e"  # a model the P2L model was not trained on
    table.to_csv(held, index=False)
    pd.read_csv(train).replace({"model": {"d": "e"}}).to_csv(train, index=False)
    pd.read_csv(costs).replace({"model": {"d": "e"}}).to_csv(costs, index=False)
    code, _, err = run_cli([*args, "--model", model_dir, "--out", tmp_path / "o2"], capsys)
    assert code == 2 and "does not know 1 of the scored models: e" in err


# --- pairwise battles: sparse per-prompt results to learn from, held-out win rate to be valued by ---


def planted_battles(prompts: range, cluster: np.ndarray, seed: int) -> pd.DataFrame:
    """Two battles per prompt between random pairs of the four models: on cluster 0 prompts b beats
    anyone with probability 0.9, on cluster 1 prompts c does; every other pair is a coin flip."""
    rng = np.random.default_rng(seed)
    best = np.where(cluster == 0, 1, 2)
    rows = []
    for i in prompts:
        for _ in range(2):
            a, b = rng.choice(4, 2, replace=False)
            p_a = 0.9 if a == best[i] else 0.1 if b == best[i] else 0.5
            winner = "model_a" if rng.random() < p_a else "model_b"
            rows.append({"prompt": f"prompt {i}", "model_a": MODELS[a], "model_b": MODELS[b], "winner": winner})
    return pd.DataFrame(rows)


def test_knn_recovers_a_planted_per_cluster_best_model_from_battles() -> None:
    from evalprism.p2l.bench_battles import read_battle_split

    x, cluster, _ = clustered_world(1500, seed=3)
    train = read_battle_split(planted_battles(range(1200), cluster, 0), "TRAIN")
    assert (
        np.isnan(train.items.quality).mean() > 0.2
    )  # sparse: two battles of four models a prompt leave a quarter of the entries empty
    rows = [int(p.split()[1]) for p in train.items.prompt]
    knn = get_router("knn").build(0).fit(x[rows], train.items.quality, train.items.benchmark)
    best = knn.predict(x[1200:], np.full(300, "all")).argmax(axis=1)
    assert np.mean(best == np.where(cluster[1200:] == 0, 1, 2)) > 0.95
    assert knn.k_ >= 10
    result = bench_routers(  # end to end on fewer training prompts (RouteLLM's mf runs 100 epochs of battles)
        planted_battles(range(300), cluster, 0),
        planted_battles(range(1200, 1500), cluster, 1),
        dict.fromkeys(MODELS, 1.0),
        BenchOptions(budgets=(1.0,), rounds=50),
        embedder=LookupEmbedder(x),
        progress=False,
    )
    table = result.policies.set_index("policy")
    assert result.summary.valuation == "win rate (pairwise battles)"
    assert table.loc["knn", "value"] > table.loc["best single", "value"] + 0.15
    assert table.loc["best single", "p_adj"] < 0.05 and table.loc["best single", "diff_vs_ref"] > 0


def test_win_rate_valuation_by_hand() -> None:
    """Held-out battles: prompt 10 b beats a, b ties c (b scores 3/4, c 1/2, a 0); prompt 11 d beats b
    (b 0, d 1); prompt 12 a beats c, b did not fight. b is the best single model (it won every training
    battle): valued on prompts 10 and 11 only, (3/4 + 0)/2, prompt 12 excluded; SE the prompt sandwich
    sqrt(G/(G-1) Σ ψ²), ψ = (3/8, −3/8, 0)/2. The oracle (every model affordable) picks b, d and a:
    (3/4 + 1 + 1)/3."""
    train = pd.DataFrame(
        {
            "prompt": [f"prompt {i}" for i in range(10)],
            "model_a": ["b", "b", "b", "b", "a", "d", "a", "c", "b", "d"],
            "model_b": ["a", "c", "d", "a", "c", "c", "d", "a", "c", "a"],
            "winner": ["model_a"] * 4 + ["tie", "model_a", "tie", "model_a", "model_a", "model_a"],
        }
    )
    held = pd.DataFrame(
        {
            "prompt": ["prompt 10", "prompt 10", "prompt 11", "prompt 12"],
            "model_a": ["b", "b", "d", "a"],
            "model_b": ["a", "c", "b", "c"],
            "winner": ["model_a", "tie", "model_a", "model_a"],
        }
    )
    x = np.random.default_rng(0).normal(size=(13, 4))
    options = BenchOptions(budgets=(1.0, 2.0), rounds=20)
    result = bench_routers(train, held, COSTS, options, embedder=LookupEmbedder(x), progress=False)
    table = result.policies.set_index(["policy", "budget"])
    single = table.loc[("best single", 1.0)]
    assert single["value"] == pytest.approx(0.375)
    assert single["se"] == pytest.approx(np.sqrt(3 / 2 * 2 * (0.375 / 2) ** 2))
    assert (single["prompts_scored"], single["prompts_excluded"]) == (2.0, 1.0)
    assert single["cost"] == pytest.approx(1.0)
    assert table.loc[("oracle", 2.0), "value"] == pytest.approx((0.75 + 1 + 1) / 3)
    assert "Win-rate valuation" in result.findings()[0]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("unknown model", "have no battle in the training split: e"),
        ("overlap", "also have battles in TRAIN"),
        ("se by benchmark", "clustered by prompt"),
    ],
)
def test_bad_battles_are_refused_with_one_message(change: str, expected: str) -> None:
    x, cluster, _ = clustered_world(60)
    train, held = planted_battles(range(40), cluster, 0), planted_battles(range(40, 60), cluster, 1)
    options = BenchOptions(rounds=10)
    if change == "unknown model":
        held.loc[0, "model_a"] = "e"
    elif change == "overlap":
        held = pd.concat([held, train.head(1)], ignore_index=True)
    else:
        options = BenchOptions(rounds=10, se_by="benchmark")
    with pytest.raises(EvalprismError, match=expected):
        bench_routers(train, held, COSTS, options, embedder=LookupEmbedder(x), progress=False)
