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

Each row is a :class:`~evalprism.compare.comparison.Comparison`, whose fields are comparisons.csv's
columns; its verdict sentence says what the test can tell: a difference with its interval and adjusted p;
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

from evalprism.compare.comparison import NAN, Comparison, comparison_table
from evalprism.compare.k_samples import default_rules, k_sample_scores, runs_table
from evalprism.compare.options import CompareOptions
from evalprism.compare.release import common_losses, confidence_set, gate_exit_code, gate_results
from evalprism.compare.result import CompareResult, CompareSummary
from evalprism.errors import EvalprismError
from evalprism.io.items import Input as Run
from evalprism.io.items import read_items
from evalprism.io.responses import same_configuration
from evalprism.stats.compare_tests import (
    EXACT_SIGN_FLIP_UNITS,
    PairedDifference,
    adjust_pvalues,
    items_needed,
    mcnemar_exact,
    minimum_detectable_effect,
    paired_difference,
    sign_flip_exact,
    sign_flip_floor,
    sign_flip_tests,
    sign_test_floor,
    variance_components,
)
from evalprism.stats.confidence_set import ConfidenceSet
from evalprism.stats.noise_plan import NoisePlan
from evalprism.vocabularies import Adjustment, choices

ADJUST = choices(Adjustment)
ALL = "all"


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


@dataclass(frozen=True)
class _Settings:
    """What every scope's row needs from the options, fixed for the whole run."""

    cluster: str | None
    binary: bool  # every score 0 or 1
    effect: float
    permutations: int


@dataclass(frozen=True)
class _Scope:
    """One pair on one scope (a benchmark, or ``all``): ``both`` holds the aligned arrays of the items
    both runs answered (see :func:`_both`), ``only_a`` / ``only_b`` count the items one run answered."""

    run_a: str
    run_b: str
    benchmark: str
    both: dict[str, np.ndarray]
    only_a: int
    only_b: int


@dataclass(frozen=True)
class _Join:
    """Two runs joined on their items (:func:`_join` plus ``pair`` and ``status``; what items.csv
    lists) and the mask of the items both answered."""

    part: dict[str, np.ndarray]
    common: np.ndarray


@dataclass(frozen=True)
class _Test:
    """The paired test chosen for a scope: its name, p (NaN for a sign-flip test until the batch runs),
    the differing units, the smallest p it can reach, and the units a sign-flip test flips (else None)."""

    name: str
    p: float
    differing: int
    floor: float
    units: np.ndarray | None = None


def _pairs(names: list[str], baseline: str | None) -> list[tuple[str, str]]:
    """The pairs (A, B) compared: each run against ``baseline``, or every pair in input order."""
    if baseline is not None:
        return [(baseline, n) for n in names if n != baseline]
    return list(combinations(names, 2))


def _sign_flip(name: str, units: np.ndarray, permutations: int) -> _Test:
    """The sign-flip test on ``units`` (p to come, batched): its floor is 2 / 2**k on k differing units
    when all their sign patterns are enumerated, else the Monte Carlo floor as well."""
    differing = int(np.count_nonzero(units))
    exact = differing <= EXACT_SIGN_FLIP_UNITS
    floor = min(1.0, 2.0 * 0.5**differing) if exact else sign_flip_floor(differing, permutations)
    return _Test(name, NAN, differing, floor if differing else 1.0, units)


def _choose_test(d: np.ndarray, both: dict[str, np.ndarray], settings: _Settings, several: bool) -> _Test:
    """Exact McNemar on 0/1 scores with one sample per item and no clusters; else the sign-flip test
    (whole clusters flip together: its units are the cluster sums); none on fewer than 2 items."""
    if len(d) < 2:
        return _Test("", NAN, int(np.count_nonzero(d)), NAN)
    if settings.cluster is not None:
        units = np.bincount(np.unique(both["groups"], return_inverse=True)[1].ravel(), weights=d)
        return _sign_flip("sign-flip (clusters)", units, settings.permutations)
    if settings.binary and not several:
        only_a, only_b, p = mcnemar_exact(both["score_a"] == 1, both["score_b"] == 1)
        return _Test("McNemar exact", p, only_a + only_b, sign_test_floor(only_a + only_b))
    return _sign_flip("sign-flip", d, settings.permutations)


