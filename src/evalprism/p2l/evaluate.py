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
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import torch
from scipy.special import expit

from evalprism.io.battles import battle_arrays, in_content_order, require_prompts, to_canonical_battles
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.p2l.model import P2LModel, Prediction, model_names
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


def _observed(loss: str, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The battles the loss uses (mask), their outcome weights normalised per battle, and the number of
    outcomes the loss predicts (the first k)."""
    k = len(outcome_model(loss).outcomes)  # the outcomes the loss predicts are the first k
    w = outcome_weights(loss, rows)[:, :k]
    total = w.sum(axis=1)
    used = total > 0
    return used, w[used] / total[used, None], k


def battle_nll(loss: str, logp: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each used battle's negative log-likelihood under predictions ``logp`` (the battles the loss
    leaves out, ties under ``bt``, are dropped: the mask is ``outcome_weights(...).sum(1) > 0``)."""
    used, w, k = _observed(loss, rows)
    return -(w * np.where(w > 0, logp[used, :k], 0.0)).sum(axis=1)


def outcome_metrics(loss: str, logp: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    """Mean NLL, expected accuracy and Brier score of predictions ``logp`` against outcome ``rows``."""
    used, w, k = _observed(loss, rows)
    p = np.exp(logp[used, :k])
    nll = float(battle_nll(loss, logp, rows).mean())
    accuracy = float(w[np.arange(w.shape[0]), p.argmax(axis=1)].mean())
    brier = float(((p - w) ** 2).sum(axis=1).mean())
    return {"battles": int(used.sum()), "nll": nll, "accuracy": accuracy, "brier": brier}


def paired_difference(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """Mean of per-battle ``values`` (a difference of two predictors' NLL on the same battles) and its
    standard error clustered by ``clusters`` (the prompt of each battle): battles of one prompt are
    correlated, so they count as one draw (the sandwich estimator with the small-sample factor
    G/(G-1)). NaN for the SE with fewer than two prompts."""
    n = values.size
    mean = float(values.mean())
    codes, uniques = pd.factorize(clusters)
    g = len(uniques)
    if g < 2:
        return mean, float("nan")
    per_prompt = np.bincount(codes, weights=values - mean, minlength=g)
    return mean, float(np.sqrt(g / (g - 1) * np.sum(per_prompt ** 2)) / n)


def compare_predictors(loss: str, rows: np.ndarray, predictions: dict[str, np.ndarray],
                       prompts: np.ndarray | None = None) -> pd.DataFrame:
    """One row per predictor (constant first): battles, nll, accuracy, brier. With ``prompts`` (each
    battle's prompt) and a ``marginal`` predictor: ``nll_vs_marginal``, each predictor's mean NLL minus
    the marginal's on the same battles (negative: better), and ``se_vs_marginal``, its paired standard
    error clustered by prompt (:func:`paired_difference`)."""
    k = len(outcome_model(loss).outcomes)
    constant = np.full((rows.shape[0], 4), -np.inf)
    constant[:, :k] = -np.log(k)
    everything = {"constant": constant, **predictions}
    table = pd.DataFrame([{"predictor": name, **outcome_metrics(loss, logp, rows)} for name, logp in everything.items()])
    if prompts is not None and "marginal" in predictions:
        used = _observed(loss, rows)[0]
        base = battle_nll(loss, predictions["marginal"], rows)
        pairs = [paired_difference(battle_nll(loss, logp, rows) - base, np.asarray(prompts)[used])
                 for logp in everything.values()]
        table["nll_vs_marginal"] = [d for d, _ in pairs]
        table["se_vs_marginal"] = [se for _, se in pairs]
        table.loc[table["predictor"] == "marginal", ["nll_vs_marginal", "se_vs_marginal"]] = np.nan
    return table


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


def evaluate_model_dir(model_dir: str | Path, battles: pd.DataFrame, *, repeats: int = 10, seed: int = 0,
                       cache_dir: str | Path | None = None, progress: bool = True) -> EvaluationResult:
    """:func:`evaluate_model` with the model in ``model_dir``: the battles are checked against its model
    list first (:func:`~evalprism.p2l.model.model_names`, milliseconds), so battles of models it does not
    rank fail before the encoder loads (tens of seconds)."""
    battle_arrays(to_canonical_battles(battles), names=model_names(model_dir), min_battles=1)
    model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=progress)
    return evaluate_model(model, battles, repeats=repeats, seed=seed, progress=progress)


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
    metrics = compare_predictors(model.loss, rows, predictions, np.asarray(prompts, dtype=object))

    present = np.unique(np.concatenate([arrays.a, arrays.b]))
    truth = fit_counts(PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(model.models), p_b=arrays.p_b),
                       "bt").coefs[present]
    prompt_coefs = pred.coefs[:, present]
    sizes = [k for k in (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500) if k < len(distinct)] + [len(distinct)]
    scaling = aggregation_scaling(prompt_coefs, truth, sizes, repeats, seed)
    if marginal is not None:
        scaling["marginal_train_l1"] = function_distance(marginal[present], truth)
    options = {"n_battles": len(table), "n_prompts": len(distinct), "loss": model.loss, "repeats": repeats, "seed": seed,
               "battles_used": int(metrics["battles"].iloc[0]), "left_out": note, "read": table.attrs.get("choices", [])}
    return EvaluationResult(metrics, scaling, options)
