"""Static embedding models distilled from a sentence encoder, built once into evalprism's cache.

A static model (model2vec's distillation, Tulkens & van Dongen 2024) holds one vector per token of
an encoder's vocabulary: the encoder's mean-pooled output for that token alone, reduced by PCA to
256 dimensions and weighted by the token's frequency rank (SIF). A prompt's vector is the mean of
its tokens' vectors: no transformer runs at inference, about 0.3 ms per prompt against MiniLM's
~10-55 ms on 2 CPU cores, at the cost of some accuracy (the README's backbone table).

``static`` distils the packaged all-MiniLM-L6-v2 (:mod:`evalprism.embed.local_models`); ``static:<path>``
distils the Hugging Face encoder in a local directory. The same model serves the router's ``static``
backbone (:class:`evalprism.p2l.backbones.StaticBackbone`) and the analyses' ``--embedder static``
(:class:`evalprism.embed.backends.StaticBackend`): one :class:`StaticEncoder`, the same vectors. Nothing is downloaded. The model is built on
first use (MiniLM's 29,525 tokens: ~7 minutes on 2 cores, one forward pass per token, with a progress
bar) into ``<cache>/static/<name>-<key>/``, where the key hashes the source model's identity, the
distillation settings and model2vec's version. The build writes into a ``.building-`` directory
beside it and renames it into place only when complete (its :data:`MARKER` written last), so an
interrupted build leaves nothing that looks complete; the next build removes such leftovers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from evalprism.embed.cache import cache_root
from evalprism.embed.clip import clip_texts
from evalprism.embed.local_models import fingerprint, packaged_minilm, quiet_transformers
from evalprism.embed.spec import EncoderSpec
from evalprism.errors import EvalprismError
from evalprism.progress import progress_bar, status

#: the file written last into a complete static model directory (what the build settings were)
MARKER = "evalprism-static.json"
#: the folder of the cache directory that holds the static models
STATIC_DIR = "static"
#: model2vec's distillation settings (its defaults): 256 PCA dimensions, SIF weighting, mean pooling
DISTILL_SETTINGS: dict[str, Any] = {
    "pca_dims": 256,
    "sif_coefficient": 1e-4,
    "pooling": "mean",
    "quantize_to": "float16",
}
#: the longest prompt read, in tokens (a static model has no window of its own; this bounds a long
#: prompt's cost, and reads twice what MiniLM reads)
DEFAULT_MAX_TOKENS = 512
_INSTALL = "pip install 'model2vec>=0.10,<0.11' 'skeletoken>=0.6,<0.7'"


@dataclass(frozen=True)
class StaticSource:
    """The encoder a static model is distilled from: its local directory, a stable identity (the
    packaged version or the directory's fingerprint) and a short name for the cache folder."""

    spec: str
    location: str
    identity: str
    name: str


def static_source(spec: EncoderSpec, role: str = "backbone") -> StaticSource:
    """The encoder that ``static`` (the packaged MiniLM) or ``static:<path>`` names; ``role`` (backbone
    or embedder) words the message about a missing directory."""
    if not spec.location:
        minilm = packaged_minilm()
        return StaticSource(spec.text, minilm.location, minilm.model_id, "minilm")
    path = Path(spec.location).expanduser()
    if not path.is_dir():
        raise EvalprismError(
            f"{role} '{spec}': '{path}' is not a local model directory (a static model is "
            "distilled from a Hugging Face encoder saved on disk; nothing is downloaded)"
        )
    path = path.resolve()
    return StaticSource(spec.text, str(path), f"{path}#{fingerprint(path)}", path.name or "model")


def _model2vec_version() -> str:
    try:
        import model2vec
    except ImportError:
        raise EvalprismError(f"the static backbone needs model2vec and skeletoken ({_INSTALL})") from None
    return str(model2vec.__version__)


def static_model_key(source: StaticSource) -> str:
    """What identifies the static model of ``source`` wherever it is built: a hash of the source model's
    identity, the distillation settings and model2vec's version (its folder's name and its vectors' cache identity)."""
    settings = {"source": source.identity, "model2vec": _model2vec_version(), **DISTILL_SETTINGS}
    return f"{source.name}-{hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]}"


def static_model_dir(source: StaticSource, cache_dir: str | Path | None = None) -> Path:
    """Where the static model of ``source`` lives (built or not) under ``cache_dir`` (default: evalprism's
    cache; :func:`~evalprism.embed.cache.cache_root` checks it, as it does for the embedding cache)."""
    return cache_root(cache_dir) / STATIC_DIR / static_model_key(source)


def is_complete(directory: Path) -> bool:
    """Whether ``directory`` holds a complete static model (its marker is written last)."""
    return (directory / MARKER).is_file()


def ensure_static_model(
    spec: EncoderSpec, *, cache_dir: str | Path | None = None, progress: bool = True, role: str = "backbone"
) -> Path:
    """The directory of the static model ``spec`` names, distilled now if the cache has none; ``role``
    (backbone or embedder) words the messages."""
    source = static_source(spec, role)
    final = static_model_dir(source, cache_dir)
    if is_complete(final):
        return final
    if final.exists():
        raise EvalprismError(
            f"{role} '{spec}': {final} exists but is not a complete static model evalprism built "
            f"(no {MARKER}); evalprism leaves it as it is: move it away to rebuild"
        )
    _remove_leftovers(final)
    building = final.parent / f".building-{final.name}-{uuid.uuid4().hex[:8]}"
    building.mkdir(parents=True)
    try:
        status(
            f"distilling a static model from {source.spec if source.name != 'minilm' else 'MiniLM'} into {final} "
            "(once; about 7 minutes for MiniLM on 2 cores)",
            progress,
        )
        _distill(source, building, progress)
        (building / MARKER).write_text(
            json.dumps(
                {"source": source.identity, "spec": source.spec, "model2vec": _model2vec_version(), **DISTILL_SETTINGS},
                indent=1,
            ),
            encoding="utf-8",
        )
        try:
            building.rename(final)
        except OSError:
            if not is_complete(final):  # another process finished first: use its model
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def _remove_leftovers(final: Path) -> None:
    """Remove the ``.building-`` directories of interrupted builds of this model (evalprism's own
    temporary directories; a build in progress in another process is left alone while it lives)."""
    for leftover in final.parent.glob(f".building-{final.name}-*") if final.parent.is_dir() else ():
        if not (leftover / "in-progress").is_file() or _stale(leftover / "in-progress"):
            shutil.rmtree(leftover, ignore_errors=True)


def _stale(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except (OSError, ValueError):
        return True
    return False


class _TqdmToBar:
    """Stands in for the tqdm bar model2vec draws while encoding tokens: evalprism's bar instead."""

    bar: Any = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def update(self, n: int = 1) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def close(self) -> None:
        pass


@contextlib.contextmanager
def _tokens_bar(total: int, progress: bool) -> Iterator[None]:
    from model2vec.distill import inference

    original = inference.tqdm
    with progress_bar("distilling the static model (tokens)", total, progress) as bar:
        _TqdmToBar.bar = bar
        inference.tqdm = _TqdmToBar
        try:
            yield
        finally:
            inference.tqdm = original
            _TqdmToBar.bar = None


@contextlib.contextmanager
def _quiet_model2vec() -> Iterator[None]:
    """model2vec and skeletoken log warnings that say nothing to an evalprism user (a tokenizer's pad
    token copied over; PCA not reducing a small encoder): errors still show."""
    import logging

    loggers = [logging.getLogger(name) for name in ("model2vec", "skeletoken")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _distill(source: StaticSource, directory: Path, progress: bool) -> None:
    """model2vec's distillation of ``source`` into ``directory`` (offline: a local model only)."""
    _model2vec_version()
    try:
        from model2vec.distill import distill_from_model
        from transformers import AutoModel, AutoTokenizer
    except ImportError as exc:
        raise EvalprismError(f"the static backbone needs model2vec and skeletoken ({_INSTALL}): {exc}") from None
    (directory / "in-progress").write_text(str(os.getpid()), encoding="utf-8")
    quiet_transformers()
    try:
        model = AutoModel.from_pretrained(source.location)
        tokenizer = AutoTokenizer.from_pretrained(source.location, use_fast=True)
    except Exception as exc:
        raise EvalprismError(
            f"backbone '{source.spec}': cannot load an encoder from '{source.location}' ({type(exc).__name__}: {exc})"
        ) from None
    with _quiet_model2vec(), _tokens_bar(_tokens_to_encode(tokenizer), progress):
        static = distill_from_model(model, cast(Any, tokenizer), device="cpu", **DISTILL_SETTINGS)
    static.save_pretrained(str(directory))
    (directory / "in-progress").unlink()


def _tokens_to_encode(tokenizer: Any) -> int:
    """How many tokens model2vec's distillation runs through the encoder (the bar's total): the
    vocabulary as its own first steps clean it (added tokens and ``[unusedN]`` removed)."""
    import re

    from model2vec.distill.distillation import TokenizerModel
    from model2vec.tokenizer import clean_and_create_vocabulary

    model = TokenizerModel.from_transformers_tokenizer(tokenizer).prune_added_tokens().deep_copy()
    if model.adds_prefix_space is not None:
        model.adds_prefix_space = True
    cleaned = clean_and_create_vocabulary(model, [], token_remove_regex=re.compile(r"\[unused\d+\]"))
    return len(cleaned.sorted_vocabulary)


class StaticEncoder:
    """A built static model: prompts -> unit-norm float32 vectors (mean of token vectors)."""

    def __init__(self, directory: Path, max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        _model2vec_version()
        from model2vec import StaticModel

        try:
            self.model = StaticModel.from_pretrained(str(directory), quantize_to="float32")  # faster means
        except Exception as exc:
            raise EvalprismError(
                f"static model {directory}: cannot be loaded ({type(exc).__name__}: {exc}); move it "
                "away and evalprism distils it again"
            ) from None
        self.dim = int(self.model.dim)
        self.max_tokens = int(max_tokens)
        #: prompts cut before tokenizing because they were far longer than ``max_tokens`` (same vectors)
        self.clipped = 0
        # counted without the tokenizer's own truncation (model2vec saves one at max_length): a count capped at
        # the window would never say a text is longer than it, and nothing would be cut
        counter = type(self.model.tokenizer).from_str(self.model.tokenizer.to_str())
        counter.no_truncation()
        self._count = lambda text: len(counter.encode(text, add_special_tokens=False).ids)

    def encode(self, prompts: list[str]) -> np.ndarray:
        """One vector per prompt; each depends on its prompt alone (not on the other prompts of the call)."""
        prompts, cut = clip_texts(prompts, self._count, self.max_tokens)  # same tokens, no megabytes tokenized
        self.clipped += cut
        vectors = self.model.encode(prompts, max_length=self.max_tokens, use_multiprocessing=False)
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(prompts), self.dim)
