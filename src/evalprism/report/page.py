"""The report page: sections of figures and tables rendered through one jinja2 template."""

from __future__ import annotations

import datetime as _dt
import html
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from evalprism import __version__


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("evalprism.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


@dataclass
class _Section:
    kind: str
    title: str
    body: str
    how_to_read: str = ""
    anchor: str = ""


@dataclass
class Report:
    """An HTML report under construction."""

    title: str
    subtitle: str = ""
    sections: list[_Section] = field(default_factory=list)
    summary_items: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def _anchor(self) -> str:
        return f"s{len(self.sections) + 1}"

    def summary(self, *items: str) -> Report:
        """Headline findings shown at the top (plain text, escaped)."""
        self.summary_items.extend(items)
        return self

    def figure(self, fig: Any, title: str, how_to_read: str) -> Report:
        """A plotly figure with a short explanation of how to read it."""
        anchor = self._anchor()
        body = fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"fig-{anchor}",
            config={"displaylogo": False, "responsive": True},
        )
        self.sections.append(_Section("figure", title, body, how_to_read, anchor))
        return self

    def table(self, frame: pd.DataFrame, title: str, caption: str = "", max_rows: int = 60) -> Report:
        """A table (first ``max_rows`` rows; the CSV next to the report has all of them)."""
        shown = frame.head(max_rows)
        body = shown.to_html(index=False, classes="data", border=0, na_rep="", float_format=lambda x: f"{x:.4g}")
        if len(frame) > max_rows:
            body += f'<p class="more">{len(frame) - max_rows} more rows in the CSV file.</p>'
        self.sections.append(_Section("table", title, body, caption, self._anchor()))
        return self

    def html_block(self, title: str, body_html: str, how_to_read: str = "") -> Report:
        """Pre-built HTML (callers escape their own text)."""
        self.sections.append(_Section("html", title, body_html, how_to_read, self._anchor()))
        return self

    def render(self) -> str:
        template = _env().get_template("report.html.j2")
        return template.render(
            title=self.title,
            subtitle=self.subtitle,
            summary=self.summary_items,
            sections=self.sections,
            details=self.details,
            plotly_js=_plotly_js(),
            version=__version__,
            has_figures=any(s.kind == "figure" for s in self.sections),
        )

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.render(), encoding="utf-8")
        return path


def write_index(path: str | Path, title: str, entries: list[tuple[str, str, str]]) -> Path:
    """An index page linking reports: ``entries`` are (relative link, name, one-line description)."""
    items = "".join(
        f'<li><a href="{html.escape(link)}">{html.escape(name)}</a> — {html.escape(desc)}</li>'
        for link, name, desc in entries
    )
    report = Report(title=title, subtitle=f"generated {_dt.date.today().isoformat()}")
    report.html_block("Reports", f'<ul class="index">{items}</ul>')
    return report.write(path)
