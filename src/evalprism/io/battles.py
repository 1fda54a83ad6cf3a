"""Pairwise battles: the canonical table and adapters for the formats users already have.

Canonical columns: ``prompt``, ``model_a``, ``model_b``, ``winner`` in {``model_a``,
``model_b``, ``tie``, ``tie (bothbad)``} (``both_bad``/``tie_bothbad`` and similar spellings are
normalised), optional ``category`` and optional soft label ``p_b`` in [0, 1] (the probability
that B is preferred). Adapters, picked from the columns present (or named by ``fmt``):

- ``canonical``: the table above;
- ``fastchat``: FastChat ``clean_battle`` JSON and Arena's releases in that layout (JSON or Parquet);
  the prompt is the user turns of ``conversation_a``, whose message content is a string or a list
  of parts (Arena's newer releases: ``{type, text, image, ...}``; the text parts are read). The
  default ``clean_battle_<date>.json`` (``--mode simple``) has no conversations, so no prompt: it is
  read for the marginal fit (``prompts=False``), which needs none, and refused where prompts are read;
- ``arena55k``: arena-55k style CSV with one-hot ``winner_model_a/_b/_tie`` columns and
  JSON-encoded turn lists in ``prompt``;
- ``alpacaeval``: AlpacaEval annotations, raw (``instruction``, ``generator_1/2``, ``preference``
  in [1, 2]) or flattened (``instruction``, ``model_a``, ``model_b``, ``p_b`` or ``preference``).

A lone UTF-16 surrogate in a prompt (a ``\\ud83d`` escape without its other half, which Arena's JSON
carries now and then and no UTF-8 writer accepts) is replaced by U+FFFD. What the read did is kept as
lines in ``attrs["choices"]`` (format, battles, columns used and not, messages read from parts,
prompts mended), for the commands to print and keep in ``run.json``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.record import Provenance
from evalprism.io.schema import Column, Schema, first_rows
from evalprism.io.tables import read_table
from evalprism.io.text import mend_surrogates
from evalprism.keyed import content_order
from evalprism.stats.outcomes import OUTCOME_INDEX, OUTCOMES

#: the canonical winner values: the pairwise outcome codes, defined in :mod:`evalprism.stats.outcomes`
WINNERS = OUTCOMES
#: what a battle is to every fit: battles equal in these columns are interchangeable
BATTLE_KEY = ("prompt", "model_a", "model_b", "winner", "p_b")
#: outcome index of each winner value, as used by the pairwise models' count matrices
OUTCOMES_INDEX = OUTCOME_INDEX
_WINNER_ALIASES = {
    "model_a": "model_a",
    "a": "model_a",
    "model_b": "model_b",
    "b": "model_b",
    "tie": "tie",
    "tie (bothbad)": "tie (bothbad)",
    "both_bad": "tie (bothbad)",
    "bothbad": "tie (bothbad)",
    "tie_bothbad": "tie (bothbad)",
    "tie(bothbad)": "tie (bothbad)",
    "tie (both bad)": "tie (bothbad)",
}

BATTLES_SCHEMA = Schema(
    name="battles",
    columns=(
        Column("prompt", "str", description="the prompt (user turns)"),
        Column("model_a", "key"),
        Column("model_b", "key"),
        Column("winner", "str", description="model_a | model_b | tie | tie (bothbad)"),
        Column("category", "str", required=False, nullable=True),
        Column("p_b", "number", required=False, nullable=True, description="soft label: P(B preferred)"),
    ),
)

#: the same table for the analyses that read no prompt (the marginal fit): the prompt may be absent
BATTLES_SCHEMA_NO_PROMPT = Schema(
    name="battles",
    columns=(
        Column("prompt", "str", required=False, nullable=True, description="the prompt (user turns)"),
        *BATTLES_SCHEMA.columns[1:],
    ),
)

Format = Literal["auto", "canonical", "fastchat", "arena55k", "alpacaeval"]
_LABELS = {
    "canonical": "battles table",
    "fastchat": "FastChat/Arena battles (conversation_a/_b)",
    "arena55k": "arena-55k battles (one-hot winner_model_a/_b/_tie)",
    "alpacaeval": "AlpacaEval annotations",
}
#: columns only FastChat's clean_battle records have (clean_battle_data.py; also judge, turn, language)
_FASTCHAT_FIELDS = {"anony", "tstamp"}
#: part types whose ``text`` is text (OpenAI-style ``text``; ``input_text`` of the Responses API)
_TEXT_PARTS = (None, "text", "input_text")


@dataclass(frozen=True)
class BattlesInput:
    """Battles as a command read them: the ``table`` (any supported battles format), the ``provenance``
    of what was read before these rows were battles (graded scores: the item reader's files, choices
    and notes, and the conversion), and whether the rows were made from graded scores
    (``from_scores``: a split writes them out, rather than copying the input file's own rows)."""

    table: pd.DataFrame
    provenance: Provenance = field(default_factory=Provenance)
    from_scores: bool = False


def as_battles_input(battles: pd.DataFrame | BattlesInput) -> BattlesInput:
    """``battles`` as a :class:`BattlesInput` (a table as it is: nothing read before it)."""
    return battles if isinstance(battles, BattlesInput) else BattlesInput(battles)


class UnreadableContent(ValueError):
    """A message or conversation that holds no text evalprism can read (the caller names file, row, column)."""


@dataclass
class TextTally:
    """What reading the prompts did: messages whose content was a list of parts, the parts without
    text left out (by type), prompts with a lone surrogate mended (their 0-based rows), and the rows
    whose user turns held parts but no text at all (an image-only question: ``textless_rows``)."""

    part_messages: int = 0
    skipped_parts: dict[str, int] = field(default_factory=dict)
    mended_rows: list[int] = field(default_factory=list)
    textless_rows: list[int] = field(default_factory=list)


def content_text(content: Any, tally: TextTally | None = None) -> str:
    """The text of one message's content: a string, or a list of parts (OpenAI-style, and Arena's
    newer releases, where Parquet hands the list over as a numpy array) whose text parts are joined by
    newlines; image and other parts carry no text and are left out (counted in ``tally``). Anything
    else raises :class:`UnreadableContent`: never the repr of a structure as a prompt."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list | tuple | np.ndarray):
        raise UnreadableContent(f"a message's content is {type(content).__name__}, expected text or a list of parts")
    if tally is not None:
        tally.part_messages += 1
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind, text = part.get("type"), part.get("text")
            if kind in _TEXT_PARTS and isinstance(text, str):
                texts.append(text)
            elif kind in _TEXT_PARTS and text is not None:
                raise UnreadableContent(f"a text part's 'text' is {type(text).__name__}, expected text")
            elif tally is not None:
                name = str(kind) if kind is not None else "untyped, no text"
                tally.skipped_parts[name] = tally.skipped_parts.get(name, 0) + 1
        elif part is not None:
            raise UnreadableContent(
                f"a message part is {type(part).__name__}, expected a {{type, text}} object or text"
            )
    return "\n".join(texts)


class Conversation(str):
    """A prompt of several user turns. As a string it is the turns joined by blank lines (what
    evalprism's own P2L models read, hash and cache); ``turns`` keeps the turns apart for a backbone
    that reads each as its own user message in a chat template, as lmarena's released P2L models
    were trained and are served (:mod:`evalprism.p2l.lmarena`). ``text``: the string, when it is not
    the plain join (the service strips the join's ends). A table column of strings keeps only the text."""

    turns: tuple[str, ...]

    def __new__(cls, turns: list[str] | tuple[str, ...], text: str | None = None) -> Self:
        obj = super().__new__(cls, "\n\n".join(turns) if text is None else text)
        obj.turns = tuple(turns)
        return obj

    def __getnewargs__(self) -> tuple[tuple[str, ...], str]:  # type: ignore[override]  # pickles with its turns
        return self.turns, str(self)


def prompt_turns(prompt: str) -> tuple[str, ...]:
    """The user turns of a prompt: a :class:`Conversation`'s, or the prompt as its one turn."""
    return prompt.turns if isinstance(prompt, Conversation) else (str(prompt),)


def user_turns(conversation: Any, tally: TextTally | None = None) -> str:
    """The user turns of a conversation (list of {role, content}, or a JSON list of strings),
    joined by blank lines: the prompt P2L is trained and queried on; with two turns or more a
    :class:`Conversation`, which keeps them apart as well. Raises :class:`UnreadableContent` for a
    structure that holds no readable text."""
    if isinstance(conversation, str):
        try:
            conversation = json.loads(conversation)
        except json.JSONDecodeError:
            return conversation
    if isinstance(conversation, list | tuple | np.ndarray):
        turns = []
        for turn in conversation:
            if isinstance(turn, dict):
                if turn.get("role") in ("user", "human"):
                    turns.append(content_text(turn.get("content"), tally))
            elif isinstance(turn, str | int | float):
                turns.append(str(turn))
            elif turn is not None:
                raise UnreadableContent(f"a turn is {type(turn).__name__}, expected a {{role, content}} object or text")
        return Conversation(turns) if len(turns) > 1 else "\n\n".join(turns)
    if conversation is None or isinstance(conversation, str | int | float):
        return "" if conversation is None else str(conversation)
    raise UnreadableContent(f"the conversation is {type(conversation).__name__}, expected a list of messages")


def _prompts(values: Any, where: str, column: str, tally: TextTally) -> list[str]:
    """Each row's prompt from its conversation (or JSON turn list): one message naming the row and
    the column for a row that holds no readable text."""
    out = []
    for row, value in enumerate(values):
        skipped = sum(tally.skipped_parts.values())
        try:
            prompt = user_turns(value, tally)
        except UnreadableContent as exc:
            raise EvalprismError(f"{where}: row {row + 1}, column '{column}': {exc}") from None
        if not prompt.strip() and sum(tally.skipped_parts.values()) > skipped:
            tally.textless_rows.append(row)
        out.append(prompt)
    return out


def conversation_prompts(values: Any, where: str, column: str) -> list[str]:
    """The prompt of each conversation in ``values`` (its user turns: :func:`user_turns`), one message
    naming the row and the column for a conversation that holds no readable text."""
    return _prompts(values, where, column, TextTally())


def detect_format(df: pd.DataFrame) -> Format:
    """Which adapter fits the columns of ``df``."""
    cols = set(df.columns)
    if {"winner_model_a", "winner_model_b", "winner_tie"} <= cols:
        return "arena55k"
    if "conversation_a" in cols and "winner" in cols:
        return "fastchat"
    if "prompt" not in cols and {"model_a", "model_b", "winner"} <= cols and cols >= _FASTCHAT_FIELDS:
        return "fastchat"  # clean_battle_<date>.json of --mode simple: the conversations are dropped
    if "instruction" in cols and ("generator_1" in cols or "preference" in cols or "p_b" in cols):
        return "alpacaeval"
    return "canonical"


def normalise_winner(value: Any, where: str, row: int) -> str:
    key = str(value).strip().lower() if value is not None else ""
    if key not in _WINNER_ALIASES:
        raise EvalprismError(
            f"{where}: row {row + 1}, column 'winner': expected one of {', '.join(WINNERS)}, got {value!r}"
        )
    return _WINNER_ALIASES[key]


def _from_arena55k(df: pd.DataFrame, where: str, tally: TextTally) -> pd.DataFrame:
    onehot = df[["winner_model_a", "winner_model_b", "winner_tie"]].apply(pd.to_numeric, errors="coerce")
    bad = onehot.isna().any(axis=1) | (onehot.sum(axis=1) != 1)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise EvalprismError(f"{where}: row {row + 1}: winner_model_a/winner_model_b/winner_tie must be one-hot (0/1)")
    out = df.drop(columns=["winner_model_a", "winner_model_b", "winner_tie"]).copy()
    out["winner"] = np.array(["model_a", "model_b", "tie"])[onehot.to_numpy().argmax(axis=1)]
    out["prompt"] = _mended(_prompts(df["prompt"], where, "prompt", tally), tally)
    return out


def _from_fastchat(df: pd.DataFrame, where: str, tally: TextTally) -> pd.DataFrame:
    out = df.drop(columns=[c for c in ("conversation_a", "conversation_b") if c in df.columns]).copy()
    if "conversation_a" in df.columns:
        out["prompt"] = _mended(_prompts(df["conversation_a"], where, "conversation_a", tally), tally)
    return out


def _mended(prompts: list[str], tally: TextTally) -> list[str]:
    """``prompts`` with lone surrogates replaced by U+FFFD (their rows noted in ``tally``): a string
    column refuses them, and pandas makes one of a list of str."""
    for row, text in enumerate(prompts):
        fixed = mend_surrogates(text)
        if fixed is not text:
            prompts[row] = fixed
            tally.mended_rows.append(row)
    return prompts


def _mend_column(df: pd.DataFrame, tally: TextTally) -> pd.DataFrame:
    """``df`` with the lone surrogates of its text ``prompt`` values replaced (other values are left to
    the schema, which names them)."""
    values = list(df["prompt"])
    before = len(tally.mended_rows)
    for row, value in enumerate(values):
        if isinstance(value, str) and (fixed := mend_surrogates(value)) is not value:
            values[row] = fixed
            tally.mended_rows.append(row)
    if len(tally.mended_rows) == before:
        return df
    out = df.copy()
    out["prompt"] = pd.Series(values, index=df.index, dtype=object)
    return out


def _from_alpacaeval(df: pd.DataFrame, where: str) -> pd.DataFrame:
    out = df.rename(columns={"generator_1": "model_a", "generator_2": "model_b", "instruction": "prompt"}).copy()
    if "p_b" not in out.columns:
        pref = pd.to_numeric(out["preference"], errors="coerce")
        if pref.isna().any() or ((pref < 1) | (pref > 2)).any():
            row = int(np.flatnonzero((pref.isna() | (pref < 1) | (pref > 2)).to_numpy())[0])
            raise EvalprismError(f"{where}: row {row + 1}, column 'preference': expected a number in [1, 2]")
        out["p_b"] = pref - 1.0
    if "winner" not in out.columns:
        p_b = pd.to_numeric(out["p_b"], errors="coerce")
        out["winner"] = np.where(p_b > 0.5, "model_b", np.where(p_b < 0.5, "model_a", "tie"))
    return out


def to_canonical_battles(
    df: pd.DataFrame,
    fmt: Format = "auto",
    source: str | None = None,
    prompts: bool = True,
    read: Provenance | None = None,
) -> pd.DataFrame:
    """Convert a battles table in any supported format to the canonical, validated form.

    With ``prompts=False`` (the marginal fit, which reads no prompt) a table without prompt text is
    read as it is (no ``prompt`` column); otherwise it is refused. ``attrs["choices"]`` says what was
    read and what was not, after what ``read`` says was read before (graded scores converted to these
    battles: its choices, then its notes)."""
    where = source or df.attrs.get("source") or "battles table"
    converted = [*read.choices, *read.notes] if read is not None else []
    fmt = detect_format(df) if fmt == "auto" else fmt
    columns = [str(c) for c in df.columns]
    n_rows = len(df)
    tally = TextTally()
    mended_on_read = dict(df.attrs.get("mended", {}))  # by read_table, in top-level text values
    anony = _anony_count(df) if fmt == "fastchat" else None
    if fmt == "arena55k":
        df = _from_arena55k(df, where, tally)
    elif fmt == "fastchat":
        df = _from_fastchat(df, where, tally)
    elif fmt == "alpacaeval":
        df = _from_alpacaeval(df, where)
    elif fmt != "canonical":
        raise EvalprismError(
            f"unknown battles format '{fmt}': expected auto, canonical, fastchat, arena55k or alpacaeval"
        )
    if "prompt" not in df.columns and prompts:
        _refuse_no_prompts(fmt, where, columns)
    if "prompt" in df.columns and fmt in ("canonical", "alpacaeval") and df["prompt"].dtype == object:
        df = _mend_column(df, tally)  # a string column cannot hold a lone surrogate: object columns only
    out = (BATTLES_SCHEMA if prompts else BATTLES_SCHEMA_NO_PROMPT).validate(df, source=where)
    codes, uniques = pd.factorize(out["winner"], use_na_sentinel=False)
    first = first_rows(codes, len(uniques))
    outcome = np.array(
        [OUTCOMES_INDEX[normalise_winner(w, where, int(row))] for w, row in zip(uniques, first, strict=True)],
        dtype=np.int8,
    )
    # categorical: compares equal to the winner strings, and its codes are the outcome indices
    out["winner"] = pd.Categorical.from_codes(outcome[codes], categories=list(WINNERS))
    same = (out["model_a"] == out["model_b"]).to_numpy()
    if same.any():
        row = int(np.flatnonzero(same)[0])
        raise EvalprismError(
            f"{where}: row {row + 1}: model_a and model_b are the same model ({out['model_a'].iat[row]!r})"
        )
    if "p_b" in out.columns:
        p_b = out["p_b"].to_numpy(dtype=float)
        outside = np.isfinite(p_b) & ((p_b < 0) | (p_b > 1))
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise EvalprismError(
                f"{where}: row {row + 1}, column 'p_b': expected a probability in [0, 1], got {p_b[row]}"
            )
    out.attrs["battles_format"] = fmt
    out.attrs["textless_rows"] = tally.textless_rows
    out.attrs["choices"] = [
        *converted,
        *read_notes(out, where, fmt, columns, n_rows, tally, anony, mended_on_read=mended_on_read),
    ]
    return out


def _anony_count(df: pd.DataFrame) -> int | None:
    """How many battles FastChat marked anonymous (``anony`` true), None without the column."""
    if "anony" not in df.columns:
        return None
    return int(sum(v is True or v is np.True_ or str(v).strip().lower() == "true" for v in df["anony"]))


def _refuse_no_prompts(fmt: str, where: str, columns: list[str]) -> None:
    """One message for battles without prompt text where the command reads prompts."""
    if fmt == "fastchat":
        raise EvalprismError(
            f"{where}: FastChat clean_battle JSON without conversations (the default output of "
            "clean_battle_data.py, --mode simple) has no prompt text, which this command reads; "
            "`evalprism p2l fit` reads this file as it is (a marginal fit needs no prompts), and "
            "clean_battle_data.py --mode conv_release writes the conversations"
        )
    raise EvalprismError(
        f"{where}: missing required column 'prompt' for a battles table (columns present: "
        f"{', '.join(columns[:20])}); this command reads the prompt text (`evalprism p2l fit` "
        "needs none)"
    )


#: the columns each battles layout is read from (the read line names them, and the ones not used)
USED_COLUMNS = {
    "canonical": ["prompt", "model_a", "model_b", "winner"],
    "fastchat": ["conversation_a", "model_a", "model_b", "winner"],
    "arena55k": ["prompt", "model_a", "model_b", "winner_model_a", "winner_model_b", "winner_tie"],
    "alpacaeval": [
        "instruction",
        "prompt",
        "generator_1",
        "generator_2",
        "model_a",
        "model_b",
        "preference",
        "p_b",
        "winner",
    ],
}


def read_notes(
    table: pd.DataFrame,
    where: str,
    fmt: str,
    columns: list[str],
    n_rows: int,
    tally: TextTally,
    anony: int | None,
    mended_on_read: dict[str, list[int]] | None = None,
) -> list[str]:
    """What reading the battles did, one line each: the layout, battles and models, the columns used
    and not, the messages read from parts and the parts left out, the prompts mended."""
    n = len(table)
    models = pd.concat([table["model_a"], table["model_b"]]).nunique()
    used = [c for c in [*USED_COLUMNS[fmt], "category", "p_b"] if c in columns]
    unused = [c for c in columns if c not in used]
    prompt = "" if "prompt" in table.columns else "; no prompt text (read for the marginal fit, which needs none)"
    if fmt == "fastchat" and "prompt" in table.columns:
        prompt = "; prompt: the user turns of conversation_a"
    not_used = ", ".join(unused[:12]) + (" …" if len(unused) > 12 else "") or "none"
    label = (
        _LABELS[fmt]
        if fmt != "fastchat" or "conversation_a" in columns
        else "FastChat clean_battle JSON without conversations (clean_battle_data.py --mode simple)"
    )
    head = (
        f"{where}: {label}, {n_rows} rows read as {n} battles of {models} models; columns used: "
        f"{', '.join(used)}; not used: {not_used}{prompt}"
    )
    lines = [head]
    if tally.part_messages:
        skipped = ", ".join(f"{k} {v}" for k, v in sorted(tally.skipped_parts.items()))
        lines.append(
            f"{where}: {tally.part_messages} user message(s) hold a list of parts: their text parts read, "
            f"joined by newlines" + (f"; parts without text left out: {skipped}" if skipped else "")
        )
    mended = sorted(
        {*tally.mended_rows, *(r for c in ("prompt", "instruction") for r in (mended_on_read or {}).get(c, []))}
    )
    if mended:
        rows = ", ".join(str(r + 1) for r in mended[:5]) + (" …" if len(mended) > 5 else "")
        lines.append(
            f"{where}: {len(mended)} prompt(s) hold a lone UTF-16 surrogate (half of a pair, no "
            f"character): replaced by U+FFFD (row(s) {rows})"
        )
    if anony is not None:
        lines.append(
            f"{where}: {anony} of {n} battles anonymous (column anony); all {n} are read (FastChat's "
            "Elo script fits the anonymous ones alone: keep anony == true for its leaderboard)"
        )
    if fmt == "fastchat" and "dedup_tag" in table.columns:
        sampled = sum(isinstance(t, dict) and bool(t.get("sampled")) for t in table["dedup_tag"])
        lines.append(
            f"{where}: {sampled} of {n} battles have dedup_tag.sampled; all {n} are read (Arena's "
            "leaderboard notebooks keep the sampled ones alone)"
        )
    return lines


def read_battles(path: str | Path, fmt: Format = "auto", prompts: bool = True) -> pd.DataFrame:
    """Read a battles file (JSONL / JSON / CSV / Parquet) in any supported format, canonicalised
    (``prompts=False``: a file without prompt text is read too, see :func:`to_canonical_battles`)."""
    df = read_table(path)
    return to_canonical_battles(df, fmt, source=str(path), prompts=prompts)


@dataclass(frozen=True)
class BattleArrays:
    """A canonical battles table as integer arrays: model indices into ``names`` (sorted), the
    outcome index into ``WINNERS`` and the soft label ``p_b`` (NaN where absent)."""

    names: list[str]
    a: np.ndarray
    b: np.ndarray
    outcome: np.ndarray
    p_b: np.ndarray | None


def battle_arrays(
    table: pd.DataFrame, names: list[str] | None = None, min_battles: int = 2, source: str | None = None
) -> BattleArrays:
    """Index a canonical battles table. With ``names`` given, every model must be one of them (a
    model the caller does not know is an error); otherwise the names are the sorted models seen.

    A model in fewer than ``min_battles`` battles is refused: one battle cannot estimate a strength
    (its maximum-likelihood coefficient is infinite)."""
    where = source or table.attrs.get("source") or "battles table"
    # each side factorized on its own: two passes over n strings are cheaper than one over 2n
    codes_a, seen_a = pd.factorize(table["model_a"])
    codes_b, seen_b = pd.factorize(table["model_b"])
    seen = seen_a.append(seen_b).unique()
    counts = (
        pd.Series(np.bincount(codes_a, minlength=len(seen_a)), index=seen_a)
        .add(pd.Series(np.bincount(codes_b, minlength=len(seen_b)), index=seen_b), fill_value=0)
        .astype(np.int64)
    )
    thin = counts[counts < min_battles]
    if len(thin):
        shown = ", ".join(f"'{m}' ({c})" for m, c in thin.head(5).items())
        raise EvalprismError(
            f"{where}: {len(thin)} model(s) appear in fewer than {min_battles} battles: {shown}; "
            "a strength cannot be estimated from so few, remove them or add battles"
        )
    if names is None:
        names = sorted(seen)
    index = pd.Index(names)
    unknown = sorted(seen[index.get_indexer(seen) < 0])
    if unknown:
        raise EvalprismError(
            f"{where}: model(s) not in the model list: {', '.join(unknown[:5])}" + (" …" if len(unknown) > 5 else "")
        )
    p_b = table["p_b"].to_numpy(dtype=float) if "p_b" in table.columns else None
    outcome = outcome_codes(table["winner"])
    require_decisive(outcome, p_b, where)
    return BattleArrays(
        list(names),
        index.get_indexer(seen_a)[codes_a].astype(np.int64),
        index.get_indexer(seen_b)[codes_b].astype(np.int64),
        outcome,
        p_b,
    )


def require_decisive(outcome: np.ndarray, p_b: np.ndarray | None, where: str) -> None:
    """Refuse battles none of which has a winner (or a soft label): ties alone say nothing about which
    model is better, and every pairwise fit of them either has no data (``bt`` drops ties) or no
    finite optimum (the tie parameter of ``rk``/``grk`` grows without bound)."""
    decisive = (outcome == OUTCOMES_INDEX["model_a"]) | (outcome == OUTCOMES_INDEX["model_b"])
    if p_b is not None:
        decisive |= np.isfinite(p_b)
    if outcome.size and not decisive.any():
        raise EvalprismError(
            f"{where}: every one of the {outcome.size} battles is a tie: no battle says which "
            "model is better, so no strength can be estimated; expected some battles won by "
            "model_a or model_b"
        )


def outcome_codes(winner: pd.Series) -> np.ndarray:
    """Each battle's outcome index into ``WINNERS`` (-1 for a value that is not canonical)."""
    if isinstance(winner.dtype, pd.CategoricalDtype):
        return pd.Index(WINNERS).get_indexer(winner.cat.categories)[winner.cat.codes.to_numpy()].astype(np.int64)
    return pd.Index(WINNERS).get_indexer(winner).astype(np.int64)


def require_prompts(prompts: pd.Series, where: str, column: str = "prompt", textless: Sequence[int] = ()) -> None:
    """Refuse empty prompts where the prompt text is the input of a model (``textless``: rows known to
    hold only parts without text, which :func:`readable_prompts` leaves out instead)."""
    empty = (prompts.fillna("").astype(str).str.strip() == "").to_numpy().copy()
    empty[np.asarray(textless, dtype=np.int64)] = False
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise EvalprismError(
            f"{where}: row {row + 1}, column '{column}': expected a non-empty prompt "
            f"({int(empty.sum())} empty prompt(s) in all)"
        )


def readable_prompts(table: pd.DataFrame, where: str) -> tuple[np.ndarray, str | None]:
    """Which battles of a canonical table a text model can read (a mask), and a note on the others.
    A battle whose user turns held only parts without text (an image-only question of Arena's vision
    battles, counted when the conversation was read) is left out with the note rather than refusing
    the file; any other empty prompt is refused, naming its row (:func:`require_prompts`)."""
    textless = list(table.attrs.get("textless_rows") or [])
    require_prompts(table["prompt"], where, textless=textless)
    keep = np.ones(len(table), dtype=bool)
    keep[np.asarray(textless, dtype=np.int64)] = False
    if not textless:
        return keep, None
    if not keep.any():
        raise EvalprismError(
            f"{where}: every battle's user turns hold only parts without text (images): a text model has "
            "no prompt to read"
        )
    note = (
        f"{where}: {len(textless):,} battle(s) whose user turns hold only parts without text (images; first: "
        f"row {textless[0] + 1}) left out: a text model cannot read their prompt"
    )
    return keep, note


def in_content_order(table: pd.DataFrame) -> pd.DataFrame:
    """A canonical battles table with its rows sorted by content (:data:`BATTLE_KEY`, the columns
    present): P2L training splits, orders and sums its battles, and evaluation draws its prompts, in
    this order, so the same battles in another file order give the same results, bit for bit
    (:mod:`evalprism.keyed`). Call it after every check that names a row by its place in the file.
    A fit of counts alone needs only :func:`in_count_order`."""
    out = table.iloc[content_order(*(table[c] for c in BATTLE_KEY if c in table.columns))].reset_index(drop=True)
    out.attrs = dict(table.attrs)
    return out


def in_count_order(arrays: BattleArrays) -> BattleArrays:
    """``arrays`` with the battles sorted by (model_a, model_b, outcome, p_b) when soft labels are
    given (else unchanged): pair counts add soft labels as floats in battle order, and in this order
    the same battles in another file order give the same sums, bit for bit. Integer counts need no
    order, and sorting numeric arrays costs a fraction of sorting the table by its prompts."""
    if arrays.p_b is None or not np.isfinite(arrays.p_b).any():
        return arrays
    rows = content_order(arrays.a, arrays.b, arrays.outcome, arrays.p_b)
    return replace(arrays, a=arrays.a[rows], b=arrays.b[rows], outcome=arrays.outcome[rows], p_b=arrays.p_b[rows])
