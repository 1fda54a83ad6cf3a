"""Prompt sets: a table with a prompt column (other columns kept, e.g. a category), a table of
conversations (a ``messages`` column of OpenAI-style ``{role, content}`` lists, as chat logs hold them,
or Arena's ``conversation``/``conversation_a``), or a plain text file with one prompt per line.

A conversation's prompt is its user turns, read as battles read them
(:func:`evalprism.io.battles.user_turns`: text parts of a list of parts, image parts left out;
several turns kept apart as a :class:`~evalprism.io.battles.Conversation`, so a released lmarena
P2L model reads each turn as its own user message)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalprism.errors import EvalprismError, shorten
from evalprism.io.battles import conversation_prompts, require_prompts
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table
from evalprism.io.text import read_text

#: column names accepted for the prompt text, in order of preference
PROMPT_COLUMNS = ("prompt", "instruction", "question", "text")
#: column names accepted for conversations whose user turns are the prompt, when no prompt column is given
CONVERSATION_COLUMNS = ("messages", "conversation", "conversation_a")
PROMPTS_SCHEMA = Schema(name="prompts", columns=(Column("prompt", "str", description="the prompt text"),))


def read_prompts(path: str | Path, column: str | None = None) -> pd.DataFrame:
    """A table whose ``prompt`` column holds non-empty prompt texts (other columns carried along)."""
    path = Path(path)
    if path.suffix == ".txt":
        lines = [line for line in read_text(path).splitlines() if line.strip()]
        table = pd.DataFrame({"prompt": lines})
    else:
        table = read_table(path)
        name = column or next((c for c in (*PROMPT_COLUMNS, *CONVERSATION_COLUMNS) if c in table.columns), None)
        if name is None or name not in table.columns:
            wanted = f"'{column}'" if column else "one of " + ", ".join((*PROMPT_COLUMNS, *CONVERSATION_COLUMNS))
            raise EvalprismError(
                f"{path}: no prompt column: expected {wanted}; columns are {', '.join(map(str, table.columns))}"
            )
        if name != "prompt" and "prompt" in table.columns:
            raise EvalprismError(
                f"{path}: the prompt column '{shorten(name)}' would be read as 'prompt', and the table "
                "has a column 'prompt' too, which it would replace; rename that column or name it as "
                "the prompt column"
            )
        conversations = name in CONVERSATION_COLUMNS or (
            not table.empty and not isinstance(table[name].iloc[0], str) and table[name].dtype == object
        )
        if conversations:
            # object dtype: a string column would turn a Conversation into plain text and lose its turns
            prompts = conversation_prompts(table[name], str(path), str(name))
            table = table.assign(**{name: pd.Series(prompts, index=table.index, dtype=object)})
        table = table.rename(columns={name: "prompt"}) if name != "prompt" else table
    if table.empty:
        raise EvalprismError(f"{path}: no prompts")
    table = PROMPTS_SCHEMA.validate(table, source=str(path))
    require_prompts(table["prompt"], str(path))
    # text as text (a number read from a table is a prompt too); a Conversation keeps its turns
    table["prompt"] = pd.Series(
        [p if isinstance(p, str) else str(p) for p in table["prompt"]], index=table.index, dtype=object
    )
    return table.reset_index(drop=True)
