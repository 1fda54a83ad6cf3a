"""Pure numeric kernels: no I/O, no pandas.

- :func:`w1_matrix`: exact L1 distance between ECDFs (= 1-Wasserstein), all pairs at once.
- :func:`ecdf_wins`: the seed's eq. (7) win matrix between ECDFs.
- :func:`kmedoids`: FasterPAM (``kmedoids`` package) or the seed's Algorithm 1 (:func:`pam`).
- :func:`mds_order`: 1-D MDS seriation of the rows of a matrix.
- :func:`fit_pairwise`: marginal BT / BT-with-ties / Rao-Kupper / grounded Rao-Kupper fits.
"""

from evalprism.stats.ecdf import ecdf_steps, ecdf_wins, w1_distance, w1_matrix
from evalprism.stats.kmedoids import choose_k, kmedoids, pam, pam_build
from evalprism.stats.seriation import mds_order

__all__ = [
    "PairCounts",
    "PairwiseFit",
    "choose_k",
    "ecdf_steps",
    "ecdf_wins",
    "elo_ratings",
    "fit_pairwise",
    "kmedoids",
    "mds_order",
    "pam",
    "pam_build",
    "w1_distance",
    "w1_matrix",
]

_LAZY = {"PairCounts", "PairwiseFit", "bootstrap_coefs", "elo_ratings", "fit_pairwise", "sandwich_cov"}


def __getattr__(name: str) -> object:
    """The pairwise models need torch; load them on first use so ECDF work does not pay for it."""
    if name in _LAZY:
        from evalprism.stats import pairwise

        return getattr(pairwise, name)
    raise AttributeError(f"module 'evalprism.stats' has no attribute {name!r}")
