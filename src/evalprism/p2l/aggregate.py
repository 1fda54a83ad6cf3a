"""The eq. 3 aggregate of prompt leaderboards, exported by :mod:`evalprism.p2l`.

The kernel lives in :mod:`evalprism.stats.aggregate`; this module keeps the public
``evalprism.p2l.aggregate_leaderboards`` (and ``evalprism.p2l.aggregate``) import paths.
"""

from evalprism.stats.aggregate import Aggregation, aggregate_by_group, aggregate_leaderboards, expected_win_matrix

__all__ = ["Aggregation", "aggregate_by_group", "aggregate_leaderboards", "expected_win_matrix"]
