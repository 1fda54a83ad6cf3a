"""Prompt-to-Leaderboard (seed 002): marginal pairwise leaderboards first; prompt-conditioned
leaderboards, aggregation, routing and strength analysis build on the same outcome models.

Entry point so far: :func:`fit_leaderboard` -> :class:`LeaderboardResult`.
"""

from evalprism.p2l.marginal import LeaderboardResult, fit_leaderboard

__all__ = ["LeaderboardResult", "fit_leaderboard"]
