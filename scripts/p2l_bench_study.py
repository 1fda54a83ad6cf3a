"""Router benchmark on real graded data (docs/p2l_bench_study.md): P2L and every baseline router valued
pointwise on held-out ZeroEval items, with real per-model prices.

- Data: ``--data`` (ZeroEval: ``scores_long.csv`` per-item correctness on GSM8K, MATH level 5 and
  CRUXEval, ``items.csv`` each item's question, the prompt); -1 (no answer) counts as 0.
- Models and prices: the models of ``--price-map`` (``model``, ``model_api_name``: the lmarena
  arena-catalog entry whose price is the model's), each priced at its catalog output price in USD per
  million tokens (``--prices``, ``output_usd_per_1M``). Models without a price are not routed among.
- Split: by item, a seeded hash of (benchmark, item_id) below ``--test-fraction`` is held out.
- P2L (unless ``--no-p2l``): `p2l train` defaults (frozen MiniLM, ridge head, ``bt``) on the training
  items' battles, valued as the reference router.
- Writes into ``--out``: ``train.csv``, ``heldout.csv``, ``costs.csv`` (the inputs of
  ``evalprism p2l bench``, so the command reruns it), the bench output in ``bench/`` (``policies.csv``,
  ``aiq.csv``, ``report.html``, ``run.json``), and ``table.md``: the policies at every budget with
  their intervals and the AIQ ranking, as the doc shows them.

``--battles FILE --costs COSTS``: the pairwise study instead (docs/p2l_bench_study.md, "Pairwise"): the
battles split by prompt with evalprism's own rule (``p2l split``: ``split_prompts``, ``--test-fraction``
default 0.2, ``--seed``) into ``split/train.jsonl`` and ``split/test.jsonl``, P2L trained on the training
battles with `p2l train` defaults, and every policy valued by held-out win rate; same outputs otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.io.costs import read_costs
from evalprism.p2l.bench import bench_routers
from evalprism.p2l.options import BenchOptions


def score_table(data: Path, models: list[str], items: int | None) -> pd.DataFrame:
    """ZeroEval's scores of ``models`` with each item's question as its prompt (first ``items`` items of
    each benchmark when given)."""
    scores = pd.read_csv(data / "scores_long.csv", dtype={"item_id": str, "model": str, "benchmark": str})
    scores = scores[scores["model"].isin(models)]
    text = pd.read_csv(data / "items.csv", dtype=str)[["benchmark", "item_id", "question"]]
    table = scores.merge(text, on=["benchmark", "item_id"], how="left", validate="many_to_one")
    table["score"] = table["score"].clip(lower=0)
    if items is not None:
        keys = table[["benchmark", "item_id"]].drop_duplicates().groupby("benchmark", sort=False).head(items)
        table = table.merge(keys, on=["benchmark", "item_id"], how="inner")
    return table.rename(columns={"question": "prompt"})


def held_out(table: pd.DataFrame, fraction: float, seed: int) -> np.ndarray:
    """True for the rows of held-out items: a seeded hash of (benchmark, item_id) below ``fraction``."""
    keys = table["benchmark"] + "/" + table["item_id"]
    u = {k: int(hashlib.sha256(f"{seed}:{k}".encode()).hexdigest()[:12], 16) / 16**12 for k in keys.unique()}
    return keys.map(u).to_numpy() < fraction


def prices(price_map: Path, catalog: Path, max_models: int | None) -> pd.DataFrame:
    """``model, cost`` (output USD per 1M tokens) of every mapped model with a catalog price."""
    mapping = pd.read_csv(price_map, dtype=str)
    listed = pd.read_csv(catalog, dtype={"model_api_name": str})[["model_api_name", "output_usd_per_1M"]]
    joined = mapping.merge(listed, on="model_api_name", how="inner", validate="many_to_one")
    costs = joined.rename(columns={"output_usd_per_1M": "cost"})[["model", "cost", "model_api_name"]]
    return costs.head(max_models) if max_models else costs


def train_p2l(train_csv: Path, out: Path, cache_dir: Path | None) -> Path:
    """`p2l train` with its defaults on the training items' battles, saved under ``out/p2l-model``."""
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.from_logs import read_battles_input

    result = train_model(read_battles_input(train_csv), TrainOptions(), cache_dir=cache_dir, progress=True)
    return result.save(out / "p2l-model")


