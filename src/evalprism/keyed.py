"""Content-keyed randomness: results that do not depend on the order of the input rows.

The same rows in another order must give the same results (a reordered file is the same data). A
seeded draw over row *positions* breaks that: the same seed then picks other rows. So every random
choice evalprism makes over rows is keyed by content, by one of two rules:

- :func:`content_order`: the permutation that sorts rows by their content key (ids or texts). A
  seeded draw over positions (an epoch's battle order, a subset of items) is made on the rows in this
  order, so the same seed picks the same rows whatever the file order.
- :func:`keyed_choice`: a seeded subset decided by each item's own text: the items whose hash of
  (seed, text) (:func:`keyed_hash`) is smallest. An item's membership does not depend on the other
  items' positions (P2L's validation prompts).

Keys are compared by value: strings by code point, numbers numerically; missing values first. Rows
equal in every key column are interchangeable (the analyses read nothing else of them), so the stable
sort leaves them in file order without changing any result.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd


def _sort_codes(values: object) -> np.ndarray:
    """Integer codes of ``values`` that sort like the values (missing values -1, so first)."""
    codes, _ = pd.factorize(pd.Series(values, copy=False), sort=True, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64)


def content_order(*keys: Sequence[object] | np.ndarray | pd.Series) -> np.ndarray:
    """Row positions sorted by the key columns (the first key first, ties by the next, ...).

    Stable: rows equal in every key keep their order. Draw over ``rows[content_order(...)]`` instead of
    ``rows`` and the draw no longer depends on the order the rows came in.
    """
    if not keys:
        raise ValueError("content_order needs at least one key column")
    codes = [_sort_codes(k) for k in keys]
    n = codes[0].size
    if any(c.size != n for c in codes):
        raise ValueError("content_order: key columns of different lengths")
    # np.lexsort sorts by the last key first, and is stable
    return np.lexsort([np.arange(n), *reversed(codes)]).astype(np.int64)


def keyed_hash(texts: Iterable[str], seed: int) -> np.ndarray:
    """A 64-bit hash of (``seed``, text) per text (BLAKE2b): a uniform random number per item that
    depends on the item's own text and the seed only."""
    prefix = f"evalprism:{int(seed)}\x00".encode()
    return np.fromiter(
        (
            int.from_bytes(
                hashlib.blake2b(prefix + str(t).encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little"
            )
            for t in texts
        ),
        dtype=np.uint64,
    )


def keyed_choice(texts: Sequence[str], k: int, seed: int) -> np.ndarray:
    """Positions of the ``k`` texts with the smallest :func:`keyed_hash` (equal hashes: the smaller
    text first), ascending: a seeded random subset of size ``k`` that is the same set of texts however
    the texts are ordered."""
    texts = list(texts)
    order = content_order(keyed_hash(texts, seed), texts)
    return np.sort(order[: max(0, int(k))])
