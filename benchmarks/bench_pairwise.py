"""Benchmark evalprism's marginal Bradley-Terry leaderboard against arena-rank and FastChat's recipe.

What is compared, and why:

* **Fit + 95% intervals from a battles table.** ``evalprism.p2l.fit_leaderboard(df, outcome_model=model,
  ci="sandwich")`` (canonicalise, order by content and index the table, aggregate to pairs, maximum
  likelihood, sandwich covariance, separation check) against what LMArena itself uses, arena-rank's
  ``PairDataset.from_pandas(df)`` + ``BradleyTerry(...).compute_ratings_and_cis(ds)`` (its
  default 95% intervals: sandwich, with a small ridge on the Hessian diagonal). Timed end to end
  and again from already aggregated data (``Leaderboard.from_counts(PairCounts)`` / ``PairDataset``),
  so the table handling and the numerical kernel can be told apart.
* **FastChat's ``compute_mle_elo``** (the Chatbot Arena notebook recipe): a dense design matrix
  with one +ln(10)/-ln(10) row per battle, every battle duplicated so that a tie becomes one win
  for each side, scikit-learn ``LogisticRegression(fit_intercept=False)`` unpenalised (``C=inf``;
  scikit-learn 1.9 deprecates ``penalty=None``), ``tol=1e-8``. It has no intervals (FastChat
  bootstraps this fit); one fit is timed.
* **Bootstrap.** ``Leaderboard.from_counts(..., ci="bootstrap", rounds=100)``: 100 multinomial resamples of
  the aggregated counts, each refitted exactly.
* **Agreement.** All three estimate the same model: Bradley-Terry with a tie counted as half a win
  for each side (evalprism ``bt-tie``; with ``--tie-rate 0`` plain ``bt``). Ratings are compared on
  arena-rank's scale, 1000 + 400/ln(10) * coefficient, after centring every method's ratings on
  their mean (arena-rank and scikit-learn leave the common shift to their optimiser's start at 0).
  arena-rank's and scikit-learn's defaults stop their optimisers early, so arena-rank is also run
  to full convergence (untimed) to show that the remaining difference is theirs.

Data: ``--battles`` battles among ``--models`` models with planted coefficients N(0, 0.6^2);
model popularity is uneven (gamma weights), so pair counts vary. Outcomes follow Bradley-Terry with
ties: P(tie) = ``tie_rate`` * 4 σ(Δ)σ(−Δ) (ties are likelier between close models) and
P(A) = σ(Δ) − P(tie)/2, so that a tie counted as half a win keeps the planted coefficients
consistent; a third of the ties are "tie (bothbad)". The Rao-Kupper fits (``rk``, ``grk``) are
timed on the same counts without a peer.

Run ``python benchmarks/bench_pairwise.py`` (about a minute; the scikit-learn design matrix takes
~2 GB at 1M battles). The script prints one table and always exits 0; PASS/MISS refer to the
targets below.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import pandas as pd
from _table import Report, Row, fmt_s, fmt_x, load_note, log, print_table, status, timed

from evalprism.p2l.options import FitOptions

T = TypeVar("T")

# Targets (from the issue), at 1,000,000 battles over 130 models.
TARGET_BATTLES = 1_000_000
TARGET_MODELS = 130
TARGET_SPEEDUP = 10.0  # arena-rank seconds / evalprism seconds, fit + 95% CI from the battles table
TARGET_MAX_DIFF = 1e-4  # max |rating difference| to arena-rank, rating points (1000 + 400/ln10 * coef)
TARGET_BOOT_S = 5.0  # 100-round bootstrap
ELO = 400.0 / math.log(10.0)


# --------------------------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------------------------


@dataclass
class Battles:
    """Simulated battles: the canonical table, the planted coefficients (mean 0) and the names."""

    frame: pd.DataFrame
    planted: np.ndarray
    names: list[str]


def simulate_battles(n: int, m: int, tie_rate: float, seed: int) -> Battles:
    """``n`` battles among ``m`` models under Bradley-Terry with ties (see the module docstring)."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.6, m)
    theta -= theta.mean()
    popularity = rng.gamma(1.0, size=m) + 0.05
    popularity /= popularity.sum()
    a = rng.choice(m, size=n, p=popularity)
    b = rng.choice(m, size=n, p=popularity)
    while np.any(same := a == b):
        b[same] = rng.choice(m, size=int(same.sum()), p=popularity)
    delta = theta[a] - theta[b]
    p_a_raw = 1.0 / (1.0 + np.exp(-delta))
    p_tie = tie_rate * 4.0 * p_a_raw * (1.0 - p_a_raw)
    p_a = p_a_raw - p_tie / 2.0
    u = rng.random(n)
    outcome = np.where(u < p_a, 0, np.where(u < p_a + p_tie, 2, 1))
    outcome[(outcome == 2) & (rng.random(n) < 1 / 3)] = 3
    names = [f"model-{i:03d}" for i in range(m)]
    labels = np.array(names, dtype=object)
    winners = np.array(["model_a", "model_b", "tie", "tie (bothbad)"], dtype=object)
    frame = pd.DataFrame(
        {
            "prompt": [f"prompt {i}" for i in range(n)],
            "model_a": labels[a],
            "model_b": labels[b],
            "winner": winners[outcome],
        }
    )
    return Battles(frame, theta, names)


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


