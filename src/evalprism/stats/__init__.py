"""Pure numeric kernels: no I/O, no pandas.

- :func:`w1_matrix`: exact L1 distance between ECDFs (= 1-Wasserstein), all pairs at once.
- :func:`ecdf_wins`: the seed's eq. (7) win matrix between ECDFs.
- :func:`kmedoids`: FasterPAM (``kmedoids`` package) or the seed's Algorithm 1 (:func:`pam`).
- :func:`mds_order`: 1-D MDS seriation of the rows of a matrix.
- :func:`fit_pairwise`: marginal BT / BT-with-ties / Rao-Kupper / grounded Rao-Kupper fits with
  95% intervals -> :class:`Leaderboard` (takes a battles table: the one kernel that accepts pandas,
  canonicalising at the boundary so callers need not aggregate by hand).
- :func:`best_mix`, :func:`best_mix_average_budget`, :func:`router_coefficient`: the routing LP of
  seed 002 Theorem 1 solved exactly, and the router's BT coefficient (Algorithm 1).
- :func:`gwet_ac1`, :func:`cohen_kappa`, :func:`percent_agreement`: two-rater agreement (Gwet 2008 AC1
  with SE and interval as irrCAC computes it); :func:`agreement_by_group` for many groups at once.
"""

from evalprism.stats.agreement import Agreement, GroupAgreement, agreement_by_group, cohen_kappa, gwet_ac1, percent_agreement
from evalprism.stats.ecdf import ecdf_steps, ecdf_wins, w1_distance, w1_matrix
from evalprism.stats.kmedoids import choose_k, kmedoids, pam, pam_build
from evalprism.stats.routing import best_mix, best_mix_average_budget, router_coefficient, win_values
from evalprism.stats.seriation import mds_order

__all__ = [
    "Agreement",
    "GroupAgreement",
    "agreement_by_group",
    "cohen_kappa",
    "gwet_ac1",
    "percent_agreement",
    "Leaderboard",
    "PairCounts",
    "PairwiseFit",
    "best_mix",
    "best_mix_average_budget",
    "choose_k",
    "ecdf_steps",
    "ecdf_wins",
    "elo_ratings",
    "fit_pairwise",
    "kmedoids",
    "mds_order",
    "pam",
    "pam_build",
    "router_coefficient",
    "w1_distance",
    "w1_matrix",
    "win_values",
]

_LAZY = {"PairCounts", "PairwiseFit", "bootstrap_coefs", "elo_ratings", "fit_counts", "sandwich_cov"}
_LAZY_LEADERBOARD = {"Leaderboard", "fit_pairwise"}


def __getattr__(name: str) -> object:
    """The pairwise models need torch; load them on first use so ECDF work does not pay for it."""
    if name in _LAZY:
        from evalprism.stats import pairwise

        return getattr(pairwise, name)
    if name in _LAZY_LEADERBOARD:
        from evalprism.stats import leaderboard

        return getattr(leaderboard, name)
    raise AttributeError(f"module 'evalprism.stats' has no attribute {name!r}")
