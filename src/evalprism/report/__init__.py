"""Self-contained HTML reports: one file, plotly JS inline, opens offline.

Build a :class:`Report`, add a summary, figures (each with a short "how to read this") and
tables, then :meth:`Report.write` it. Analyses own their figures; this layer owns the page.
"""

from evalprism.report.page import IndexEntry, Report, inline_markdown, literal, write_index

__all__ = ["IndexEntry", "Report", "inline_markdown", "literal", "write_index"]
