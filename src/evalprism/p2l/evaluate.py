"""How well leaderboards predict held-out votes: NLL, accuracy and Brier score (seed 002 Fig. 2).

Predictions are outcome probabilities per battle (n, 4) in the order of
:data:`evalprism.stats.pairwise.OUTCOMES`; observations are the per-battle outcome weights of the
loss in use (soft labels give fractional weights), normalised to sum to one per battle. Battles
the loss ignores (ties under ``bt``) are left out. Three predictors are compared: the constant one
(equal probability for every outcome the loss knows), the marginal leaderboard and P2L.
Aggregation scaling (Fig. 6) measures how fast the eq. 3 aggregate of a few prompts' leaderboards
approaches the ground-truth leaderboard of the prompt set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from scipy.special import expit

from evalprism.io.battles import battle_arrays, in_content_order, require_prompts, to_canonical_battles
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.p2l.model import P2LModel, Prediction
from evalprism.progress import status
from evalprism.p2l.likelihood import log_outcome_probs
from evalprism.stats.aggregate import aggregate_leaderboards
from evalprism.stats.outcome_models import outcome_model
from evalprism.stats.pairwise import PairCounts, fit_counts, ignored_battles_note, outcome_rows, outcome_weights


def marginal_log_probs(loss: str, coefs: np.ndarray, extra: float | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b under one constant leaderboard (``extra``: its
    reported tie parameter)."""
    ex = None
    if extra is not None:
        raw = outcome_model(loss).extra.unreport(extra)  # type: ignore[union-attr]
        ex = torch.full((a.size,), float(raw), dtype=torch.float64)
    c = torch.tensor(np.asarray(coefs, dtype=np.float64))
    return log_outcome_probs(loss, c[torch.as_tensor(np.array(a))], c[torch.as_tensor(np.array(b))], ex).numpy()


