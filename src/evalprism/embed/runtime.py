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

__all__ = ["OPENVINO_PRECISION", "choose_runtime", "resolve_embed_runtime", "runtime_model_id"]

#: the sentence encoders OpenVINO runs (the traced sentence-transformers pipeline; INSTRUCTOR's prompt is not
#: traced, and static models compute in numpy)
OPENVINO_KINDS = ("minilm", "st")
#: the precision OpenVINO computes the analyses' vectors in (the exact one)
OPENVINO_PRECISION = "float32"
#: the parameter the messages name (the command line shows ``--embed-runtime``)
PARAMETER = "embed_runtime"
#: whether the fallback of ``auto`` to torch was said in this process
_said: set[str] = set()


def choose_runtime(
    requested: str,
    spec: EncoderSpec,
    *,
    device: str,
    name: str,
    role: str,
    progress: bool = True,
    on_command_line: bool = True,
) -> str:
    """``torch`` or ``openvino``: the one rule for the analyses' embedders (:func:`resolve_embed_runtime`)
    and the router's backbones (:func:`evalprism.p2l.backbones.resolve_runtime`).

    ``auto``: OpenVINO for a sentence encoder of :data:`OPENVINO_KINDS` on a CPU when the package is
    installed; otherwise torch, and when OpenVINO is what is missing, said once per process.
    ``openvino`` where it cannot run (not installed, another kind of model, a GPU) is refused with one
    message naming ``name`` and what it cannot run (``embedder 'static'``, ``device 'cuda'``, ``backbone
    'hf:...'``: ``role`` names the spec). ``on_command_line``: ``name`` is a command's option, so
    the command line shows its flag in the message; False for a key of a file or an argument of the API
    (the router's ``runtime``), named as it is."""
    check_choice(name, requested, Runtime)
    flag = name if on_command_line else None  # the CLI shows a command option as its flag
    traced = spec.kind in OPENVINO_KINDS
    applies = traced and device == "cpu"
    if requested == "torch" or (requested == "auto" and not applies):
        return "torch"
    if not applies:
        what = f"device {device!r}" if traced else f"{role} '{spec.text}'"
        raise EvalprismError(
            f"{name} 'openvino' runs sentence encoders (minilm, st:...) on a CPU, not {what}; use {name} torch or auto",
            parameter=flag,
        )
    if openvino_available():
        return "openvino"
    if requested == "openvino":
        raise EvalprismError(
            f"{name} 'openvino': the openvino package is not installed (pip install openvino); or use {name} torch",
            parameter=flag,
        )
    if "auto" not in _said:
        _said.add("auto")
        status(
            f"{name} auto: OpenVINO is not installed, embedding in torch (pip install openvino for faster "
            "CPU embedding)",
            progress,
        )
    return "torch"


def resolve_embed_runtime(runtime: str, spec: EncoderSpec, device: str, *, progress: bool = True) -> str:
    """``torch`` or ``openvino`` for an analysis' embedder of ``spec`` on ``device`` (:func:`choose_runtime`;
    the messages name ``embed_runtime``)."""
    return choose_runtime(runtime, spec, device=device, name=PARAMETER, role="embedder", progress=progress)


def runtime_model_id(model_id: str, runtime: str) -> str:
    """The cache identity of a model's vectors computed in ``runtime``: torch's is the model's own (the
    cache's existing entries), any other runtime's names itself, since its vectors differ in the last bits."""
    return model_id if runtime == "torch" else f"{model_id}|{runtime}-{OPENVINO_PRECISION}"