def _sizes(res: PairedDifference, naive: PairedDifference, effect: float) -> tuple[float, float]:
    """The MDE for this SE and the items needed to detect ``effect`` with this per-item variance (and
    the cluster design effect). Every item the same difference: no variance to size an effect
    against, so no MDE (not 0)."""
    mde = float(minimum_detectable_effect(res.se)) if np.isfinite(res.se) and res.se > 0 else NAN
    deff = (res.se / naive.se) ** 2 if np.isfinite(naive.se) and naive.se > 0 and np.isfinite(res.se) else 1.0
    needed = items_needed(effect, naive.sd, design_effect=deff) if np.isfinite(naive.sd) and naive.sd > 0 else NAN
    return mde, needed


def _unpaired_se(a: np.ndarray, b: np.ndarray) -> float:
    """The SE of the difference of two independent means on these items, sqrt(var_A / n + var_B / n)."""
    n = len(a)
    return float(np.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / n)) if n > 1 else NAN


def _samples(both: dict[str, np.ndarray]) -> float:
    """The median samples per item of the two runs, over the items both answered."""
    return float(np.median((both["samples_a"] + both["samples_b"]) / 2))


def _variance_parts(d: np.ndarray, both: dict[str, np.ndarray], several: bool) -> tuple[float, float, float]:
    """The variance of the item differences and, with several samples per item, its within-item and
    between-item parts."""
    n = len(d)
    if several and n > 1:
        return variance_components(d, both["var_a"], both["samples_a"], both["var_b"], both["samples_b"])
    return (float(np.var(d, ddof=1)) if n > 1 else NAN), NAN, NAN


def _scope_row(scope: _Scope, settings: _Settings) -> tuple[Comparison, np.ndarray | None]:
    """One comparison row from the items both runs answered (p_adj and verdict to come), and the
    units of its sign-flip test (None for another test), which the batch of all sign-flips reads."""
    both = scope.both
    if len(both["score_a"]) == 0:
        row = Comparison.no_common_items(scope.run_a, scope.run_b, scope.benchmark, scope.only_a, scope.only_b)
        return row, None
    d = both["score_b"] - both["score_a"]
    res = paired_difference(d, both["groups"])
    naive = paired_difference(d)
    several = bool((both["samples_a"] > 1).any() or (both["samples_b"] > 1).any())
    test = _choose_test(d, both, settings, several)
    mde, needed = _sizes(res, naive, settings.effect)
    total, within, between = _variance_parts(d, both, several)
    plan = NoisePlan.from_parts(len(d), _samples(both) if several else 1.0, total, within, res.se, naive.se)
    row = Comparison(
        run_a=scope.run_a,
        run_b=scope.run_b,
        benchmark=scope.benchmark,
        items=len(d),
        samples=plan.samples,
        only_a=scope.only_a,
        only_b=scope.only_b,
        mean_a=float(pd.Series(both["score_a"]).mean()),
        mean_b=float(pd.Series(both["score_b"]).mean()),
        difference=res.mean,
        se=res.se,
        ci_low=max(res.low, -1.0),
        ci_high=min(res.high, 1.0),
        se_naive=naive.se,
        se_unpaired=_unpaired_se(both["score_a"], both["score_b"]),
        clusters=res.clusters,
        df=res.df,
        test=test.name,
        differing=test.differing,
        p_floor=test.floor,
        p=test.p,
        p_adj=NAN,
        mde=mde,
        items_needed=needed,
        resolution=plan.resolution_ratio(res.mean) if np.isfinite(res.mean) and total > 0 else NAN,
        var_total=total,
        var_within=within,
        var_between=between,
        verdict="",
    )
    return row, test.units


