"""Sentence-encoder inference in OpenVINO: the embeddings of a sentence-transformers model, faster on a CPU.

Why a second runtime: the P2L router spends nearly all of its time encoding prompts. On this
project's reference machine (2 cores, AVX512-BF16) the minilm encoder runs, per batch of 16
prompts, at about 620 prompts/s in OpenVINO bfloat16 against 530 in PyTorch bfloat16 and 260 in
PyTorch float32 (``benchmarks/bench_p2l.py``); in the service, where Python and the model share
the two cores, the gap widens to about 1.4x in requests/s (``benchmarks/bench_serve.py``).
OpenVINO fuses each layer's attention, GELU and layer norms into a few kernels and runs them with
the GIL released, where eager PyTorch dispatches one operator at a time from Python.

The whole sentence-transformers pipeline (transformer, pooling as the model defines it, any dense
or normalise modules) is traced once into an OpenVINO model, so the vectors are the model's own
``sentence_embedding``: in float32 they equal sentence-transformers' to about 1e-7. Tokenisation
stays the model's own (its Hugging Face fast tokenizer, with its truncation length).
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalprism.embed.length_groups import length_groups
from evalprism.errors import EvalprismError
from evalprism.io.options import check_choice
from evalprism.vocabularies import ComputePrecision

#: evalprism precision names -> OpenVINO's inference precision hint
_OV_PRECISION = {"float32": "f32", "bfloat16": "bf16"}


def openvino_available() -> bool:
    """Whether the OpenVINO runtime is installed here (found, not imported: see :func:`import_openvino`)."""
    return importlib.util.find_spec("openvino") is not None


def import_openvino() -> Any:
    """``import openvino``, without its usage telemetry.

    Importing OpenVINO reports the import (and each ``convert_model`` call) to Google Analytics
    from a forked process, and writes a client id under ``~/intel``, unless the user has opted out
    or runs under CI. A library must not phone home on its users' behalf (nor fork a threaded
    server to do it), and OpenVINO has no switch short of a file in the user's home, so OpenVINO's
    own modules are imported while ``openvino_telemetry`` is unimportable: they then bind the no-op
    stub they ship for installs without telemetry. Nothing changes if OpenVINO was already imported.
    """
    block = "openvino" not in sys.modules and "openvino_telemetry" not in sys.modules
    if block:
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]  # makes its import raise ImportError
    try:
        import openvino
    finally:
        if block:
            del sys.modules["openvino_telemetry"]
    return openvino


class OpenVINOEncoder:
    """``encode(texts)`` -> the model's sentence embeddings (n, dim) float32, computed by OpenVINO.

    ``precision``: ``float32`` or ``bfloat16`` (OpenVINO's inference precision; pin float32
    explicitly, since OpenVINO picks bfloat16 by itself on CPUs with AMX). ``threads``: OpenVINO's
    inference threads (default: one per physical core). Safe to call from several threads: each
    thread gets its own inference request on the one compiled model.
    """

    def __init__(self, model: Any, *, precision: str = "float32", threads: int | None = None) -> None:
        check_choice("precision", precision, ComputePrecision)
        try:
            import torch

            ov = import_openvino()
        except ImportError as exc:
            raise EvalprismError(
                f"runtime 'openvino' needs the openvino package ({exc}); pip install openvino"
            ) from None
        self.model = model
        self.precision = precision
        probe = model.preprocess(["a probe sentence", "another, longer probe sentence"])
        self.input_names = [name for name, value in probe.items() if isinstance(value, torch.Tensor)]
        try:
            with warnings.catch_warnings(), torch.no_grad():
                # tracing warns about Python branches on shapes; for an encoder's forward they are
                # fixed by the presence of the attention mask, not by the probe's sizes
                warnings.simplefilter("ignore")
                converted = ov.convert_model(
                    _sentence_embedding_module(model.eval(), self.input_names),
                    example_input=tuple(probe[name] for name in self.input_names),
                )
            config: dict[str, Any] = {
                "INFERENCE_PRECISION_HINT": _OV_PRECISION[precision],
                "PERFORMANCE_HINT": "LATENCY",
            }
            if threads is not None:
                config["INFERENCE_NUM_THREADS"] = int(threads)
            self._compiled = ov.Core().compile_model(converted, "CPU", config)
        except Exception as exc:
            raise EvalprismError(
                f"runtime 'openvino': cannot convert this sentence encoder "
                f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                "use runtime 'torch'"
            ) from None
        self._local = threading.local()

    def encode(self, texts: Sequence[str], *, length_buckets: bool = True) -> np.ndarray:
        """Sentence embeddings of ``texts``, tokenised once and run in length-bucketed calls
        (:func:`~evalprism.embed.length_groups.length_groups`): each call is padded to the longest
        text of its group, not of the batch. The vectors are the same as one padded call's (the
        attention mask hides padding), to float32 rounding. ``length_buckets=False``: one call
        padded to the longest text (the peer in ``benchmarks/bench_serve.py``)."""
        dim = self._compiled.outputs[0].get_partial_shape()[-1].get_length()
        if not texts:
            return np.zeros((0, dim), dtype=np.float32)
        request = getattr(self._local, "request", None)
        if request is None:
            request = self._local.request = self._compiled.create_infer_request()
        tokenised = self.model.preprocess(list(texts))
        features = {name: tokenised[name].numpy() for name in self.input_names}
        mask: np.ndarray | None = features.get("attention_mask")
        if not length_buckets or mask is None or getattr(self.model.tokenizer, "padding_side", "right") != "right":
            groups = [np.arange(len(texts))]  # padding is not a suffix: one call, as the model pads
        else:
            groups = length_groups(mask.sum(axis=1))
        out = np.empty((len(texts), dim), dtype=np.float32)
        for rows in groups:
            width = (
                int(mask[rows].sum(axis=1).max())
                if mask is not None and len(groups) > 1
                else features[self.input_names[0]].shape[1]
            )
            outputs = request.infer([features[name][rows, :width] for name in self.input_names])
            out[rows] = outputs[0]  # copied out: the request reuses its output buffer
        return out


def _sentence_embedding_module(model: Any, input_names: list[str]) -> Any:
    import torch

    class SentenceEmbedding(torch.nn.Module):
        """The sentence-transformers forward with positional tensor inputs, as tracing wants them."""

        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.model(dict(zip(input_names, tensors, strict=True)))["sentence_embedding"]

    return SentenceEmbedding()
