"""Paired, clustered, corrected comparison of evaluation runs: is B better than A, by how much, and
can the items tell? (`evalprism compare`; kernels in :mod:`evalprism.stats.compare_tests`).

The names load from their submodules on first use (:mod:`evalprism._lazy`), as in every analysis
package: importing the options (the command line does at start-up) imports no numpy.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.compare.analysis import compare_runs
    from evalprism.compare.options import CompareOptions
    from evalprism.compare.result import CompareResult

__all__ = ["CompareOptions", "CompareResult", "compare_runs"]

lazy_package(
    __name__,
    {
        "analysis": ["compare_runs"],
        "options": ["CompareOptions"],
        "result": ["CompareResult"],
    },
)
