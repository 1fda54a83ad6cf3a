"""Paired, clustered, corrected comparison of evaluation runs: is B better than A, by how much, and
can the items tell? (`evalprism compare`; kernels in :mod:`evalprism.stats.compare_tests`)."""

from evalprism.compare.analysis import compare_runs
from evalprism.compare.responses import ResponseOptions
from evalprism.compare.result import CompareResult

__all__ = ["CompareResult", "ResponseOptions", "compare_runs"]
