"""What computes a sentence encoder's vectors for the analyses: PyTorch (sentence-transformers) or OpenVINO.

The analyses (``ecdf``, ``judges``, ``p2l bench``) embed thousands of texts in batches on a CPU. OpenVINO
runs the same traced sentence-transformers pipeline in float32 (:class:`~evalprism.embed.openvino_runtime.
OpenVINOEncoder`): fused attention and layer-norm kernels with the GIL released, where eager PyTorch
dispatches one operator at a time. Only float32 is offered: its vectors differ from sentence-transformers'
by at most 2.4e-7 per coordinate (cosine 1 - 8e-13) on 2,000 real texts, at 1.8x less CPU time
(``benchmarks/bench_embed.py``); bfloat16 is faster still but moves each vector by up to 1.7e-3 (cosine
1 - 3e-5), so it is left to the router, where every prompt is new and nothing is compared across runs.

``embed_runtime`` (:data:`~evalprism.vocabularies.Runtime`): ``auto`` picks OpenVINO for a sentence
encoder (``minilm``, ``st:``) on a CPU where it is installed, else torch (said once per process);
``torch`` and ``openvino`` force one. The vectors are not bit-identical across runtimes, so the cache keeps
them apart: a non-torch runtime adds itself to the backend's ``model_id`` (:func:`runtime_model_id`).
"""

from __future__ import annotations

from evalprism.embed.openvino_runtime import openvino_available
from evalprism.embed.spec import EncoderSpec
from evalprism.errors import EvalprismError
from evalprism.io.options import check_choice
from evalprism.progress import status
from evalprism.vocabularies import Runtime

__all__ = ["OPENVINO_PRECISION", "resolve_embed_runtime", "runtime_model_id"]

#: the precision OpenVINO computes the analyses' vectors in (the exact one)
OPENVINO_PRECISION = "float32"
#: the parameter the messages name (the command line shows ``--embed-runtime``)
PARAMETER = "embed_runtime"
#: whether the fallback of ``auto`` to torch was said in this process
_said: set[str] = set()


def resolve_embed_runtime(runtime: str, spec: EncoderSpec, device: str, *, progress: bool = True) -> str:
    """``torch`` or ``openvino`` for an embedder of ``spec`` on ``device``.

    ``auto``: OpenVINO for a sentence encoder without an instruction prompt (``minilm``, ``st:``) on a CPU
    when the package is installed; otherwise torch, and when OpenVINO is what is missing, said once per
    process. ``openvino`` where it cannot run (not installed, another kind of model, a GPU) is refused with
    one message naming ``embed_runtime``."""
    check_choice(PARAMETER, runtime, Runtime)
    applies = spec.kind in ("minilm", "st") and device == "cpu"
    if runtime == "torch" or (runtime == "auto" and not applies):
        return "torch"
    if not applies:
        what = f"device {device!r}" if spec.kind in ("minilm", "st") else f"embedder '{spec.text}'"
        raise EvalprismError(
            f"{PARAMETER} 'openvino' runs sentence encoders (minilm, st:...) on a CPU, not {what}; "
            f"use {PARAMETER} torch or auto",
            parameter=PARAMETER,
        )
    if openvino_available():
        return "openvino"
    if runtime == "openvino":
        raise EvalprismError(
            f"{PARAMETER} 'openvino': the openvino package is not installed (pip install openvino); "
            f"or use {PARAMETER} torch",
            parameter=PARAMETER,
        )
    if "auto" not in _said:
        _said.add("auto")
        status(
            f"{PARAMETER} auto: OpenVINO is not installed, embedding in torch (pip install openvino for faster "
            "CPU embedding)",
            progress,
        )
    return "torch"


def runtime_model_id(model_id: str, runtime: str) -> str:
    """The cache identity of a model's vectors computed in ``runtime``: torch's is the model's own (the
    cache's existing entries), any other runtime's names itself, since its vectors differ in the last bits."""
    return model_id if runtime == "torch" else f"{model_id}|{runtime}-{OPENVINO_PRECISION}"
