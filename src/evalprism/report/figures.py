"""Pieces of figures every analysis draws alike, so that a highlighted choice looks the same in
every report (a red star labelled beneath it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

#: the colour of what a run chose (the best epoch, the chosen penalty, the router's budget)
CHOSEN_COLOUR = "#d62728"


def chosen_point(x: Sequence[Any], y: Sequence[Any], name: str, label: str) -> go.Scatter:
    """The point a run chose (saved with its output), as a red star with ``label`` beneath it and
    ``name`` in the legend."""
    return go.Scatter(
        x=x,
        y=y,
        mode="markers+text",
        name=name,
        text=[label],
        textposition="bottom center",
        marker={"symbol": "star", "size": 16, "color": CHOSEN_COLOUR, "line": {"width": 1}},
    )
