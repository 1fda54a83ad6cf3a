"""The OpenVINO runtime of a sentence encoder against its peer, sentence-transformers itself: the
same vectors in float32 (the whole pipeline is traced: transformer, mean pooling, normalisation),
close ones in bfloat16, and the same answers from several threads at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from evalprism.embed.backends import resolve_backend
from evalprism.embed.openvino_runtime import OpenVINOEncoder
from evalprism.errors import EvalprismError
from evalprism.p2l.backbones import resolve_runtime

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
    with pytest.raises(EvalprismError, match="runtime 'openvino' runs sentence-encoder backbones"):
        resolve_runtime("openvino", "hf:/models/qwen")
    with pytest.raises(EvalprismError, match="unknown runtime 'tensorrt'"):
        resolve_runtime("tensorrt", "minilm")
    with pytest.raises(EvalprismError, match="unknown precision 'float16'"):
        OpenVINOEncoder(object(), precision="float16")
