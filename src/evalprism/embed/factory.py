"""The one factory from a spec string, or a command's embedding options, to an :class:`~evalprism.embed.Embedder`.

ECDF, judges and the P2L sentence-encoder backbones all build their embedders here, so a spec means
the same everywhere: ``instructor:<path>`` always gives the INSTRUCTOR embedder (the instruction as
the model's prompt), and a kind the caller cannot use is refused by :func:`~evalprism.embed.spec.parse_spec`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evalprism.embed.embedder import Embedder
from evalprism.embed.instructor import InstructorEmbedder
from evalprism.embed.spec import DEFAULT_SPEC, EMBEDDER_KINDS, EncoderSpec, Kind, parse_spec
from evalprism.io.embed_options import EmbedOptions, EngineOptions

#: what names an embedder: a spec (text or parsed), a command's embedding options, or an Embedder itself
EmbedderChoice = str | EncoderSpec | EmbedOptions | Embedder


def spec_text(choice: EmbedderChoice) -> str:
    """The spec a choice names, as written (for records and messages)."""
    if isinstance(choice, EmbedOptions):
        return choice.embedder
    return str(getattr(choice, "spec", choice))


def get_embedder(
    spec: EmbedderChoice = DEFAULT_SPEC,
    *,
    instruction: str | None = None,
    cache_dir: str | Path | bool | None = None,
    progress: bool = True,
    batch_size: int = 64,
    device: str | None = None,
    role: str = "embedder",
    kinds: Sequence[Kind] = EMBEDDER_KINDS,
    engine: EngineOptions | None = None,
    runtime: str | None = None,
) -> Embedder:
    """An :class:`Embedder` for ``spec`` (an Embedder passes through unchanged; a command's
    :class:`~evalprism.io.embed_options.EmbedOptions` give the spec and every other embedding choice).

    ``instruction`` goes with every text as the spec's model expects it (see :class:`Embedder`).
    ``role`` and ``kinds``: how the caller names what it builds, and the spec kinds it accepts
    (a P2L backbone takes ``minilm`` and ``st:`` here). ``engine``: where missing texts are encoded
    (:class:`~evalprism.io.embed_options.EngineOptions`; a command's EmbedOptions carry their own).
    ``runtime``: what computes a sentence encoder's vectors (:mod:`evalprism.embed.runtime`); None: the
    options' ``embed_runtime`` (default ``auto``), and ``torch`` for a spec given alone (a P2L backbone's
    features, computed as its model was trained)."""
    if isinstance(spec, Embedder):
        return spec
    options = spec if isinstance(spec, EmbedOptions) else None
    engine = engine or options
    parsed = parse_spec(options.embedder if options else spec, role=role, kinds=kinds)  # type: ignore[arg-type]
    cls = InstructorEmbedder if parsed.kind == "instructor" else Embedder
    return cls(
        parsed,
        instruction=instruction,
        cache_dir=cache_dir,
        progress=progress,
        batch_size=batch_size,
        device=device,
        engine=engine,
        runtime=runtime or (options.embed_runtime if options else "torch"),
    )
