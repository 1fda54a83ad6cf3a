"""Real data: do adaptively planned items place an unseen model as well as random sampling of 100
items, from at most 50 (issue 26, part 3's target), and does the adaptive interval cover?

For every family x setting cell of stem_real_data.py (ZeroEval Qwen2.5 / Llama-3.1 / gemma-2,
MMLU-Pro Llama-2; leave-one-out and other families), every located model X and plan seed s:

- adaptive K (K = 30, 40, 50): stage 1 the stratified plan of K/2 items (``make_plan(..., "adaptive")``),
  stage 2 the K/2 most informative items given X's stage-1 answers (``run_plan``, what
  ``stem plan --plan S1 --answers`` picks); and 50 items in 5 stages of 10; each read with the calibrated IRT ability posterior
  (:mod:`evalprism.stem.adaptive`): X's 2PL is fitted on the panel without X and its other-provider
  copies; the calibration's panel runs are every panel model by leave-one-out except X and its copies.
- B plan K (K = 50, 100): B on a stratified plan of K items (``stem locate --plan`` of ``stem plan``).
- random 50, random 100: plain random sampling of 50 or 100 items, placed by its weighted score (1,000 draws).

Placement is right when the position (members with a lower reference score than the estimate)
equals X's true position (its full-pool reference score against the members'); covered when
|estimate - full-pool score| <= 1.96 se. Run from the repository root:

    PYTHONPATH=src python scripts/stem_adaptive_study.py [--seeds 20] [--out out/stem-adaptive]
        [--datasets zeroeval mmlu_pro gsm8k] [--families gemma-2-it ...] [--max-models N]

``--families`` keeps only the named families of the datasets; ``--max-models N`` locates at most N models per
family x setting (both for smoke runs: the panel's calibration runs dominate the time).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stem_plan_study import UNIT, abstentions, calibration, calibration_tables, difference, stated
from stem_real_data import DEFAULT_DATASETS, FAMILIES, at_most, copies_of, family_jobs, load

from evalprism.errors import EvalprismError
from evalprism.stem import build_pool, make_plan
from evalprism.stem.adaptive import (
    ScoreWeights,
    ability_posterior,
    panel_runs,
    run_plan,
    score_posterior,
)
from evalprism.stem.baselines import random_scores
from evalprism.stem.estimate import positions_of, score_confidence
from evalprism.stem.options import PlanOptions, PoolOptions
from evalprism.stem.plan import plan_rows
from evalprism.stem.pool import attach_panel
from evalprism.stem.resolution import abstention
from evalprism.stem.subset import locate_subset
from evalprism.stem.target import NO_ROW, target_of

Z95 = 1.959963984540054
#: adaptive arms: name -> (stage-1 items, later stages' items)
ADAPTIVE = {
    "adaptive 30": (15, [15]),
    "adaptive 40": (20, [20]),
    "adaptive 50": (25, [25]),
    "adaptive 50, 5 stages": (10, [10, 10, 10, 10]),
}
PLANNED = (50, 100)
RANDOM_DRAWS = 1000
#: random sampling of these sizes (the adaptive and B arms' own sizes 50 and 100)
RANDOM_SIZES = (50, 100)


def study(dataset: str, seeds: int, max_models: int | None = None, families: list[str] | None = None) -> list[dict]:
    _, enc, meta, complete = load(dataset)
    rows: list[dict] = []
    for family, members in FAMILIES[dataset].items():
        if families and family not in families:
            continue
        jobs = at_most(family_jobs(meta, members, complete), max_models)
        # each left-out member has a pool of its own; the other families share the family's
        cells = [(setting, pool_rows, [model]) for model, setting, pool_rows in jobs if setting == "leave-one-out"]
        cells.append(("other families", jobs[-1][2], [m for m, setting, _ in jobs if setting == "other families"]))
        for setting, pool_rows, located in cells:
            started = time.perf_counter()
            shared = build_pool(enc, pool_rows, PoolOptions(min_models=2))  # the calibration's panel: every other model
            attach_panel(
                shared,
                enc,
                sorted(complete - set(shared.members["model"]) - set(located if setting == "leave-one-out" else [])),
            )
            runs = {}
            for seed in range(seeds):
                for arm, (first, later) in ADAPTIVE.items():
                    stage1 = plan_rows(
                        shared, make_plan(shared, PlanOptions(items=first, seed=seed, method="adaptive"))
                    )
                    runs[seed, arm] = (stage1, panel_runs(shared, stage1, later, seed))
            for model in located:
                rows += locate_one(enc, meta, complete, dataset, family, setting, pool_rows, model, runs, seeds)
            print(
                f"{dataset} {family} {setting}: {len(located)} models, {time.perf_counter() - started:.0f} s",
                flush=True,
            )
    return rows


def locate_one(enc, meta, complete, dataset, family, setting, pool_rows, model, runs, seeds) -> list[dict]:
    pool = build_pool(enc, pool_rows, PoolOptions(min_models=2))
    copies = copies_of(meta, model)
    attach_panel(pool, enc, sorted(complete - set(pool.members["model"]) - copies))
    target = target_of(pool, enc, model)
    fit = pool.irt_fit(exclude=model)
    weights = ScoreWeights.of(pool)
    mu = pool.members["reference_score"].to_numpy(dtype=float)
    y = (target.outcome == 1).astype(float)
    truth = target.reference_score
    base = {
        "dataset": dataset,
        "family": family,
        "setting": setting,
        "model": model,
        "reference_score": truth,
        "true_position": target.truth,
    }
    out = []
    rng = np.random.default_rng(12345)
    order = pool.item_order
    for size in RANDOM_SIZES:
        draws = np.stack([rng.choice(len(order), size, replace=False) for _ in range(RANDOM_DRAWS)])
        for r, score in enumerate(100 * random_scores(pool.bench_code[order], y[order] > 0, draws, pool.weights)):
            out.append(
                {
                    **base,
                    "arm": f"random {size}",
                    "seed": r,
                    "estimate": score,
                    "se": np.nan,
                    "position": int(positions_of(np.array(score), mu)),
                }
            )
    names = pool.members["model"].tolist()
    for seed in range(seeds):
        for arm, (_, later) in ADAPTIVE.items():
            stage1, panel = runs[seed, arm]
            keep = [i for i, name in enumerate(panel.names) if name not in copies]
            cal = panel.calibration(keep)
            try:
                planned = run_plan(fit, y, stage1, later, seed)
                if (target.outcome[planned] == NO_ROW).any():  # what `stem locate --plan` refuses
                    raise EvalprismError(
                        f"model '{model}' has no answer row on {int((target.outcome[planned] == NO_ROW).sum())} planned items"
                    )
                mean, var = score_posterior(
                    fit, weights, planned, y[planned], ability_posterior(fit, planned, y[planned])
                )
                est, se, error = 100 * cal.corrected(mean), 100 * cal.standard_error(var), ""
            except Exception as exc:
                est, se, error = np.nan, np.nan, _failure(exc)
            out.append(
                {
                    **base,
                    "arm": arm,
                    "seed": seed,
                    "estimate": est,
                    "se": se,
                    **(stated_adaptive(est, se, names, mu) if not error else {}),
                    "posterior_se": 100 * np.sqrt(var) if not error else np.nan,
                    "position": int(positions_of(np.array(est), mu)) if not error else -1,
                    "error": error,
                }
            )
        for k in PLANNED:
            plan = make_plan(pool, PlanOptions(items=k, seed=seed, method="irt"))
            idx = plan_rows(pool, plan)
            answered = replace(
                target, outcome=np.where(np.isin(np.arange(len(y)), idx), target.outcome, NO_ROW).astype(np.int8)
            )
            said: dict = {}
            try:
                loc = locate_subset(pool, answered, plan=plan, method="irt")
                est, se, error = loc.estimate, loc.standard_error, ""
                said = stated(loc)
            except Exception as exc:
                est, se, error = np.nan, np.nan, _failure(exc)
            out.append(
                {
                    **base,
                    "arm": f"B plan {k}",
                    "seed": seed,
                    "estimate": est,
                    "se": se,
                    **said,
                    "position": int(positions_of(np.array(est), mu)) if not error else -1,
                    "error": error,
                }
            )
    return out


def stated_adaptive(est: float, se: float, names: list[str], mu: np.ndarray) -> dict:
    """What `stem locate` states for an adaptive estimate (:func:`stem_plan_study.stated`'s columns): the
    point placement's normal confidence and the abstention when the 95% interval holds a member."""
    a = abstention(est, se, names, mu)
    return {
        "method": "adaptive",
        "confidence": float(score_confidence(np.array([est]), np.array([se]), mu)[0]),
        "abstained": a is not None,
        "abstention_from": np.nan if a is None else a.positions[0],
        "abstention_to": np.nan if a is None else a.positions[1],
        "ceiling_bound": np.nan,
    }


def _failure(exc: Exception) -> str:
    """A refusal (one clear message: e.g. the data lack a row for a planned item) or a traceback."""
    kind = "refused" if isinstance(exc, EvalprismError) else "traceback"
    return f"{kind}: {type(exc).__name__}: {exc}"


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    failed = runs["error"].fillna("")
    refused_models = set(runs.loc[failed.str.startswith("refused"), "model"])
    runs = runs.assign(refused=failed.str.startswith("refused"), traceback=failed.str.startswith("traceback"))
    runs = runs.assign(
        right=runs["position"] == runs["true_position"],
        covered=np.where(
            runs["ceiling_bound"].notna(),
            runs["reference_score"] >= runs["ceiling_bound"],
            (runs["estimate"] - runs["reference_score"]).abs() <= Z95 * runs["se"],
        ),
        err=runs["estimate"] - runs["reference_score"],
    )
    cells = []
    keys = [("dataset", "family", "setting")]
    groups = (
        list(runs.groupby(["dataset", "family", "setting"], sort=False))
        + [(("all", "all", s), g) for s, g in runs.groupby("setting", sort=False)]
        + [(("all", "all", "all"), runs)]
    )
    del keys
    for (dataset, family, setting), g in groups:
        g0 = g
        refused = int(g["refused"].sum())
        # a model with a refused run (its data lack rows for planned items) is left out of every arm, so the
        # arms compare the same models
        g = g[~g["model"].isin(refused_models)]
        # a model located on three families' pools counts three times (one per cell), as in stem_real_data.py
        per_model = g.groupby(["dataset", "family", "setting", "model", "arm"])["right"].mean().unstack()
        row = {
            "dataset": dataset,
            "family": family,
            "setting": setting,
            "models": len(per_model),
            "refused runs": refused,
            "models left out": ", ".join(sorted(set(refused_models) & set(g0["model"]))),
        }
        for arm in per_model.columns:
            row[f"{arm} accuracy"] = float(per_model[arm].mean())
            sub = g[g["arm"] == arm]
            row[f"{arm} rmse"] = float(np.sqrt(np.mean(sub["err"] ** 2)))
            if not arm.startswith("random"):
                row[f"{arm} coverage"] = float(sub["covered"].mean())
                row[f"{arm} bias"] = float(sub["err"].mean())
                row[f"{arm} mean se"] = float(sub["se"].mean())
                row[f"{arm} tracebacks"] = int(sub["traceback"].sum())
        cells.append(row)
    return pd.DataFrame(cells)


#: each arm against random sampling of the same size
VERSUS = {
    "adaptive 50": "random 50",
    "adaptive 50, 5 stages": "random 50",
    "B plan 50": "random 50",
    "B plan 100": "random 100",
}


def as_plan_study(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs in stem_plan_study's columns (its calibration, abstention and paired-difference summaries):
    ``error_type`` for a failed run, ``hit``, ``items`` (the arm's size), the abstention's hold on the truth;
    a model with a refused run is left out of every arm, as in :func:`summarise`."""
    failed = runs["error"].fillna("")
    refused = set(runs.loc[failed.str.startswith("refused"), "model"])
    runs = runs[~runs["model"].isin(refused)]
    failed = runs["error"].fillna("")
    gone = runs["abstained"].astype("boolean").fillna(False).astype(bool) if "abstained" in runs else False
    held = (runs["abstention_from"] <= runs["true_position"]) & (runs["true_position"] <= runs["abstention_to"])
    return runs.assign(
        error_type=np.where(failed == "", None, failed.str.split(":").str[1]),
        hit=(runs["position"] == runs["true_position"]).astype(float),
        items=runs["arm"].str.extract(r"(\d+)")[0].astype(int),
        abstained=gone,
        abstention_holds_truth=np.where(gone, held.astype(float), np.nan),
        covered=np.where(
            runs["ceiling_bound"].notna(),
            runs["reference_score"] >= runs["ceiling_bound"],
            (runs["estimate"] - runs["reference_score"]).abs() <= Z95 * runs["se"],
        ).astype(float),
    )


def versus_random(runs: pd.DataFrame) -> str:
    """Each arm of :data:`VERSUS` minus random sampling of the same size, per setting and overall, with the
    paired 95% interval of stem_plan_study (seeds as the random unit: a cell's models share each plan)."""
    runs = as_plan_study(runs)
    lines = [
        "Placement accuracy against random sampling of the same size (1,000 draws per model), the difference with "
        "its 95% interval (stem_plan_study's, seeds as the random unit):",
        "",
        "| dataset | family | setting | arm | models | accuracy | random | difference [95%] |",
        "|---|---|---|---|---|---|---|---|",
    ]
    groups = (
        list(runs.groupby(["dataset", "family", "setting"], sort=False))
        + [(("all", "all", s), g) for s, g in runs.groupby("setting", sort=False)]
        + [(("all", "all", "all"), runs)]
    )
    for key, g in groups:
        for arm, base in VERSUS.items():
            a, b = g[g["arm"] == arm], g[g["arm"] == base]
            d = difference(a, b)
            acc = a.groupby(UNIT)["hit"].mean().mean()
            lines.append(
                f"| {' | '.join(key)} | {arm} | {d['compared']} | {acc:.3f} | {d['random_on_compared']:.3f} | "
                f"{d['vs_random']:+.3f} [{d['vs_random_low']:+.3f}, {d['vs_random_high']:+.3f}] |"
            )
    return "\n".join(lines)


def tables(cells: pd.DataFrame, seeds: int) -> str:
    arms = list(ADAPTIVE) + [f"B plan {k}" for k in PLANNED] + [f"random {k}" for k in RANDOM_SIZES]
    lines = [
        (
            f"Placement accuracy (share of (model, seed) runs placing the model at its true position; random 50 and 100: "
            f"{RANDOM_DRAWS} draws per model), {seeds} plan seeds:"
        ),
        "",
        "| dataset | family | setting | models | " + " | ".join(arms) + " | smallest adaptive >= random 100 |",
        "|---|---|---|---|" + "---|" * (len(arms) + 1),
    ]
    for r in cells.to_dict("records"):
        smallest = next(
            (arm.removeprefix("adaptive ") for arm in ADAPTIVE if r[f"{arm} accuracy"] >= r["random 100 accuracy"]),
            "none (missed)",
        )
        lines.append(
            f"| {r['dataset']} | {r['family']} | {r['setting']} | {r['models']} | "
            + " | ".join(f"{r[f'{a} accuracy']:.3f}" for a in arms)
            + f" | {smallest} |"
        )
    lines += [
        "",
        "95% coverage of the full-pool score, bias and RMSE (points), mean reported se:",
        "",
        "| dataset | family | setting | "
        + " | ".join(f"{a} coverage" for a in arms[:-2])
        + " | adaptive 50 bias | adaptive 50 RMSE | B plan 50 RMSE | B plan 100 RMSE | random 100 RMSE | "
        "adaptive 50 mean se | tracebacks |",
        "|---|---|---|" + "---|" * (len(arms) - 2 + 7),
    ]
    for r in cells.to_dict("records"):
        trace = sum(r.get(f"{a} tracebacks", 0) for a in arms[:-2])
        refused = r["refused runs"]
        lines.append(
            f"| {r['dataset']} | {r['family']} | {r['setting']} | "
            + " | ".join(f"{r[f'{a} coverage']:.3f}" for a in arms[:-2])
            + f" | {r['adaptive 50 bias']:+.2f} | {r['adaptive 50 rmse']:.2f} | {r['B plan 50 rmse']:.2f} | "
            f"{r['B plan 100 rmse']:.2f} | {r['random 100 rmse']:.2f} | {r['adaptive 50 mean se']:.2f} | "
            f"{trace} ({refused} refused{': ' + r['models left out'] + ' left out' if r['models left out'] else ''}) |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("out/stem-adaptive"))
    parser.add_argument("--datasets", nargs="*", default=DEFAULT_DATASETS, choices=list(FAMILIES))
    parser.add_argument("--runs", nargs="*", type=Path, help="summarise these runs.csv files instead of running")
    parser.add_argument("--max-models", type=int, default=None, help="at most this many models per cell (smoke runs)")
    parser.add_argument(
        "--families", nargs="*", choices=[f for fams in FAMILIES.values() for f in fams], help="only these families"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.runs:
        runs = pd.concat([pd.read_csv(path) for path in args.runs], ignore_index=True)
    else:
        runs = pd.DataFrame(
            [row for dataset in args.datasets for row in study(dataset, args.seeds, args.max_models, args.families)]
        )
    cells = summarise(runs)
    args.out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(args.out / "runs.csv", index=False)
    cells.to_csv(args.out / "cells.csv", index=False)
    text = tables(cells, args.seeds) + "\n" + versus_random(runs) + "\n\n"
    scored = as_plan_study(runs[~runs["arm"].str.startswith("random")])
    text += calibration_tables(calibration(scored), abstentions(scored)) + "\n"
    (args.out / "tables.md").write_text(text, encoding="utf-8")
    print(text)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
