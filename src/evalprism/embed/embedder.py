"""The :class:`Embedder`: dedup, cache lookup, batched encoding with a progress bar.

Build one with :func:`evalprism.embed.get_embedder` (the one factory from a spec string), or
directly; either way the backend named by the spec decides how the instruction reaches the model.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from evalprism.embed.backends import EncoderBackend, default_device, resolve_backend
from evalprism.embed.cache import EmbeddingCache, cache_key
from evalprism.embed.spec import DEFAULT_SPEC, EncoderSpec, parse_spec
from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EngineOptions
from evalprism.progress import progress_bar, status


class Embedder:
    """Embed texts as unit-norm float32 vectors, encoding each distinct text at most once ever.

    ``instruction`` (optional) is part of the cache key and reaches the model as the backend
    defines: prepended as plain text (``"<instruction> <text>"``) for ``minilm`` and ``st:``, as
    INSTRUCTOR's prompt for ``instructor:``. ``cache_dir=False`` disables the persistent cache of vectors (a
    ``static`` model is still built into, and read from, the default cache directory: it is a model, not vectors).
    ``engine`` (:class:`~evalprism.io.embed_options.EngineOptions`; default local): where the missing texts
    are encoded, in this process or on a Ray actor pool (:mod:`evalprism.embed.ray_engine`), with the same
    batches and so the same vectors. ``stats`` counts, for the last call, how many texts were requested,
    distinct, cached and encoded. ``runtime``: what computes a sentence encoder's vectors, ``auto``, ``torch``
    or ``openvino`` (:mod:`evalprism.embed.runtime`; the commands default to ``auto``, this class to ``torch``).
    """

    def __init__(
        self,
        spec: str | EncoderSpec = DEFAULT_SPEC,
        *,
        instruction: str | None = None,
        cache_dir: str | Path | bool | None = None,
        batch_size: int = 64,
        progress: bool = True,
        device: str | None = None,
        engine: EngineOptions | None = None,
        runtime: str = "torch",
    ) -> None:
        parsed = parse_spec(spec)
        self.instruction = instruction or None
        static_home = cache_dir if isinstance(cache_dir, (str, Path)) else None  # where a static model is built
        self.device = device or default_device()
        self.backend: EncoderBackend = resolve_backend(
            parsed,
            self.device,
            self.instruction,
            cache_dir=static_home,
            progress=progress,
            runtime=runtime,
        )
        self.engine = engine or EngineOptions()
        if self.engine.engine == "ray":
            from evalprism.embed.ray_engine import BackendRecipe, require_ray

            require_ray()
            self._recipe = BackendRecipe.of(
                parsed, self.device, self.instruction, static_home, getattr(self.backend, "runtime", "torch")
            )
        self.spec = parsed.text
        self.batch_size = batch_size
        self.progress = progress
        self.cache = None if cache_dir is False else EmbeddingCache(None if cache_dir is True else cache_dir or None)
        self.stats = {"requested": 0, "distinct": 0, "cached": 0, "encoded": 0}

    @property
    def model_id(self) -> str:
        return self.backend.model_id

    @property
    def dim(self) -> int:
        """The vectors' length, from the model (loads it; encodes and caches nothing)."""
        return self.backend.dimension()

    def embed(self, texts: Sequence[str], *, what: str | None = None) -> np.ndarray:
        """Return an array (len(texts), dim); identical texts share one encoding.

        ``what`` (what the texts are, e.g. ``"9260 pairs"``): given, the call first says what it will
        really do, ``embedding D distinct texts of N (C cached) with SPEC: what``, once the texts are
        deduplicated and looked up in the cache and before anything is encoded. None: no line (a P2L
        backbone embeds batch after batch)."""
        texts = list(texts)
        distinct = list(dict.fromkeys(texts))
        keys = [cache_key(self.model_id, self.instruction, t) for t in distinct]
        found = self._cached(keys)
        if what is not None and texts:
            status(
                f"embedding {len(distinct)} distinct texts of {len(texts)} ({len(found)} cached) with {self.spec}: "
                f"{what}",
                self.progress,
            )
        todo = [i for i, k in enumerate(keys) if k not in found]
        vectors: dict[int, np.ndarray] = {i: found[k] for i, k in enumerate(keys) if k in found}
        if todo:
            vectors.update(self._encode(distinct, keys, todo))
        self.stats = {"requested": len(texts), "distinct": len(distinct), "cached": len(found), "encoded": len(todo)}
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        table = np.stack([vectors[i] for i in range(len(distinct))]).astype(np.float32, copy=False)
        position = {t: i for i, t in enumerate(distinct)}
        return table[[position[t] for t in texts]]

    def _encode(self, distinct: list[str], keys: list[bytes], todo: list[int]) -> dict[int, np.ndarray]:
        """Encode ``distinct[i]`` for every ``i`` in ``todo`` with a progress bar, caching as it goes."""
        vectors: dict[int, np.ndarray] = {}
        # Longest first: batches of similar length waste less padding, and the ETA is honest. Equal
        # lengths by text: a batch's company changes its vectors in the last bits, so batches are
        # made by content, never by the order the texts came in (results independent of row order).
        todo = sorted(todo, key=lambda i: (-len(distinct[i]), distinct[i]))
        batches = [todo[b : b + self.batch_size] for b in range(0, len(todo), self.batch_size)]
        texts = [[self.backend.model_text(distinct[i]) for i in batch] for batch in batches]
        # Progress counts every batch (a slow encoder on a CPU takes minutes per 512 texts); the cache
        # is written per chunk of 8 batches (one transaction each).
        chunk = self.batch_size * 8
        pending: list[tuple[list[int], np.ndarray]] = []
        clipped = 0

        def flush() -> None:
            idx = [i for part, _ in pending for i in part]
            enc = np.concatenate([e for _, e in pending])
            check_finite(enc, [distinct[i] for i in idx], self.spec)
            if self.cache is not None:
                self.cache.put_many([keys[i] for i in idx], enc)
            vectors.update(zip(idx, enc, strict=True))
            pending.clear()

        with progress_bar(f"embedding ({self.spec})", len(todo), self.progress) as bar:
            for positions, enc, cut in self._encoded_batches(texts):
                pending.append(([todo[p] for p in positions], enc))
                clipped += cut
                bar.update(len(enc))
                if sum(len(e) for _, e in pending) >= chunk:
                    flush()
            if pending:
                flush()
        if clipped:
            status(
                f"{clipped} text(s) far longer than {self.spec} reads were cut before "
                "tokenizing (the model reads only its first tokens; the vectors are the same)",
                self.progress,
            )
        return vectors

    def _encoded_batches(self, batches: list[list[str]]) -> Iterator[tuple[Sequence[int], np.ndarray, int]]:
        """Each batch of model texts encoded in one call, here or on the Ray engine's actors, as it is
        done (Ray: in the order they finish): (positions in the concatenated ``batches``, their vectors,
        texts cut before tokenizing)."""
        if self.engine.engine == "ray":
            from evalprism.embed.ray_engine import encode_on_ray

            yield from encode_on_ray(batches, self._recipe, self.batch_size, self.engine.ray_address, self.progress)
            return
        first = 0
        for batch in batches:
            before = self.backend.clipped
            enc = self.backend.encode(batch, self.batch_size)
            yield range(first, first + len(enc)), enc, self.backend.clipped - before
            first += len(enc)

    def _cached(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The valid cached vectors among ``keys``; damaged entries are left out (so the caller
        recomputes and replaces them) and said once. The model's vector length comes from the cache's record; a cache without
        one (written before lengths were recorded) learns it from the model, once."""
        if self.cache is None or not keys:
            return {}
        dim = self.cache.model_dim(self.model_id)
        if dim is None:
            dim = self.dim
            self.cache.record_model(self.model_id, dim)
        found, damaged = self.cache.get_many(keys, dim)
        if damaged:
            status(
                f"embedding cache {self.cache.path}: {len(damaged)} cached vector(s) of {self.model_id} were "
                f"damaged (not {dim} finite numbers); recomputing them",
                self.progress,
            )
        return found


def check_finite(vectors: np.ndarray, texts: Sequence[str], spec: str) -> None:
    """Refuse vectors from an encoder that are not finite (a broken or wrongly converted model): they
    would be cached and silently turn every distance and score built on them into NaN."""
    bad = ~np.isfinite(vectors).all(axis=1)
    if bad.any():
        first = texts[int(np.flatnonzero(bad)[0])]
        shown = first if len(first) <= 60 else first[:57] + "..."
        raise EvalprismError(
            f"encoder {spec}: produced non-finite vectors for {int(bad.sum())} of {len(texts)} "
            f"texts (the first: {shown!r}); nothing was cached; check the model's weights"
        )
