"""INSTRUCTOR embeddings (Su et al. 2023) with their instruction format, from local weights.

INSTRUCTOR encodes ``[instruction, text]`` pairs: the model reads the instruction followed by the
text, and the mean pooling covers only the text's tokens (the instruction conditions the encoding but
is not averaged in). :class:`~evalprism.embed.backends.InstructorBackend` runs this with
sentence-transformers alone; the weights (e.g. hkunlp/instructor-xl) must be a local directory, since
nothing is downloaded at run time.

Spec: ``instructor:<path>``. :func:`evalprism.embed.get_embedder` returns an
:class:`InstructorEmbedder` for it, which passes the instruction to the model as INSTRUCTOR's prompt
(and into the cache key).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalprism.embed.backends import InstructorBackend, instructor_prompt
from evalprism.embed.embedder import Embedder
from evalprism.embed.spec import EncoderSpec
from evalprism.errors import EvalprismError

__all__ = ["InstructorBackend", "InstructorEmbedder", "instructor_inputs", "instructor_prompt"]


def instructor_inputs(instruction: str, texts: Sequence[str]) -> list[list[str]]:
    """The ``[instruction, text]`` pairs INSTRUCTOR's own ``encode`` takes (for reference and export)."""
    prompt = instructor_prompt(instruction)
    return [[prompt, t] for t in texts]


class InstructorEmbedder(Embedder):
    """The :class:`~evalprism.embed.Embedder` of an ``instructor:<path>`` spec (refuses any other)."""

    def __init__(self, spec: str | EncoderSpec, *, instruction: str | None = None, **options: Any) -> None:
        super().__init__(spec, instruction=instruction, **options)
        if not isinstance(self.backend, InstructorBackend):
            raise EvalprismError(f"embedder '{spec}': expected an instructor:<path> spec")
