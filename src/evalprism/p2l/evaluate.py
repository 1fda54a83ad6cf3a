"""How well leaderboards predict held-out votes: NLL, accuracy and Brier score (seed 002 Fig. 2).

Predictions are outcome probabilities per battle (n, 4) in the order of
:data:`evalprism.stats.pairwise.OUTCOMES`; observations are the per-battle outcome weights of the
loss in use (soft labels give fractional weights), normalised to sum to one per battle. Battles
the loss ignores (ties under ``bt``) are left out. Three predictors are compared: the constant one
(equal probability for every outcome the loss knows), the marginal leaderboard and P2L.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from evalprism.p2l.model import P2LModel

from evalprism.stats.pairwise import log_outcome_probs, outcome_weights

#: outcomes each loss predicts (A wins, B wins, tie, tie both bad)
SUPPORT = {"bt": 2, "bt-tie": 2, "rk": 3, "grk": 4}


def outcome_rows(outcome: np.ndarray, p_b: np.ndarray | None = None) -> np.ndarray:
    """One row of outcome weights per battle: one-hot of the outcome index, or (1 - p_b, p_b, 0, 0)
    where a soft label is given."""
    outcome = np.asarray(outcome, np.int64)
    rows = np.zeros((outcome.size, 4))
    rows[np.arange(outcome.size), outcome] = 1.0
    if p_b is not None:
        p_b = np.asarray(p_b, dtype=float)
        soft = np.isfinite(p_b)
        rows[soft] = 0.0
        rows[soft, 0] = 1.0 - p_b[soft]
        rows[soft, 1] = p_b[soft]
    return rows


def marginal_log_probs(loss: str, coefs: np.ndarray, extra: float | None, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b under one constant leaderboard."""
    ex = None
    if extra is not None:
        raw = np.log(extra - 1.0) if loss == "grk" else extra  # grk reports λ; the kernel takes log(λ - 1)
        ex = torch.full((a.size,), float(raw), dtype=torch.float64)
    c = torch.as_tensor(coefs, dtype=torch.float64)
    return log_outcome_probs(loss, c[torch.as_tensor(a)], c[torch.as_tensor(b)], ex).numpy()


def p2l_log_probs(model: P2LModel, prompts: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b, each under the leaderboard of its own prompt."""
    distinct = list(dict.fromkeys(prompts))
    pred = model.predict(distinct)
    pos = pd.Index(distinct).get_indexer(prompts)
    extra = None
    if pred.extra is not None:
        raw = np.log(pred.extra - 1.0) if model.loss == "grk" else pred.extra
        extra = torch.as_tensor(raw[pos], dtype=torch.float64)
    coefs = torch.as_tensor(pred.coefs[pos])
    rows = torch.arange(a.size)
    return log_outcome_probs(model.loss, coefs[rows, torch.as_tensor(a)], coefs[rows, torch.as_tensor(b)], extra).numpy()


def outcome_metrics(loss: str, logp: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    """Mean NLL, expected accuracy and Brier score of predictions ``logp`` against outcome ``rows``."""
    k = SUPPORT[loss]
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
    k = SUPPORT[loss]
    constant = np.full((rows.shape[0], 4), -np.inf)
    constant[:, :k] = -np.log(k)
    table = [{"predictor": "constant", **outcome_metrics(loss, constant, rows)}]
    table += [{"predictor": name, **outcome_metrics(loss, logp, rows)} for name, logp in predictions.items()]
    return pd.DataFrame(table)