@dataclass
class Timing:
    """Repeated wall times of one measurement; ``first`` pays one-off costs (imports, JIT)."""

    seconds: list[float]

    @property
    def first(self) -> float:
        return self.seconds[0]

    @property
    def best(self) -> float:
        return min(self.seconds)

    def show(self) -> str:
        if len(self.seconds) == 1:
            return fmt_s(self.first)
        return f"{fmt_s(self.best)} (1st {fmt_s(self.first)})"


def repeat(fn: Callable[[], T], times: int) -> tuple[T, Timing]:
    """Run ``fn`` ``times`` times; the result of the last run and all wall times."""
    seconds = []
    result: Any = None
    for _ in range(times):
        result, s = timed(fn)
        seconds.append(s)
    return result, Timing(seconds)


def centred_ratings(ratings: np.ndarray) -> np.ndarray:
    """Ratings shifted to mean 1000: the methods differ only in where their optimiser put the mean."""
    ratings = np.asarray(ratings, dtype=float)
    return ratings - ratings.mean() + 1000.0


# --------------------------------------------------------------------------------------------
# The three methods
# --------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One method's ratings (aligned to ``Battles.names``), 95% half-widths and timings."""

    ratings: np.ndarray
    half_width: np.ndarray | None
    total: Timing
    kernel: Timing | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run_evalprism(battles: Battles, model: str, times: int) -> Run:
    """``fit_leaderboard`` from the battles table, and ``Leaderboard.from_counts`` from the aggregated
    counts; one instrumented pass splits the table time into canonicalise + order + index, aggregate,
    fit and sandwich."""
    from evalprism.io.battles import battle_arrays, in_content_order, to_canonical_battles
    from evalprism.p2l import fit_leaderboard
    from evalprism.p2l.marginal import Leaderboard
    from evalprism.stats.pairwise import PairCounts, fit_counts, sandwich_cov

    result, total = repeat(
        lambda: fit_leaderboard(battles.frame, FitOptions(model=model, ci="sandwich"), progress=False),
        times,
    )
    board = result.fit
    assert board.names == battles.names
    arrays, t_io = timed(lambda: battle_arrays(in_content_order(to_canonical_battles(battles.frame))))
    pairs, t_agg = timed(lambda: PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(arrays.names)))
    fit, t_fit = timed(lambda: fit_counts(pairs, model))  # type: ignore[arg-type]
    _, t_cov = timed(lambda: sandwich_cov(fit, pairs))
    _, kernel = repeat(
        lambda: Leaderboard.from_counts(
            pairs,
            model,
            ci="sandwich",  # type: ignore[arg-type]
            names=arrays.names,
        ),
        times,
    )
    return Run(
        ratings=ELO * board.coefs + 1000.0,
        half_width=ELO * (board.upper - board.lower) / 2,
        total=total,
        kernel=kernel,
        extra={
            "pairs": pairs,
            "names": arrays.names,
            "coefs": board.coefs,
            "t_io": t_io,
            "t_agg": t_agg,
            "t_fit": t_fit,
            "t_cov": t_cov,
            "n_iter": fit.n_iter,
            "grad_norm": fit.grad_norm,
        },
    )


