"""Prompt sets: a table with a prompt column (other columns kept, e.g. a category), or a plain
text file with one prompt per line."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalprism.errors import EvalprismError, shorten
from evalprism.io.battles import require_prompts
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table
from evalprism.io.text import read_text

#: column names accepted for the prompt text, in order of preference
PROMPT_COLUMNS = ("prompt", "instruction", "question", "text")
PROMPTS_SCHEMA = Schema(name="prompts", columns=(Column("prompt", "str", description="the prompt text"),))


def read_prompts(path: str | Path, column: str | None = None) -> pd.DataFrame:
    """A table whose ``prompt`` column holds non-empty prompt texts (other columns carried along)."""
    path = Path(path)
    if path.suffix == ".txt":
        lines = [line for line in read_text(path).splitlines() if line.strip()]
        table = pd.DataFrame({"prompt": lines})
    else:
        table = read_table(path)
        name = column or next((c for c in PROMPT_COLUMNS if c in table.columns), None)
        if name is None or name not in table.columns:
            wanted = f"'{column}'" if column else "one of " + ", ".join(PROMPT_COLUMNS)
            raise EvalprismError(
                f"{path}: no prompt column: expected {wanted}; columns are {', '.join(map(str, table.columns))}"
            )
        if name != "prompt" and "prompt" in table.columns:
            raise EvalprismError(
                f"{path}: the prompt column '{shorten(name)}' would be read as 'prompt', and the table "
                "has a column 'prompt' too, which it would replace; rename that column or name it as "
                "the prompt column"
            )
        table = table.rename(columns={name: "prompt"}) if name != "prompt" else table
    if table.empty:
        raise EvalprismError(f"{path}: no prompts")
    table = PROMPTS_SCHEMA.validate(table, source=str(path))
    require_prompts(table["prompt"], str(path))
    table["prompt"] = table["prompt"].astype(str)
    return table.reset_index(drop=True)
