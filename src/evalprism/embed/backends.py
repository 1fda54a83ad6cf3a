"""Model backends behind the embedder specs (:mod:`evalprism.embed.spec`).

A backend turns a batch of texts into unit-norm float32 vectors and has a stable ``model_id`` for
the cache. How its ``instruction`` reaches the model is the backend's: a sentence-transformers model
reads it prepended to each text (:meth:`~SentenceTransformerBackend.model_text`), an INSTRUCTOR model
as its prompt (pooled over the text tokens only). Models load lazily, on the first batch that is not in the
cache, so a fully cached rerun never loads torch weights.

Nothing is downloaded: ``st:`` takes a local directory or a name already in the local Hugging Face
cache, and anything else fails at once with the command that would download it.

Every kind an embedder can be is one row of :data:`_RESOLVERS`: ``minilm``, ``st:``, ``instructor:`` and
``static`` (:class:`StaticBackend`: the static model the router's ``static`` backbone uses, built into the
cache directory on first use).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from evalprism.embed.clip import clip_for_tokenizer
from evalprism.embed.local_models import fingerprint, packaged_minilm, quiet_transformers
from evalprism.embed.runtime import OPENVINO_PRECISION, resolve_embed_runtime, runtime_model_id
from evalprism.embed.spec import DEFAULT_SPEC, EMBEDDER_KINDS, EncoderSpec, Kind, parse_spec
from evalprism.embed.static import (
    DEFAULT_MAX_TOKENS,
    StaticEncoder,
    StaticSource,
    ensure_static_model,
    static_model_key,
    static_source,
)
from evalprism.errors import EvalprismError

__all__ = [
    "DEFAULT_SPEC",
    "EncoderBackend",
    "InstructorBackend",
    "SentenceTransformerBackend",
    "StaticBackend",
    "default_device",
    "instructor_prompt",
    "quiet_transformers",
    "resolve_backend",
    "sentence_dimension",
]


class EncoderBackend(Protocol):
    """What an :class:`~evalprism.embed.Embedder` needs of a backend: the spec as written, where the model
    is, its cache identity, how many texts it cut, and three methods."""

    spec: str
    location: str
    model_id: str
    clipped: int

    def dimension(self) -> int: ...

    def model_text(self, text: str) -> str: ...

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray: ...


@dataclass(frozen=True)
class BackendContext:
    """What every backend is resolved with: the ``device``, the ``instruction`` (None: none), and for a
    backend that builds its model into evalprism's cache (``static``) the ``cache_dir`` (None: the default)
    and whether it may report the build (``progress``); the ``runtime`` asked of a sentence encoder
    (:func:`~evalprism.embed.runtime.resolve_embed_runtime`)."""

    device: str = "cpu"
    instruction: str | None = None
    cache_dir: str | Path | None = None
    progress: bool = True
    runtime: str = "torch"


def _first_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


@dataclass
class SentenceTransformerBackend:
    """Any sentence-transformers model, from a local path or a name already in the local HF cache.
    The ``instruction`` is prepended to every text as plain text (``"<instruction> <text>"``).
    ``runtime``: ``torch`` (sentence-transformers' own ``encode``) or ``openvino`` (the same pipeline traced
    into OpenVINO float32, :mod:`evalprism.embed.runtime`); ``model_id`` already names a non-torch runtime."""

    spec: str
    location: str
    model_id: str
    device: str = "cpu"
    instruction: str | None = None
    runtime: str = "torch"
    _model: Any = field(default=None, init=False, repr=False)
    #: texts cut before tokenizing because they were far longer than the model reads (:meth:`encode`)
    clipped: int = field(default=0, init=False, repr=False)
    #: models loaded in this process, by (location, device): a second Embedder reuses the weights
    _loaded: ClassVar[dict[tuple[str, str], Any]] = {}
    #: the OpenVINO encoders compiled in this process, by location: tracing and compiling take seconds
    _compiled: ClassVar[dict[str, Any]] = {}

    def load(self) -> Any:
        """The model, loaded on first use (once per process and location)."""
        if self._model is None:
            key = (self.location, self.device)
            if key not in self._loaded:
                self._loaded[key] = self._open()
            self._model = self._loaded[key]
        return self._model

    def _open(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer

            quiet_transformers()  # our own bar reports progress; no second one per load
            return SentenceTransformer(self.location, device=self.device)
        except Exception as exc:  # OSError, HF hub errors, bad configs: all one message for the user
            raise EvalprismError(
                f"embedder '{self.spec}': cannot load model from '{self.location}' ({_first_line(exc)}). "
                "Give a local directory (st:/path/to/model) when there is no network."
            ) from None

    def dimension(self) -> int:
        """The length of the model's vectors, read from the model (nothing is cached)."""
        dim = sentence_dimension(self.load())
        return dim if dim is not None else int(self.encode(["dimension"]).shape[1])  # a model that does not say

    def model_text(self, text: str) -> str:
        """What :meth:`encode` is given for ``text``: the instruction prepended as plain text."""
        return f"{self.instruction} {text}" if self.instruction else text

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit-norm float32 vectors (len(texts), dim) of model texts (:meth:`model_text`). A text far
        longer than the model reads is cut first (:func:`~evalprism.embed.clip.clip_text`: same
        vector, without tokenizing megabytes that would be dropped); ``clipped`` counts them."""
        model = self.load()
        texts, cut = clip_for_tokenizer(texts, model.tokenizer, int(model.max_seq_length))
        self.clipped += cut
        if self.runtime == "openvino":
            return unit_rows(self._openvino().encode(texts))
        vecs = model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
            **self._encode_options(),
        )
        return np.asarray(vecs, dtype=np.float32)

    def _openvino(self) -> Any:
        """The model traced and compiled in OpenVINO float32 (once per process and location)."""
        if self.location not in self._compiled:
            from evalprism.embed.openvino_runtime import OpenVINOEncoder

            try:
                self._compiled[self.location] = OpenVINOEncoder(self.load(), precision=OPENVINO_PRECISION)
            except EvalprismError as exc:
                raise EvalprismError(
                    f"embedder '{self.spec}': {exc} (embed_runtime torch)", parameter="embed_runtime"
                ) from None
        return self._compiled[self.location]

    def _encode_options(self) -> dict[str, Any]:
        return {}


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (float32) scaled to unit length row by row, as sentence-transformers' ``normalize_embeddings``
    (a zero row stays zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


def sentence_dimension(model: Any) -> int | None:
    """The vector length a loaded sentence-transformers model declares (None if it declares none)."""
    dim_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    dim = dim_of()  # renamed in sentence-transformers 6
    return None if dim is None else int(dim)


def instructor_prompt(instruction: str) -> str:
    """The text placed before every input: INSTRUCTOR's instructions end with ':' and a space
    ("Represent the Science title: "); an instruction without the colon gets one."""
    text = instruction.strip()
    return (text if text.endswith(":") else text + ":") + " "


@dataclass
class InstructorBackend(SentenceTransformerBackend):
    """An INSTRUCTOR checkpoint in a local directory (Su et al. 2023).

    INSTRUCTOR encodes ``[instruction, text]`` pairs: the model reads the instruction followed by the
    text, and the mean pooling covers only the text's tokens. sentence-transformers reproduces exactly
    this with a ``prompt`` plus ``Pooling(include_prompt=False)``, its documented way to run INSTRUCTOR
    checkpoints, so no extra package is needed.
    """

    #: kept apart from the other backends' models because the pooling is switched to exclude the prompt
    _loaded: ClassVar[dict[tuple[str, str], Any]] = {}

    def _open(self) -> Any:
        try:
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(self.location, device=self.device)
        except Exception as exc:
            raise EvalprismError(
                f"embedder '{self.spec}': cannot load an INSTRUCTOR model from '{self.location}' ({_first_line(exc)})"
            ) from None
        pools = [m for m in model.modules() if hasattr(m, "include_prompt")]
        if not pools:
            raise EvalprismError(
                f"embedder '{self.spec}': the model in '{self.location}' has no pooling "
                "layer, expected a sentence-transformers INSTRUCTOR checkpoint"
            )
        for m in pools:
            setattr(m, "include_prompt", False)  # noqa: B010  # INSTRUCTOR pools over the text tokens only
        return model

    def model_text(self, text: str) -> str:
        return text  # the instruction goes in as the prompt

    def _encode_options(self) -> dict[str, Any]:
        return {"prompt": instructor_prompt(self.instruction) if self.instruction else None}


@dataclass
class StaticBackend:
    """A static model (:mod:`evalprism.embed.static`) as an embedder: the :class:`StaticEncoder` the router's
    ``static`` backbone runs, so a text's vector is the backbone's feature for it, to the bit (each vector
    depends on its own text alone). The instruction is prepended as plain text, as for ``minilm``. The model
    is distilled into the cache directory on first encode, so a fully cached run builds and loads nothing."""

    spec: str
    parsed: EncoderSpec
    source: StaticSource
    model_id: str
    instruction: str | None
    cache_dir: str | Path | None
    progress: bool
    location: str = ""
    clipped: int = field(default=0, init=False, repr=False)
    _encoder: StaticEncoder | None = field(default=None, init=False, repr=False)
    #: encoders loaded in this process, by model directory: a second Embedder reuses the vectors
    _loaded: ClassVar[dict[Path, StaticEncoder]] = {}

    def load(self) -> StaticEncoder:
        """The encoder, distilled (once, into the cache) and loaded on first use."""
        if self._encoder is None:
            directory = ensure_static_model(
                self.parsed, cache_dir=self.cache_dir, progress=self.progress, role="embedder"
            )
            if directory not in self._loaded:
                self._loaded[directory] = StaticEncoder(directory)
            self._encoder = self._loaded[directory]
        return self._encoder

    def dimension(self) -> int:
        return self.load().dim

    def model_text(self, text: str) -> str:
        """What :meth:`encode` is given for ``text``: the instruction prepended as plain text."""
        return f"{self.instruction} {text}" if self.instruction else text

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit-norm float32 vectors (zero for a text with no known token); ``batch_size`` is not needed."""
        encoder = self.load()
        before = encoder.clipped
        vectors = encoder.encode(list(texts))
        self.clipped += encoder.clipped - before
        return vectors