def run_arena_rank(battles: Battles, times: int) -> Run:
    """arena-rank from the battles table (dataset + fit + sandwich intervals), then from its dataset;
    finally one untimed fit to full convergence."""
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.utils.data_utils import PairDataset

    def fit(dataset: Any, **options: Any) -> dict[str, Any]:
        model = BradleyTerry(n_competitors=len(dataset.competitors), **options)
        result = model.compute_ratings_and_cis(dataset, significance_level=0.05)  # default ci_method="sandwich"
        return {k: (np.asarray(v) if k != "competitors" else list(v)) for k, v in result.items()}  # waits for JAX

    result, total = repeat(lambda: fit(PairDataset.from_pandas(battles.frame)), times)
    dataset, t_dataset = timed(lambda: PairDataset.from_pandas(battles.frame))
    _, kernel = repeat(lambda: fit(dataset), times)
    converged = fit(dataset, ftol=0.0, gtol=1e-13, max_iter=20_000)
    order = [result["competitors"].index(name) for name in battles.names]
    return Run(
        ratings=result["ratings"][order],
        half_width=(result["rating_upper"] - result["rating_lower"])[order] / 2,
        total=total,
        kernel=kernel,
        extra={
            "converged": converged["ratings"][[converged["competitors"].index(n) for n in battles.names]],
            "t_dataset": t_dataset,
        },
    )


def fastchat_compute_mle_elo(
    df: pd.DataFrame, scale: float = 400.0, base: float = 10.0, init_rating: float = 1000.0
) -> pd.Series:
    """FastChat's ``compute_mle_elo`` (Chatbot Arena notebook), with ``C=np.inf`` for ``penalty=None``."""
    from sklearn.linear_model import LogisticRegression

    models = pd.concat([df["model_a"], df["model_b"]]).unique()
    models = pd.Series(np.arange(len(models)), index=models)
    df = pd.concat([df, df], ignore_index=True)  # duplicate battles
    p, n = len(models.index), df.shape[0]
    X = np.zeros([n, p])
    X[np.arange(n), models[df["model_a"]]] = +math.log(base)
    X[np.arange(n), models[df["model_b"]]] = -math.log(base)
    Y = np.zeros(n)  # one A win => two A wins
    Y[(df["winner"] == "model_a").to_numpy()] = 1.0
    tie_idx = ((df["winner"] == "tie") | (df["winner"] == "tie (bothbad)")).to_numpy().copy()
    tie_idx[len(tie_idx) // 2 :] = False  # one tie => one A win + one B win
    Y[tie_idx] = 1.0
    lr = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-8)
    lr.fit(X, Y)
    return pd.Series(scale * lr.coef_[0] + init_rating, index=models.index)


def run_sklearn(battles: Battles, times: int) -> Run:
    """FastChat's recipe on the battles table (design matrix + fit), ``times`` times."""
    elo, total = repeat(lambda: fastchat_compute_mle_elo(battles.frame), times)
    return Run(ratings=elo.reindex(battles.names).to_numpy(), half_width=None, total=total)


# --------------------------------------------------------------------------------------------
# Stages
# --------------------------------------------------------------------------------------------


def max_diff(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.max(np.abs(centred_ratings(x) - centred_ratings(y))))


