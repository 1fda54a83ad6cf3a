"""The runtime that computes a sentence encoder's vectors for the analyses (:mod:`evalprism.embed.runtime`).

The encoder is a tiny BERT (builders.tiny_bert: random weights, the real BERT layout) loaded by
sentence-transformers as ``st:<dir>`` (mean pooling); OpenVINO traces that same pipeline, so its float32
vectors must equal sentence-transformers' to float32 rounding (the bound is the one measured on MiniLM and
2,000 real texts by benchmarks/bench_embed.py: max |diff| 2.4e-7; the test allows 1e-6).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from builders import tiny_bert
from helpers import REPO, run_process

from evalprism.embed import Embedder, get_embedder
from evalprism.embed import runtime as embed_runtime
from evalprism.embed.runtime import resolve_embed_runtime
from evalprism.embed.spec import parse_spec
from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EmbedOptions

pytest.importorskip("openvino")

TEXTS = [
    "the cat sat on the mat .",
    "a dog runs in the park , and the cat watches it",
    "what is the capital of france ? paris is the capital of france .",
    "rain",
    "the park is green in spring and the dogs run there every morning before the rain",
    "paris",
]


def words_of(texts: list[str]) -> list[str]:
    return sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``st:<dir>`` of a tiny BERT whose vocabulary covers :data:`TEXTS`."""
    return f"st:{tiny_bert(tmp_path_factory.mktemp('bert') / 'bert', words_of(TEXTS))}"


def test_runtime_option_takes_its_vocabulary_and_refuses_anything_else() -> None:
    assert EmbedOptions().embed_runtime == "auto"
    assert EmbedOptions(embed_runtime="openvino").embed_runtime == "openvino"
    with pytest.raises(EvalprismError) as refused:
        EmbedOptions(embed_runtime="onnx")
    assert str(refused.value) == "embed_runtime: expected one of auto, torch, openvino, got 'onnx'"
    assert refused.value.parameter == "embed_runtime"


def test_openvino_vectors_equal_sentence_transformers_to_float32_rounding(encoder: str) -> None:
    torch_vectors = Embedder(encoder, cache_dir=False, progress=False, runtime="torch").embed(TEXTS)
    emb = Embedder(encoder, cache_dir=False, progress=False, runtime="openvino")
    openvino_vectors = emb.embed(TEXTS)
    assert emb.backend.runtime == "openvino"  # type: ignore[attr-defined]
    assert np.abs(openvino_vectors - torch_vectors).max() < 1e-6
    cosine = np.sum(openvino_vectors * torch_vectors, axis=1)
    assert cosine.min() > 1 - 1e-6
    assert np.allclose(np.linalg.norm(openvino_vectors, axis=1), 1, atol=1e-6)  # unit rows, as torch's


def test_the_cache_keeps_each_runtimes_vectors_apart(encoder: str, tmp_path: Path) -> None:
    def embedder(runtime: str) -> Embedder:
        return Embedder(encoder, cache_dir=tmp_path, progress=False, runtime=runtime)

    torch_emb = embedder("torch")
    torch_vectors = torch_emb.embed(TEXTS)
    openvino_emb = embedder("openvino")
    assert openvino_emb.model_id == f"{torch_emb.model_id}|openvino-float32"
    openvino_vectors = openvino_emb.embed(TEXTS)
    assert openvino_emb.stats["cached"] == 0 and openvino_emb.stats["encoded"] == len(TEXTS)  # torch's not served
    again = embedder("openvino")
    assert np.array_equal(again.embed(TEXTS), openvino_vectors) and again.stats["cached"] == len(TEXTS)
    rerun = embedder("torch")
    assert np.array_equal(rerun.embed(TEXTS), torch_vectors) and rerun.stats["cached"] == len(TEXTS)


def test_commands_default_to_auto_and_a_spec_alone_to_torch(encoder: str) -> None:
    """A command's options pick OpenVINO where it is installed; a bare spec (a P2L backbone's features) keeps torch."""
    from_options = get_embedder(EmbedOptions(embedder=encoder), cache_dir=False, progress=False)
    assert from_options.backend.runtime == "openvino"  # type: ignore[attr-defined]
    alone = get_embedder(encoder, cache_dir=False, progress=False)
    assert alone.backend.runtime == "torch" and "|" not in alone.model_id  # type: ignore[attr-defined]
    forced = get_embedder(EmbedOptions(embedder=encoder, embed_runtime="torch"), cache_dir=False, progress=False)
    assert forced.model_id == alone.model_id


def test_auto_falls_back_to_torch_once_when_openvino_cannot_be_imported(
    encoder: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # `import openvino` raises ImportError, find_spec finds none
    monkeypatch.setattr(embed_runtime, "_said", set())
    spec = parse_spec(encoder)
    assert resolve_embed_runtime("auto", spec, "cpu") == "torch"
    assert resolve_embed_runtime("auto", parse_spec("minilm"), "cpu") == "torch"
    said = [line for line in capsys.readouterr().err.splitlines() if "OpenVINO is not installed" in line]
    assert len(said) == 1
    with pytest.raises(EvalprismError) as refused:
        resolve_embed_runtime("openvino", spec, "cpu")
    assert "embed_runtime 'openvino': the openvino package is not installed" in str(refused.value)
    assert refused.value.parameter == "embed_runtime"


@pytest.mark.parametrize(
    ("spec", "device", "named"),
    [
        ("static", "cpu", "embedder 'static'"),
        ("instructor:/x", "cpu", "embedder 'instructor:/x'"),
        ("minilm", "cuda", "device 'cuda'"),
    ],
)
def test_openvino_forced_where_it_cannot_run_is_refused_and_auto_keeps_torch(
    spec: str, device: str, named: str
) -> None:
    parsed = parse_spec(spec)
    assert resolve_embed_runtime("auto", parsed, device) == "torch"
    with pytest.raises(EvalprismError, match=re.escape(named)) as refused:
        resolve_embed_runtime("openvino", parsed, device)
    assert refused.value.parameter == "embed_runtime"


def test_the_cli_refuses_an_unknown_runtime_naming_its_flag(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from helpers import run_cli

    code, _, err = run_cli(
        ["judges", tmp_path / "none.csv", "--embed-runtime", "onnx", "--out", tmp_path / "o"], capsys
    )
    assert code != 0 and "--embed-runtime" in err and "Traceback" not in err


@pytest.mark.slow
def test_bench_embed_compares_both_runtimes_in_one_run(encoder: str) -> None:
    """benchmarks/bench_embed.py --quick on the tiny encoder: both runtimes timed, their agreement, auto's pick."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    bench = [sys.executable, REPO / "benchmarks" / "bench_embed.py", "--quick", "--embedder", encoder]
    done = run_process(bench, REPO, env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "stopped early" not in out, out
    assert "texts/s" in out and "note: auto picks openvino here" in out
    cosine_min = re.search(r"note: openvino float32 against torch float32: cosine min 1 - ([0-9.e+-]+)", out)
    assert cosine_min is not None and float(cosine_min.group(1)) < 1e-6
