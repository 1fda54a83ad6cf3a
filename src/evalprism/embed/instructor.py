"""INSTRUCTOR embeddings (Su et al. 2023) with their instruction format, from local weights.

INSTRUCTOR encodes ``[instruction, text]`` pairs: the model reads the instruction followed by the
text, and the mean pooling covers only the text's tokens (the instruction conditions the encoding but
is not averaged in). sentence-transformers reproduces exactly this with a ``prompt`` plus
``Pooling(include_prompt=False)``, its documented way to run INSTRUCTOR checkpoints, so no extra
package is needed; the weights (e.g. hkunlp/instructor-xl) must be a local directory, since nothing
is downloaded at run time.

Spec: ``instructor:<path>``. :class:`InstructorEmbedder` passes the instruction to the model as
INSTRUCTOR's prompt (and into the cache key); a plain :class:`~evalprism.embed.Embedder` built on this
backend would prepend it as text instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalprism.embed.embedder import Embedder
from evalprism.errors import EvalprismError

#: INSTRUCTOR models loaded in this process, by (location, device); kept apart from the other
#: backends' models because the pooling is switched to exclude the prompt
_LOADED: dict[tuple[str, str], Any] = {}


def instructor_prompt(instruction: str) -> str:
    """The text placed before every input: INSTRUCTOR's instructions end with ':' and a space
    ("Represent the Science title: "); an instruction without the colon gets one."""
    text = instruction.strip()
    return (text if text.endswith(":") else text + ":") + " "


def instructor_inputs(instruction: str, texts: Sequence[str]) -> list[list[str]]:
    """The ``[instruction, text]`` pairs INSTRUCTOR's own ``encode`` takes (for reference and export)."""
    prompt = instructor_prompt(instruction)
    return [[prompt, t] for t in texts]


@dataclass
class InstructorBackend:
    """An INSTRUCTOR checkpoint in a local directory; ``instruction`` is set by the embedder."""

    spec: str
    location: str
    model_id: str
    device: str = "cpu"
    instruction: str | None = None
    _model: Any = field(default=None, init=False, repr=False)

    def load(self) -> Any:
        if self._model is None:
            key = (self.location, self.device)
            if key not in _LOADED:
                try:
                    from sentence_transformers import SentenceTransformer

                    model = SentenceTransformer(self.location, device=self.device)
                except Exception as exc:
                    raise EvalprismError(
                        f"embedder '{self.spec}': cannot load an INSTRUCTOR model from '{self.location}' "
                        f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})"
                    ) from None
                pools = [m for m in model.modules() if hasattr(m, "include_prompt")]
                if not pools:
                    raise EvalprismError(f"embedder '{self.spec}': the model in '{self.location}' has no pooling "
                                         "layer, expected a sentence-transformers INSTRUCTOR checkpoint")
                for m in pools:
                    m.include_prompt = False  # INSTRUCTOR pools over the text tokens only
                _LOADED[key] = model
            self._model = _LOADED[key]
        return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        model = self.load()
        prompt = instructor_prompt(self.instruction) if self.instruction else None
        vecs = model.encode(texts, prompt=prompt, batch_size=batch_size, show_progress_bar=False,
                            convert_to_numpy=True, normalize_embeddings=True)
        return np.asarray(vecs, dtype=np.float32)


def resolve_instructor(spec: str, device: str = "cpu") -> InstructorBackend:
    """``instructor:<path>`` -> backend; the path must be a local model directory."""
    from evalprism.embed.backends import _fingerprint

    name = spec.split(":", 1)[1].strip()
    if not name:
        raise EvalprismError("embedder 'instructor:': give the local directory of an INSTRUCTOR model, "
                             "e.g. instructor:/models/instructor-xl")
    path = Path(name).expanduser()
    if not path.is_dir():
        raise EvalprismError(f"embedder '{spec}': '{path}' is not a directory; INSTRUCTOR weights cannot be "
                             "downloaded at run time, give the local directory of a checkpoint "
                             "(e.g. a copy of hkunlp/instructor-xl)")
    path = path.resolve()
    return InstructorBackend(spec=spec, location=str(path), model_id=f"instructor:{path}#{_fingerprint(path)}",
                             device=device)


class InstructorEmbedder(Embedder):
    """An :class:`Embedder` that gives the instruction to an INSTRUCTOR backend as its prompt."""

    def __init__(self, spec: str, *, instruction: str | None = None, **options: Any) -> None:
        super().__init__(spec, instruction=instruction, **options)
        if not isinstance(self.backend, InstructorBackend):
            raise EvalprismError(f"embedder '{spec}': expected an instructor:<path> spec")
        self.backend.instruction = self.instruction

    def _model_text(self, text: str) -> str:
        return text  # the backend adds the instruction as INSTRUCTOR's prompt