def bench_fits(report: Report, args: argparse.Namespace, battles: Battles, model: str) -> dict[str, Any]:
    """evalprism vs arena-rank vs FastChat/scikit-learn on the same battles."""
    at_target = args.battles == TARGET_BATTLES and args.models == TARGET_MODELS
    report.section(f"Fit + 95% CI, {args.battles:,} battles, {args.models} models, model '{model}'")
    log("evalprism fit_leaderboard")
    ours = run_evalprism(battles, model, args.repeat)
    log("arena-rank BradleyTerry")
    arena = run_arena_rank(battles, args.repeat)
    sk = None
    if not args.skip_sklearn:
        log("FastChat compute_mle_elo (scikit-learn)")
        sk = run_sklearn(battles, args.repeat)

    x = ours.extra
    speedup = arena.total.best / ours.total.best
    report.add(
        Row(
            what="from the battles table: fit_leaderboard(df, ci='sandwich') vs PairDataset.from_pandas + "
            "compute_ratings_and_cis",
            ours=ours.total.show(),
            peer=arena.total.show(),
            ratio=fmt_x(speedup),
            quality=f"1st calls: {fmt_x(arena.total.first / ours.total.first)}",
            target=f">= {TARGET_SPEEDUP:g}x at {TARGET_BATTLES:,} x {TARGET_MODELS}",
            status=status(speedup >= TARGET_SPEEDUP if at_target else None),
        )
    )
    assert ours.kernel is not None and arena.kernel is not None
    report.add(
        Row(
            what="from aggregated data: Leaderboard.from_counts(PairCounts) vs compute_ratings_and_cis(PairDataset)",
            ours=ours.kernel.show(),
            peer=arena.kernel.show(),
            ratio=fmt_x(arena.kernel.best / ours.kernel.best),
            quality=f"1st calls: {fmt_x(arena.kernel.first / ours.kernel.first)}",
        )
    )
    report.add(
        Row(
            what="  evalprism split: canonicalise + order + index | aggregate | fit | sandwich",
            ours=f"{fmt_s(x['t_io'])} | {fmt_s(x['t_agg'])} | {fmt_s(x['t_fit'])} | {fmt_s(x['t_cov'])}",
            peer=f"from_pandas {fmt_s(arena.extra['t_dataset'])}",
            quality=f"{x['pairs'].a.size:,} ordered pairs; L-BFGS-B {x['n_iter']} it., |grad| {x['grad_norm']:.0e}",
        )
    )
    if sk is not None:
        report.add(
            Row(
                what="from the battles table: fit_leaderboard(df, ci='sandwich') vs FastChat compute_mle_elo "
                "(scikit-learn, no CI)",
                ours=ours.total.show(),
                peer=sk.total.show(),
                ratio=fmt_x(sk.total.best / ours.total.best),
                quality=f"1st calls: {fmt_x(sk.total.first / ours.total.first)}",
            )
        )

    diff_arena = max_diff(ours.ratings, arena.ratings)
    diff_conv = max_diff(ours.ratings, arena.extra["converged"])
    report.add(
        Row(
            what="max |rating diff| vs arena-rank run to convergence (ftol=0, gtol=1e-13)",
            quality=f"{diff_conv:.1e} rating points = {diff_conv / ELO:.1e} in coefficients",
            target=f"<= {TARGET_MAX_DIFF:g} rating points",
            status=status(diff_conv <= TARGET_MAX_DIFF),
        )
    )
    report.add(
        Row(
            what="max |rating diff| vs arena-rank defaults (ftol=gtol=1e-9)",
            quality=f"{diff_arena:.1e} rating points = {diff_arena / ELO:.1e} in coefficients; arena-rank converged vs "
            f"its defaults: {max_diff(arena.ratings, arena.extra['converged']):.1e}",
        )
    )
    if sk is not None:
        diff_sk = max_diff(ours.ratings, sk.ratings)
        report.add(
            Row(
                what="max |rating diff| vs FastChat compute_mle_elo (scikit-learn lbfgs, tol=1e-8)",
                quality=f"{diff_sk:.1e} rating points = {diff_sk / ELO:.1e} in coefficients",
            )
        )
    assert ours.half_width is not None and arena.half_width is not None
    rel = ours.half_width / arena.half_width - 1.0
    report.add(
        Row(
            what="95% half-widths: evalprism sandwich vs arena-rank sandwich",
            quality=f"ours / arena-rank - 1: median {np.median(rel):+.1%}, range {rel.min():+.1%} .. {rel.max():+.1%}",
        )
    )
    z = (x["coefs"] - battles.planted) / (ours.half_width / ELO / 1.959963984540054)
    report.add(
        Row(
            what="recovery of the planted coefficients",
            quality=f"max |coef - planted| {np.max(np.abs(x['coefs'] - battles.planted)):.3f}; "
            f"{np.mean(np.abs(z) <= 1.96):.1%} of models within their 95% interval",
        )
    )
    n_ties = int(battles.frame["winner"].isin(["tie", "tie (bothbad)"]).sum())
    report.notes.append(
        f"ties: {n_ties:,} of {args.battles:,} battles ({n_ties / args.battles:.1%}). Both sandwiches score a tie "
        "as one battle with outcome 1/2 (score 1/2 - p); arena-rank also adds 1e-5 x battles to the Hessian "
        "diagonal (evalprism: pseudo-inverse), which narrows its intervals very slightly."
    )
    x["half_width"], x["arena_half_width"] = ours.half_width, arena.half_width
    return x


