"""The penalised fit of P2L's linear head on frozen prompt features: the default for frozen backbones.

Why not the epoch loop: measured on real battles split by prompt (``scripts/p2l_heldout_study.py``,
``docs/p2l_heldout_study.md``), AdamW with early stopping on a 10% validation split gained little on
RWQ and was *worse* than the marginal leaderboard on the small human Arena slice. The head is a
multinomial-logistic-type model on fixed features, so it can be fitted to convergence and its one
real choice, how far to move from the marginal leaderboard, made by cross-validation:

- objective (seed 002 eq. 2 with a penalty): the mean NLL per unit of outcome weight over the training
  battles plus ``λ ‖W‖²_F``. The bias is not penalised and the features are centred (by their mean
  over the training prompts, folded into the bias afterwards), so λ → ∞ gives back the marginal
  leaderboard exactly: with little data the model falls back to it rather than away from it;
- the fit: full-batch L-BFGS with a strong-Wolfe line search from the marginal warm start (zero
  weights, the marginal coefficients and tie parameter as bias), in float64;
- λ from :data:`PENALTY_GRID` plus ∞ (the marginal itself) by K-fold cross-validation over the
  training *prompts* (a prompt's fold is decided by the hash of its text and the seed,
  :func:`evalprism.keyed.keyed_hash`), each fold warm-started at the marginal of its own training
  battles; the largest λ within one standard error of the smallest out-of-fold NLL wins (the
  "one-standard-error rule" of cross-validated penalties, e.g. glmnet's ``lambda.1se``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from evalprism.keyed import keyed_hash
from evalprism.p2l.head import CoefficientHead
from evalprism.p2l.likelihood import log_outcome_probs
from evalprism.p2l.marginal import Leaderboard
from evalprism.p2l.train_summary import CV_FOLDS
from evalprism.vocabularies import OutcomeModelName

#: candidate penalties λ on ‖W‖²_F (features are unit-norm sentence embeddings); ∞ is always a candidate
PENALTY_GRID = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1)
#: L-BFGS settings: full batch, to convergence (the problem is small: prompts x feature dimensions)
LBFGS = {
    "lr": 1.0,
    "max_iter": 300,
    "history_size": 20,
    "tolerance_grad": 1e-6,
    "tolerance_change": 1e-9,
    "line_search_fn": "strong_wolfe",
}


@dataclass(frozen=True)
class RidgeBattles:
    """Battles as the penalised fit reads them: each battle's prompt (an index into the features),
    the two models and the outcome model's outcome weights (n, 4)."""

    prompt: np.ndarray
    a: np.ndarray
    b: np.ndarray
    weights: np.ndarray

    def subset(self, keep: np.ndarray) -> RidgeBattles:
        return RidgeBattles(self.prompt[keep], self.a[keep], self.b[keep], self.weights[keep])


def battle_nll(head: CoefficientHead, features: torch.Tensor, battles: RidgeBattles) -> torch.Tensor:
    """Each battle's outcome NLL (weighted; zero-weight outcomes count nothing even at -inf)."""
    coefs, extra = head(features)
    p = torch.as_tensor(battles.prompt)
    c = coefs[p]
    rows = torch.arange(p.shape[0])
    a, b = torch.as_tensor(battles.a), torch.as_tensor(battles.b)
    logp = log_outcome_probs(head.outcome_model, c[rows, a], c[rows, b], None if extra is None else extra[p])
    w = torch.as_tensor(battles.weights, dtype=logp.dtype)
    return -torch.where(w > 0, w * logp, torch.zeros_like(logp)).sum(dim=1)


def penalised_nll(head: CoefficientHead, features: torch.Tensor, battles: RidgeBattles) -> torch.Tensor:
    """Sum of the battles' outcome NLL (:func:`battle_nll`)."""
    return battle_nll(head, features, battles).sum()


