"""Is B better than A? Paired, clustered, corrected comparisons of runs on the items both answered.

For every pair of runs (all pairs in input order, or each run against ``baseline``), per benchmark
and over all benchmarks (the ``all`` rows), over the items both runs answered:

- ``difference`` = mean over items of (score under B - score under A); with several samples of an
  item (rows repeating a model, benchmark and item) the item's score is its mean over samples, and
  the variance of the item differences is split into its within-item part (sampling noise) and its
  between-item part;
- ``se`` the paired standard error: naive (items independent) or, with ``cluster``, cluster-robust
  (CR1; clusters are (benchmark, cluster value)), and the 95% t interval;
- the test: exact McNemar when every score is 0/1 with one sample per item and no clusters; else the
  paired sign-flip permutation test (whole clusters flipped together with ``cluster``);
- ``p_adj``: Benjamini-Hochberg (``adjust="bh"``) or Holm across the pairs compared on the same
  benchmark (one family per benchmark row, and one for the ``all`` rows);
- ``mde``: the minimum detectable effect at 80% power (two-sided 5%) for that SE, and
  ``items_needed`` to detect ``effect`` with that pair's per-item variance (and cluster design effect);
- items present in one run only: counted per row (``only_a``, ``only_b``) and listed in items.csv.

The verdict sentence says what the test can tell: a difference with its interval and adjusted p,
or "no difference detectable: the MDE is X points" (never "not significantly different").
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

import numpy as np
import pandas as pd

from evalprism.compare.read import Run, read_runs
from evalprism.compare.result import CompareResult
from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions, ReadChoices
from evalprism.stats.compare_tests import (
    adjust_pvalues,
    items_needed,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_difference,
    sign_flip_tests,
    variance_components,
)

ADJUST = ("bh", "holm")
ALL = "all"
ALPHA = 0.05
_KEY = ["benchmark", "item_id"]


def _per_item(table: pd.DataFrame, cluster: str | None) -> pd.DataFrame:
    """One row per (run, benchmark, item): mean score, samples, sample variance, cluster."""
    grouped = table.groupby(["run", *_KEY], sort=False, observed=True)["score"]
    out = grouped.agg(score="mean", samples="size", var="var").reset_index()
    if cluster is not None:
        first = table.drop_duplicates(["run", *_KEY])[["run", *_KEY, "cluster"]]
        out = out.merge(first, on=["run", *_KEY], how="left")
    return out


def _pairs(names: list[str], baseline: str | None) -> list[tuple[str, str]]:
    if baseline is not None:
        return [(baseline, n) for n in names if n != baseline]
    return list(combinations(names, 2))


def _points(x: float) -> str:
    return f"{100 * x:.1f}"


def _p(p: float) -> str:
    return f"{p:.2g}" if p >= 0.001 else f"{p:.1e}"


def _verdict(row: dict) -> str:
    a, b, n = row["run_a"], row["run_b"], row["items"]
    if n == 0:
        return f"no item both {a} and {b} answered on this benchmark"
    if n < 2 or not np.isfinite(row["se"]):
        return f"too few items in common to tell (n = {n})"
    if row["difference"] == 0 and row["se"] == 0:
        return f"{b} and {a} score the same on every one of the {n:,} items"
    if row["p_adj"] < ALPHA:
        side = "better" if row["difference"] > 0 else "worse"
        return (f"{b} is {_points(abs(row['difference']))} points {side} than {a} "
                f"[{_points(row['ci_low'])}, {_points(row['ci_high'])}], p_adj = {_p(row['p_adj'])}")
    if row["p"] < ALPHA:  # the test alone would tell, the correction for several pairs does not
        return (f"no difference detectable after correcting for several pairs: the MDE is {_points(row['mde'])} "
                f"points ({b} - {a} = {float(_points(row['difference'])):+.1f} [{_points(row['ci_low'])}, "
                f"{_points(row['ci_high'])}], p = {_p(row['p'])} but p_adj = {_p(row['p_adj'])})")
    return (f"no difference detectable: the MDE is {_points(row['mde'])} points "
            f"({b} - {a} = {float(_points(row['difference'])):+.1f} [{_points(row['ci_low'])}, {_points(row['ci_high'])}], "
            f"p_adj = {_p(row['p_adj'])})")


def _scope_row(a: str, b: str, bench: str, both: pd.DataFrame, only_a: int, only_b: int, *, cluster: str | None,
               binary: bool, effect: float) -> dict:
    """One comparison row; a sign-flip row carries its units in ``_units`` for the batched test."""
    n = len(both)
    row: dict = {"run_a": a, "run_b": b, "benchmark": bench, "items": n, "only_a": only_a, "only_b": only_b}
    nan = float("nan")
    if n == 0:
        row.update(mean_a=nan, mean_b=nan, difference=nan, se=nan, ci_low=nan, ci_high=nan, se_naive=nan,
                   clusters=0, test="", p=nan, mde=nan, items_needed=np.nan, var_total=nan, var_within=nan,
                   var_between=nan)
        return row
    d = (both["score_b"] - both["score_a"]).to_numpy()
    groups = (both["benchmark"] + "\x1f" + both["cluster_a"]).to_numpy() if cluster is not None else None
    res = paired_difference(d, groups)
    naive = paired_difference(d)
    several = bool((both["samples_a"] > 1).any() or (both["samples_b"] > 1).any())
    if n < 2:
        test, p = "", nan
    elif cluster is not None:  # whole clusters flip: the units are the cluster sums (p filled in by the batch)
        test, p = "sign-flip (clusters)", nan
        row["_units"] = np.bincount(np.unique(groups, return_inverse=True)[1].ravel(), weights=d)
    elif binary and not several:
        test, p = "McNemar exact", mcnemar_exact(both["score_a"].to_numpy() == 1, both["score_b"].to_numpy() == 1)[2]
    else:
        test, p = "sign-flip", nan
        row["_units"] = d
    # every item the same difference: no variance to size an effect against, so no MDE (not 0)
    mde = float(minimum_detectable_effect(res.se)) if np.isfinite(res.se) and res.se > 0 else nan
    deff = (res.se / naive.se) ** 2 if np.isfinite(naive.se) and naive.se > 0 and np.isfinite(res.se) else 1.0
    needed = items_needed(effect, naive.sd, design_effect=deff) if np.isfinite(naive.sd) and naive.sd > 0 else np.nan
    if several and n > 1:
        total, within, between = variance_components(d, both["var_a"].to_numpy(), both["samples_a"].to_numpy(),
                                                     both["var_b"].to_numpy(), both["samples_b"].to_numpy())
    else:
        total, within, between = (float(np.var(d, ddof=1)) if n > 1 else nan), nan, nan
    row.update(mean_a=float(both["score_a"].mean()), mean_b=float(both["score_b"].mean()), difference=res.mean,
               se=res.se, ci_low=res.low, ci_high=res.high, se_naive=naive.se, clusters=res.clusters, test=test,
               p=p, mde=mde, items_needed=needed, var_total=total, var_within=within, var_between=between)
    return row


def compare_runs(runs: Sequence[Run], baseline: str | None = None, cluster: str | None = None, *,
                 harness: HarnessOptions | None = None, adjust: str = "bh", permutations: int = 9999,
                 seed: int = 0, effect: float = 0.02) -> CompareResult:
    """Compare runs pairwise (see the module docstring). ``runs``: paths (lm-eval directories, inspect
    logs, score tables) or score DataFrames; ``effect``: the difference (0..1 scale) whose
    ``items_needed`` is reported."""
    if adjust not in ADJUST:
        raise EvalprismError(f"--adjust {adjust}: expected one of {', '.join(ADJUST)}", parameter="adjust")
    if permutations < 1:
        raise EvalprismError(f"--permutations {permutations}: expected a positive number", parameter="permutations")
    if not 0 < effect < 1:
        raise EvalprismError(f"--effect {effect}: expected a difference between 0 and 1 (0.02 = 2 points)",
                             parameter="effect")
    choices = ReadChoices()
    table, notes = read_runs(runs, cluster=cluster, harness=harness, choices=choices)
    names = [str(n) for n in pd.unique(table["run"])]  # input order
    first = table.drop_duplicates("run")
    sources = dict(zip(first["run"], first["source"], strict=True))
    if len(names) < 2:
        raise EvalprismError(f"{', '.join(pd.unique(table['source']))}: only one run ('{names[0]}'): compare needs "
                             "at least two (several RUN arguments, or a table with several models)")
    if baseline is not None and baseline not in names:
        raise EvalprismError(f"--baseline '{baseline}': no such run (runs: {', '.join(names)})", parameter="baseline")
    binary = bool(np.isin(table["score"].to_numpy(), (0.0, 1.0)).all())
    items = _per_item(table, cluster)
    rows, item_rows = [], []
    bench_order = [str(b) for b in pd.unique(items["benchmark"])]
    for a, b in _pairs(names, baseline):
        left = items[items["run"] == a].drop(columns="run")
        right = items[items["run"] == b].drop(columns="run")
        merged = left.merge(right, on=_KEY, how="outer", suffixes=("_a", "_b"), indicator=True)
        both = merged[merged["_merge"] == "both"]
        if both.empty:
            raise EvalprismError(f"runs '{a}' ({sources[a]}) and '{b}' ({sources[b]}) have no item in common "
                                 f"({len(left):,} and {len(right):,} items; items match on benchmark and item_id)")
        labels = {"both": "both", "left_only": f"only {a}", "right_only": f"only {b}"}
        merge = merged["_merge"].cat
        status = pd.Series(np.array([labels[c] for c in merge.categories], dtype=object)[merge.codes.to_numpy()],
                           index=merged.index)
        cols = ["benchmark", "item_id", "score_a", "score_b", "samples_a", "samples_b"]
        pair_items = merged[cols].assign(run_a=a, run_b=b, difference=merged["score_b"] - merged["score_a"],
                                         status=status)
        if cluster is not None:
            pair_items.insert(2, "cluster", merged["cluster_a"].fillna(merged["cluster_b"]))
        item_rows.append(pair_items)
        present = set(merged["benchmark"])
        benches = [bx for bx in bench_order if bx in present]  # input order
        scopes = [(bx, merged["benchmark"] == bx) for bx in benches] if len(benches) > 1 else []
        scopes.append((ALL, pd.Series(True, index=merged.index)))
        for bench, sel in scopes:
            part = merged[sel]
            rows.append(_scope_row(a, b, bench, part[part["_merge"] == "both"], int((part["_merge"] == "left_only").sum()),
                                   int((part["_merge"] == "right_only").sum()), cluster=cluster, binary=binary,
                                   effect=effect))
    flips = [k for k, r in enumerate(rows) if "_units" in r]
    if flips:  # every sign-flip test at once, sharing the random signs (see sign_flip_tests)
        for k, p in zip(flips, sign_flip_tests([rows[k].pop("_units") for k in flips], permutations, seed), strict=True):
            rows[k]["p"] = float(p)
    comparisons = pd.DataFrame(rows)
    comparisons["p_adj"] = np.nan
    for idx in comparisons.groupby("benchmark", sort=False).groups.values():
        comparisons.loc[idx, "p_adj"] = adjust_pvalues(comparisons.loc[idx, "p"].to_numpy(dtype=float), adjust)
    comparisons["verdict"] = [_verdict(r) for r in comparisons.to_dict("records")]
    order = ["run_a", "run_b", "benchmark", "items", "only_a", "only_b", "mean_a", "mean_b", "difference", "se",
             "ci_low", "ci_high", "se_naive", "clusters", "test", "p", "p_adj", "mde", "items_needed", "var_total",
             "var_within", "var_between", "verdict"]
    item_table = pd.concat(item_rows, ignore_index=True)
    front = ["run_a", "run_b", "benchmark", "item_id", *(["cluster"] if cluster else []), "status"]
    item_table = item_table[front + [c for c in item_table.columns if c not in front]]
    options = {"runs": [str(r) if not isinstance(r, pd.DataFrame) else sources.get(str(r), "table") for r in runs],
               "run_names": names, "baseline": baseline, "cluster": cluster, "adjust": adjust,
               "permutations": permutations, "seed": seed, "effect": effect, "scores": "0/1" if binary else "0..1",
               "harness": (harness or HarnessOptions()).given()}
    return CompareResult(comparisons=comparisons[order], items=item_table, options=options, notes=notes,
                         read=list(choices.lines), sources=sources)
