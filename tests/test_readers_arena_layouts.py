"""Arena / FastChat battle layouts read exactly as the canonical JSONL form of the same rows (or
refused with one message naming file, row and column).

Fixtures: tests/fixtures/arena_layouts (made by its make_fixtures.py; see its README.md): the same 12
battles as canonical JSONL, FastChat ``clean_battle`` JSON without conversations (``--mode simple``,
the file FastChat's own Elo script fits) and with them (``--mode conv_release``), Arena's Parquet
releases with string content (100k) and with content as a list of parts (140k), and two files with a
lone UTF-16 surrogate in row 2's prompt (arena-55k CSV, clean_battle JSON). The real-data tests write
the 2,008 human Chatbot Arena battles of ../shared/data/p2l-battles in these layouts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import run_cli, shared_data

from evalprism.errors import EvalprismError
from evalprism.io import read_battles, read_table
from evalprism.p2l import fit_leaderboard, split_battles
from evalprism.p2l.options import SplitOptions
from evalprism.p2l.train import TrainOptions, prepare_battles

FIXTURES = Path(__file__).parent / "fixtures" / "arena_layouts"
CANONICAL = FIXTURES / "battles.jsonl"
WITH_PROMPTS = ["clean_battle_conv_20240601.json", "arena_100k.parquet", "arena_140k_parts.parquet"]
SIMPLE = FIXTURES / "clean_battle_20240601.json"
MENDED = "Rate this emoji: \ufffd please"


def _expected() -> pd.DataFrame:
    return read_battles(CANONICAL)


@pytest.mark.parametrize("name", WITH_PROMPTS)
def test_layout_reads_the_jsonl_rows(name: str) -> None:
    """Prompts (user turns joined by a blank line), models and winners equal the JSONL form row by row."""
    got, want = read_battles(FIXTURES / name), _expected()
    assert got.attrs["battles_format"] == "fastchat"
    assert got["prompt"].tolist() == want["prompt"].tolist()  # 12/12, incl. the two-turn conversation
    for column in ("model_a", "model_b", "winner"):
        assert got[column].astype(str).tolist() == want[column].astype(str).tolist()


def test_list_of_parts_content_reads_the_text_parts_and_says_so() -> None:
    """Arena 140k: content is a list of {type, text, image, mimeType} parts (a numpy array once read from
    Parquet); the text parts are read, the image part of row 5 is left out and counted, never a repr."""
    got = read_battles(FIXTURES / "arena_140k_parts.parquet")
    assert got["prompt"].iat[4] == "List three prime numbers above 50."
    assert not got["prompt"].str.contains("'type'").any()
    notes = got.attrs["choices"]
    assert "12 rows read as 12 battles of 4 models" in notes[0]
    assert "prompt: the user turns of conversation_a" in notes[0] and "not used: id," in notes[0]
    assert "13 user message(s) hold a list of parts" in notes[1]  # 11 one-turn battles + one of two turns
    assert "parts without text left out: image 1" in notes[1]
    assert got["winner"].iat[5] == "tie (bothbad)"  # the release spells it both_bad


def test_training_reads_the_parts_text() -> None:
    """What `p2l train` trains on: the distinct prompts of the 140k layout are the JSONL ones."""
    parts = prepare_battles(read_table(FIXTURES / "arena_140k_parts.parquet"), TrainOptions())
    jsonl = prepare_battles(read_table(CANONICAL), TrainOptions())
    assert list(parts.prompts) == list(jsonl.prompts)
    assert any("list of parts" in line for line in parts.read)


def test_clean_battle_without_conversations_fits_like_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """FastChat's default clean_battle_<date>.json has no prompt: the marginal fit reads it and equals the
    fit of the same battles given as a canonical table; the read is printed and kept in run.json."""
    simple = fit_leaderboard(read_table(SIMPLE), progress=False)
    table = fit_leaderboard(read_table(CANONICAL), progress=False)
    pd.testing.assert_frame_equal(simple.leaderboard, table.leaderboard)
    assert np.isfinite(simple.leaderboard["coef"]).all()
    code, _, err = run_cli(["p2l", "fit", SIMPLE, "--out", tmp_path / "lb"], capsys)
    assert code == 0, err
    assert "without conversations" in err and "no prompt text (read for the marginal fit" in err
    assert "9 of 12 battles anonymous" in err
    run = json.loads((tmp_path / "lb" / "run.json").read_text(encoding="utf-8"))
    read = json.dumps(run)
    assert "not used: judge, turn, anony, language, tstamp" in read and "9 of 12 battles anonymous" in read


def test_public_clean_battle_says_what_the_leaderboard_keeps(tmp_path: Path) -> None:
    """Arena's public clean_battle_<date>_public.json adds dedup_tag (the leaderboard keeps the sampled
    battles) and category_tag: read with every battle, the two filters said, the fit unchanged."""
    rows = json.loads(SIMPLE.read_text(encoding="utf-8"))
    for i, row in enumerate(rows):
        row.update(
            dedup_tag={"high_freq": i == 0, "sampled": i != 0},
            category_tag={"if_v0.1": {"if": False}},
            is_code=False,
            is_refusal=False,
            num_tokens_info={"user_tokens": 9},
        )
    path = tmp_path / "clean_battle_20240814_public.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    got = read_battles(path, prompts=False)
    assert "11 of 12 battles have dedup_tag.sampled; all 12 are read" in got.attrs["choices"][-1]
    assert "9 of 12 battles anonymous (column anony); all 12 are read" in got.attrs["choices"][-2]
    pd.testing.assert_frame_equal(
        fit_leaderboard(read_table(path), progress=False).leaderboard,
        fit_leaderboard(read_table(CANONICAL), progress=False).leaderboard,
    )


def test_clean_battle_without_conversations_refused_where_prompts_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(
        EvalprismError,
        match="clean_battle_20240601.json: FastChat clean_battle JSON without conversations .* has no prompt text",
    ):
        split_battles(read_table(SIMPLE))
    code, out, err = run_cli(["p2l", "split", SIMPLE, "--out", tmp_path / "split"], capsys)
    assert code != 0 and "Traceback" not in out + err
    assert "--mode conv_release" in err and not (tmp_path / "split").exists()


@pytest.mark.parametrize("name", ["arena55k_lone_surrogate.csv", "clean_battle_conv_lone_surrogate.json"])
def test_lone_surrogate_is_mended_and_said(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Row 2's prompt holds the JSON escape \\ud83d without its low half: read with U+FFFD in its place,
    the other rows exactly as in JSONL; `p2l fit` runs (it crashed in pyarrow) and says which row."""
    got = read_battles(FIXTURES / name)
    want = _expected().iloc[:6]["prompt"].tolist()
    assert got["prompt"].tolist() == [want[0], MENDED, *want[2:]]
    assert any(
        "1 prompt(s) hold a lone UTF-16 surrogate" in line and "row(s) 2" in line for line in got.attrs["choices"]
    )
    code, out, err = run_cli(["p2l", "fit", FIXTURES / name, "--out", tmp_path / "lb"], capsys)
    assert code == 0 and "Traceback" not in out + err
    assert "replaced by U+FFFD (row(s) 2)" in err
    assert "replaced by U+FFFD" in (tmp_path / "lb" / "run.json").read_text(encoding="utf-8")
    code, out, err = run_cli(["p2l", "split", FIXTURES / name, "--out", tmp_path / "split"], capsys)
    assert code == 0 and "Traceback" not in out + err  # the .json split crashed writing the surrogate
    written = "".join(p.read_text(encoding="utf-8") for p in sorted((tmp_path / "split").glob("t*.*")))
    assert "\\ud83d" in written and "\ufffd" not in written  # the rows copied as they were, escape included


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_lone_surrogate_in_a_canonical_table(suffix: str, tmp_path: Path) -> None:
    """A canonical JSON / JSON Lines table whose prompt holds a lone surrogate: .json was refused
    ("cannot be read as json", pandas' string column), .jsonl lost the character without a word
    (pandas' parser drops it); both now read it as U+FFFD and name the row."""
    rows = [
        '{"prompt": "ok", "model_a": "x", "model_b": "y", "winner": "model_a"}',
        '{"prompt": "Rate this emoji: \\ud83d please", "model_a": "y", "model_b": "x", "winner": "tie"}',
        '{"prompt": "a pair \\ud83d\\ude00 stays", "model_a": "x", "model_b": "y", "winner": "model_b"}',
    ]
    path = tmp_path / f"battles{suffix}"
    path.write_text("[" + ", ".join(rows) + "]" if suffix == ".json" else "\n".join(rows) + "\n", encoding="utf-8")
    got = read_battles(path)
    assert got["prompt"].tolist() == ["ok", MENDED, "a pair \U0001f600 stays"]
    assert "1 prompt(s) hold a lone UTF-16 surrogate" in got.attrs["choices"][1]
    assert "replaced by U+FFFD (row(s) 2)" in got.attrs["choices"][1]


