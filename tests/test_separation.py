"""Separation per outcome model (evalprism.stats.separation.model_separation, read from the registry's
``bounds``): on planted minimal designs the flags agree with the profile likelihood computed directly
from each model's log-probabilities, a grk model with only losses and "both bad" is flagged (it got
−30.97, identified=True before), and the P2L warm start pins such coefficients."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize

from evalprism.p2l.marginal import Leaderboard, fit_leaderboard, pair_separation
from evalprism.p2l.options import FitOptions
from evalprism.stats.outcome_models import NUMPY_OPS, OUTCOME_MODELS, get_outcome_model
from evalprism.stats.outcomes import A_WINS, B_WINS, BOTH_BAD, TIE
from evalprism.stats.pairwise import PairCounts, outcome_weights

W, L, T, BB = A_WINS, B_WINS, TIE, BOTH_BAD  # outcome of a battle "i vs j": i wins, j wins, tie, both bad

# (model, battles as (i, j, outcome) among 2-3 models, expected flags per model: "" identified,
#  "+" unbounded above, "-" unbounded below, "+-" both ways). The minimal non-identified and identified
# designs of each model; the grk ones include the "both bad" cases the old rule got wrong.
DESIGNS = [
    ("bt", [(0, 1, W)], ["+", "-"]),
    ("bt", [(0, 1, W), (0, 1, L)], ["", ""]),
    ("bt", [(0, 1, W), (0, 1, L), (0, 1, T)], ["", ""]),
    ("bt", [(0, 1, W), (0, 1, T)], ["+", "-"]),  # bt drops the tie
    ("bt", [(0, 1, W), (1, 2, W)], ["+", "+-", "-"]),
    ("bt-tie", [(0, 1, W)], ["+", "-"]),
    ("bt-tie", [(0, 1, T)], ["", ""]),  # half a win each way
    ("bt-tie", [(0, 1, W), (0, 1, BB)], ["", ""]),
    ("rk", [(0, 1, W), (0, 2, T)], ["", "-", ""]),
    ("rk", [(0, 1, W), (0, 1, T)], ["", ""]),
    ("rk", [(0, 1, W), (0, 1, BB)], ["", ""]),  # rk merges "both bad" into the tie
    ("rk", [(0, 1, T), (0, 1, T)], ["", ""]),
    ("rk", [(0, 1, W), (2, 1, W), (0, 2, T)], ["", "-", ""]),
    ("rk", [(1, 0, W), (0, 2, T), (2, 0, T)], ["", "+", ""]),
    # grk: coefficients are absolute (the "bad" model is 0)
    ("grk", [(0, 1, L), (0, 1, BB)], ["-", ""]),  # only losses and both bad: no finite MLE (the bug)
    ("grk", [(0, 1, BB)], ["-", "-"]),
    ("grk", [(0, 1, T)], ["+", "+"]),
    ("grk", [(0, 1, W), (0, 1, L), (0, 1, BB)], ["", ""]),
    ("grk", [(0, 1, T), (0, 1, BB)], ["", ""]),
    ("grk", [(0, 1, W), (0, 1, BB)], ["", "-"]),
    ("grk", [(0, 1, W), (0, 1, T)], ["+", "+"]),
    ("grk", [(0, 1, W), (1, 2, BB), (0, 2, T)], ["", "-", ""]),
    ("grk", [(0, 1, L), (0, 1, BB), (0, 2, W), (0, 2, BB)], ["", "", "-"]),
]


def design_pairs(battles: list[tuple[int, int, int]]) -> PairCounts:
    n = 1 + max(max(i, j) for i, j, _ in battles)
    a, b, outcome = (np.array(col) for col in zip(*battles, strict=True))
    return PairCounts.from_battles(a, b, outcome, n)


def profile_loglik(model: str, pairs: PairCounts, j: int, value: float, pin: int | None) -> float:
    """The profile log-likelihood of coefficient ``j`` at ``value``: the model's log-likelihood (from its
    log-probabilities directly, not the fitting code) maximised over the other coefficients and the
    tie parameter; ``pin`` fixes one more coefficient at 0 (the reference of a shift-invariant model).
    The tie parameter is kept in a box (raw value at most 4): where ties alone would send it to
    infinity, the coefficients' own gain from moving on would otherwise shrink below rounding."""
    entry = get_outcome_model(model)
    w = outcome_weights(model, pairs.counts)
    n = pairs.n_models
    free = [k for k in range(n) if k not in (j, pin)]
    n_extra = entry.n_extra

    def full(x: np.ndarray) -> tuple[np.ndarray, float | None]:
        coefs = np.zeros(n)
        coefs[j] = value
        coefs[free] = x[: len(free)]
        return coefs, (x[-1] if n_extra else None)

    def negll(x: np.ndarray) -> float:
        coefs, extra = full(x)
        logp = entry.log_probs(NUMPY_OPS, coefs[pairs.a], coefs[pairs.b], extra)
        with np.errstate(invalid="ignore"):
            return -float(np.where(w > 0, w * logp, 0.0).sum())

    bounds = [(-60.0, 60.0)] * len(free) + (
        [(entry.extra.lower if entry.extra.lower is not None else -8.0, 4.0)] if n_extra else []
    )
    if not bounds:
        return -negll(np.zeros(0))
    starts = [np.zeros(len(bounds)), np.full(len(bounds), value)]
    if n_extra:
        for s in starts:
            s[-1] = 0.5
    best = min(
        minimize(
            negll, s, method="L-BFGS-B", bounds=bounds, options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 5000}
        ).fun
        for s in starts
    )
    return -best


