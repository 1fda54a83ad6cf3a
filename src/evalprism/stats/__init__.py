"""Pure numeric kernels: no I/O, no pandas.

- :func:`w1_matrix`: exact L1 distance between ECDFs (= 1-Wasserstein), all pairs at once.
- :func:`ecdf_wins`: the seed's eq. (7) win matrix between ECDFs.
- :func:`kmedoids`: FasterPAM (``kmedoids`` package) or the seed's Algorithm 1 (:func:`pam`), each
  returning a :class:`KMedoidsResult` (medoids, labels, loss, n_iter, n_swap).
- :func:`kmedoids_ecdfs`: k-medoids of ECDFs by exact W1, CLARA-style without the n x n matrix above
  20,000 ECDFs (:class:`SortedEcdfs`: exact W1 from all ECDFs to a few).
- :func:`choose_k_by_stability`: K by clustering stability under resampling of questions.
- :func:`paired_w1_test`, :func:`mcnemar_exact`, :func:`bootstrap_mean_ci`: paired comparison of two
  configurations over shared questions (within-question permutation test of the mean W1, exact sign
  test on correctness, question-level bootstrap).
- :func:`mds_order`: 1-D MDS seriation of the rows of a matrix.
- :data:`OUTCOME_MODELS` / :func:`get_outcome_model`: the pairwise outcome models (BT, BT with ties,
  Rao-Kupper, grounded Rao-Kupper), each defined once; :func:`fit_counts`, :func:`coef_intervals`:
  their marginal maximum-likelihood fits to aggregated battles (:class:`PairCounts`) with sandwich
  or bootstrap 95% intervals (a battles table becomes a leaderboard in
  :func:`evalprism.p2l.fit_leaderboard`).
- :func:`aggregate_leaderboards`: one leaderboard for a prompt set from its prompts' leaderboards
  (seed 002 eq. 3, appendix B.1).
- :func:`best_mix`, :func:`best_mix_average_budget`, :func:`router_coefficient`: the routing LP of
  seed 002 Theorem 1 solved exactly, and the router's BT coefficient (Algorithm 1).
- :func:`classify`, :func:`transition_index`, :func:`boundary_counts`: inference result vectors
  of a model family, their transition indices and a model's discordant counts against every member
  (seed 003); :func:`sign_test_pvalues`, :func:`clopper_pearson`: the exact binomial test and interval.
- :func:`gwet_ac1`, :func:`cohen_kappa`, :func:`percent_agreement`: two-rater agreement (Gwet 2008 AC1
  with SE and interval as irrCAC computes it); :func:`agreement_by_group` for many groups at once.

Every name loads from its submodule on first use (:mod:`evalprism._lazy`): a pairwise fit does not
import the ``kmedoids`` package (and with it scikit-learn), and ECDF work not the pairwise models.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.stats.aggregate import aggregate_leaderboards, expected_win_matrix
    from evalprism.stats.agreement import (
        Agreement,
        GroupAgreement,
        agreement_by_group,
        cohen_kappa,
        gwet_ac1,
        percent_agreement,
    )
    from evalprism.stats.binomial import clopper_pearson, sign_test_pvalues
    from evalprism.stats.clara import SortedEcdfs, kmedoids_ecdfs
    from evalprism.stats.ecdf import distinct_ecdf_count, ecdf_steps, ecdf_wins, w1_distance, w1_matrix
    from evalprism.stats.irv import boundary_counts, classify, transition_index
    from evalprism.stats.kmedoids import KMedoidsResult, choose_k, kmedoids, pam, pam_build
    from evalprism.stats.outcome_models import (
        OUTCOME_MODEL_NAMES,
        OUTCOME_MODELS,
        OutcomeModel,
        TieParameter,
        get_outcome_model,
    )
    from evalprism.stats.paired import bootstrap_mean_ci, mcnemar_exact, paired_w1_test
    from evalprism.stats.pairwise import (
        PairCounts,
        PairwiseFit,
        bootstrap_coefs,
        coef_intervals,
        elo_ratings,
        fit_counts,
        sandwich_cov,
    )
    from evalprism.stats.routing import best_mix, best_mix_average_budget, router_coefficient, win_values
    from evalprism.stats.seriation import mds_order
    from evalprism.stats.stability import choose_k_by_stability

__all__ = [
    "OUTCOME_MODELS",
    "OUTCOME_MODEL_NAMES",
    "Agreement",
    "GroupAgreement",
    "KMedoidsResult",
    "OutcomeModel",
    "PairCounts",
    "PairwiseFit",
    "SortedEcdfs",
    "TieParameter",
    "aggregate_leaderboards",
    "agreement_by_group",
    "best_mix",
    "best_mix_average_budget",
    "bootstrap_coefs",
    "bootstrap_mean_ci",
    "boundary_counts",
    "choose_k",
    "choose_k_by_stability",
    "classify",
    "clopper_pearson",
    "coef_intervals",
    "cohen_kappa",
    "distinct_ecdf_count",
    "ecdf_steps",
    "ecdf_wins",
    "elo_ratings",
    "expected_win_matrix",
    "fit_counts",
    "get_outcome_model",
    "gwet_ac1",
    "kmedoids",
    "kmedoids_ecdfs",
    "mcnemar_exact",
    "mds_order",
    "paired_w1_test",
    "pam",
    "pam_build",
    "percent_agreement",
    "router_coefficient",
    "sandwich_cov",
    "sign_test_pvalues",
    "transition_index",
    "w1_distance",
    "w1_matrix",
    "win_values",
]

lazy_package(
    __name__,
    {
        "aggregate": ["aggregate_leaderboards", "expected_win_matrix"],
        "agreement": [
            "Agreement",
            "GroupAgreement",
            "agreement_by_group",
            "cohen_kappa",
            "gwet_ac1",
            "percent_agreement",
        ],
        "binomial": ["clopper_pearson", "sign_test_pvalues"],
        "clara": ["SortedEcdfs", "kmedoids_ecdfs"],
        "paired": ["bootstrap_mean_ci", "mcnemar_exact", "paired_w1_test"],
        "stability": ["choose_k_by_stability"],
        "ecdf": ["distinct_ecdf_count", "ecdf_steps", "ecdf_wins", "w1_distance", "w1_matrix"],
        "irv": ["boundary_counts", "classify", "transition_index"],
        "kmedoids": ["KMedoidsResult", "choose_k", "kmedoids", "pam", "pam_build"],
        "outcome_models": [
            "OUTCOME_MODELS",
            "OUTCOME_MODEL_NAMES",
            "OutcomeModel",
            "TieParameter",
            "get_outcome_model",
        ],
        "pairwise": [
            "PairCounts",
            "PairwiseFit",
            "bootstrap_coefs",
            "coef_intervals",
            "elo_ratings",
            "fit_counts",
            "sandwich_cov",
        ],
        "routing": ["best_mix", "best_mix_average_budget", "router_coefficient", "win_values"],
        "seriation": ["mds_order"],
    },
)