def _join(items: _Items, ia: int, ib: int) -> dict[str, np.ndarray]:
    """The outer join of runs ``ia`` and ``ib`` on their sorted key codes: the union of their items in
    key order, ``in_a``/``in_b`` masks, both sides' scores, samples, variances (NaN where absent) and
    the item's cluster code (A's, else B's)."""
    ka, kb = items.keys[ia], items.keys[ib]
    if np.array_equal(ka, kb):  # runs of one item set (the common case): no union, no lookup, no gaps
        return _aligned_join(items, ia, ib)
    key = np.union1d(ka, kb)
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


def _aligned_join(items: _Items, ia: int, ib: int) -> dict[str, np.ndarray]:
    """:func:`_join` of two runs with the same items: their arrays side by side (samples as floats, as
    the outer join gives them)."""
    present = np.ones(len(items.keys[ia]), dtype=bool)
    out: dict[str, np.ndarray] = {"key": items.keys[ia], "in_a": present, "in_b": present}
    for side, i in (("a", ia), ("b", ib)):
        out[f"score_{side}"] = items.score[i]
        out[f"samples_{side}"] = items.samples[i].astype(np.float64)
        out[f"var_{side}"] = items.var[i]
    if items.clusters is not None:
        out["cluster"] = items.clusters[ia]
    return out


