"""Pure numeric kernels: no I/O, no pandas.

- :func:`w1_matrix`: exact L1 distance between ECDFs (= 1-Wasserstein), all pairs at once.
- :func:`ecdf_wins`: the seed's eq. (7) win matrix between ECDFs.
- :func:`kmedoids`: FasterPAM (``kmedoids`` package) or the seed's Algorithm 1 (:func:`pam`).
- :func:`mds_order`: 1-D MDS seriation of the rows of a matrix.
"""

from evalprism.stats.ecdf import ecdf_steps, ecdf_wins, w1_distance, w1_matrix
from evalprism.stats.kmedoids import choose_k, kmedoids, pam, pam_build
from evalprism.stats.seriation import mds_order

__all__ = [
    "choose_k",
    "ecdf_steps",
    "ecdf_wins",
    "kmedoids",
    "mds_order",
    "pam",
    "pam_build",
    "w1_distance",
    "w1_matrix",
]
