"""The OpenVINO runtime of a sentence encoder against its peer, sentence-transformers itself: the
same vectors in float32 (the whole pipeline is traced: transformer, mean pooling, normalisation),
close ones in bfloat16, and the same answers from several threads at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import HANG_LIMIT_S

from evalprism.embed.backends import resolve_backend
from evalprism.embed.length_groups import length_groups
from evalprism.embed.openvino_runtime import OpenVINOEncoder
from evalprism.errors import EvalprismError
from evalprism.p2l.backbones import resolve_runtime

pytestmark = pytest.mark.slow  # converts and compiles encoders

TEXTS = [
    "Write a sonnet about the autumn sea.",
    "What is 36 * 12 + 5?",
    "ok",
    "Écris un poème sur la mer; 海についての詩を書いてください — und auf Deutsch, bitte.",
    "Explain, step by step and with one worked example at the end, how the Bradley-Terry model turns pairwise "
    "votes into a leaderboard, and why a tie needs its own parameter in the Rao-Kupper extension.",
    # far past minilm's 256-token window: truncated by the model's own tokenizer, as in sentence-transformers
    " ".join(["the quick brown fox jumps over the lazy dog"] * 80),
]


@pytest.fixture(scope="module")
def sentence_transformer():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(resolve_backend("minilm").location, device="cpu")


@pytest.fixture(scope="module")
def reference(sentence_transformer) -> np.ndarray:
    return sentence_transformer.encode(TEXTS, batch_size=64, convert_to_numpy=True)


@pytest.fixture(scope="module")
def float32_encoder(sentence_transformer) -> OpenVINOEncoder:
    return OpenVINOEncoder(sentence_transformer, precision="float32")


def test_float32_equals_sentence_transformers(float32_encoder: OpenVINOEncoder, reference: np.ndarray) -> None:
    batched = float32_encoder.encode(TEXTS)
    assert batched.shape == reference.shape == (len(TEXTS), 384) and batched.dtype == np.float32
    np.testing.assert_allclose(batched, reference, atol=2e-6)
    one_by_one = np.concatenate([float32_encoder.encode([text]) for text in TEXTS])  # no padding at all
    np.testing.assert_allclose(one_by_one, reference, atol=2e-6)
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-6)  # the model's Normalize module ran
    assert float32_encoder.encode([]).shape == (0, 384)
    lengths = sentence_transformer_lengths(float32_encoder, TEXTS)
    assert len(length_groups(lengths)) > 1  # the batch above really ran in several length-bucketed calls


def sentence_transformer_lengths(encoder: OpenVINOEncoder, texts: list[str]) -> np.ndarray:
    return encoder.model.preprocess(texts)["attention_mask"].sum(axis=1).numpy()


@pytest.mark.parametrize("runtime", ["openvino", "torch"])
def test_a_token_cap_reads_prompts_as_a_shorter_encoder_would(runtime: str) -> None:
    """Serving's ``max_prompt_tokens``: the backbone's features equal sentence-transformers' own
    embeddings with ``max_seq_length`` set to the cap (long prompts cut, short ones untouched)."""
    from sentence_transformers import SentenceTransformer

    from evalprism.p2l.backbones import load_backbone

    backbone = load_backbone("minilm", runtime=runtime, cache_dir=False)
    backbone.limit_prompt_tokens(12)
    peer = SentenceTransformer(resolve_backend("minilm").location, device="cpu")
    peer.max_seq_length = 12
    expected = peer.encode(TEXTS, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    with torch.no_grad():
        np.testing.assert_allclose(backbone.features(TEXTS).numpy(), expected, atol=2e-6)
    uncut = load_backbone("minilm", runtime=runtime, cache_dir=False).features(TEXTS[:5]).detach().numpy()
    # the sonnet request (9 tokens) is read whole; the 40-token Bradley-Terry question is cut
    assert np.abs(uncut[0] - expected[0]).max() < 2e-6 and np.abs(uncut[4] - expected[4]).max() > 1e-3
    with pytest.raises(EvalprismError, match="max_prompt_tokens 0"):
        backbone.limit_prompt_tokens(0)


def test_bfloat16_stays_within_a_cosine_of_1e_4(sentence_transformer, reference: np.ndarray) -> None:
    encoded = OpenVINOEncoder(sentence_transformer, precision="bfloat16").encode(TEXTS)
    cosine = (encoded * reference).sum(axis=1) / np.linalg.norm(encoded, axis=1)
    assert cosine.min() > 0.9999
    # it really computes in bfloat16 where the CPU has it: not bit-identical to float32
    from evalprism.p2l.backbones import native_bf16

    if native_bf16():
        assert np.abs(encoded - reference).max() > 1e-5


def test_threads_each_get_their_own_request(float32_encoder: OpenVINOEncoder, reference: np.ndarray) -> None:
    batches = [TEXTS[k:] + TEXTS[:k] for k in range(len(TEXTS))] * 4
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(float32_encoder.encode, batches))
    for k, result in enumerate(results):
        shift = k % len(TEXTS)
        np.testing.assert_allclose(result, np.roll(reference, -shift, axis=0), atol=2e-6)


def test_runtime_names_resolve_or_fail_clearly() -> None:
    assert resolve_runtime("auto", "minilm") == "openvino"  # openvino is a dependency of evalprism
    assert resolve_runtime("auto", "st:/models/e5") == "openvino"
    assert resolve_runtime("auto", "hf:/models/qwen") == "torch"
    assert resolve_runtime("torch", "minilm") == "torch"
    with pytest.raises(
        EvalprismError, match="runtime 'openvino' runs sentence encoders .* not backbone 'hf:/models/qwen'"
    ):
        resolve_runtime("openvino", "hf:/models/qwen")
    with pytest.raises(EvalprismError, match="runtime: expected one of auto, torch, openvino, got 'tensorrt'"):
        resolve_runtime("tensorrt", "minilm")
    with pytest.raises(EvalprismError, match="precision: expected one of float32, bfloat16, got 'float16'"):
        OpenVINOEncoder(object(), precision="float16")


# Runs in a fresh interpreter with its own HOME (where OpenVINO keeps its telemetry client id) and no CI
# variables (with which OpenVINO turns telemetry off by itself). Forked processes are counted, not started:
# the telemetry client sends each report from a forked process, and a test must not send one.
_CONVERT = """
import json, multiprocessing, os, sys
starts = []
multiprocessing.Process.start = lambda self: starts.append(getattr(self, "_target", None).__name__)
if sys.argv[1] == "library":
    from evalprism.p2l.backbones import load_backbone
    assert load_backbone("minilm", runtime="auto").runtime == "openvino"
