"""P2L on real data: AlpacaEval 2 (805 prompts x 57 models against gpt4_1106_preview, soft labels).

    python scripts/alpacaeval_p2l.py --data ../shared/data/alpacaeval --out alpacaeval-p2l [--prompts N] [--penalty L]

1. Prompts split 80/20 (seeded). The default P2L (frozen minilm) trains on the 80%.
2. Held-out NLL / accuracy / Brier of P2L against the marginal BT and the constant predictor.
3. The marginal leaderboard on all battles against the upstream AlpacaEval 2 leaderboard
   (Spearman and Kendall rank correlation with win_rate and with the length-controlled win rate).
4. A routing curve on the held-out prompts: per-model cost = mean output length (characters) on the
   training prompts (the paper's c_i = E[T_i]); for each budget the P2L router (Theorem 1, budget on
   the mean cost) against the best single model within budget, scored with the *observed* judge
   preferences p_b of the held-out prompts and their actual output lengths. The same LP on the
   marginal leaderboard (one leaderboard for every prompt: it can only mix models globally) shows
   how much of the gain is prompt-specific.
Writes the model, the evaluation report, the curve (CSV) and summary.json under --out. ``--prompts N``
keeps the N prompts with the smallest ids (all 805 by default; a smoke run takes a few dozen);
``--penalty L`` fixes the ridge head's penalty instead of choosing it by 5-fold cross-validation.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import kendalltau, spearmanr

from evalprism.io import read_table
from evalprism.p2l import P2LModel, TrainOptions, fit_leaderboard, train_model
from evalprism.p2l.evaluate import evaluate_model
from evalprism.p2l.routing import route

REFERENCE = "gpt4_1106_preview"
#: adversarial judge-gaming entries (see PROVENANCE.txt): not models anyone would route to
GAMING = {"NullModel", "gpt4_gamed"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data/alpacaeval"))
    parser.add_argument("--out", type=Path, default=Path("alpacaeval-p2l"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=None, help="the first N prompts by id (default: all)")
    parser.add_argument("--penalty", type=float, default=None, help="the ridge penalty (default: chosen by CV)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    battles = read_table(args.data / "battles_ae2_weighted_gpt4turbo.jsonl")
    prompt_ids = np.sort(battles["prompt_id"].unique())[: args.prompts]
    battles = battles[battles["prompt_id"].isin(prompt_ids)].reset_index(drop=True)
    rng = np.random.default_rng(args.seed)
    test_ids = set(rng.choice(prompt_ids, size=round(0.2 * prompt_ids.size), replace=False).tolist())
    is_test = battles["prompt_id"].isin(test_ids)
    train, test = battles[~is_test], battles[is_test]

    result = train_model(train, TrainOptions(seed=args.seed, penalty=args.penalty))
    result.save(out / "model")
    model = P2LModel.load(out / "model")
    evaluation = evaluate_model(model, test)
    evaluation.save(out / "evaluation")
    metrics = evaluation.metrics.set_index("predictor")
    print(metrics.round(4).to_string())

    marginal = fit_leaderboard(battles, progress=False).leaderboard.set_index("model")
    upstream = pd.read_csv(
        args.data / "data_AlpacaEval_2__weighted_alpaca_eval_gpt4_turbo_leaderboard.csv", index_col=0
    )
    common = marginal.index.intersection(upstream.index)
    corr = {}
    for column in ("win_rate", "length_controlled_winrate"):
        if column in upstream.columns:
            x, y = marginal.loc[common, "coef"], upstream.loc[common, column]
            corr[column] = {
                "spearman": float(spearmanr(x, y).statistic),
                "kendall": float(kendalltau(x, y).statistic),
                "models": len(common),
            }
    print("rank correlation of the marginal leaderboard with upstream:", corr)

    curve = routing_curve(model, train, test, pd.read_csv(args.data / "output_lengths.csv"))
    curve.to_csv(out / "routing_curve.csv", index=False)
    print(curve.round(4).to_string(index=False))
    summary = {
        "held_out": metrics.round(5).to_dict(orient="index"),
        "upstream_rank_correlation": corr,
        "train_battles": len(train),
        "test_battles": len(test),
        "test_prompts": len(test_ids),
        "training": result.training(),
        "routing_curve": curve.round(5).to_dict(orient="records"),
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")


def routing_curve(model: P2LModel, train: pd.DataFrame, test: pd.DataFrame, lengths: pd.DataFrame) -> pd.DataFrame:
    """Observed win rate against the reference and mean output length, router vs best single model."""
    candidates = [m for m in model.models if m != REFERENCE and m not in GAMING and m in set(lengths["model_dir"])]
    lengths = lengths[lengths["model_dir"].isin(candidates)]
    train_ids = set(train["prompt_id"])
    cost = lengths[lengths["prompt_id"].isin(train_ids)].groupby("model_dir")["n_chars"].mean().reindex(candidates)
    observed = test.pivot_table(index="prompt_id", columns="model_b", values="p_b").reindex(columns=candidates)
    observed = observed.dropna(axis=0)  # prompts every candidate answered
    actual_len = lengths.pivot_table(index="prompt_id", columns="model_dir", values="n_chars").reindex(
        index=observed.index, columns=candidates
    )
    prompts = test.drop_duplicates("prompt_id").set_index("prompt_id").loc[observed.index, "instruction"]
    idx = [model.models.index(m) for m in [*candidates, REFERENCE]]
    coefs = model.leaderboards(prompts.tolist())[:, idx]  # candidates, then the reference as opponent
    q = np.zeros(len(idx))
    q[-1] = 1.0
    c = np.r_[cost.to_numpy(), np.inf]  # the reference is the opponent, never a route
    c[-1] = 1e12
    marginal = model.marginal.coefs([*candidates, REFERENCE])
    marginal_coefs = np.tile(marginal, (len(prompts), 1))  # the same leaderboard for every prompt
    win = observed.to_numpy()
    mean_win = win.mean(axis=0)
    rows = []
    for budget in np.quantile(cost.to_numpy(), [0.0, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 1.0]):
        r = route(coefs, c, float(budget), q, budget_scope="average")
        probs = r.probs[:, :-1]
        flat = route(marginal_coefs, c, float(budget), q, budget_scope="average").probs[:, :-1]
        affordable = cost.to_numpy() <= budget + 1e-9
        best = int(np.flatnonzero(affordable)[mean_win[affordable].argmax()])
        rows.append(
            {
                "budget_chars": float(budget),
                "router_winrate": float((probs * win).sum(axis=1).mean()),
                "router_chars": float((probs * actual_len.to_numpy()).sum(axis=1).mean()),
                "router_predicted_winrate": float(np.mean(r.expected_winrate)),
                "marginal_router_winrate": float((flat * win).sum(axis=1).mean()),
                "best_single_model": candidates[best],
                "best_single_winrate": float(mean_win[best]),
                "best_single_chars": float(actual_len.iloc[:, best].mean()),
            }
        )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    main()
