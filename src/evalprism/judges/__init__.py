"""Judge-agreement bias map: where LLM relevance judges disagree with humans (seed 004).

Query-document pairs are embedded as one text with a task instruction, clustered with HDBSCAN, and
the human and LLM relevance labels are compared per cluster and per query within each cluster with
Gwet's AC1; queries whose agreement varies strongly across clusters (ΔAC1) are flagged bias-prone
with a direction (under-recall or over-inclusion).

Entry point: :func:`analyze` (options in one :class:`JudgesOptions`) -> :class:`JudgesResult`
(``.frames()``, ``.summary``: what the run resolved and counted, ``.record``, ``.save(dir)``).

The names load from their submodules on first use (:mod:`evalprism._lazy`), as in every analysis
package: importing one helper does not import the whole analysis.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.judges.analysis import DEFAULT_INSTRUCTION, analyze, pair_text
    from evalprism.judges.bias import flag_queries
    from evalprism.judges.options import BiasRules, ClusterOptions, JudgesOptions
    from evalprism.judges.result import JudgesResult
    from evalprism.judges.summary import JudgesSummary

__all__ = [
    "DEFAULT_INSTRUCTION",
    "BiasRules",
    "ClusterOptions",
    "JudgesOptions",
    "JudgesResult",
    "JudgesSummary",
    "analyze",
    "flag_queries",
    "pair_text",
]

lazy_package(
    __name__,
    {
        "analysis": ["DEFAULT_INSTRUCTION", "analyze", "pair_text"],
        "bias": ["flag_queries"],
        "options": ["BiasRules", "ClusterOptions", "JudgesOptions"],
        "result": ["JudgesResult"],
        "summary": ["JudgesSummary"],
    },
)