def test_content_without_text_is_refused_by_row_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A message content that is neither text nor a list of parts is refused, naming file, row and column."""
    rows = json.loads((FIXTURES / "clean_battle_conv_20240601.json").read_text(encoding="utf-8"))
    rows[1]["conversation_a"][0]["content"] = {"unexpected": 1}
    path = tmp_path / "clean_battle_conv.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(EvalprismError) as info:
        read_battles(path)
    assert str(info.value).startswith(f"{path}: row 2, column 'conversation_a': a message's content is dict")
    code, out, err = run_cli(["p2l", "fit", path, "--out", tmp_path / "lb"], capsys)
    assert code != 0 and "Traceback" not in out + err and "row 2, column 'conversation_a'" in err


def _real_arena() -> pd.DataFrame:
    table = pd.read_json(
        shared_data("p2l-battles") / "arena33k_human_elobench" / "battles.jsonl", lines=True, dtype=False
    )
    return table[["prompt", "model_a", "model_b", "winner"]]


def test_real_arena_battles_in_every_layout(tmp_path: Path) -> None:
    """2,008 human Chatbot Arena battles written in the FastChat and Arena layouts: every prompt and
    winner reads as in the JSONL (2008/2008 each), and the prompt-less clean_battle fits like the table."""
    real = _real_arena()
    jsonl = tmp_path / "battles.jsonl"
    real.to_json(jsonl, orient="records", lines=True, force_ascii=False)
    want = read_battles(jsonl)

    def conv(text: str, parts: bool) -> list[dict]:
        content = [{"type": "text", "text": text, "image": None, "mimeType": None}] if parts else text
        answer = [{"type": "text", "text": "...", "image": None, "mimeType": None}] if parts else "..."
        return [{"role": "user", "content": content}, {"role": "assistant", "content": answer}]

    parts = real.drop(columns=["prompt"]).assign(
        winner=real["winner"].replace({"tie (bothbad)": "both_bad"}),
        conversation_a=[conv(p, True) for p in real["prompt"]],
        conversation_b=[conv(p, True) for p in real["prompt"]],
    )
    parts.to_parquet(tmp_path / "arena_140k.parquet", index=False)
    records = [
        {
            "model_a": r.model_a,
            "model_b": r.model_b,
            "winner": r.winner,
            "judge": "arena_user_0",
            "conversation_a": conv(r.prompt, False),
            "conversation_b": conv(r.prompt, False),
            "turn": 1,
            "anony": True,
            "language": "English",
            "tstamp": 1.0,
        }
        for r in real.itertuples()
    ]
    (tmp_path / "clean_battle_conv.json").write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    for record in records:
        del record["conversation_a"], record["conversation_b"]
    (tmp_path / "clean_battle.json").write_text(json.dumps(records), encoding="utf-8")

    for name in ("arena_140k.parquet", "clean_battle_conv.json"):
        got = read_battles(tmp_path / name)
        assert len(got) == len(want) == 2008
        assert (got["prompt"].to_numpy() == want["prompt"].to_numpy()).sum() == 2008, name
        assert (got["winner"].astype(str).to_numpy() == want["winner"].astype(str).to_numpy()).sum() == 2008, name
    pd.testing.assert_frame_equal(
        fit_leaderboard(read_table(tmp_path / "clean_battle.json"), progress=False).leaderboard,
        fit_leaderboard(read_table(jsonl), progress=False).leaderboard,
    )


def _with_image_only_question(tmp_path: Path) -> tuple[Path, int]:
    """The Arena 140k parts fixture with row 3's user turn made image-only (a vision battle)."""
    table = pd.read_parquet(FIXTURES / "arena_140k_parts.parquet")
    row = 2
    turns = list(table.at[row, "conversation_a"])
    image = {"type": "image", "text": None, "image": "https://example.test/cat.png", "mimeType": "image/png"}
    turns[0] = {**turns[0], "content": [image]}
    table.at[row, "conversation_a"] = turns
    path = tmp_path / "vision.parquet"
    table.to_parquet(path, index=False)
    return path, len(table)