def unbounded_by_profile(model: str, pairs: PairCounts, j: int, direction: float, core: list[int]) -> bool:
    """True when the profile likelihood of coefficient ``j`` still rises between ``direction`` × 6 and
    × 14 (it keeps increasing towards ±inf). A shift-invariant model's coefficients are relative: the
    reference is a model of the identified ``core`` (any other model when there is none)."""
    others = [k for k in range(pairs.n_models) if k != j]
    pins = ([k for k in core if k != j] or others) if get_outcome_model(model).shift_invariant else [None]
    return any(
        profile_loglik(model, pairs, j, 14 * direction, pin)
        > profile_loglik(model, pairs, j, 6 * direction, pin) + 1e-8
        for pin in pins
    )


def flags(sep, n: int) -> list[str]:
    return [("+" if sep.unbounded_above[k] else "") + ("-" if sep.unbounded_below[k] else "") for k in range(n)]


def test_every_outcome_model_has_designs_of_both_kinds() -> None:
    for name in OUTCOME_MODELS:
        kinds = {all(f == "" for f in expected) for model, _, expected in DESIGNS if model == name}
        assert kinds == {True, False}, name


@pytest.mark.parametrize(
    ("model", "battles", "expected"), DESIGNS, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(DESIGNS)]
)
def test_planted_designs_are_flagged_as_the_profile_likelihood_says(model: str, battles, expected) -> None:
    pairs = design_pairs(battles)
    sep = pair_separation(pairs, model)
    assert flags(sep, pairs.n_models) == expected
    core = [k for k, f in enumerate(expected) if f == ""]
    truth = [
        ("+" if unbounded_by_profile(model, pairs, k, 1.0, core) else "")
        + ("-" if unbounded_by_profile(model, pairs, k, -1.0, core) else "")
        for k in range(pairs.n_models)
    ]
    assert truth == expected


def alpaca_like(seed: int = 0) -> pd.DataFrame:
    """Four models in every outcome with each other, and 'weak' with 372 losses and 186 'both bad'
    (the counts of alpaca-13b on 25% of the training prompts of the RWQ battles)."""
    rng = np.random.default_rng(seed)
    rows = []
    for x, y in itertools.combinations(["m1", "m2", "m3", "m4"], 2):
        for w in rng.choice(["model_a", "model_b", "tie", "tie (bothbad)"], size=40, p=[0.4, 0.3, 0.15, 0.15]):
            rows.append((x, y, str(w)))
    for k in range(372 + 186):
        other = f"m{1 + k % 4}"
        rows.append(("weak", other, "model_b" if k < 372 else "tie (bothbad)"))
    return pd.DataFrame(
        [{"prompt": f"p{i}", "model_a": a, "model_b": b, "winner": w} for i, (a, b, w) in enumerate(rows)]
    )


@pytest.mark.parametrize("model", ["bt", "bt-tie", "rk", "grk"])
def test_a_model_with_only_losses_and_both_bad(model: str) -> None:
    """Not identified by bt (ties dropped) nor grk (a "both bad" bounds it from above only); bt-tie
    counts "both bad" as half a win each way and rk merges it into ties, which bound both sides, so
    there it is identified."""
    result = fit_leaderboard(alpaca_like(), FitOptions(outcome_model=model, ci="sandwich"), progress=False)
    board = result.leaderboard.set_index("model")
    if model in ("bt-tie", "rk"):
        assert board["identified"].all() and np.isfinite(board.loc["weak", "coef"])
        return
    assert not board.loc["weak", "identified"] and board.loc[["m1", "m2", "m3", "m4"], "identified"].all()
    assert board.loc["weak", "coef"] == -np.inf and board.loc["weak", "lower"] == -np.inf
    assert "weak never won" in (result.summary.not_identified or "")


