#!/usr/bin/env python
"""P2L trained from per-item correctness logs, evaluated on held-out items (issue 29, part 4).

Data: ``../shared/data/zeroeval`` (per-item correctness of 44-51 models on GSM8K, MATH level 5 and
CRUXEval; every item carries its question text in ``items.csv``). The score table (model, item_id,
score, benchmark, prompt = the item's question) goes through the library's conversion
(`evalprism.p2l.from_logs.battles_from_scores`, what `p2l train` does with a score table): every two
models scored on the same item are a battle (higher score wins, equal a tie, both 0 "both bad").

- Models: the ``--models`` models scored on all three benchmarks, evenly spaced in overall accuracy
  (every k-th of them sorted by accuracy; a battle set of n(n-1)/2 pairs per item).
- Split by item: a ``--test-fraction`` of the items (chosen by a seeded hash of benchmark and item id)
  is held out; P2L is trained (`train_model`, default options: the cross-validated ridge head on
  frozen MiniLM; ``--outcome-model``) on the battles of the other items only.
- Held-out evaluation: on the held-out items' battles, the trained model's P2L predictions and its
  marginal leaderboard (the warm start, fitted on the training battles minus the trainer's validation
  prompts) are scored with `compare_predictors`; the NLL difference has its standard error clustered
  by item (all battles of one item are one draw). A third predictor, the marginal leaderboard fitted
  per benchmark on all training battles of that benchmark, says how much of P2L's gain knowing the
  benchmark alone gives.

Smaller runs: ``--items N`` keeps the first N items of each benchmark (in the data's order), ``--penalty L``
fixes the ridge penalty instead of choosing it by cross-validation.

Writes ``--out/metrics.csv`` (one row per outcome model and predictor), ``conversion.json`` and the trained
models (``--out/model-<outcome model>/``), and prints the metrics.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.p2l import TrainOptions, train_model
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.evaluate import (
    battle_nll,
    compare_predictors,
    log_probs,
    marginal_log_probs,
    p2l_log_probs,
    paired_difference,
)
from evalprism.p2l.from_logs import battles_from_scores
from evalprism.p2l.marginal import fit_leaderboard
from evalprism.p2l.options import FitOptions
from evalprism.p2l.train_summary import PenaltyChoice
from evalprism.stats.outcomes import OUTCOME_INDEX
from evalprism.stats.pairwise import outcome_rows, outcome_weights
from evalprism.vocabularies import OutcomeModelName


def score_table(data: Path) -> pd.DataFrame:
    """scores_long.csv with each item's question as its prompt, in compare's column names."""
    scores = pd.read_csv(data / "scores_long.csv", dtype={"item_id": str, "model": str, "benchmark": str})
    items = pd.read_csv(data / "items.csv", dtype=str)[["benchmark", "item_id", "question"]]
    table = scores.merge(items, on=["benchmark", "item_id"], how="left", validate="many_to_one")
    return table.rename(columns={"model": "run", "question": "prompt"})


def first_items(table: pd.DataFrame, n: int | None) -> pd.DataFrame:
    """The rows of the first ``n`` items of each benchmark, in the order the items first appear (all: None)."""
    if n is None:
        return table
    keys = table[["benchmark", "item_id"]].drop_duplicates()
    kept = keys.groupby("benchmark", sort=False).head(n)
    return table.merge(kept, on=["benchmark", "item_id"], how="inner")


def pick_models(table: pd.DataFrame, n: int) -> list[str]:
    """``n`` models scored on every benchmark, evenly spaced in overall accuracy (-1 counts as 0)."""
    benches = table["benchmark"].nunique()
    everywhere = table.groupby("run")["benchmark"].nunique()
    full = everywhere[everywhere == benches].index
    acc = table[table["run"].isin(full)].assign(s=lambda d: d["score"].clip(lower=0)).groupby("run")["s"].mean()
    ranked = acc.sort_values().index.tolist()
    take = np.unique(np.round(np.linspace(0, len(ranked) - 1, n)).astype(int))
    return [ranked[i] for i in take]


def held_out(table: pd.DataFrame, fraction: float, seed: int) -> np.ndarray:
    """True for the rows of held-out items: a seeded hash of (benchmark, item_id) below ``fraction``."""
    keys = (table["benchmark"] + "/" + table["item_id"]).unique()
    u = {k: int(hashlib.sha256(f"{seed}:{k}".encode()).hexdigest()[:12], 16) / 16**12 for k in keys}
    return (table["benchmark"] + "/" + table["item_id"]).map(u).to_numpy() < fraction


def by_benchmark(
    train: pd.DataFrame,
    test: pd.DataFrame,
    outcome_model: OutcomeModelName,
    models: list[str],
    a: np.ndarray,
    b: np.ndarray,
) -> np.ndarray:
    """Log-probabilities of the held-out battles under a marginal leaderboard fitted per benchmark on
    all training battles of that benchmark: the baseline that knows which benchmark an item is from."""
    logp = np.zeros((len(test), 4))
    for bench, part in test.groupby("benchmark"):
        fit = fit_leaderboard(
            train[train["benchmark"] == bench], FitOptions(outcome_model=outcome_model, ci=None), progress=False
        ).fit
        rows = part.index.to_numpy()
        baseline = MarginalBaseline.from_leaderboard(fit)
        coefs = pd.Series(fit.coefs, index=fit.names).reindex(models).to_numpy()
        logp[rows] = log_probs(outcome_model, coefs[a[rows]], coefs[b[rows]], baseline.tie)
    return logp


def evaluate(result, train: pd.DataFrame, test: pd.DataFrame, outcome_model: OutcomeModelName) -> pd.DataFrame:
    """P2L, its marginal and the per-benchmark marginal on the held-out battles; NLL differences to
    the marginal (and P2L's to the per-benchmark marginal) with standard errors clustered by item."""
    model = result.model
    index = {name: i for i, name in enumerate(model.models)}
    test = test.reset_index(drop=True)
    a = test["model_a"].map(index).to_numpy()
    b = test["model_b"].map(index).to_numpy()
    rows = outcome_rows(test["winner"].map(OUTCOME_INDEX).to_numpy())
    preds = {
        "marginal": marginal_log_probs(model.marginal, a, b, model.models),
        "marginal_by_benchmark": by_benchmark(train, test, outcome_model, model.models, a, b),
        "p2l": p2l_log_probs(model, test["prompt"].tolist(), a, b),
    }
    items = (test["benchmark"] + "/" + test["item_id"]).to_numpy()
    table = compare_predictors(outcome_model, rows, preds, items)
    mask = outcome_weights(outcome_model, rows).sum(axis=1) > 0
    diff = battle_nll(outcome_model, preds["p2l"], rows) - battle_nll(
        outcome_model, preds["marginal_by_benchmark"], rows
    )
    mean, se = paired_difference(diff, items[mask])
    table["p2l_vs_by_benchmark"] = np.where(table["predictor"] == "p2l", mean, np.nan)
    table["se_vs_by_benchmark"] = np.where(table["predictor"] == "p2l", se, np.nan)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/zeroeval"))
    parser.add_argument("--models", type=int, default=12)
    parser.add_argument("--outcome-model", "--loss", nargs="+", default=["bt", "grk"])
    parser.add_argument("--test-fraction", type=float, default=0.2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--items", type=int, default=None, help="the first N items of each benchmark (default: all)")
    parser.add_argument("--penalty", type=float, default=None, help="the ridge penalty (default: chosen by CV)")
    parser.add_argument("--out", type=Path, default=Path("docs/p2l_from_correctness"))
    args = parser.parse_args()

    table = first_items(score_table(args.data), args.items)
    models = pick_models(table, args.models)
    table = table[table["run"].isin(models)].reset_index(drop=True)
    test_rows = held_out(table, args.test_fraction, args.seed)
    train_battles, train_conv = battles_from_scores(table[~test_rows], where="zeroeval train items")
    test_battles, test_conv = battles_from_scores(table[test_rows], where="zeroeval held-out items")
    print("models:", ", ".join(models))
    print(train_conv.line("zeroeval train items"))
    print(test_conv.line("zeroeval held-out items"))
    args.out.mkdir(parents=True, exist_ok=True)
    frames = []
    for outcome_model in args.outcome_model:
        start = time.perf_counter()
        result = train_model(
            train_battles,
            TrainOptions(outcome_model=outcome_model, seed=args.seed, penalty=args.penalty),
            cache_dir=args.cache_dir,
            progress=False,
        )
        result.save(args.out / f"model-{outcome_model}")
        metrics = evaluate(result, train_battles, test_battles, outcome_model)
        metrics.insert(0, "outcome_model", outcome_model)
        chosen = result.summary.chosen
        metrics["penalty"] = chosen.penalty_chosen if isinstance(chosen, PenaltyChoice) else None
        metrics["seconds"] = round(time.perf_counter() - start, 1)
        print(metrics.to_string(index=False))
        frames.append(metrics)
    out = pd.concat(frames, ignore_index=True)
    out.to_csv(args.out / "metrics.csv", index=False)
    (args.out / "conversion.json").write_text(
        json.dumps(
            {
                "models": models,
                "train": train_conv.__dict__,
                "test": test_conv.__dict__,
                "test_fraction": args.test_fraction,
                "seed": args.seed,
            },
            indent=2,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
