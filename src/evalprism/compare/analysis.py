"""Is B better than A? Paired, clustered, corrected comparisons of runs on the items both answered.

For every pair of runs (all pairs in input order, or each run against ``baseline``), per benchmark
and over all benchmarks (the ``all`` rows), over the items both runs answered:

- ``difference`` = mean over items of (score under B - score under A); with several samples of an
  item (rows repeating a model, benchmark and item) the item's score is its mean over samples, and
  the variance of the item differences is split into its within-item part (sampling noise) and its
  between-item part;
- ``se`` the paired standard error: naive (items independent) or, with ``cluster``, cluster-robust
  (CR1; clusters are (benchmark, cluster value)), and the 95% t interval, cut to the possible range
  [-1, 1] (a t interval on 6 items can reach past it);
- the test: exact McNemar when every score is 0/1 with one sample per item and no clusters; else the
  paired sign-flip permutation test (whole clusters flipped together with ``cluster``);
- ``p_adj``: Benjamini-Hochberg (``adjust="bh"``) or Holm across the pairs compared on the same
  benchmark (one family per benchmark row, and one for the ``all`` rows);
- ``mde``: the minimum detectable effect at 80% power (two-sided 5%) for that SE, and
  ``items_needed`` to detect ``effect`` with that pair's per-item variance (and cluster design effect);
- items present in one run only: counted per row (``only_a``, ``only_b``) and listed in items.csv.

- ``differing``: the items (clusters) whose difference is not zero, and ``p_floor`` the smallest p the
  test can reach on them (McNemar: ``2 * 0.5**k``; sign-flip: ``2 / 2**k``, and ``1/(1+B)``).

The verdict sentence says what the test can tell: a difference with its interval and adjusted p;
"the items cannot tell" when ``p_floor`` is at or above 0.05 (4 discordant items never give p < 0.05,
whatever they are); else "no difference detectable: the MDE is X points" (never "not significantly
different").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from evalprism.compare.read import Run, read_runs
from evalprism.compare.responses import ResponseOptions
from evalprism.compare.result import CompareResult
from evalprism.ecdf.responses import same_configuration
from evalprism.errors import EvalprismError
from evalprism.io.harness_options import HarnessOptions, ReadChoices
from evalprism.io.options import check_number
from evalprism.stats.compare_tests import (
    adjust_pvalues,
    items_needed,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_difference,
    sign_flip_floor,
    sign_flip_tests,
    sign_test_floor,
    variance_components,
)
from evalprism.vocabularies import Adjustment, choices

ADJUST = choices(Adjustment)
ALL = "all"
ALPHA = 0.05
_KEY = ["benchmark", "item_id"]


@dataclass
class _Items:
    """The per-item table in integer codes, factorised once: ``key`` numbers the (benchmark, item_id)
    pairs in lexicographic order (the order the items are listed in), each run's rows sorted by key.
    Joining two runs is then a merge of two sorted integer arrays, not of strings."""

    bench_names: np.ndarray  # benchmark of each key code (object array of str)
    item_names: np.ndarray  # item_id of each key code
    keys: list[np.ndarray]  # per run: its key codes, sorted
    score: list[np.ndarray]  # per run, aligned with keys: mean score over samples
    samples: list[np.ndarray]
    var: list[np.ndarray]  # sample variance over the item's samples (NaN with one)
    clusters: list[np.ndarray] | None  # per run: cluster code of the item's first row
    cluster_names: np.ndarray | None


def _sorted_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes numbering a text column's distinct values in lexicographic order (a categorical's
    own category order is its input order, so it is not used), and those values."""
    codes, uniques = pd.factorize(column)
    values = np.asarray(uniques, dtype=object)
    order = np.argsort(values, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank[codes], values[order]


def _per_item(table: pd.DataFrame, names: list[str], cluster: str | None) -> _Items:
    """One entry per (run, benchmark, item): mean score, samples, sample variance, cluster."""
    run = pd.Categorical(table["run"], categories=names).codes.astype(np.int64)
    bench_codes, benches = _sorted_codes(table["benchmark"])
    item_codes, item_ids = _sorted_codes(table["item_id"])
    key, pairs = pd.factorize(bench_codes.astype(np.int64) * len(item_ids) + item_codes, sort=True)
    nkeys = len(pairs)
    group = run * nkeys + key
    values = table["score"].to_numpy(dtype=np.float64)
    order = np.argsort(group, kind="stable")  # each group's rows in input order
    sorted_group = group[order]
    starts = np.flatnonzero(np.r_[True, sorted_group[1:] != sorted_group[:-1]])
    g = sorted_group[starts]
    samples = np.diff(np.r_[starts, len(group)])
    score = values[order[starts]]  # the mean of one sample is that sample
    var = np.full(len(g), np.nan)  # and its sample variance undefined
    several = samples > 1
    if several.any():  # pandas' own group mean and variance where there is something to average
        rows = np.repeat(several, samples)
        sub = pd.DataFrame({"g": sorted_group[rows], "score": values[order[rows]]}).groupby("g", sort=True)["score"]
        agg = sub.agg(score="mean", var="var")
        score[several], var[several] = agg["score"].to_numpy(), agg["var"].to_numpy()
    runs, keys = g // nkeys, g % nkeys
    bounds = np.searchsorted(runs, np.arange(len(names) + 1))
    split = [slice(bounds[i], bounds[i + 1]) for i in range(len(names))]
    clusters = cluster_names = None
    if cluster is not None:
        codes, cluster_names = pd.factorize(table["cluster"])
        clusters = [codes[order[starts]][s] for s in split]  # the item's first row
        cluster_names = np.asarray(cluster_names, dtype=object)
    return _Items(
        bench_names=np.asarray(benches, dtype=object)[pairs // len(item_ids)],
        item_names=np.asarray(item_ids, dtype=object)[pairs % len(item_ids)],
        keys=[keys[s] for s in split],
        score=[score[s] for s in split],
        samples=[samples[s] for s in split],
        var=[var[s] for s in split],
        clusters=clusters,
        cluster_names=cluster_names,
    )


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
    if row["p_floor"] >= ALPHA:  # no outcome of these items could reach the level: the test cannot tell
        unit = "clusters" if row["test"].endswith("(clusters)") else "items"
        k = row["differing"]
        only = f"only {k:,}" if k else "none"
        caveat = ""
        if row["ci_low"] > 0 or row["ci_high"] < 0:  # a t interval on so few items is a large-sample approximation
            caveat = f"; the t interval leaves out 0, but {n:,} items are too few for it: the test decides"
        return (
            f"the items cannot tell: {only} of the {row['clusters'] if unit == 'clusters' else n:,} {unit} "
            f"{'differs' if k == 1 else 'differ'} between {a} and {b}, too few for the test to reach "
            f"p < {ALPHA} (its smallest possible p is {_p(row['p_floor'])}; {b} - {a} = "
            f"{float(_points(row['difference'])):+.1f} [{_points(row['ci_low'])}, {_points(row['ci_high'])}]"
            f"{caveat})"
        )
    if row["p_adj"] < ALPHA:
        side = "better" if row["difference"] > 0 else "worse"
        return (
            f"{b} is {_points(abs(row['difference']))} points {side} than {a} "
            f"[{_points(row['ci_low'])}, {_points(row['ci_high'])}], p_adj = {_p(row['p_adj'])}"
        )
    if row["p"] < ALPHA:  # the test alone would tell, the correction for several pairs does not
        return (
            f"no difference detectable after correcting for several pairs: the MDE is {_points(row['mde'])} "
            f"points ({b} - {a} = {float(_points(row['difference'])):+.1f} [{_points(row['ci_low'])}, "
            f"{_points(row['ci_high'])}], p = {_p(row['p'])} but p_adj = {_p(row['p_adj'])})"
        )
    return (
        f"no difference detectable: the MDE is {_points(row['mde'])} points "
        f"({b} - {a} = {float(_points(row['difference'])):+.1f} [{_points(row['ci_low'])}, {_points(row['ci_high'])}], "
        f"p_adj = {_p(row['p_adj'])})"
    )


def _scope_row(
    a: str,
    b: str,
    bench: str,
    both: dict[str, np.ndarray],
    only_a: int,
    only_b: int,
    *,
    cluster: str | None,
    binary: bool,
    effect: float,
    permutations: int,
) -> dict:
    """One comparison row from the items both runs answered (``both``: aligned arrays ``score_a``,
    ``score_b``, ``samples_*``, ``var_*``, and ``groups``, the clusters as ``benchmark\x1fcluster`` text
    or None); a sign-flip row carries its units in ``_units`` for the batched test."""
    n = len(both["score_a"])
    row: dict = {"run_a": a, "run_b": b, "benchmark": bench, "items": n, "only_a": only_a, "only_b": only_b}
    nan = float("nan")
    if n == 0:
        row.update(
            mean_a=nan,
            mean_b=nan,
            difference=nan,
            se=nan,
            ci_low=nan,
            ci_high=nan,
            se_naive=nan,
            clusters=0,
            test="",
            p=nan,
            differing=0,
            p_floor=nan,
            mde=nan,
            items_needed=np.nan,
            var_total=nan,
            var_within=nan,
            var_between=nan,
        )
        return row
    d = both["score_b"] - both["score_a"]
    groups = both["groups"]
    res = paired_difference(d, groups)
    naive = paired_difference(d)
    several = bool((both["samples_a"] > 1).any() or (both["samples_b"] > 1).any())
    if n < 2:
        test, p, differing, floor = "", nan, int(np.count_nonzero(d)), nan
    elif cluster is not None:  # whole clusters flip: the units are the cluster sums (p filled in by the batch)
        test, p = "sign-flip (clusters)", nan
        row["_units"] = np.bincount(np.unique(groups, return_inverse=True)[1].ravel(), weights=d)
        differing = int(np.count_nonzero(row["_units"]))
        floor = sign_flip_floor(differing, permutations)
    elif binary and not several:
        only_a, only_b, p = mcnemar_exact(both["score_a"] == 1, both["score_b"] == 1)
        test, differing = "McNemar exact", only_a + only_b
        floor = sign_test_floor(differing)
    else:
        test, p = "sign-flip", nan
        row["_units"] = d
        differing = int(np.count_nonzero(d))
        floor = sign_flip_floor(differing, permutations)
    # every item the same difference: no variance to size an effect against, so no MDE (not 0)
    mde = float(minimum_detectable_effect(res.se)) if np.isfinite(res.se) and res.se > 0 else nan
    deff = (res.se / naive.se) ** 2 if np.isfinite(naive.se) and naive.se > 0 and np.isfinite(res.se) else 1.0
    needed = items_needed(effect, naive.sd, design_effect=deff) if np.isfinite(naive.sd) and naive.sd > 0 else np.nan
    if several and n > 1:
        total, within, between = variance_components(
            d, both["var_a"], both["samples_a"], both["var_b"], both["samples_b"]
        )
    else:
        total, within, between = (float(np.var(d, ddof=1)) if n > 1 else nan), nan, nan
    row.update(
        mean_a=float(pd.Series(both["score_a"]).mean()),
        mean_b=float(pd.Series(both["score_b"]).mean()),
        difference=res.mean,
        se=res.se,
        ci_low=max(res.low, -1.0),
        ci_high=min(res.high, 1.0),
        se_naive=naive.se,
        clusters=res.clusters,
        test=test,
        p=p,
        differing=differing,
        p_floor=floor,
        mde=mde,
        items_needed=needed,
        var_total=total,
        var_within=within,
        var_between=between,
    )
    return row


def _join(items: _Items, ia: int, ib: int) -> dict[str, np.ndarray]:
    """The outer join of runs ``ia`` and ``ib`` on their sorted key codes: the union of their items in
    key order, ``in_a``/``in_b`` masks, both sides' scores, samples, variances (NaN where absent) and
    the item's cluster code (A's, else B's)."""
    ka, kb = items.keys[ia], items.keys[ib]
    key = ka if np.array_equal(ka, kb) else np.union1d(ka, kb)  # runs of one item set: no set union
    out: dict[str, np.ndarray] = {"key": key}
    pos = {}
    for side, k in (("a", ka), ("b", kb)):
        at = np.minimum(np.searchsorted(k, key), len(k) - 1)
        pos[side] = at
        out[f"in_{side}"] = k[at] == key
    for side, i in (("a", ia), ("b", ib)):
        at, there = pos[side], out[f"in_{side}"]
        out[f"score_{side}"] = np.where(there, items.score[i][at], np.nan)
        out[f"samples_{side}"] = np.where(there, items.samples[i][at], np.nan)
        out[f"var_{side}"] = np.where(there, items.var[i][at], np.nan)
    if items.clusters is not None:
        out["cluster"] = np.where(out["in_a"], items.clusters[ia][pos["a"]], items.clusters[ib][pos["b"]])
    return out


def _both(items: _Items, part: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays :func:`_scope_row` reads, on the rows of ``part`` selected by ``mask``."""
    both: dict[str, Any] = {
        c: part[c][mask] for c in ("score_a", "score_b", "samples_a", "samples_b", "var_a", "var_b")
    }
    both["groups"] = None
    if items.clusters is not None:
        assert items.cluster_names is not None  # set together with clusters
        both["groups"] = items.bench_names[part["key"][mask]] + "\x1f" + items.cluster_names[part["cluster"][mask]]
    return both


def _item_table(
    items: _Items,
    parts: list[dict[str, np.ndarray]],
    names: list[str],
    pairs: list[tuple[str, str]],
    cluster: str | None,
) -> pd.DataFrame:
    """items.csv: one row per (pair, item of either run), built column by column from the joins' code
    arrays (text only through categoricals, which write as their values)."""
    col = {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}
    index = {n: i for i, n in enumerate(names)}
    pair = col["pair"]
    key = col["key"]
    status_names = ["both", *(f"only {n}" for n in names)]
    bench_cat, bench_code = np.unique(items.bench_names, return_inverse=True)
    item_cat, item_code = np.unique(items.item_names, return_inverse=True)
    out = {
        "run_a": pd.Categorical.from_codes(np.array([index[a] for a, _ in pairs])[pair], categories=names),
        "run_b": pd.Categorical.from_codes(np.array([index[b] for _, b in pairs])[pair], categories=names),
        "benchmark": pd.Categorical.from_codes(bench_code.ravel()[key], categories=bench_cat),
        "item_id": pd.Categorical.from_codes(item_code.ravel()[key], categories=item_cat),
    }
    if cluster is not None:
        out["cluster"] = pd.Categorical.from_codes(col["cluster"], categories=items.cluster_names)
    out["status"] = pd.Categorical.from_codes(col["status"], categories=status_names)
    out["score_a"], out["score_b"] = col["score_a"], col["score_b"]
    for c in ("samples_a", "samples_b"):
        out[c] = col[c] if np.isnan(col[c]).any() else col[c].astype(np.int64)
    out["difference"] = col["score_b"] - col["score_a"]
    return pd.DataFrame(out)


def compare_runs(
    runs: Sequence[Run],
    baseline: str | None = None,
    cluster: str | None = None,
    *,
    harness: HarnessOptions | None = None,
    adjust: str = "bh",
    permutations: int = 9999,
    seed: int = 0,
    effect: float = 0.02,
    responses: ResponseOptions | None = None,
) -> CompareResult:
    """Compare runs pairwise (see the module docstring). ``runs``: paths (lm-eval directories, inspect
    logs, score tables) or score DataFrames; ``effect``: the difference (0..1 scale) whose
    ``items_needed`` is reported; ``responses``: how ECDF responses files become runs (``--by``,
    ``--score``, ``--extract``)."""
    if adjust not in ADJUST:
        raise EvalprismError(f"adjust {adjust}: expected one of {', '.join(ADJUST)}", parameter="adjust")
    check_number("permutations", permutations)
    if not 0 < effect < 1:
        raise EvalprismError(
            f"effect {effect}: expected a difference between 0 and 1 (0.02 = 2 points)", parameter="effect"
        )
    choices = ReadChoices()
    table, notes = read_runs(runs, cluster=cluster, harness=harness, choices=choices, responses=responses)
    names = [str(n) for n in pd.unique(table["run"])]  # input order
    first = table.drop_duplicates("run")
    sources = dict(zip(first["run"], first["source"], strict=True))
    if len(names) < 2:
        raise EvalprismError(
            f"{', '.join(pd.unique(table['source']))}: only one run ('{names[0]}'): compare needs "
            "at least two (several RUN arguments, or a table with several models)"
        )
    if baseline is not None and baseline not in names:  # a configuration's parts in any order (ECDF responses runs)
        baseline = next((n for n in names if "=" in baseline and same_configuration(n, baseline)), baseline)
    if baseline is not None and baseline not in names:
        raise EvalprismError(f"baseline '{baseline}': no such run (runs: {', '.join(names)})", parameter="baseline")
    binary = bool(np.isin(table["score"].to_numpy(), (0.0, 1.0)).all())
    bench_order = [str(b) for b in pd.unique(table["benchmark"])]  # input order
    items = _per_item(table, names, cluster)
    del table
    rows: list[dict] = []
    parts: list[dict[str, np.ndarray]] = []
    bench_code = pd.Categorical(items.bench_names, categories=bench_order).codes
    index = {n: i for i, n in enumerate(names)}
    for a, b in _pairs(names, baseline):
        ia, ib = index[a], index[b]
        part = _join(items, ia, ib)
        in_a, in_b = part.pop("in_a"), part.pop("in_b")
        if not (in_a & in_b).any():
            raise EvalprismError(
                f"runs '{a}' ({sources[a]}) and '{b}' ({sources[b]}) have no item in common "
                f"({len(items.keys[ia]):,} and {len(items.keys[ib]):,} items; items match on "
                "benchmark and item_id)"
            )
        part["pair"] = np.full(len(in_a), len(parts), dtype=np.int64)
        parts.append(part)
        status = np.where(in_a & in_b, 0, np.where(in_a, 1 + ia, 1 + ib))
        part["status"] = status
        codes = bench_code[part["key"]]
        present = np.unique(codes)
        scopes = [(bench_order[c], codes == c) for c in present] if len(present) > 1 else []
        scopes.append((ALL, None))
        for bench, sel in scopes:
            rows.append(
                _scope_row(
                    a,
                    b,
                    bench,
                    _both(items, part, in_a & in_b if sel is None else in_a & in_b & sel),
                    int(np.count_nonzero((status == 1 + ia) if sel is None else (status == 1 + ia) & sel)),
                    int(np.count_nonzero((status == 1 + ib) if sel is None else (status == 1 + ib) & sel)),
                    cluster=cluster,
                    binary=binary,
                    effect=effect,
                    permutations=permutations,
                )
            )
    flips = [k for k, r in enumerate(rows) if "_units" in r]
    if flips:  # every sign-flip test at once, sharing the random signs (see sign_flip_tests)
        for k, p in zip(
            flips, sign_flip_tests([rows[k].pop("_units") for k in flips], permutations, seed), strict=True
        ):
            rows[k]["p"] = float(p)
    comparisons = pd.DataFrame(rows)
    comparisons["p_adj"] = np.nan
    for idx in comparisons.groupby("benchmark", sort=False).groups.values():
        comparisons.loc[idx, "p_adj"] = adjust_pvalues(comparisons.loc[idx, "p"].to_numpy(dtype=float), adjust)
    comparisons["verdict"] = [_verdict(r) for r in comparisons.to_dict("records")]
    order = [
        "run_a",
        "run_b",
        "benchmark",
        "items",
        "only_a",
        "only_b",
        "mean_a",
        "mean_b",
        "difference",
        "se",
        "ci_low",
        "ci_high",
        "se_naive",
        "clusters",
        "test",
        "differing",
        "p_floor",
        "p",
        "p_adj",
        "mde",
        "items_needed",
        "var_total",
        "var_within",
        "var_between",
        "verdict",
    ]
    item_table = _item_table(items, parts, names, _pairs(names, baseline), cluster)
    options = {
        "runs": [str(r) if not isinstance(r, pd.DataFrame) else sources.get(str(r), "table") for r in runs],
        "run_names": names,
        "baseline": baseline,
        "cluster": cluster,
        "adjust": adjust,
        "permutations": permutations,
        "seed": seed,
        "effect": effect,
        "scores": "0/1" if binary else "0..1",
        "harness": (harness or HarnessOptions()).given(),
        "responses": dataclasses.asdict(responses) if responses and responses.given() else None,
    }
    return CompareResult(
        comparisons=comparisons[order],
        items=item_table,
        options=options,
        notes=notes,
        read=list(choices.lines),
        sources=sources,
    )
