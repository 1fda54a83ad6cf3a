"""How texts are embedded: the options every command that embeds shares, declared once.

``ecdf`` (responses), ``judges`` (query-passage pairs) and ``p2l bench`` (the baselines' prompt
features) embed texts through one :class:`~evalprism.embed.Embedder`; what the user chooses about it
is one group (:func:`~evalprism.io.options.group`) in each command's options, so a new choice (a
runtime, an engine) is one field here and reaches every command. Where the missing texts are encoded
(:class:`EngineOptions`: in process, or on a Ray actor pool) is a group of its own, which
:class:`EmbedOptions` extends and ``p2l train`` includes for its frozen backbone's pre-encoding. The spec itself is parsed where it
is used (:func:`evalprism.embed.spec.parse_spec`): this module imports nothing heavy, since the
command line builds its flags from it at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from evalprism.io.options import Options, check_applies, option
from evalprism.vocabularies import EmbedEngine, Runtime

__all__ = ["EMBEDDER_HELP", "EmbedOptions", "EngineOptions"]

#: the ``--embedder`` help every command shows (a command may add what the embedding is of)
EMBEDDER_HELP = (
    "Frozen text encoder: minilm | st:<local dir> | instructor:<local dir> (read with judges' --instruction; none elsewhere) | static (the router's static "
    "backbone: MiniLM distilled once into the cache, the mean of token vectors, far faster and less accurate; "
    "static:<local encoder dir> distils another)."
)


@dataclass(frozen=True)
class EngineOptions(Options):
    """Where the texts missing from the cache are encoded (:mod:`evalprism.embed.ray_engine`): ``engine``
    ``local`` (this process) or ``ray`` (Ray Data's actor pool, each actor loading the encoder once), and
    ``ray_address``, the Ray cluster to use (default: ``RAY_ADDRESS``, else a local instance). Its own
    group because ``p2l train``'s frozen backbone pre-encodes its prompts with it too."""

    engine: EmbedEngine = option(
        "local",
        help="Where texts missing from the embedding cache are encoded: local (this process) | ray (Ray Data actors "
        "on a local instance or a cluster, each loading the encoder once; same vectors; pip install "
        "'evalprism[ray]').",
    )
    ray_address: str | None = option(
        None,
        metavar="ADDRESS",
        help="With --engine ray: the Ray cluster to run on (e.g. 10.0.0.5:6379, or auto; default: RAY_ADDRESS, else "
        "a local instance with this machine's CPUs).",
    )

    def check(self) -> None:
        """An address says where Ray runs: it has no effect on the local engine."""
        check_applies("ray_address", self.ray_address, self.engine == "ray", "it names a Ray cluster for engine 'ray'")


@dataclass(frozen=True)
class EmbedOptions(EngineOptions):
    """``embedder``: the encoder spec (:mod:`evalprism.embed.spec`). ``embed_runtime``: what computes a
    sentence encoder's vectors (:mod:`evalprism.embed.runtime`): auto (OpenVINO float32 where installed,
    for minilm and st: on a CPU; else torch), torch (sentence-transformers) or openvino. And where the
    missing texts are encoded (:class:`EngineOptions`)."""

    embedder: str = option("minilm", help=EMBEDDER_HELP)
    embed_runtime: Runtime = option(
        "auto",
        help="What computes the encoder's vectors (minilm, st:): auto (OpenVINO float32 where it is installed, "
        "on a CPU; else torch), torch (sentence-transformers) or openvino. Their vectors differ by at most "
        "about 3e-7 per coordinate, and are cached apart.",
    )