def split_battle_file(battles: Path, out: Path, fraction: float, seed: int) -> tuple[Path, Path]:
    """``battles`` split by prompt as `evalprism p2l split` splits them, into ``out/split``."""
    from evalprism.p2l.from_logs import read_battles_input
    from evalprism.p2l.options import SplitOptions
    from evalprism.p2l.split import split_battles

    folder = split_battles(read_battles_input(battles), SplitOptions(test_fraction=fraction, seed=seed)).save(
        out / "split"
    )
    return next(folder.glob("train.*")), next(folder.glob("test.*"))


def table_md(policies: pd.DataFrame, aiq: pd.DataFrame) -> str:
    """The doc's tables: value ± SE and cost per policy and budget, the difference to the reference with
    its interval and BH-adjusted p (on battles, a win-rate valuation, also the prompts excluded: routed
    to a model without a verdict there); then AIQ with its bootstrap interval."""
    battles = "prompts_excluded" in policies.columns
    head = ["budget", "policy", "win rate (SE)" if battles else "value (SE)", "cost"]
    head += ["P2L − policy [95% CI]" if battles else "ref − policy [95% CI]", "p (BH)"]
    head += ["prompts excluded"] if battles else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in policies.itertuples():
        diff = (
            ""
            if not np.isfinite(r.diff_vs_ref)
            else f"{100 * r.diff_vs_ref:+.1f} [{100 * r.low:.1f}, {100 * r.high:.1f}]"
        )
        p = "" if not np.isfinite(r.p_adj) else f"{r.p_adj:.2g}"
        cells = [f"{r.budget:.3g}", str(r.policy), f"{100 * r.value:.1f} ({100 * r.se:.1f})", f"{r.cost:.3g}", diff, p]
        cells += [f"{r.prompts_excluded:.0f}"] if battles else []
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| policy | AIQ [95% bootstrap by prompt] |", "|---|---|"]
    for r in aiq.sort_values("aiq", ascending=False).itertuples():
        lines.append(f"| {r.policy} | {100 * r.aiq:.1f} [{100 * r.low:.1f}, {100 * r.high:.1f}] |")
    return "\n".join(lines) + "\n"


def battle_study(args: argparse.Namespace) -> None:
    """The pairwise study (module docstring)."""
    train, test = split_battle_file(args.battles, args.out, args.test_fraction or 0.2, args.seed)
    bench(train, test, args.costs, args)


def bench(train: Path, test: Path, costs: Path, args: argparse.Namespace) -> None:
    """Train P2L on ``train`` (unless ``--no-p2l``), bench every router on ``test``, and write the bench
    directory and ``table.md`` (both studies end here)."""
    model_dir = None if args.no_p2l else train_p2l(train, args.out, args.cache_dir)
    result = bench_routers(
        train,
        test,
        read_costs(costs),
        BenchOptions(rounds=args.rounds, seed=args.seed),
        model_dir=model_dir,
        cache_dir=args.cache_dir,
    )
    result.save(args.out / "bench")
    (args.out / "table.md").write_text(table_md(result.policies, result.aiq), encoding="utf-8")
    print("\n".join(result.findings()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/zeroeval"))
    parser.add_argument("--prices", type=Path, default=Path("../shared/data/pricing/arena_catalog_prices.csv"))
    parser.add_argument("--price-map", type=Path, default=Path("docs/p2l_bench/zeroeval_price_map.csv"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--test-fraction", type=float, default=None, help="default 0.3 (items), 0.2 (--battles)")
    parser.add_argument("--battles", type=Path, default=None, help="the pairwise study on this battles file")
    parser.add_argument("--costs", type=Path, default=None, help="--battles: the models' costs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--items", type=int, default=None, help="first N items per benchmark (smoke runs)")
    parser.add_argument("--max-models", type=int, default=None, help="first N priced models (smoke runs)")
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument(
        "--no-p2l", action="store_true", help="leave P2L out (the best learned router is the reference)"
    )
    parser.add_argument("--cache-dir", type=Path, default=None)
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    if args.battles is not None:
        if args.costs is None:
            parser.error("--battles needs --costs")
        battle_study(args)
        return
    costs = prices(args.price_map, args.prices, args.max_models)
    costs[["model", "cost"]].to_csv(args.out / "costs.csv", index=False)
    table = score_table(args.data, costs["model"].tolist(), args.items)
    test = held_out(table, 0.3 if args.test_fraction is None else args.test_fraction, args.seed)
    columns = ["model", "benchmark", "item_id", "score", "prompt"]
    table.loc[~test, columns].to_csv(args.out / "train.csv", index=False)
    table.loc[test, columns].to_csv(args.out / "heldout.csv", index=False)
    bench(args.out / "train.csv", args.out / "heldout.csv", args.out / "costs.csv", args)


if __name__ == "__main__":
    main()