def p2l_log_probs(model: P2LModel, prompts: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b, each under the leaderboard of its own prompt."""
    distinct = list(dict.fromkeys(prompts))
    return prediction_log_probs(model.loss, model.predict(distinct), pd.Index(distinct).get_indexer(prompts), a, b)


def prediction_log_probs(loss: str, pred: Prediction, pos: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b, battle i under the leaderboard ``pred`` row ``pos[i]``."""
    extra = None
    if pred.extra is not None:
        raw = outcome_model(loss).extra.unreport(pred.extra)  # type: ignore[union-attr]
        extra = torch.as_tensor(raw[pos], dtype=torch.float64)
    coefs = torch.as_tensor(pred.coefs[pos])
    rows = torch.arange(a.size)
    return log_outcome_probs(loss, coefs[rows, torch.as_tensor(np.array(a))], coefs[rows, torch.as_tensor(np.array(b))], extra).numpy()


def outcome_metrics(loss: str, logp: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    """Mean NLL, expected accuracy and Brier score of predictions ``logp`` against outcome ``rows``."""
    k = len(outcome_model(loss).outcomes)  # the outcomes the loss predicts are the first k
    w = outcome_weights(loss, rows)[:, :k]
    total = w.sum(axis=1)
    used = total > 0
    w = w[used] / total[used, None]
    p = np.exp(logp[used, :k])
    logp_used = np.where(w > 0, logp[used, :k], 0.0)
    nll = float(-(w * logp_used).sum(axis=1).mean())
    accuracy = float(w[np.arange(w.shape[0]), p.argmax(axis=1)].mean())
    brier = float(((p - w) ** 2).sum(axis=1).mean())
    return {"battles": int(used.sum()), "nll": nll, "accuracy": accuracy, "brier": brier}


def compare_predictors(loss: str, rows: np.ndarray, predictions: dict[str, np.ndarray]) -> pd.DataFrame:
    """One row per predictor (constant first): battles, nll, accuracy, brier."""
    k = len(outcome_model(loss).outcomes)
    constant = np.full((rows.shape[0], 4), -np.inf)
    constant[:, :k] = -np.log(k)
    table = [{"predictor": "constant", **outcome_metrics(loss, constant, rows)}]
    table += [{"predictor": name, **outcome_metrics(loss, logp, rows)} for name, logp in predictions.items()]
    return pd.DataFrame(table)


def function_distance(coefs: np.ndarray, truth: np.ndarray) -> float:
    """Mean |σ(θ_a − θ_b) − σ(θ*_a − θ*_b)| over ordered model pairs a ≠ b: the L1 distance between
    the win probabilities two leaderboards predict (seed 002 section 3.5)."""
    d = expit(coefs[:, None] - coefs[None, :]) - expit(truth[:, None] - truth[None, :])
    m = coefs.size
    return float(np.abs(d).sum() / (m * (m - 1)))


def aggregation_scaling(prompt_coefs: np.ndarray, truth: np.ndarray, sizes: list[int], repeats: int = 10,
                        seed: int = 0) -> pd.DataFrame:
    """Fig. 6: distance between the eq. 3 aggregate of ``k`` random prompts' leaderboards and the
    ground-truth leaderboard ``truth``, for each k in ``sizes`` (``repeats`` draws each). The draws are
    over the rows of ``prompt_coefs``: give them in content order (by prompt), not file order."""
    rng = np.random.default_rng(seed)
    n = prompt_coefs.shape[0]
    rows = []
    for k in sizes:
        for r in range(repeats if k < n else 1):
            pick = rng.choice(n, size=min(k, n), replace=False)
            rows.append({"prompts": int(min(k, n)), "repeat": r,
                         "l1": function_distance(aggregate_leaderboards(prompt_coefs[pick]), truth)})
    return pd.DataFrame(rows)


@dataclass
class EvaluationResult(SavedResult):
    """``metrics`` (constant / marginal / P2L on the battles) and ``scaling`` (Fig. 6)."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_EVALUATE

    metrics: pd.DataFrame
    scaling: pd.DataFrame
    options: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"metrics": self.metrics, "scaling": self.scaling}

    def report(self) -> Any:
        from evalprism.p2l.reports import evaluation_report

        return evaluation_report(self)


def evaluate_model(model: P2LModel, battles: pd.DataFrame, *, repeats: int = 10, seed: int = 0,
                   progress: bool = True) -> EvaluationResult:
    """Score ``model`` on held-out ``battles``: NLL / accuracy / Brier against the constant and the
    marginal (training) leaderboard, and the aggregation scaling of Fig. 6 against the marginal BT
    fitted on these battles themselves (the ground truth of this prompt set)."""
    table = to_canonical_battles(battles)
    where = table.attrs.get("source") or "battles table"
    require_prompts(table["prompt"], where)
    table = in_content_order(table)  # the scaling draws pick prompts from this order; sums run in it
    arrays = battle_arrays(table, names=model.models, min_battles=1)
    rows = outcome_rows(arrays.outcome, arrays.p_b)
    prompts = table["prompt"].astype(str).tolist()
    distinct = list(dict.fromkeys(prompts))
    status(f"scoring {len(table)} battles on {len(distinct)} prompts", progress)
    note = ignored_battles_note(model.loss, arrays.outcome, arrays.p_b)
    if note:
        status(note, progress)
    pred = model.predict(distinct)  # once: the votes and the scaling curve both read these leaderboards
    predictions = {"p2l": prediction_log_probs(model.loss, pred, pd.Index(distinct).get_indexer(prompts),
                                               arrays.a, arrays.b)}
    marginal = None if model.marginal is None else model.marginal.set_index("model").loc[model.models, "coef"].to_numpy()
    if marginal is not None:
        extra = model.config.get("training", {}).get("marginal_extra")
        predictions = {"marginal": marginal_log_probs(model.loss, marginal, extra, arrays.a, arrays.b), **predictions}
    metrics = compare_predictors(model.loss, rows, predictions)

    present = np.unique(np.concatenate([arrays.a, arrays.b]))
    truth = fit_counts(PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(model.models), p_b=arrays.p_b),
                       "bt").coefs[present]
    prompt_coefs = pred.coefs[:, present]
    sizes = [k for k in (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500) if k < len(distinct)] + [len(distinct)]
    scaling = aggregation_scaling(prompt_coefs, truth, sizes, repeats, seed)
    if marginal is not None:
        scaling["marginal_train_l1"] = function_distance(marginal[present], truth)
    options = {"n_battles": len(table), "n_prompts": len(distinct), "loss": model.loss, "repeats": repeats, "seed": seed}
    return EvaluationResult(metrics, scaling, options)
