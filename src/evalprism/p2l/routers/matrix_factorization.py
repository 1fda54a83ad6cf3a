"""RouteLLM's matrix-factorisation router (``mf``; Ong et al. 2024, arXiv:2406.18665), reimplemented.

RouteLLM (``routellm/routers/matrix_factorization``) scores model m on a prompt with embedding x as

    s_m(x) = w · ( P̂_m ⊙ W x ),    P̂_m = P_m / ‖P_m‖,

a model embedding P (M, dim) normalised to unit length, a projection W (text_dim, dim) of the prompt
embedding and a classifier vector w (dim,), all without bias; it is trained on pairwise battles with
the logistic loss of s_winner − s_loser (``BCEWithLogitsLoss`` against label 1), Gaussian noise of
scale α added to the prompt embeddings during training, Adam with weight decay. We keep that model,
loss and noise exactly and build the battles from graded items as RouteLLM builds them from Arena
data: every two models scored differently on an item, the higher score winning (ties carry no
label). Two departures, both for CPU time: full-size mini-batches (:data:`BATCH`) and a higher
learning rate over fewer epochs than RouteLLM's (64 battles, lr 3e-4, 100 epochs on a GPU), and at
most :data:`PAIRS_PER_EPOCH` battles drawn per epoch. The quality a router maximises is each model's
predicted win rate against a uniform opponent, mean_a σ(s_m − s_a) (:func:`~evalprism.stats.routing.win_values`),
the value P2L's routers use, so the budget rule mixes models on a win-rate scale.

On pairwise battles (:mod:`evalprism.p2l.bench_battles`) ``mf`` is trained as RouteLLM trained it, on
the decisive battles themselves (:meth:`MatrixFactorization.fit_battles`), with RouteLLM's own batch,
learning rate and epochs (:data:`BATTLE_SETTINGS`): battle sets are small enough for them on a CPU.

Why not a library: RouteLLM's own class calls the OpenAI embeddings API inside ``forward`` and fixes
its 64 model ids; no maintained package offers this text-conditioned factorisation on given features.
"""

from __future__ import annotations

import numpy as np

from evalprism.stats.routing import win_values

DIM = 128  # RouteLLM's dim
NOISE = 0.1  # RouteLLM's alpha
WEIGHT_DECAY = 1e-5  # RouteLLM's weight decay
LR = 3e-3
BATCH = 2048
EPOCHS = 30
PAIRS_PER_EPOCH = 200_000
#: RouteLLM's own (batch, learning rate, epochs), used on battles
BATTLE_SETTINGS = (64, 3e-4, 100)


def decisive_pairs(quality: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, winner, loser) for every two models whose scores on an item differ (both scored: a
    missing score, NaN, makes no pair)."""
    i, j = np.triu_indices(quality.shape[1], 1)
    qi, qj = quality[:, i], quality[:, j]
    item, pair = np.nonzero((qi != qj) & np.isfinite(qi) & np.isfinite(qj))
    first_wins = qi[item, pair] > qj[item, pair]
    winner = np.where(first_wins, i[pair], j[pair])
    loser = np.where(first_wins, j[pair], i[pair])
    return item, winner, loser


class MatrixFactorization:
    """RouteLLM's ``mf`` on given prompt features; ``P_``, ``W_``, ``w_`` the fitted parameters."""

    def __init__(self, seed: int = 0, dim: int = DIM, epochs: int = EPOCHS) -> None:
        self.seed, self.dim, self.epochs = seed, dim, epochs

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> MatrixFactorization:
        return self._train(features, decisive_pairs(quality), quality.shape[1], BATCH, LR, self.epochs)

    def fit_battles(
        self, features: np.ndarray, pairs: tuple[np.ndarray, np.ndarray, np.ndarray], models: int
    ) -> MatrixFactorization:
        """Fit on decisive battles ``pairs`` = (prompt row of ``features``, winner, loser), model indices
        below ``models``, with RouteLLM's own settings (:data:`BATTLE_SETTINGS`)."""
        batch, lr, epochs = BATTLE_SETTINGS
        return self._train(features, pairs, models, batch, lr, epochs)

    def _train(
        self,
        features: np.ndarray,
        pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
        m: int,
        batch: int,
        lr: float,
        epochs: int,
    ) -> MatrixFactorization:
        import torch

        gen = torch.Generator().manual_seed(self.seed)
        x = torch.as_tensor(features, dtype=torch.float32)
        item, win, lose = (torch.as_tensor(a, dtype=torch.long) for a in pairs)
        P = torch.nn.Parameter(torch.randn(m, self.dim, generator=gen))
        W = torch.nn.Parameter(torch.randn(x.shape[1], self.dim, generator=gen) / np.sqrt(x.shape[1]))
        w = torch.nn.Parameter(torch.randn(self.dim, generator=gen) / np.sqrt(self.dim))
        optimiser = torch.optim.Adam([P, W, w], lr=lr, weight_decay=WEIGHT_DECAY)
        for _ in range(epochs if item.numel() else 0):
            draw = torch.randperm(item.numel(), generator=gen)[:PAIRS_PER_EPOCH]
            for start in range(0, draw.numel(), batch):
                take = draw[start : start + batch]
                prompt = x[item[take]] + NOISE * torch.randn(take.numel(), x.shape[1], generator=gen)
                unit = torch.nn.functional.normalize(P, dim=1)
                logit = ((unit[win[take]] - unit[lose[take]]) * (prompt @ W)) @ w
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, torch.ones_like(logit))
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
        self.P_, self.W_, self.w_ = (t.detach().numpy().astype(np.float64) for t in (P, W, w))
        return self

    def scores(self, features: np.ndarray) -> np.ndarray:
        """s_m(x) (n, M) for every model."""
        unit = self.P_ / np.linalg.norm(self.P_, axis=1, keepdims=True)
        return ((features @ self.W_)[:, None, :] * unit[None, :, :]) @ self.w_

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        s = self.scores(np.asarray(features, dtype=np.float64))
        return win_values(s, np.full(s.shape[1], 1.0 / s.shape[1]))