def fit_penalised(head: CoefficientHead, features: np.ndarray, battles: RidgeBattles, penalty: float) -> None:
    """Fit ``head`` (warm-started: zero weights, the marginal leaderboard as bias) in place by
    minimising mean NLL + ``penalty`` ‖W‖²_F with full-batch L-BFGS on centred ``features`` (P, d), the
    centring folded back into the bias. ``penalty = inf`` leaves the warm start (the marginal)."""
    if math.isinf(penalty):
        return
    used = np.unique(battles.prompt)
    centre = features[used].mean(axis=0)
    work = CoefficientHead(features.shape[1], head.n_models, head.outcome_model).double()
    work.load_state_dict(head.state_dict())
    x = torch.as_tensor(features - centre, dtype=torch.float64)
    total = float(battles.weights.sum())
    optimizer = torch.optim.LBFGS(work.parameters(), **LBFGS)  # type: ignore[arg-type]

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        value = penalised_nll(work, x, battles) / total + penalty * (work.linear.weight**2).sum()
        value.backward()
        return value

    optimizer.step(closure)
    with torch.no_grad():
        work.linear.bias.sub_(work.linear.weight @ torch.as_tensor(centre, dtype=torch.float64))
        head.load_state_dict({k: v.to(torch.float32) for k, v in work.state_dict().items()})


def prompt_folds(prompts: list[str], k: int, seed: int) -> np.ndarray:
    """Each prompt's cross-validation fold in 0..k-1, from the hash of its text and the seed: the
    same prompts fall in the same fold in any file order."""
    return (keyed_hash(prompts, seed) % np.uint64(k)).astype(np.int64)


def choose_penalty(
    features: np.ndarray,
    prompts: list[str],
    battles: RidgeBattles,
    outcome_model: OutcomeModelName,
    marginal_of: Callable[[np.ndarray], Leaderboard],
    warm_start: Callable[..., None],
    *,
    seed: int,
    folds: int = CV_FOLDS,
    grid: tuple[float, ...] = PENALTY_GRID,
    step: Callable[[], None] = lambda: None,
) -> pd.DataFrame:
    """K-fold cross-validation of the penalty over the prompts of ``battles``, with the one-standard-
    error rule: the largest penalty whose out-of-fold NLL is within one standard error of the best
    (the standard error of the paired difference, by prompt: battles of one prompt are correlated).
    On little data the marginal leaderboard (λ = ∞) is kept unless a penalty beats it clearly.

    Returns one row per candidate (``penalty``, ∞ last): its out-of-fold ``cv_nll`` (per unit of
    outcome weight, pooled over folds), ``cv_se`` (the standard error of its difference to the best)
    and ``chosen``. ``marginal_of(mask)`` fits the marginal leaderboard of the battles in ``mask``;
    ``warm_start(head, leaderboard)`` sets a head to it; ``step()`` ticks a progress bar once per
    fitted (fold, candidate)."""
    used = np.unique(battles.prompt)
    k = min(folds, used.size)
    candidates = (*sorted(grid), math.inf)
    if k < 2:  # one training prompt: nothing to cross-validate, the marginal is all the data supports
        return pd.DataFrame(
            {"penalty": candidates, "cv_nll": np.nan, "cv_se": np.nan, "chosen": [c == math.inf for c in candidates]}
        )
    fold_of_prompt = np.full(len(prompts), -1)
    fold_of_prompt[used] = prompt_folds([prompts[i] for i in used], k, seed)
    fold = fold_of_prompt[battles.prompt]
    out_of_fold = np.zeros((len(candidates), battles.prompt.size))  # each battle's NLL when its fold is held out
    x = torch.as_tensor(features, dtype=torch.float32)  # as the saved head computes
    for f in range(k):
        inside = fold != f
        if not inside.any() or inside.all():
            continue
        board = marginal_of(inside)
        for j, penalty in enumerate(candidates):
            head = CoefficientHead(features.shape[1], len(board.names), outcome_model)
            warm_start(head, board)
            fit_penalised(head, features, battles.subset(inside), penalty)
            with torch.no_grad():
                out_of_fold[j, ~inside] = battle_nll(head, x, battles.subset(~inside)).numpy()
            step()
    total = float(battles.weights.sum())
    cv_nll = out_of_fold.sum(axis=1) / total
    best = int(np.argmin(cv_nll))
    # per-prompt sums of the paired difference to the best: its standard error as a mean per unit weight
    codes = np.unique(battles.prompt, return_inverse=True)[1]
    by_prompt = np.stack([np.bincount(codes, weights=row - out_of_fold[best]) for row in out_of_fold])
    se = by_prompt.std(axis=1, ddof=1) * math.sqrt(by_prompt.shape[1]) / total
    within = [j for j in range(len(candidates)) if cv_nll[j] - cv_nll[best] <= se[j]]
    chosen = max(within, key=lambda j: candidates[j])
    return pd.DataFrame(
        {"penalty": candidates, "cv_nll": cv_nll, "cv_se": se, "chosen": [j == chosen for j in range(len(candidates))]}
    )
