"""``--engine ray``: the texts missing from the cache encoded by a Ray Data actor pool give the in-process
path's vectors to the bit, fill the cache the same, and leave nothing to encode on a rerun; a command's
outputs are byte-identical to ``--engine local``'s.

The checks run on one local Ray instance with 2 CPUs (two actors), started by a fixture the way a notebook
user would; the command-line check lets the embedder start (and stop) its own.
"""

from __future__ import annotations

import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from builders import tiny_bert
from helpers import run_cli

from evalprism.embed import Embedder, get_embedder
from evalprism.embed.cache import CACHE_FILE
from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EmbedOptions, EngineOptions

ray = pytest.importorskip("ray")  # the `ray` extra, in the dev extra: CI runs these

RAY = EngineOptions(engine="ray")
WORDS = [
    "the",
    "a",
    "of",
    "to",
    "and",
    "in",
    "is",
    "it",
    "for",
    "on",
    "with",
    "as",
    "at",
    "by",
    "from",
    "what",
    "how",
    "why",
    "when",
    "who",
    "river",
    "mountain",
    "city",
    "sea",
]


def texts_of(n: int) -> list[str]:
    """``n`` distinct short texts over the tiny model's words, of many lengths and many equal ones (the
    order batches are made in breaks ties by content), with a few duplicates after them."""
    rng = np.random.default_rng(7)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) + f" {i}" for i in range(n)]
    return [*texts, *texts[:5]]


def cache_rows(directory: Path) -> list[tuple[bytes, bytes]]:
    """The cache's vectors as stored, by key."""
    with sqlite3.connect(directory / CACHE_FILE) as db:
        table = next(
            name for (name,) in db.execute("select name from sqlite_master where type='table'") if name != "models"
        )
        return sorted(db.execute(f"select * from {table}").fetchall())


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny") / "bert", [*WORDS, *map(str, range(10))])


@pytest.fixture(scope="module", autouse=True)
def ray_stops_with_the_module() -> Iterator[None]:
    yield
    ray.shutdown()


@pytest.fixture()
def local_ray() -> None:
    """A running local Ray instance with 2 CPUs (started once, whatever the tests' order), which the
    embedder uses as it is and leaves running."""
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)


@pytest.fixture()
def no_ray() -> None:
    """No Ray running: the embedder starts its own."""
    ray.shutdown()


@pytest.mark.slow  # Ray starts worker processes that import torch: tens of seconds on 2 CPUs
@pytest.mark.usefixtures("no_ray")
def test_judges_with_engine_ray_writes_the_local_engines_outputs(tmp_path: Path, capsys) -> None:
    """The command line end to end, Ray started and stopped by evalprism itself: the same CSV bytes."""
    from evalprism.judges.simulate import simulate_judgments

    path = tmp_path / "judgments.csv"
    simulate_judgments(n_queries=6, docs_per_genre=4, noise=0.05).to_csv(path, index=False)
    outputs = {}
    for engine in ("local", "ray"):
        args = ["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--engine", engine]
        code, _, err = run_cli([*args, "--out", tmp_path / engine, "--cache-dir", tmp_path / f"cache-{engine}"], capsys)
        assert code == 0, err
        outputs[engine] = {p.name: p.read_bytes() for p in sorted((tmp_path / engine).glob("*.csv"))}
        if engine == "ray":
            assert "ray: started a local Ray instance" in err
    assert outputs["ray"] == outputs["local"] and "pairs.csv" in outputs["ray"]
    assert not ray.is_initialized()  # what evalprism started, it shut down


@pytest.mark.slow  # Ray starts worker processes that import torch: tens of seconds on 2 CPUs
@pytest.mark.usefixtures("local_ray")
def test_tiny_model_same_vectors_and_cache_and_a_rerun_encodes_nothing(tiny_model: Path, tmp_path: Path) -> None:
    texts = texts_of(150)
    spec = f"st:{tiny_model}"
    for instruction in (None, "represent the city"):
        local = Embedder(spec, instruction=instruction, cache_dir=tmp_path / "local", batch_size=8, progress=False)
        on_ray = Embedder(
            spec, instruction=instruction, cache_dir=tmp_path / "ray", batch_size=8, progress=False, engine=RAY
        )
        want, got = local.embed(texts), on_ray.embed(texts)
        assert np.array_equal(got, want) and got.dtype == np.float32
        assert on_ray.stats == local.stats == {"requested": 155, "distinct": 150, "cached": 0, "encoded": 150}
    assert cache_rows(tmp_path / "ray") == cache_rows(tmp_path / "local")
    again = Embedder(spec, cache_dir=tmp_path / "ray", batch_size=8, progress=False, engine=RAY)
    assert np.array_equal(
        again.embed(texts), Embedder(spec, cache_dir=False, batch_size=8, progress=False).embed(texts)
    )
    assert again.stats["encoded"] == 0 and again.stats["cached"] == 150
    # partly cached: only the new texts go to the actors, and they join the cached ones exactly
    more = [*texts, "a new river", "the sea city 9"]
    partly = Embedder(spec, cache_dir=tmp_path / "ray", batch_size=8, progress=False, engine=RAY)
    assert np.array_equal(partly.embed(more), Embedder(spec, cache_dir=False, batch_size=8, progress=False).embed(more))
    assert partly.stats["encoded"] == 2


