"""The report page: sections of figures and tables rendered through one jinja2 template."""

from __future__ import annotations

import datetime as _dt
import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from evalprism import __version__


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


@lru_cache(maxsize=1)
def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("evalprism.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = inline_markdown
    return env


_CODE = re.compile(r"`([^`]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_TH = re.compile(r"(<th[^>]*>)(.*?)(</th>)", re.S)


#: stand-ins for the two characters inline Markdown reads, in text that must show them as they are
_LITERAL = str.maketrans({"`": "\ue000", "*": "\ue001"})
_UNLITERAL = str.maketrans({"\ue000": "`", "\ue001": "*"})


def literal(text: object) -> str:
    """``text`` (a run name, a model, a path a user gave) to be shown as it is inside a summary or caption
    that :func:`inline_markdown` renders: its backticks and asterisks are not read as `code` or **bold**."""
    return str(text).translate(_LITERAL)


def inline_markdown(text: str) -> Markup:
    """Escape ``text`` and render the two inline Markdown forms reports use: `code` and **bold**.

    Summaries and captions are written as plain sentences that name commands and paths; literal
    backticks on the page read as noise, a full Markdown renderer would be more than they need.
    """
    escaped = html.escape(str(text), quote=False)
    rendered = _BOLD.sub(r"<b>\1</b>", _CODE.sub(r"<code>\1</code>", escaped))
    return Markup(rendered.translate(_UNLITERAL))


def _cell(value: Any) -> str:
    """One table cell as text: missing values (NaN, None, NA) blank, floats to 4 significant digits."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def _detail(value: Any) -> str:
    """A run-details value as text: an unset option reads "—", not Python's None; containers as JSON."""
    if value is None:
        return "—"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


#: columns that name a model or a run: never wrapped in any table (a browser breaks ``other-b`` or
#: ``gpt-4-turbo`` at its hyphens in a narrow column, and a reader takes the pieces for two names)
NAME_COLUMNS = frozenset(
    {"model", "model_a", "model_b", "model_2", "run", "run_a", "run_b", "leader", "upper_model", "lower_model"}
)


def _table_html(frame: pd.DataFrame, nowrap: Sequence[str] = (), lines: Sequence[str] = ()) -> str:
    """``frame`` as an HTML table whose headers may wrap after underscores (``false_negatives``).

    ``nowrap``: columns whose cells never wrap (model names: a browser breaks ``gpt-4-turbo`` at its
    hyphens in a narrow column); ``lines``: columns whose line breaks show (prompts: paragraphs stay
    paragraphs), elsewhere a line break is a space. Cells are escaped here and the HTML passed through:
    pandas would print a text's line breaks and tabs as the characters ``\\n`` and ``\\t``."""
    columns = {}
    for i, name in enumerate(frame.columns):
        kept = "<br>" if name in lines else " "
        css = "lines" if name in lines else "nowrap" if name in nowrap else None
        texts = [
            html.escape(_cell(v), quote=False)
            .replace("\r\n", "\n")
            .replace("\r", "\n")
            .replace("\t", " ")
            .replace("\n", kept)
            for v in frame.iloc[:, i]
        ]
        columns[i] = [f'<span class="{css}">{t}</span>' if css and t else t for t in texts]
    cells = pd.DataFrame(columns, index=range(len(frame)))
    cells.columns = [html.escape(str(c), quote=False) for c in frame.columns]
    body = cells.to_html(index=False, classes="data", border=0, escape=False)
    return _TH.sub(lambda m: m[1] + m[2].replace("_", "_<wbr>") + m[3], body)


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
    #: the heading of the headline findings (an analysis whose headline is verdicts names them so)
    summary_title: str = "What the average hides"

    def _anchor(self) -> str:
        return f"s{len(self.sections) + 1}"

    def summary(self, *items: str) -> Report:
        """Headline findings shown at the top (escaped text; `code` and **bold** are rendered)."""
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

    def table(
        self,
        frame: pd.DataFrame,
        title: str,
        caption: str = "",
        max_rows: int = 60,
        *,
        transpose: bool = False,
        nowrap: Sequence[str] = (),
        lines: Sequence[str] = (),
    ) -> Report:
        """A table (first ``max_rows`` rows; the CSV next to the report has all of them).

        ``transpose``: one row per column of ``frame``, one column per row headed by the first
        column's values; for a few rows of many measures, which do not fit side by side.
        ``nowrap``: columns that never wrap, besides the :data:`NAME_COLUMNS` every table keeps whole;
        ``lines``: columns whose line breaks show.
        """
        shown = frame.head(max_rows)
        if transpose:
            key = shown.columns[0]
            shown = shown.set_index(key).T.rename_axis(index="measure", columns=None).reset_index()
        names = [c for c in shown.columns if c in NAME_COLUMNS and c not in lines]
        body = _table_html(shown, [*nowrap, *names], lines)
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
            summary_title=self.summary_title,
            sections=self.sections,
            details={k: _detail(v) for k, v in self.details.items()},
            plotly_js=_plotly_js(),
            version=__version__,
            has_figures=any(s.kind == "figure" for s in self.sections),
        )

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.render(), encoding="utf-8")
        return path


@dataclass(frozen=True)
class IndexEntry:
    """One report on an index page: its relative link, its name, what it ran on, and the headline
    number a reader should take away without opening it."""

    link: str
    name: str
    description: str
    headline: str = ""

    def html(self) -> str:
        headline = f'<div class="headline">{inline_markdown(self.headline)}</div>' if self.headline else ""
        return (
            f'<li><a href="{html.escape(self.link)}">{html.escape(self.name)}</a>{headline}'
            f'<div class="desc">{html.escape(self.description)}</div></li>'
        )


def write_index(path: str | Path, title: str, entries: Sequence[IndexEntry | tuple[str, ...]]) -> Path:
    """An index page linking reports; ``entries`` are :class:`IndexEntry` or (link, name,
    description[, headline]) tuples."""
    items = "".join((e if isinstance(e, IndexEntry) else IndexEntry(*e)).html() for e in entries)
    report = Report(title=title, subtitle=f"generated {_dt.date.today().isoformat()}")
    report.html_block("Reports", f'<ul class="index">{items}</ul>')
    return report.write(path)
