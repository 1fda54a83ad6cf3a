"""Cluster each collection apart when the input mixes collections.

Pairs of two test collections (TREC DL 2019 and 2020) share no query; pooled, their embeddings form
one dense region that HDBSCAN's excess of mass keeps as one cluster (97% of the 20,646 DL19 + DL20
pairs), while each year alone clusters into dozens. The seed analyses each year on its own. So the
pairs are reduced and clustered per value of a grouping column: ``by="auto"`` takes the first of
:data:`AUTO_COLUMNS` present with two or more values, ``by=<column>`` that column, ``by=None`` (or
``"none"``) all pairs together. Agreement, ΔAC1 and the flags are then computed over the combined
clusters (a query belongs to one collection, so its ΔAC1 compares clusters of its own collection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError

#: columns that name a test collection, tried in this order by ``by="auto"``
AUTO_COLUMNS = ("collection", "year")


@dataclass(frozen=True)
class Groups:
    """The column the pairs were split by (None: not split) and each group's name and row indices."""

    column: str | None
    parts: list[tuple[str | None, np.ndarray]]

    def where(self, name: str | None) -> str:
        """' of collection 'x'' for messages about one group ('' when not split)."""
        return "" if self.column is None else f" of {self.column} '{name}'"


def split_groups(table: pd.DataFrame, by: str | None) -> Groups:
    """The groups of ``table``'s rows (in row order within each group; groups sorted by name)."""
    everything = Groups(None, [(None, np.arange(len(table)))])
    if by is None or by == "none":
        return everything
    if by == "auto":
        found = [c for c in AUTO_COLUMNS if c in table.columns and table[c].nunique(dropna=True) >= 2]
        if not found:
            return everything
        by = found[0]
    elif by not in table.columns:
        raise EvalprismError(
            f"by column '{by}' not found in the judgments; columns: {', '.join(map(str, table.columns))} "
            "(or 'auto', 'none')",
            parameter="by",
        )
    values = table[by]
    missing = values.isna().to_numpy()
    if missing.any():
        row = table.iloc[int(np.flatnonzero(missing)[0])]
        raise EvalprismError(
            f"by column '{by}' is empty for the pair query_id {row['query_id']}, doc_id {row['doc_id']}; "
            "every pair needs a value (its collection)",
            parameter="by",
        )
    names = values.astype(str).to_numpy()
    return Groups(by, [(name, np.flatnonzero(names == name)) for name in sorted(set(names))])