def bench_bootstrap(report: Report, args: argparse.Namespace, fitted: dict[str, Any], model: str) -> None:
    """100-round bootstrap from the aggregated counts (the full-data fit included)."""
    from evalprism.p2l.marginal import Leaderboard

    report.section(f"Bootstrap, {args.rounds} rounds, model '{model}'")
    log(f"bootstrap {args.rounds} rounds")
    board, t_boot = timed(
        lambda: Leaderboard.from_counts(
            fitted["pairs"],
            model,
            ci="bootstrap",  # type: ignore[arg-type]
            names=fitted["names"],
            rounds=args.rounds,
            seed=args.seed,
        )
    )
    width = ELO * (board.upper - board.lower) / 2
    report.add(
        Row(
            what="Leaderboard.from_counts(PairCounts, ci='bootstrap') incl. the full-data fit",
            ours=fmt_s(t_boot),
            quality=f"95% half-widths (median {np.median(width):.2f} rating points) / arena-rank sandwich: median "
            f"{np.median(width / fitted['arena_half_width']):.3f}; / evalprism sandwich: "
            f"{np.median(width / fitted['half_width']):.3f}",
            target=f"<= {TARGET_BOOT_S:g} s ({TARGET_BOOT_S * args.rounds / 100:g} s for {args.rounds} rounds)"
            if args.rounds != 100
            else f"<= {TARGET_BOOT_S:g} s",
            status=status(t_boot <= TARGET_BOOT_S * args.rounds / 100 if args.battles == TARGET_BATTLES else None),
        )
    )


def bench_tie_models(report: Report, args: argparse.Namespace, fitted: dict[str, Any]) -> None:
    """Rao-Kupper and grounded Rao-Kupper on the same counts (no peer implements them)."""
    from evalprism.p2l.marginal import Leaderboard
    from evalprism.stats.outcome_models import get_outcome_model

    report.section("Tie models on the same counts (no peer)")
    for model in ("rk", "grk"):
        log(f"evalprism {model}")
        board, t = repeat(
            lambda: Leaderboard.from_counts(
                fitted["pairs"],
                model,
                ci="sandwich",
                names=fitted["names"],
            ),
            args.repeat,
        )
        name = get_outcome_model(model).extra.symbol  # type: ignore[union-attr]
        report.add(
            Row(
                what=f"Leaderboard.from_counts(PairCounts, '{model}', ci='sandwich')",
                ours=t.show(),
                quality=f"{name} = {board.extra:.4f}; |grad| {board.fit.grad_norm:.0e}",
            )
        )


# --------------------------------------------------------------------------------------------
# Output and CLI
# --------------------------------------------------------------------------------------------


def print_report(report: Report) -> None:
    """The results table and notes, to stdout."""
    print_table(
        report,
        "evalprism pairwise benchmark",
        quality="agreement / notes",
        with_n=False,
        footer="speedup = peer time / evalprism time (> 1: evalprism is faster); times are the best of --repeat runs, '1st' the first run in this process (imports, JIT).",
        width=220,
    )


def environment_line(args: argparse.Namespace) -> str:
    """Versions and machine facts that the numbers depend on."""
    from importlib.metadata import version

    import scipy
    import sklearn

    return (
        f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, pandas "
        f"{pd.__version__}, scikit-learn {sklearn.__version__}, arena-rank {version('arena-rank')}, jax "
        f"{version('jax')}, cores {os.cpu_count()}, seed {args.seed}, battles {args.battles:,}, models {args.models}, "
        f"tie rate {args.tie_rate:g}, repeat {args.repeat}"
    )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--battles", type=int, default=TARGET_BATTLES)
    parser.add_argument("--models", type=int, default=TARGET_MODELS)
    parser.add_argument("--rounds", type=int, default=100, help="bootstrap rounds")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument(
        "--tie-rate",
        type=float,
        default=0.3,
        help="P(tie) between equal models (0 to 0.5); 0 gives no ties and fits plain 'bt'",
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each measurement (best is reported)")
    parser.add_argument("--skip-sklearn", action="store_true", help="skip FastChat's scikit-learn recipe (~2 GB at 1M)")
    args = parser.parse_args(argv)
    if not 0.0 <= args.tie_rate <= 0.5:
        parser.error("--tie-rate must be in [0, 0.5]")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # deprecation chatter from the peers' stacks
    report = Report()
    print(environment_line(args), flush=True)
    load_before = os.getloadavg()
    log(f"simulating {args.battles:,} battles over {args.models} models")
    battles = simulate_battles(args.battles, args.models, args.tie_rate, args.seed)
    model = "bt-tie" if args.tie_rate > 0 else "bt"
    fitted = bench_fits(report, args, battles, model)
    bench_bootstrap(report, args, fitted, model)
    if args.tie_rate > 0:
        bench_tie_models(report, args, fitted)
    report.notes.append(load_note(load_before))
    print_report(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
