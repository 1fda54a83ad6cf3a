"""The files of the TREC judgments layout (``judges --qrels [NAME=]PATH --topics ... --passages ...``):
which judge a qrels item names, what each file holds, and the check that it is there.

Standard library only, so the command line can check these paths before pandas is imported
(:mod:`evalprism.io.preflight`); :mod:`evalprism.io.judgments` reads the files.
"""

from __future__ import annotations

from pathlib import Path

from evalprism.errors import EvalprismError

#: what each file of the layout holds, as its messages name it
QRELS = "qrels"
TOPICS = "topics: qid<TAB>query"
PASSAGES = "passages: docno<TAB>text"


def judge_name(path: str | Path) -> str:
    """The judge name a qrels file gets by default: its file name without extensions."""
    name = Path(path).name
    return name.split(".", 1)[0] or name


def named_qrels(item: str | Path | tuple[str, str | Path]) -> tuple[str, Path]:
    """(judge, path) of one qrels item: a ``(judge, path)`` pair, ``NAME=PATH`` (the CLI's form, when
    no file of that literal name exists), or a path whose judge is its file name (:func:`judge_name`)."""
    if isinstance(item, tuple):
        return item[0], Path(item[1])
    text = str(item)
    if "=" in text and not Path(text).exists():
        name, path = (part.strip() for part in text.split("=", 1))
        if not name or not path:
            raise EvalprismError(
                f"qrels '{text}': the {'path after' if not path else 'judge name before'} '=' is empty; "
                "expected NAME=PATH (or a PATH, whose file name names the judge)"
            )
        return name, Path(path)
    return judge_name(text), Path(text)


def existing_trec_file(path: Path, what: str) -> Path:
    """``path`` when it exists; else the message naming the file and what it should hold (``what``)."""
    if not path.exists():
        raise EvalprismError(f"{path}: file not found ({what})")
    return path