def _both(items: _Items, part: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    """The arrays :func:`_scope_row` reads, on the rows of ``part`` selected by ``mask``."""
    every = bool(mask.all())  # runs of one item set, all benchmarks: the arrays as they are
    both: dict[str, Any] = {
        c: part[c] if every else part[c][mask]
        for c in ("score_a", "score_b", "samples_a", "samples_b", "var_a", "var_b")
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


def _pair_join(items: _Items, ia: int, ib: int, pair: int) -> _Join:
    """The join of runs ``ia`` and ``ib`` for items.csv, numbered ``pair``, with each item's ``status``
    (0: both answered, else 1 + the index of the one run that did)."""
    part = _join(items, ia, ib)
    in_a, in_b = part.pop("in_a"), part.pop("in_b")
    part["pair"] = np.full(len(in_a), pair, dtype=np.int64)
    part["status"] = np.where(in_a & in_b, 0, np.where(in_a, 1 + ia, 1 + ib))
    return _Join(part, in_a & in_b)


def _pair_scopes(
    items: _Items, join: _Join, a: tuple[str, int], b: tuple[str, int], bench_code: np.ndarray, bench_order: list[str]
) -> list[_Scope]:
    """A pair's scopes: each benchmark in input order when there are several, then ``all``."""
    part, common = join.part, join.common
    status = part["status"]
    codes = bench_code[part["key"]]
    present = np.unique(codes)
    scopes: list[tuple[str, np.ndarray | None]] = (
        [(bench_order[c], codes == c) for c in present] if len(present) > 1 else []
    )
    scopes.append((ALL, None))

    def count(mask: np.ndarray, sel: np.ndarray | None) -> int:
        return int(np.count_nonzero(mask if sel is None else mask & sel))

    return [
        _Scope(
            run_a=a[0],
            run_b=b[0],
            benchmark=bench,
            both=_both(items, part, common if sel is None else common & sel),
            only_a=count(status == 1 + a[1], sel),
            only_b=count(status == 1 + b[1], sel),
        )
        for bench, sel in scopes
    ]


def _compare_pairs(
    items: _Items,
    names: list[str],
    pairs: list[tuple[str, str]],
    bench_order: list[str],
    sources: dict[str, str],
    settings: _Settings,
) -> tuple[list[Comparison], list[np.ndarray | None], list[dict[str, np.ndarray]], list[str]]:
    """Every pair's rows (one per scope), the units of each row's sign-flip test (None for another
    test), every pair's join (for items.csv) and the pairs without an item in common, said (refused
    when no pair has one)."""
    bench_code = pd.Categorical(items.bench_names, categories=bench_order).codes
    index = {n: i for i, n in enumerate(names)}
    rows: list[Comparison] = []
    units: list[np.ndarray | None] = []
    parts: list[dict[str, np.ndarray]] = []
    apart: list[str] = []
    for name_a, name_b in pairs:
        a, b = (name_a, index[name_a]), (name_b, index[name_b])
        join = _pair_join(items, a[1], b[1], len(parts))
        parts.append(join.part)
        if not join.common.any():  # this pair has nothing to compare; the others still do
            apart.append(_no_common_items(items, a, b, sources))
        for scope in _pair_scopes(items, join, a, b, bench_code, bench_order):
            row, flips = _scope_row(scope, settings)
            rows.append(row)
            units.append(flips)
    if len(apart) == len(pairs):
        raise EvalprismError(apart[0])
    return rows, units, parts, apart


def _no_common_items(items: _Items, a: tuple[str, int], b: tuple[str, int], sources: dict[str, str]) -> str:
    """Two runs without an item in common, said with their sources and item counts."""
    (name_a, ia), (name_b, ib) = a, b
    return (
        f"runs '{name_a}' ({sources[name_a]}) and '{name_b}' ({sources[name_b]}) have no item in common "
        f"({len(items.keys[ia]):,} and {len(items.keys[ib]):,} items; items match on benchmark and item_id)"
    )


def _with_sign_flip_p(
    rows: list[Comparison], units: list[np.ndarray | None], permutations: int, seed: int
) -> list[Comparison]:
    """Every sign-flip test at once, sharing the random signs (see :func:`sign_flip_tests`)."""
    out = list(rows)
    # few differing units: every sign pattern, exactly (a Monte Carlo p could fall below the test's floor)
    exact = [k for k, u in enumerate(units) if u is not None and _enumerable(u, permutations)]
    for k in exact:
        out[k] = dataclasses.replace(out[k], p=sign_flip_exact(units[k]))  # type: ignore[arg-type]
    flips = [k for k, u in enumerate(units) if u is not None and k not in set(exact)]
    if not flips:
        return out
    p = sign_flip_tests([units[k] for k in flips], permutations, seed)  # type: ignore[misc]
    for k, pk in zip(flips, p, strict=True):
        # the exact p is at least 2 / 2**n on n differing units; a Monte Carlo estimate is held to it
        floor = 2.0 * 0.5 ** int(np.count_nonzero(units[k]))  # type: ignore[arg-type]
        out[k] = dataclasses.replace(out[k], p=max(float(pk), floor))
    return out


def _enumerable(units: np.ndarray, permutations: int) -> bool:
    """Few enough differing units (2**16 patterns at most) that every sign pattern is enumerated."""
    return int(np.count_nonzero(units)) <= EXACT_SIGN_FLIP_UNITS


def _adjusted(rows: list[Comparison], adjust: str) -> list[Comparison]:
    """Each row with its p corrected across its family (the pairs compared on the same benchmark;
    the ``all`` rows are one more family), and its verdict."""
    families: dict[str, list[int]] = {}
    for k, row in enumerate(rows):
        families.setdefault(row.benchmark, []).append(k)
    p_adj = np.full(len(rows), np.nan)
    for family in families.values():
        p_adj[family] = adjust_pvalues(np.array([rows[k].p for k in family], dtype=float), adjust)
    return [row.adjusted(float(q)) for row, q in zip(rows, p_adj, strict=True)]


def _runs_read(table: pd.DataFrame) -> tuple[list[str], dict[str, str]]:
    """The runs' names in input order and the file each came from; refused when there is one run."""
    names = [str(n) for n in pd.unique(table["run"])]
    first = table.drop_duplicates("run")
    sources = dict(zip(first["run"], first["source"], strict=True))
    if len(names) < 2:
        raise EvalprismError(
            f"{', '.join(pd.unique(table['source']))}: only one run ('{names[0]}'): compare needs "
            "at least two (several RUN arguments, or a table with several models)"
        )
    return names, sources


def _baseline_run(baseline: str | None, names: list[str]) -> str | None:
    """``baseline`` as one of ``names`` (a configuration's parts in any order, for ECDF responses
    runs); refused when it names no run."""
    if baseline is not None and baseline not in names:
        baseline = next((n for n in names if "=" in baseline and same_configuration(n, baseline)), baseline)
    if baseline is not None and baseline not in names:
        raise EvalprismError(f"baseline '{baseline}': no such run (runs: {', '.join(names)})", parameter="baseline")
    return baseline


def compare_runs(runs: Sequence[Run], options: CompareOptions | None = None) -> CompareResult:
    """Compare runs pairwise (see the module docstring). ``runs``: paths (lm-eval directories, inspect
    logs, score tables, ECDF responses files) or score DataFrames; ``options``: how
    (:class:`~evalprism.compare.options.CompareOptions`: the baseline, clusters, correction,
    permutations, the effect whose ``items_needed`` is reported, how several samples of an item are
    scored, the release gate, the confidence set, and how logs and responses are read)."""
    o = options or CompareOptions()
    loaded = read_items(runs, cluster=o.cluster, harness=o.harness, responses=o.responses)
    table = loaded.table
    names, sources = _runs_read(table)
    baseline = _baseline_run(o.baseline, names)
    binary = bool(np.isin(table["score"].to_numpy(), (0.0, 1.0)).all())
    bench_order = [str(b) for b in pd.unique(table["benchmark"])]  # input order
    items = _per_item(table, names, o.cluster)
    del table
    per_run = runs_table(o.at_k or default_rules(items.samples, binary), items.score, items.samples, names, binary)
    notes = list(loaded.provenance.notes)
    compared_binary = binary
    if o.aggregate != "mean":  # one value per item, in 0..1 (a McNemar test needs 0/1 scores)
        items, compared_binary = _aggregated(items, o.aggregate, names, binary), False
        notes.append(
            f"each item's score is its {o.aggregate} over its samples (the unbiased estimate over every k of them)"
        )
    settings = _Settings(cluster=o.cluster, binary=compared_binary, effect=o.effect, permutations=o.permutations)
    pairs = _pairs(names, baseline)
    rows, units, parts, apart = _compare_pairs(items, names, pairs, bench_order, sources, settings)
    notes += apart
    rows = _adjusted(_with_sign_flip_p(rows, units, o.permutations, o.seed), o.adjust)
    gate = gate_results(rows, baseline, o.margin, o.gate_alpha) if baseline and o.margin is not None else []
    summary = CompareSummary(
        runs=tuple(str(r) if not isinstance(r, pd.DataFrame) else sources.get(str(r), "table") for r in runs),
        run_names=tuple(names),
        sources=sources,
        baseline=baseline,
        scores="0/1" if binary else "0..1",
        gate_exit_code=gate_exit_code(gate) if gate else None,
    )
    return CompareResult(
        comparisons=comparison_table(rows),
        items=_item_table(items, parts, names, pairs, o.cluster) if o.items_table else None,
        options=o,
        summary=summary,
        provenance=loaded.provenance,
        notes=tuple(notes),
        runs_table=per_run,
        gate=tuple(gate),
        confidence_set=_confidence_set(items, names, o) if o.confidence_set is not None else None,
    )


def _aggregated(items: _Items, rule: str, names: list[str], binary: bool) -> _Items:
    """The items scored by a k-sample rule (one value per item, no within-item variance left)."""
    return dataclasses.replace(
        items,
        score=k_sample_scores(rule, items.score, items.samples, names, binary),
        samples=[np.ones_like(n) for n in items.samples],
        var=[np.full(len(v), np.nan) for v in items.var],
    )


def _confidence_set(items: _Items, names: list[str], o: CompareOptions) -> ConfidenceSet:
    """The model confidence set over the items (clusters) every run answered."""
    groups = None
    if items.clusters is not None:
        assert items.cluster_names is not None
        groups = [
            items.bench_names[k] + "\x1f" + items.cluster_names[c]
            for k, c in zip(items.keys, items.clusters, strict=True)
        ]
    assert o.confidence_set is not None
    return confidence_set(common_losses(items.keys, items.score, groups, names), names, o.confidence_set, o.seed)