else:  # the control: OpenVINO imported and its converter called directly
    import torch, openvino as ov
    ov.convert_model(torch.nn.Linear(3, 2), example_input=torch.zeros(1, 3))
print(json.dumps({"forks": starts, "home": sorted(os.listdir(os.path.expanduser("~")))}))
"""


def _convert_in_fresh_process(home: Path, how: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "TF_BUILD", "JENKINS_URL")}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", _CONVERT, how], env=env, capture_output=True, text=True, timeout=HANG_LIMIT_S, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_conversion_sends_no_telemetry(tmp_path: Path) -> None:
    """OpenVINO reports its import and each conversion to Google Analytics unless told not to; we must not."""
    (tmp_path / "control").mkdir()
    (tmp_path / "library").mkdir()
    control = _convert_in_fresh_process(tmp_path / "control", "control")
    assert "intel" in control["home"] and control["forks"], control  # telemetry is on by default here
    ours = _convert_in_fresh_process(tmp_path / "library", "library")
    assert ours == {"forks": [], "home": []}


def test_serving_backbone_loads_without_transformers_warnings() -> None:
    """The router service's backbone (minilm in OpenVINO) loads without transformers' load-time chatter:
    no weight-loading bar and no "`loss_type=None` ... unrecognized" warning, which tracing triggered."""
    code = (
        "from evalprism.p2l.backbones import load_backbone\n"
        "b = load_backbone('minilm', runtime='openvino', cache_dir=False, progress=False)\n"
        "print(tuple(b.features(['hello']).shape))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=HANG_LIMIT_S, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(1, 384)"
    assert "loss_type" not in proc.stderr and "Loading weights" not in proc.stderr, proc.stderr