def test_pinned_coefficients_are_finite_and_documented() -> None:
    """Below: the lowest identified coefficient; above: the highest; both ways: their mean (0 for grk)."""
    pairs = design_pairs([(0, 1, W), (0, 1, L), (2, 0, W), (1, 3, W)])  # 2 never lost, 3 never won
    board = Leaderboard.from_counts(pairs, "bt", ci=None).pinned(pairs)
    assert board.identified.tolist() == [True, True, False, False]
    assert board.coefs[2] == board.coefs[:2].max() and board.coefs[3] == board.coefs[:2].min()
    assert board.coefs[0] == pytest.approx(-board.coefs[1], abs=1e-6)
    grk = design_pairs([(0, 1, L), (0, 1, BB), (1, 2, W), (1, 2, BB), (1, 2, L), (3, 2, W), (3, 4, T)])
    pinned = Leaderboard.from_counts(grk, "grk", ci=None).pinned(grk)
    assert pinned.identified.tolist() == [False, True, True, False, False]  # 0 lost or both bad; 3, 4 never lost
    assert np.isfinite(pinned.coefs).all()
    assert pinned.coefs[0] == pinned.coefs[1:3].min() and (pinned.coefs[3:] == pinned.coefs[1:3].max()).all()
    assert pinned.frame().set_index("model").loc["0", "identified"].item() is False


def test_p2l_train_grk_warm_start_pins_the_unidentified_coefficient(tmp_path: Path, capsys) -> None:
    """`p2l train --loss grk` on battles where 'weak' only loses or is 'both bad': the warm start (head
    bias), the stored marginal and the baseline use the pinned coefficient, marked not identified."""
    import torch
    from helpers import run_cli

    from evalprism.p2l import TrainOptions
    from evalprism.p2l.model import CoefficientHead, P2LModel
    from evalprism.p2l.train import fit_marginal, prepare_battles, warm_start

    battles = alpaca_like()
    battles["prompt"] = [f"question {i % 60}: explain topic {i % 7}" for i in range(len(battles))]
    battles.to_json(tmp_path / "battles.jsonl", orient="records", lines=True)
    code, _, err = run_cli(
        [
            "p2l",
            "train",
            str(tmp_path / "battles.jsonl"),
            "--loss",
            "grk",
            "--penalty",
            "1e6",
            "--out",
            str(tmp_path / "model"),
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    assert "do not identify the grk coefficient of weak" in " ".join(err.split())
    marginal = pd.read_csv(tmp_path / "model" / "marginal.csv").set_index("model")
    others = marginal.drop(index="weak")
    assert not marginal.loc["weak", "identified"] and others["identified"].all()
    assert marginal.loc["weak", "coef"] == pytest.approx(others["coef"].min())
    assert marginal.loc["weak", "coef"] > -10  # the unpinned fit stops near -30
    run = json.loads((tmp_path / "model" / "run.json").read_text())
    assert run["results"]["marginal_pinned"] == ["weak"]
    config = json.loads((tmp_path / "model" / "config.json").read_text())
    assert config["training"]["marginal_pinned"] == ["weak"]
    model = P2LModel.load(tmp_path / "model")
    assert torch.isfinite(model.head.linear.bias).all()
    # the warm start itself (epoch 0 of adamw; the ridge fit's start): the pinned coefficient in the bias
    data = prepare_battles(battles, TrainOptions(outcome_model="grk").resolved())
    marginal = fit_marginal(data, "grk")
    head = CoefficientHead(8, len(data.names), "grk")
    warm_start(head, marginal)
    weak = data.names.index("weak")
    assert float(head.linear.bias.detach()[weak]) == pytest.approx(marginal_csv_coef := marginal.coefs[weak], abs=1e-6)
    assert marginal_csv_coef == pytest.approx(marginal.coefs[marginal.identified].min())
    raw = Leaderboard.from_counts(
        PairCounts.from_battles(
            data.arrays.a[data.train_idx],
            data.arrays.b[data.train_idx],
            data.arrays.outcome[data.train_idx],
            len(data.names),
        ),
        "grk",
        ci=None,
    )
    assert raw.coefs[weak] < -15  # what the warm start began at before: the optimiser's stopping point
