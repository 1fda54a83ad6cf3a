"""Response-quality distributions: ECDF clustering of many responses per setting (seed 001).

A *setting* is one question under one configuration (the ``by`` columns, e.g. model and
temperature). Each response gets a quality value, its maximum cosine similarity to the
question's references (eq. 3) or a score the user already has; each setting becomes the ECDF
of its values; settings are clustered by k-medoids on the exact L1 distance between ECDFs
(eq. 4-5); clusters are numbered by wins (eq. 7, cluster 0 is best); the question x
configuration assignment matrix is reordered by 1-D MDS; and per setting a final answer is
picked as the response nearest the mean embedding (eq. 6) for exact-match accuracy.

Entry point: :func:`analyze` -> :class:`EcdfResult` (``.frames()``, ``.save(dir)``). The responses
table's schema and how answers are taken out and scored lexically are :mod:`evalprism.io`'s
(:mod:`evalprism.io.responses`, :mod:`evalprism.io.answers`, :mod:`evalprism.io.lexical`): `compare`
and `p2l` read the same files.

The names load from their submodules on first use (:mod:`evalprism._lazy`), as in every analysis
package: importing one helper does not import the whole analysis.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.ecdf.analysis import analyze
    from evalprism.ecdf.options import EcdfOptions
    from evalprism.ecdf.result import EcdfResult

__all__ = ["EcdfOptions", "EcdfResult", "analyze"]

lazy_package(
    __name__,
    {
        "analysis": ["analyze"],
        "options": ["EcdfOptions"],
        "result": ["EcdfResult"],
    },
)
