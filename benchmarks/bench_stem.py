"""Benchmark STEM's pool construction and localization trials against a straightforward pandas version.

What is compared, and why:

* **Pool construction.** :func:`evalprism.stem.build_pool` from a long correctness DataFrame
  (validation, one factorize per key column, IRV matrix, kinds, TI, per-benchmark anomaly rates,
  difficulty shares, D and weights) against what a user would write with pandas: ``pivot`` to a
  wide items x models table, ``diff`` along the family for monotonicity, row sums for TI and a
  ``groupby`` per benchmark. Both must give the same anomaly rates and TI histogram.
* **Localization trials.** :func:`evalprism.stem.run_trials` (1,000 trials of 100 items: the paper's
  rule, estimator A and both baselines, the new model's alignment to the pool included) against a
  pandas loop that per trial draws the balanced subset with ``groupby("ti").sample``, scores it by
  ``groupby`` and applies the same boundary rule. The pandas loop is timed on a share of the trials
  and extrapolated; the paper-rule positions of those trials must be equally accurate.
* **Estimators A and B with a reference panel (issue 17).** 40 more models of the same world on the
  same items are attached as the pool's reference panel (built as an
  :class:`~evalprism.io.correctness.EncodedCorrectness` directly: a 40-million-row long DataFrame
  would only measure pandas), the 2PL MAP fit on the 50-model panel runs once (cached in the pool,
  timed on its own), then 1,000 trials of every method. The peer is random sampling in the same
  trials: accuracy and score RMSE of A and B against it.
* **The 2PL fit on 50 models x 100,000 items** (:func:`evalprism.stem.irt.fit_irt`, target <= 30 s)
  against girth's joint maximum likelihood 2PL (``girth.twopl_jml``, the maintained pure-Python IRT
  library; skipped when girth is not installed), which is timed on 5,000 items and extrapolated
  linearly per item. Quality: correlation of the fitted discriminations and intercepts with the
  planted ones (with 50 models the discrimination is information-limited: even a fit that knows the
  abilities reaches about 0.78).

Data: a planted 2PL family of 10 members (abilities evenly spaced, parameter counts doubling) and
one new model, on 1,000,000 items in two benchmarks (10 million correctness rows for the family).
Run ``python benchmarks/bench_stem.py`` (about 10 minutes, 8 of them the 2PL fit of the 50-model panel
on 1,000,000 items) or ``--quick`` (100,000 items; ``--skip-panel`` leaves out A/B and the fit). The
script prints one table and always exits 0; PASS/MISS refer to the targets below.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
from collections.abc import Sequence

import numpy as np
import pandas as pd
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

TARGET_POOL_S = 2.0  # 1,000,000 items x 10 models
TARGET_TRIALS_S = 1.0  # 1,000 localization trials
TARGET_FIT_S = 30.0  # 2PL MAP fit, 50 models x 100,000 items
FULL_ITEMS = 1_000_000
FIT_ITEMS = 100_000
PANEL_MODELS = 40


def item_parameters(n_items: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Planted 2PL items: discrimination a ~ lognormal(log 2, 0.3), difficulty b ~ N(0, 1.5)."""
    return rng.lognormal(np.log(2.0), 0.3, n_items), rng.normal(0.0, 1.5, n_items)


def responses(
    theta: np.ndarray, a: np.ndarray, b: np.ndarray, rng: np.random.Generator, missing: float = 0.0
) -> np.ndarray:
    """Models x items int8 correctness (1 / 0, ``-1`` on a ``missing`` share) of the 2PL world."""
    out = np.empty((len(theta), len(a)), dtype=np.int8)
    for j, t in enumerate(theta):  # one model at a time: 1M floats, not 50M
        out[j] = rng.random(len(a)) < 1.0 / (1.0 + np.exp(-a * (t - b)))
        if missing:
            out[j][rng.random(len(a)) < missing] = -1
    return out


