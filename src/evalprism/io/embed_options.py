"""How texts are embedded: the options every command that embeds shares, declared once.

``ecdf`` (responses), ``judges`` (query-passage pairs) and ``p2l bench`` (the baselines' prompt
features) embed texts through one :class:`~evalprism.embed.Embedder`; what the user chooses about it
is one group (:func:`~evalprism.io.options.group`) in each command's options, so a new choice (a
runtime, an engine) is one field here and reaches every command. The spec itself is parsed where it
is used (:func:`evalprism.embed.spec.parse_spec`): this module imports nothing heavy, since the
command line builds its flags from it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalprism.io.options import Options, option
from evalprism.vocabularies import Runtime

__all__ = ["EMBEDDER_HELP", "EmbedOptions"]

#: the ``--embedder`` help every command shows (a command may add what the embedding is of)
EMBEDDER_HELP = (
    "Frozen text encoder: minilm | st:<local dir> | instructor:<local dir> (read with judges' --instruction; none elsewhere) | static (the router's static "
    "backbone: MiniLM distilled once into the cache, the mean of token vectors, far faster and less accurate; "
    "static:<local encoder dir> distils another)."
)


@dataclass(frozen=True)
class EmbedOptions(Options):
    """``embedder``: the encoder spec (:mod:`evalprism.embed.spec`). ``embed_runtime``: what computes a
    sentence encoder's vectors (:mod:`evalprism.embed.runtime`): auto (OpenVINO float32 where installed,
    for minilm and st: on a CPU; else torch), torch (sentence-transformers) or openvino."""

    embedder: str = option("minilm", help=EMBEDDER_HELP)
    embed_runtime: Runtime = option(
        "auto",
        help="What computes the encoder's vectors (minilm, st:): auto (OpenVINO float32 where it is installed, "
        "on a CPU; else torch), torch (sentence-transformers) or openvino. Their vectors differ by at most "
        "about 3e-7 per coordinate, and are cached apart.",
    )
