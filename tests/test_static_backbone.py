"""The static backbone (``static`` / ``static:<path>``): model2vec's distillation of an encoder, built
once into evalprism's cache, atomically.

The encoder is a tiny BERT (builders.tiny_bert: random weights, the real BERT layout, a 20-token WordPiece
vocabulary), so a build takes well under a second instead of MiniLM's ~7 minutes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from builders import tiny_bert
from helpers import read_run, run_cli, small_responses

from evalprism.embed import get_embedder
from evalprism.embed.spec import parse_spec
from evalprism.embed.static import (
    MARKER,
    STATIC_DIR,
    StaticEncoder,
    ensure_static_model,
    is_complete,
)
from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EmbedOptions
from evalprism.judges import JudgesOptions, analyze
from evalprism.judges.analysis import DEFAULT_INSTRUCTION, pair_text
from evalprism.judges.simulate import simulate_judgments
from evalprism.p2l import P2LModel, TrainOptions, route, train_model
from evalprism.p2l.backbones import load_backbone
from evalprism.p2l.simulate import simulate_topic_battles

pytest.importorskip("model2vec")

WORDS = [
    "the",
    "a",
    "write",
    "poem",
    "sonnet",
    "sea",
    "solve",
    "equation",
    "integral",
    "python",
    "code",
    "bug",
    "loop",
    "history",
    "empire",
]


@pytest.fixture()
def encoder(tmp_path: Path) -> Path:
    return tiny_bert(tmp_path / "tiny-bert", WORDS)


def spec_of(encoder: Path) -> str:
    return f"static:{encoder}"


def built(cache: Path) -> list[Path]:
    return sorted((cache / STATIC_DIR).iterdir()) if (cache / STATIC_DIR).is_dir() else []


def test_features_are_the_normalised_mean_of_the_token_vectors(encoder: Path, tmp_path: Path) -> None:
    backbone = load_backbone(spec_of(encoder), cache_dir=tmp_path / "cache", progress=False)
    static = backbone.encoder.model
    prompts = ["Write a poem", "solve the integral of the equation", "nothing known here"]
    vectors = backbone.features(prompts).numpy()
    for prompt, vector in zip(prompts[:2], vectors[:2], strict=True):
        encoding = static.tokenizer.encode(prompt, add_special_tokens=False)
        ids = [i for i, token in zip(encoding.ids, encoding.tokens, strict=True) if token != "[UNK]"]  # "of" is unknown
        expected = static.embedding[ids].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
    assert not vectors[2].any()  # no known token: the zero vector (the head's bias alone decides)
    assert backbone.dim == vectors.shape[1] == 32 and backbone.runtime == "numpy" and not backbone.trainable


def test_built_once_into_the_cache_and_reused(encoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    spec = parse_spec(spec_of(encoder), role="backbone", kinds=("static",))
    first = ensure_static_model(spec, cache_dir=cache, progress=False)
    assert built(cache) == [first] and is_complete(first)
    record = json.loads((first / MARKER).read_text())
    assert record["spec"] == spec_of(encoder) and record["pca_dims"] == 256
    import evalprism.embed.static as static_module

    def no_second_build(*args: object) -> None:
        raise AssertionError("distilled again")

    monkeypatch.setattr(static_module, "_distill", no_second_build)
    assert ensure_static_model(spec, cache_dir=cache, progress=False) == first
    # the key follows the encoder: changed weights are another model
    (encoder / "model.safetensors").write_bytes((encoder / "model.safetensors").read_bytes() + b" ")
    os.utime(encoder / "model.safetensors", (1, 1))
    with pytest.raises(AssertionError, match="distilled again"):
        ensure_static_model(spec, cache_dir=cache, progress=False)


def test_an_interrupted_build_leaves_nothing_that_looks_complete(
    encoder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    spec = parse_spec(spec_of(encoder), role="backbone", kinds=("static",))
    from model2vec.distill import distillation

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt  # Ctrl-C while the tokens are encoded

    with monkeypatch.context() as patch:
        patch.setattr(distillation, "create_embeddings", interrupted)
        with pytest.raises(KeyboardInterrupt):
            ensure_static_model(spec, cache_dir=cache, progress=False)
    assert built(cache) == []  # neither the model nor its temporary directory
    # a build killed outright (no cleanup ran) leaves its temporary directory: not a model, removed by the next build
    final = ensure_static_model(spec, cache_dir=cache, progress=False)
    leftover = final.parent / f".building-{final.name}-deadbeef"
    leftover.mkdir()
    (leftover / "in-progress").write_text("999999999")  # no such process
    (leftover / "model.safetensors").write_bytes(b"half")
    import shutil

    shutil.rmtree(final)
    again = ensure_static_model(spec, cache_dir=cache, progress=False)
    assert again == final and is_complete(final) and built(cache) == [final]
    StaticEncoder(final).encode(["write a poem"])


def test_a_directory_in_the_way_that_evalprism_did_not_complete_is_left_alone(encoder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    spec = parse_spec(spec_of(encoder), role="backbone", kinds=("static",))
    final = ensure_static_model(spec, cache_dir=cache, progress=False)
    (final / MARKER).unlink()
    with pytest.raises(EvalprismError, match="not a complete static model evalprism built.*move it away"):
        ensure_static_model(spec, cache_dir=cache, progress=False)
    assert (final / "model.safetensors").is_file()


def test_train_save_load_and_route_with_the_static_backbone(encoder: Path, tmp_path: Path) -> None:
    battles = simulate_topic_battles(300, seed=3)
    result = train_model(
        battles, TrainOptions(backbone=spec_of(encoder), seed=0), cache_dir=tmp_path / "cache", progress=False
    )
    result.save(tmp_path / "model")
    assert json.loads((tmp_path / "model" / "config.json").read_text())["backbone"]["spec"] == spec_of(encoder)
    loaded = P2LModel.load(tmp_path / "model", cache_dir=tmp_path / "cache")
    prompts = ["write a sonnet about the sea", "solve the integral", "fix the python loop bug"]
    np.testing.assert_allclose(loaded.leaderboards(prompts), result.model.leaderboards(prompts), atol=1e-6)
    costs = np.ones(len(loaded.models))
    assert route(loaded.leaderboards(prompts[:1])[0], costs, None).probs.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("spec", "options", "message"),
    [
        ("static:", {}, "write 'static' .* or give the local directory of an encoder"),
        ("static:/no/such/encoder", {}, "'/no/such/encoder' is not a local model directory"),
        ("static", {"finetune": True}, "is a static model: it cannot be fine-tuned"),
    ],
)
def test_bad_static_specs(spec: str, options: dict[str, bool], message: str) -> None:
    with pytest.raises(EvalprismError, match=message):
        load_backbone(spec, progress=False, **options)


def words_of(texts: Iterable[str]) -> list[str]:
    """Every lowercase word and punctuation mark of ``texts``: the vocabulary of a tiny BERT that knows them all."""
    return sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})


def test_the_static_embedder_gives_the_routers_features_to_the_bit(encoder: Path, tmp_path: Path) -> None:
    """``--embedder static:<dir>`` (the analyses' one factory) and the router's static backbone run the same
    :class:`StaticEncoder` from the same built model. No tolerance: each vector is model2vec's mean over its
    own text's token rows, whatever else is in the call, so the embedder's batches (2 texts, by length, not
    the backbone's one call), its clipping of a 20,000-character text and its SQLite cache's float32 round
    trip change no bit."""
    cache = tmp_path / "cache"
    texts = [
        "write a poem",
        "solve the integral of the equation",
        "python code: a bug in the loops",
        "nothing known here",
        "write a poem",
        "the " * 5000 + "sea",
        "empire history",
    ]
    embedder = get_embedder(spec_of(encoder), cache_dir=cache, progress=False, batch_size=2)
    vectors = embedder.embed(texts)
    backbone = load_backbone(spec_of(encoder), cache_dir=cache, progress=False)
    np.testing.assert_array_equal(vectors, backbone.features(texts).numpy())
    assert embedder.stats == {"requested": 7, "distinct": 6, "cached": 0, "encoded": 6}
    assert embedder.backend.clipped == 1 and len(built(cache)) == 1  # one model, built once, for both
    again = get_embedder(spec_of(encoder), cache_dir=cache, progress=False)
    np.testing.assert_array_equal(again.embed(texts), vectors)
    assert again.stats["cached"] == 6 and again.stats["encoded"] == 0
    # an instruction (judges) is prepended as plain text, as for minilm: the backbone's vector of that text
    instruction = "Represent the python code"
    instructed = get_embedder(spec_of(encoder), instruction=instruction, cache_dir=cache, progress=False)
    np.testing.assert_array_equal(
        instructed.embed(texts), backbone.features([f"{instruction} {t}" for t in texts]).numpy()
    )


def test_judges_cluster_the_static_embedders_vectors(tmp_path: Path) -> None:
    """judges with ``embedder='static:<dir>'`` finds what it finds from the router's static features of
    the same pair texts given as precomputed vectors: the analysis takes the vectors as they are."""
    table = simulate_judgments()
    texts = [pair_text(q, d) for q, d in zip(table["query"], table["doc"], strict=True)]
    encoder = tiny_bert(tmp_path / "bert", words_of([*texts, DEFAULT_INSTRUCTION]))
    options = JudgesOptions(human="human", llm=["llm_strict"], embedding=EmbedOptions(embedder=spec_of(encoder)))
    got = analyze(table, options, cache_dir=tmp_path / "cache", progress=False)
    backbone = load_backbone(spec_of(encoder), cache_dir=tmp_path / "cache", progress=False)
    features = backbone.features([f"{DEFAULT_INSTRUCTION} {t}" for t in texts]).numpy()
    want = analyze(table, options, embeddings=features, progress=False)
    assert got.pairs["cluster"].nunique() > 1
    for name in ("pairs", "clusters", "queries"):
        pd.testing.assert_frame_equal(getattr(got, name), getattr(want, name))


@pytest.mark.parametrize("command", ["judges", "ecdf"])
def test_every_analysis_takes_static_and_says_what_it_embeds(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--embedder static:<dir>`` on the command line, and the line said before encoding: how many
    distinct texts of how many, and how many the cache already holds (all of them on the second run)."""
    if command == "judges":
        table = simulate_judgments()
        texts = [f"{DEFAULT_INSTRUCTION} {pair_text(q, d)}" for q, d in zip(table["query"], table["doc"], strict=True)]
        args = ["--human", "human", "--llm", "llm_strict"]
        what = f"{len(table)} pairs, instruction {DEFAULT_INSTRUCTION!r}"
    else:
        table = small_responses()
        table["response"] = table["response"].str.rstrip(".,;")  # the answers as ecdf reads them: no trailing marks
        references = list(dict.fromkeys(r for cell in table["references"] for r in json.loads(cell)))
        texts = [*table["response"].astype(str), *references]
        args = ["--by", "model", "--by", "temperature", "--clusters", "2"]
        what = f"{len(table)} responses and {len(references)} references"
    path = tmp_path / "input.csv"
    table.to_csv(path, index=False)
    spec = spec_of(tiny_bert(tmp_path / "bert", words_of(texts)))
    monkeypatch.setenv("EVALPRISM_CACHE_DIR", str(tmp_path / "cache"))
    distinct = len(set(texts))
    for run, cached in (("first", 0), ("again", distinct)):
        code, _, err = run_cli([command, path, *args, "--embedder", spec, "--out", tmp_path / run], capsys)
        assert code == 0, err
        said = f"embedding {distinct} distinct texts of {len(texts)} ({cached} cached) with {spec}: {what}"
        assert said in " ".join(err.split()), err
        assert read_run(tmp_path / run).options["embedding"]["embedder"] == spec
    assert distinct < len(texts)  # the inputs repeat texts: the count said is the real work


@pytest.mark.slow
def test_the_service_routes_with_a_static_model(encoder: Path, tmp_path: Path) -> None:
    """`evalprism serve` on a model trained with the static backbone: it loads the static model from the
    cache the training built (``EVALPRISM_CACHE_DIR``), reports runtime numpy, and routes as
    :func:`evalprism.p2l.route` does on the prompt's leaderboard."""
    import httpx
    from serve_harness import (
        CLIENT_TIMEOUT_S,
        FakeUpstreams,
        running_service,
        write_config,
    )

    cache = tmp_path / "cache"
    battles = simulate_topic_battles(300, seed=3)
    train_model(battles, TrainOptions(backbone=spec_of(encoder), seed=0), cache_dir=cache, progress=False).save(
        tmp_path / "model"
    )
    costs = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
    model = P2LModel.load(tmp_path / "model", cache_dir=cache)
    names = list(costs)
    columns = [model.models.index(n) for n in names]
    with FakeUpstreams() as upstreams:
        config = write_config(tmp_path / "router.yaml", upstreams, costs, budget=1.0, seed=0)
        with running_service(
            tmp_path / "model", config, {"FAKE_UPSTREAM_KEY": "k", "EVALPRISM_CACHE_DIR": str(cache)}
        ) as svc:
            assert httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()["runtime"] == "numpy"
            for prompt in ["write a sonnet about the sea", "solve the integral of the equation"]:
                got = httpx.post(
                    svc.url + "/v1/route",
                    json={"messages": [{"role": "user", "content": prompt}]},
                    timeout=CLIENT_TIMEOUT_S,
                ).json()
                theta = model.leaderboards([prompt])[0][columns]
                want = route(theta, np.array([costs[n] for n in names]), 1.0, "uniform", names=names)
                np.testing.assert_allclose([got["distribution"].get(n, 0.0) for n in names], want.probs, atol=1e-6)
                np.testing.assert_allclose([got["coefs"][n] for n in names], theta, atol=1e-5)
    assert built(cache) == [c for c in built(cache) if is_complete(c)] and len(built(cache)) == 1