@pytest.mark.slow
@pytest.mark.usefixtures("local_ray")
def test_packaged_minilm_on_200_real_responses_gives_the_same_vectors(tmp_path: Path, capsys) -> None:
    from importlib.resources import files

    data = files("evalprism.demo") / "data" / "renze_slice.csv.gz"
    with data.open("rb") as handle:
        responses = pd.read_csv(handle, compression="gzip")["response"].astype(str).drop_duplicates().head(200)
    texts = responses.tolist()
    # the commands' default runtime (auto: OpenVINO float32 here) in both: the actors compute as the driver resolved
    want = get_embedder(EmbedOptions(), cache_dir=tmp_path / "local", progress=False).embed(texts)
    on_ray = get_embedder(EmbedOptions(engine="ray"), cache_dir=tmp_path / "ray", progress=True)
    got = on_ray.embed(texts, what="200 responses")
    assert np.array_equal(got, want)
    assert cache_rows(tmp_path / "ray") == cache_rows(tmp_path / "local")
    err = capsys.readouterr().err
    assert "ray: using the running Ray instance (2 CPUs)" in err
    assert re.search(r"embedding \(minilm\): 200/200 \(100%\)", err)


@pytest.mark.slow  # Ray starts worker processes that import torch: tens of seconds on 2 CPUs
@pytest.mark.usefixtures("local_ray")
def test_p2l_backbone_pre_encodes_through_ray(tiny_model: Path, tmp_path: Path) -> None:
    from evalprism.p2l.backbones import load_backbone

    prompts = texts_of(40)
    local = load_backbone(f"st:{tiny_model}", cache_dir=tmp_path / "local", progress=False)
    on_ray = load_backbone(f"st:{tiny_model}", cache_dir=tmp_path / "ray", progress=False, engine=RAY)
    assert np.array_equal(on_ray.features(prompts).numpy(), local.features(prompts).numpy())
    with pytest.raises(EvalprismError, match="engine 'ray' pre-encodes prompts with a frozen sentence-encoder"):
        load_backbone("static", cache_dir=tmp_path / "ray", progress=False, engine=RAY)


@pytest.mark.slow  # Ray starts worker processes that import torch: tens of seconds on 2 CPUs
@pytest.mark.usefixtures("local_ray")
def test_a_model_that_fails_on_the_workers_is_one_message(tiny_model: Path, tmp_path: Path) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    embedder = Embedder(f"st:{broken}", cache_dir=False, progress=False, engine=RAY)
    (broken / "config.json").write_text("{not json", encoding="utf-8")  # after the driver resolved it
    with pytest.raises(EvalprismError, match=r"^embedder 'st:.*broken': cannot load model from") as caught:
        embedder.embed(["the river"])
    assert "\n" not in str(caught.value)


def test_without_ray_one_message(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed: the probe finds nothing
    with pytest.raises(
        EvalprismError, match=re.escape("needs Ray Data, which is not installed: pip install 'evalprism[ray]'")
    ):
        get_embedder(EmbedOptions(engine="ray"), cache_dir=tmp_path, progress=False)


def test_engine_options_are_checked(capsys, tmp_path: Path) -> None:
    from evalprism.p2l.options import TrainOptions

    with pytest.raises(EvalprismError, match="ray_address 10.0.0.5:6379: does not apply here"):
        EmbedOptions(ray_address="10.0.0.5:6379")
    with pytest.raises(EvalprismError, match="engine ray: does not apply here: it pre-encodes the prompts of a frozen"):
        TrainOptions(finetune=True, encoding=EngineOptions(engine="ray"))
    assert TrainOptions(encoding=RAY).training_record() == TrainOptions().training_record()  # not in config.json
    code, _, err = run_cli(["judges", tmp_path / "none.csv", "--ray-address", "auto", "--out", tmp_path / "o"], capsys)
    assert code != 0 and "--ray-address" in err and "Traceback" not in err


@pytest.mark.usefixtures("no_ray")
def test_an_address_where_no_cluster_answers_is_one_message_at_once(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        address = f"127.0.0.1:{probe.getsockname()[1]}"
        embedder = get_embedder(EmbedOptions(engine="ray", ray_address=address), cache_dir=tmp_path, progress=False)
        with pytest.raises(EvalprismError, match=f"engine 'ray': nothing answers at {address} \\(no Ray cluster"):
            embedder.embed(["the river"])
    assert not ray.is_initialized()


@pytest.mark.slow  # Ray starts worker processes that import torch: tens of seconds on 2 CPUs
@pytest.mark.usefixtures("local_ray")
def test_p2l_train_with_engine_ray_saves_the_local_engines_model(tiny_model: Path, tmp_path: Path) -> None:
    """``p2l train``'s frozen backbone pre-encodes every distinct prompt on the actors: the same features,
    so the same ridge head, to the byte; how the prompts were encoded stays out of the model's config."""
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.simulate import simulate_topic_battles

    battles = simulate_topic_battles(300, seed=1)
    saved = {}
    for engine in ("local", "ray"):
        options = TrainOptions(backbone=f"st:{tiny_model}", penalty=1.0, encoding=EngineOptions(engine=engine))
        model = train_model(battles, options, cache_dir=tmp_path / f"cache-{engine}", progress=False)
        directory = model.save(tmp_path / engine)
        saved[engine] = {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name != "run.json"}
    assert saved["ray"] == saved["local"] and "config.json" in saved["ray"]
