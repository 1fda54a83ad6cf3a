"""Leaderboard baselines: each model's mean training quality, per benchmark or overall.

The per-benchmark leaderboard is what a user reads off a leaderboard per task and routes by: it knows
an item's benchmark (which the prompt-only routers must infer from the text) and nothing else about it.
A benchmark not seen in training falls back to the overall means.

Quality learned from pairwise battles is sparse (NaN where a model did not fight on a prompt): a mean
is then over the entries a model has, a (benchmark, model) without one falls back to the model's
overall mean, and the overall leaderboard is each model's mean result over its battles' prompts.
"""

from __future__ import annotations

import numpy as np


def mean_quality(quality: np.ndarray) -> np.ndarray:
    """Each model's mean quality over the items (M,): the overall leaderboard (over the items it has,
    where the quality is sparse)."""
    quality = np.asarray(quality, dtype=np.float64)
    return np.nanmean(quality, axis=0) if np.isnan(quality).any() else quality.mean(axis=0)


class BenchmarkLeaderboard:
    """Mean quality per (benchmark, model) on the training items; ``overall_`` for unseen benchmarks."""

    def fit(self, features: np.ndarray, quality: np.ndarray, benchmarks: np.ndarray) -> BenchmarkLeaderboard:
        names, codes = np.unique(np.asarray(benchmarks).astype(str), return_inverse=True)
        sums = np.zeros((names.size, quality.shape[1]))
        self.benchmarks_ = names
        self.overall_ = mean_quality(quality)
        observed = np.isfinite(quality)
        if observed.all():
            np.add.at(sums, codes, quality)
            self.means_ = sums / np.bincount(codes, minlength=names.size)[:, None]
            return self
        counts = np.zeros_like(sums)
        np.add.at(sums, codes, np.where(observed, quality, 0.0))
        np.add.at(counts, codes, observed.astype(np.float64))
        self.means_ = np.where(counts > 0, sums / np.maximum(counts, 1.0), self.overall_[None, :])
        return self

    def predict(self, features: np.ndarray, benchmarks: np.ndarray) -> np.ndarray:
        wanted = np.asarray(benchmarks).astype(str)
        pos = np.searchsorted(self.benchmarks_, wanted)
        pos = np.clip(pos, 0, self.benchmarks_.size - 1)
        known = self.benchmarks_[pos] == wanted
        return np.where(known[:, None], self.means_[pos], self.overall_[None, :])