def _hub_cache_name(name: str) -> str | None:
    """The hub name under which ``name`` sits in the local Hugging Face cache (sentence-transformers
    also tries the ``sentence-transformers/`` organisation), or None; never touches the network."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    for candidate in (name, f"sentence-transformers/{name}") if "/" not in name else (name,):
        try:
            if isinstance(try_to_load_from_cache(candidate, "config.json"), str):
                return candidate
        except ValueError:  # not a valid repository id
            return None
    return None


def _looks_like_path(name: str) -> bool:
    """Whether an ``st:`` name can only be a path: absolute, relative to '.' or '~', or with more
    slashes than a hub id ('organisation/model') has."""
    return name.startswith((".", "~")) or Path(name).is_absolute() or name.count("/") > 1


def _sentence_backend(
    spec: EncoderSpec, ctx: BackendContext, location: str, model_id: str
) -> SentenceTransformerBackend:
    """A sentence-transformers backend in the runtime ``ctx`` asks for, once ``auto`` is decided; its cache
    identity names that runtime when it is not torch."""
    runtime = resolve_embed_runtime(ctx.runtime, spec, ctx.device, progress=ctx.progress)
    return SentenceTransformerBackend(
        spec=spec.text,
        location=location,
        model_id=runtime_model_id(model_id, runtime),
        device=ctx.device,
        instruction=ctx.instruction,
        runtime=runtime,
    )


def _minilm(spec: EncoderSpec, ctx: BackendContext) -> SentenceTransformerBackend:
    packaged = packaged_minilm()
    return _sentence_backend(spec, ctx, packaged.location, packaged.model_id)


def _sentence_transformer(spec: EncoderSpec, ctx: BackendContext) -> SentenceTransformerBackend:
    name = spec.location
    path = Path(name).expanduser()
    if path.exists():
        return _sentence_backend(spec, ctx, str(path.resolve()), f"st:{path.resolve()}#{fingerprint(path)}")
    # Checked here, in well under a second: loading would spend ~45 s in Hugging Face retries
    # before failing, since evalprism never downloads models.
    if _looks_like_path(name):
        raise EvalprismError(
            f"embedder '{spec}': cannot load model from '{path}': no such directory "
            "(give the directory of a sentence-transformers model; evalprism never downloads models)"
        )
    cached = _hub_cache_name(name)
    if cached is None:
        raise EvalprismError(
            f"embedder '{spec}': '{name}' is not a local directory, and no model of that name is in the local "
            "Hugging Face cache; evalprism never downloads models. Download it yourself (e.g. "
            f"`huggingface-cli download {name if '/' in name else 'sentence-transformers/' + name} --local-dir "
            f"models/{Path(name).name}`) and pass st:<that directory>"
        )
    return _sentence_backend(spec, ctx, cached, f"st:{cached}")


def _instructor(spec: EncoderSpec, ctx: BackendContext) -> InstructorBackend:
    resolve_embed_runtime(ctx.runtime, spec, ctx.device)  # refuses a forced openvino: the prompt is not traced
    path = Path(spec.location).expanduser()
    if not path.is_dir():
        raise EvalprismError(
            f"embedder '{spec}': '{path}' is not a directory; INSTRUCTOR weights cannot be "
            "downloaded at run time, give the local directory of a checkpoint "
            "(e.g. a copy of hkunlp/instructor-xl)"
        )
    path = path.resolve()
    return InstructorBackend(
        spec=spec.text,
        location=str(path),
        model_id=f"instructor:{path}#{fingerprint(path)}",
        device=ctx.device,
        instruction=ctx.instruction,
    )


def _static(spec: EncoderSpec, ctx: BackendContext) -> StaticBackend:
    """The static model of ``static`` / ``static:<dir>``; its cache identity is the model's (source,
    distillation settings, model2vec version) and the tokens it reads, wherever the model is built. It
    computes in numpy: a forced ``openvino`` runtime is refused."""
    resolve_embed_runtime(ctx.runtime, spec, ctx.device)
    source = static_source(spec, role="embedder")
    return StaticBackend(
        spec=spec.text,
        parsed=spec,
        source=source,
        model_id=f"static:{static_model_key(source)}:max{DEFAULT_MAX_TOKENS}",
        instruction=ctx.instruction,
        cache_dir=ctx.cache_dir,
        progress=ctx.progress,
        location=source.location,
    )


#: every kind an embedder can be, and how its backend is resolved (one row per kind of EMBEDDER_KINDS)
_RESOLVERS: dict[Kind, Callable[[EncoderSpec, BackendContext], EncoderBackend]] = {
    "minilm": _minilm,
    "st": _sentence_transformer,
    "instructor": _instructor,
    "static": _static,
}


def resolve_backend(
    spec: str | EncoderSpec | None,
    device: str = "cpu",
    instruction: str | None = None,
    *,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    runtime: str = "torch",
) -> EncoderBackend:
    """Map an embedder spec to its backend (no model is loaded yet); ``instruction`` goes with every text;
    ``cache_dir`` and ``progress``: where a backend that builds its model (``static``) keeps it, and whether
    it may say so; ``runtime``: what computes a sentence encoder's vectors (:mod:`evalprism.embed.runtime`)."""
    parsed = parse_spec(spec, kinds=EMBEDDER_KINDS)
    return _RESOLVERS[parsed.kind](parsed, BackendContext(device, instruction or None, cache_dir, progress, runtime))


def default_device() -> str:
    """``cpu`` unless EVALPRISM_DEVICE says otherwise (e.g. ``cuda`` for GPU installs)."""
    return os.environ.get("EVALPRISM_DEVICE", "cpu")