def test_image_only_questions_are_left_out_of_what_a_text_model_reads(tmp_path: Path) -> None:
    """A battle whose user turn is only an image has no prompt a text model can read: training,
    evaluation and the split leave it out and say so (before, the whole file was refused); the
    marginal fit, which reads no prompt, keeps it; an empty prompt written as such is still refused."""
    path, n = _with_image_only_question(tmp_path)
    data = prepare_battles(read_table(path), TrainOptions())
    assert data.n_battles == n - 1
    assert any(
        "1 battle(s) whose user turns hold only parts without text (images; first: row 3)" in line for line in data.read
    )
    split = split_battles(read_table(path), SplitOptions(test_fraction=0.5))
    assert split.train.size + split.test.size == n - 1 and 2 not in set(split.train) | set(split.test)
    assert any("left out: a text model cannot read" in line for line in split.provenance.choices)
    assert fit_leaderboard(read_table(path), progress=False).summary.n_battles == n
    blank = read_battles(CANONICAL).astype({"prompt": object})
    blank.loc[4, "prompt"] = "  "
    with pytest.raises(EvalprismError, match="row 5, column 'prompt': expected a non-empty prompt"):
        prepare_battles(blank, TrainOptions())


def test_prompt_files_may_hold_conversations(tmp_path: Path) -> None:
    """`p2l leaderboard`/`route` prompt files: a chat log's ``messages`` column (OpenAI-style, a list of
    parts included) gives each conversation's user turns; two user turns stay apart (a Conversation,
    as released lmarena models read them); other columns are carried along; a conversation without
    text is refused by its row."""
    from evalprism.io import read_prompts
    from evalprism.io.battles import Conversation

    rows = [
        {"messages": [{"role": "user", "content": "Name a prime."}], "topic": "math"},
        {
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Write a haiku."}, {"type": "image_url"}]},
                {"role": "assistant", "content": "Rain on the roof..."},
                {"role": "user", "content": "Now in French."},
            ],
            "topic": "poetry",
        },
    ]
    path = tmp_path / "chats.jsonl"
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    table = read_prompts(path)
    assert table["prompt"].tolist() == ["Name a prime.", "Write a haiku.\n\nNow in French."]
    second = table["prompt"].iat[1]
    assert isinstance(second, Conversation) and second.turns == ("Write a haiku.", "Now in French.")
    assert table["topic"].tolist() == ["math", "poetry"]
    rows[0]["messages"] = [{"role": "user", "content": [{"type": "image_url"}]}]
    pd.DataFrame(rows).to_json(path, orient="records", lines=True)
    with pytest.raises(EvalprismError, match="row 1, column 'prompt': expected a non-empty prompt"):
        read_prompts(path)
