"""Leaderboard baselines: each model's mean training quality, per benchmark or overall.

The per-benchmark leaderboard is what a user reads off a leaderboard per task and routes by: it knows
an item's benchmark (which the prompt-only routers must infer from the text) and nothing else about it.
A benchmark not seen in training falls back to the overall means.
"""

from __future__ import annotations

import numpy as np


def mean_quality(quality: np.ndarray) -> np.ndarray:
    """Each model's mean quality over the items (M,): the overall leaderboard."""
    return np.asarray(quality, dtype=np.float64).mean(axis=0)


class BenchmarkLeaderboard:
    """Mean quality per (benchmark, model) on the training items; ``overall_`` for unseen benchmarks."""

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> BenchmarkLeaderboard:
        names, codes = np.unique(np.asarray(benchmarks).astype(str), return_inverse=True)
        sums = np.zeros((names.size, quality.shape[1]))
        np.add.at(sums, codes, quality)
        self.benchmarks_ = names
        self.means_ = sums / np.bincount(codes, minlength=names.size)[:, None]
        self.overall_ = mean_quality(quality)
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        wanted = np.asarray(benchmarks).astype(str)
        pos = np.searchsorted(self.benchmarks_, wanted)
        pos = np.clip(pos, 0, self.benchmarks_.size - 1)
        known = self.benchmarks_[pos] == wanted
        return np.where(known[:, None], self.means_[pos], self.overall_[None, :])