def simulate(n_items: int, n_models: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Family correctness (long), the new model's correctness, and the family metadata (the panel
    of :func:`panel_of` is drawn from the same seed's items)."""
    rng = np.random.default_rng(seed)
    a, b = item_parameters(n_items, rng)
    members = np.linspace(-2.0, 2.0, n_models)
    theta = np.append(members, members[n_models // 2 : n_models // 2 + 2].mean())  # midway between two members
    names = [f"fam-{i}" for i in range(n_models)] + ["new"]
    score = responses(theta, a, b, rng, missing=0.01)
    bench, ids = item_keys(n_items)

    def long(rows: slice) -> pd.DataFrame:
        k = len(names[rows])
        return pd.DataFrame(
            {
                "model": pd.array(np.repeat(names[rows], n_items), dtype="str"),
                "benchmark": pd.array(np.tile(bench, k), dtype="str"),
                "item_id": pd.array(np.tile(ids, k), dtype="str"),
                "score": score[rows].ravel(),
            }
        )

    meta = pd.DataFrame({"model": names[:-1], "params": 2.0 ** np.arange(n_models), "family": "fam"})
    return long(slice(0, n_models)), long(slice(n_models, None)), meta


def item_keys(n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Benchmark and item id of each simulated item (two benchmarks, alternating)."""
    ids = np.char.add("q", np.arange(n_items).astype(str))
    return np.where(np.arange(n_items) % 2 == 0, "bench-a", "bench-b"), ids


def panel_of(n_items: int, n_panel: int, seed: int):
    """``n_panel`` other models of :func:`simulate`'s world (same items; abilities ~ N(0, 1.2)) as
    an EncodedCorrectness, built directly from the models x items matrix."""
    from evalprism.io.correctness import EncodedCorrectness

    a, b = item_parameters(n_items, np.random.default_rng(seed))
    rng = np.random.default_rng([seed, 1])
    score = responses(rng.normal(0.0, 1.2, n_panel), a, b, rng)
    bench, ids = item_keys(n_items)
    return EncodedCorrectness(
        model_names=np.array([f"panel-{j}" for j in range(n_panel)]),
        items=pd.DataFrame({"benchmark": bench, "item_id": ids}),
        model_code=np.repeat(np.arange(n_panel), n_items),
        item_code=np.tile(np.arange(n_items), n_panel),
        score=score.ravel(),
        source="simulated panel",
    )


def girth_fit(resp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """girth's joint maximum likelihood 2PL on a models x items 0/1 matrix: (a, c) per item with
    c = -a b (girth's parametrisation is a (theta - b))."""
    import girth

    out = girth.twopl_jml(resp.T.astype(int))
    a = np.asarray(out["Discrimination"], dtype=float)
    return a, -a * np.asarray(out["Difficulty"], dtype=float)


def pandas_pool(df: pd.DataFrame, meta: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """The straightforward pandas version: anomaly rate per benchmark and TI histogram."""
    order = meta.sort_values("params")["model"].tolist()
    wide = df.pivot(index=["benchmark", "item_id"], columns="model", values="score")[order].dropna()
    right = (wide == 1).astype(int)
    monotone = (right.diff(axis=1).iloc[:, 1:] >= 0).all(axis=1)
    ti = len(order) - right.sum(axis=1) + 1
    anomaly = (~monotone).groupby(level="benchmark").mean()
    return anomaly, ti[monotone].value_counts().sort_index()


def pandas_trials(
    pool_df: pd.DataFrame, new: pd.DataFrame, n_members: int, items: int, trials: int, seed: int
) -> np.ndarray:
    """Per trial: balanced subset by groupby-sample, per-level accuracy, the same boundary rule."""
    merged = pool_df[pool_df["ti"].notna()].merge(new[["benchmark", "item_id", "score"]], on=["benchmark", "item_id"])
    m = items // (n_members + 1)
    positions = []
    for t in range(trials):
        subset = merged.groupby("ti", group_keys=False).sample(n=m, random_state=seed + t)
        per = subset.assign(right=subset["score"] == 1).groupby("ti")["right"].agg(["sum", "count"])
        position = 0
        for j in range(1, n_members + 1):
            above = per.loc[per.index > j, "sum"].sum()
            wrong = (per.loc[per.index <= j, "count"] - per.loc[per.index <= j, "sum"]).sum()
            position += int(above > wrong)
        positions.append(position)
    return np.array(positions)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100,000 items instead of 1,000,000")
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--peer-trials", type=int, default=50, help="pandas trials actually run (extrapolated)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peer-fit-items", type=int, default=5000, help="items girth's fit actually runs on")
    parser.add_argument("--skip-panel", action="store_true", help="skip estimators A/B with a panel and the 2PL fit")
    args = parser.parse_args(argv)
    args.items = 100_000 if args.quick else FULL_ITEMS
    return args


def main(argv: Sequence[str] | None = None) -> int:
    from evalprism.stem import build_pool, run_trials

    args = parse_args(argv)
    print(
        f"python {platform.python_version()}, pandas {pd.__version__}, numpy {np.__version__}, "
        f"{os.cpu_count()} cores; {args.items:,} items x {args.models} models",
        flush=True,
    )
    load_before = os.getloadavg()
    report = Report()
    log(f"simulating {args.items:,} items x {args.models + 1} models")
    family, new, meta = simulate(args.items, args.models, args.seed)
    full = args.items == FULL_ITEMS

    report.section(f"pool construction ({len(family):,} correctness rows)")
    log("evalprism build_pool")
    pool, ours = timed(lambda: build_pool(family, meta))
    log("pandas pivot + diff + groupby")
    (anomaly, hist), peer = timed(lambda: pandas_pool(family, meta))
    same = (
        np.allclose(pool.benchmarks.set_index("benchmark")["anomaly_rate"].sort_index(), anomaly.sort_index())
        and (np.bincount(pool.ti[pool.ti > 0])[1:] == hist.to_numpy()).all()
    )
    report.add(
        Row(
            what="build_pool from a long DataFrame",
            n=f"{args.items:,} x {args.models}",
            ours=fmt_s(ours),
            peer=f"pandas {fmt_s(peer)}",
            ratio=fmt_x(peer / ours),
            quality="same anomaly rates and TI histogram" if same else "DIFFERENT",
            target=f"<= {TARGET_POOL_S:g} s at 1M items",
            status=status(ours <= TARGET_POOL_S if full else None),
        )
    )

    report.section(f"{args.trials:,} localization trials of 100 items")
    log("evalprism evaluate")
    result, ours_t = timed(lambda: run_trials(pool, new, items=100, trials=args.trials, seed=args.seed))
    pool_df = pool.pool_frame()
    peer_n = min(args.peer_trials, args.trials)
    log(f"pandas loop, {peer_n} trials")
    peer_pos, peer_t = timed(lambda: pandas_trials(pool_df, new, pool.n, 100, peer_n, args.seed))
    peer_total = peer_t * args.trials / peer_n
    report.add(
        Row(
            what="evaluate: paper rule + A + random + Bayesian, alignment included",
            n=f"{args.trials:,}",
            ours=fmt_s(ours_t),
            peer=f"pandas (STEM only) {fmt_s(peer_total)}" + ("" if peer_n == args.trials else f" (from {peer_n})"),
            ratio=fmt_x(peer_total / ours_t),
            quality=f"paper-rule accuracy {result.accuracy('paper'):.0%} vs pandas "
            f"{(peer_pos == result.truth).mean():.0%} (truth {result.truth})",
            target=f"<= {TARGET_TRIALS_S:g} s",
            status=status(ours_t <= TARGET_TRIALS_S),
        )
    )
    report.notes.append(
        f"baselines in the same trials: random sampling {result.accuracy('random'):.0%}, "
        f"Bayesian {result.accuracy('bayesian'):.0%} correct"
    )
    if not args.skip_panel:
        panel_section(report, pool, new, args)
        fit_section(report, args)
    report.notes.append(load_note(load_before))
    print_table(report, "STEM: pool construction and localization trials", quality="agreement")
    return 0


def panel_section(report: Report, pool, new: pd.DataFrame, args: argparse.Namespace) -> None:
    """Estimators A and B on 1,000 trials with a 40-model panel, against random sampling."""
    from evalprism.stem import run_trials
    from evalprism.stem.pool import attach_panel

    report.section(f"estimators A and B, {PANEL_MODELS}-model reference panel, {args.trials:,} trials of 100 items")
    log(f"simulating the {PANEL_MODELS}-model panel")
    attach_panel(pool, panel_of(args.items, PANEL_MODELS, args.seed))
    log(f"2PL MAP fit on {pool.panel_size()} models x {args.items:,} items")
    fit, fit_s = timed(lambda: pool.irt_fit())
    report.add(
        Row(
            what="2PL MAP fit of the panel (once, cached in the pool)",
            n=f"{pool.panel_size()} x {args.items:,}",
            ours=fmt_s(fit_s),
            quality=f"{fit.info.get('iterations', '?')} iterations",
        )
    )
    log("evalprism evaluate, method irt")
    result, trials_s = timed(lambda: run_trials(pool, new, items=100, trials=args.trials, seed=args.seed, method="irt"))
    summary = result.by_method().set_index("method")

    def versus(method: str) -> str:
        row = summary.loc[method]
        return (
            f"{row['accuracy']:.1%} right ({row['accuracy_vs_random']:+.3f} vs random, 95% "
            f"[{row['accuracy_vs_random_low']:+.3f}, {row['accuracy_vs_random_high']:+.3f}]); RMSE "
            f"{row['score_rmse']:.2f} vs {result.rmse('random'):.2f} pp; 95% coverage {row['coverage_95']:.1%}"
        )

    report.add(
        Row(
            what="evaluate: every method, B chosen (fit cached)",
            n=f"{args.trials:,}",
            ours=fmt_s(trials_s),
            peer=f"random sampling {result.accuracy('random'):.1%} right",
            quality="A: " + versus("stratified"),
            target="A and B above random",
            status=status(min(summary.loc[m, "accuracy_vs_random_low"] for m in ("stratified", "irt")) > 0),
        )
    )
    report.add(Row(what="", quality="B: " + versus("irt")))


def fit_section(report: Report, args: argparse.Namespace) -> None:
    """The 2PL MAP fit on 50 models x 100,000 items against girth's JML on a share of the items."""
    from evalprism.stem.irt import fit_irt

    n_items = min(FIT_ITEMS, args.items)
    report.section(f"2PL fit, 50 models x {n_items:,} items")
    rng = np.random.default_rng([args.seed, 2])
    a, b = item_parameters(n_items, rng)
    resp = responses(rng.normal(0.0, 1.0, 50), a, b, rng)
    c = -a * b
    log(f"evalprism fit_irt, 50 x {n_items:,}")
    fit, ours = timed(lambda: fit_irt(resp))
    quality = f"corr a {np.corrcoef(fit.a, a)[0, 1]:.2f}, c {np.corrcoef(fit.c, c)[0, 1]:.3f}"
    if importlib.util.find_spec("girth") is None:
        peer, ratio = "girth not installed (pip install girth)", ""
    else:
        k = min(args.peer_fit_items, n_items)
        log(f"girth twopl_jml, 50 x {k:,}")
        (ga, gc), peer_s = timed(lambda: girth_fit(resp[:, :k]))
        total = peer_s * n_items / k
        peer = (
            f"girth JML {fmt_s(total)}"
            + ("" if k == n_items else f" (from {k:,} items)")
            + f", corr a {np.corrcoef(ga, a[:k])[0, 1]:.2f}, c {np.corrcoef(gc, c[:k])[0, 1]:.3f}"
        )
        ratio = fmt_x(total / ours)
    full = n_items == FIT_ITEMS
    report.add(
        Row(
            what="fit_irt (MAP, preconditioned L-BFGS)",
            n=f"50 x {n_items:,}",
            ours=fmt_s(ours),
            peer=peer,
            ratio=ratio,
            quality=quality,
            target=f"<= {TARGET_FIT_S:g} s",
            status=status(ours <= TARGET_FIT_S if full else None),
        )
    )
    refit_row(report, resp, fit)


#: panel models left out one at a time in the leave-one-out comparison (a calibration leaves out each of ~40)
REFITS = 3


def refit_row(report: Report, resp: np.ndarray, fit) -> None:
    """A calibration's leave-one-out refits (the 2PL without one panel model, :meth:`Pool.irt_fit`), started
    from the full panel's fit as the pool does, against the same refits from the scores' logits: time, and
    how far the two optima are apart (the same MAP, to the stopping rule's tolerance)."""
    from evalprism.stem.irt import fit_irt

    names = [f"m{j}" for j in range(resp.shape[0])]
    warm_s = cold_s = 0.0
    gap = 0.0
    for j in range(REFITS):
        keep = [k for k in range(resp.shape[0]) if k != j]
        log(f"leave-one-out refit {j + 1}/{REFITS}: from the full fit, then from the logits")
        warm, seconds = timed(lambda: fit_irt(resp[keep], [names[k] for k in keep], start=fit))
        warm_s += seconds
        cold, seconds = timed(lambda: fit_irt(resp[keep], [names[k] for k in keep]))
        cold_s += seconds
        gap = max(gap, float(np.abs(warm.c - cold.c).max()), float(np.abs(warm.a - cold.a).max()))
    report.add(
        Row(
            what="leave-one-out refits, started from the full fit",
            n=f"{REFITS} x 49 x {resp.shape[1]:,}",
            ours=fmt_s(warm_s),
            peer=f"started from the logits {fmt_s(cold_s)}",
            ratio=fmt_x(cold_s / warm_s),
            quality=f"max |difference| of a and c {gap:.1e}",
            target="",
            status="",
        )
    )


if __name__ == "__main__":
    raise SystemExit(main())
