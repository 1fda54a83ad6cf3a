"""A command's input paths, checked before anything heavy is imported: a refused input answers at once.

``evalprism ecdf nosuch.csv`` used to import scipy and scikit-learn (3 s of CPU, 200 MB; minutes on a
busy machine) before its reader said ``nosuch.csv: file not found``. The command line now names each
input with what its reader expects there (:class:`Input`, :class:`Expect`) and runs
:func:`check_inputs` right after the output directory is claimed, in the order the command reads
its inputs, before the analysis is imported.

Each check is the first steps of the reader that opens the path later, through the same functions,
so the message is the reader's own: a table's format by its name and a regular file that opens
(:func:`~evalprism.io.formats.table_format`, :func:`~evalprism.io.text.readable_file`), a results
path that exists, a saved directory of the kind asked for (:func:`model_directory`,
:func:`pool_directory`, :func:`plan_directory`, which the loaders call too). What only reading can
tell (columns, rows, a directory's contents) stays with the readers. Standard library only: no
pandas, numpy, scipy or torch is imported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from evalprism.errors import EvalprismError
from evalprism.io.formats import table_format
from evalprism.io.text import readable_file
from evalprism.io.trec_files import PASSAGES, QRELS, TOPICS, existing_trec_file

#: the file every plan directory holds (`evalprism stem plan` writes it; `stem locate --plan` reads it)
PLAN_FILE = "plan.csv"


class Expect(Enum):
    """What a command's reader expects at an input path."""

    TABLE = "a table file (read_table)"
    TEXT = "a text file (read_text)"
    PROMPTS = "a prompt list: .txt, else a table (read_prompts)"
    RESULTS = "item-level results: a table, a harness log or a directory of them (read_correctness, compare)"
    BATTLES = "battles: a table, or graded logs as RESULTS (p2l's read_battles_input)"
    QRELS = "a TREC qrels file"
    TOPICS = "a TREC topics file"
    PASSAGES = "a TREC passage file"
    MODEL_DIR = "a P2L model directory"
    POOL_DIR = "a STEM pool directory"
    PLAN_DIR = "a STEM plan directory"


@dataclass(frozen=True)
class Input:
    """One input path of a command and what its reader expects there (``path`` None: an optional
    input that was not given, nothing to check)."""

    path: Path | None
    expect: Expect


def input_paths(inputs: Iterable[Input | Path | None]) -> list[Path | None]:
    """The paths of ``inputs`` as given (for the output rules, which refuse an output that holds an input)."""
    return [item.path if isinstance(item, Input) else item for item in inputs]


def check_inputs(inputs: Iterable[Input | Path | None]) -> None:
    """Check every :class:`Input` of ``inputs`` in order (plain paths are not checked: a cache directory,
    made when missing); the first refusal raises the reader's :class:`EvalprismError`."""
    for item in inputs:
        if isinstance(item, Input) and item.path is not None:
            _CHECKS[item.expect](Path(item.path))


def table_file(path: Path) -> None:
    """What :func:`~evalprism.io.tables.read_table` refuses before reading: an unknown format, a path
    that is no regular file, a file that does not open."""
    table_format(path)
    readable_file(path)


def prompts_file(path: Path) -> None:
    """A ``.txt`` prompt list is text, anything else a table (as :func:`~evalprism.io.prompts.read_prompts`)."""
    if path.suffix == ".txt":
        readable_file(path)
    else:
        table_file(path)


def results_path(path: Path) -> None:
    """Item-level results as the correctness and compare readers take them: the path must exist; a
    directory (harness output) is left to its readers, a log (.eval, .json) must open, any other file
    is a table."""
    if not path.exists():
        raise EvalprismError(f"{path}: file not found")
    if path.is_dir():
        return
    if path.suffix.lower() in (".eval", ".json"):
        readable_file(path)
    else:
        table_file(path)


def battles_path(path: Path) -> None:
    """Battles as ``p2l`` reads them: a directory or an .eval log are graded logs, anything else a table."""
    if path.is_dir() or path.suffix.lower() == ".eval":
        results_path(path)
    else:
        table_file(path)


def trec_file(what: str) -> Callable[[Path], None]:
    """The check of a TREC layout file holding ``what``: it exists (the message says what it should
    hold), then it opens as a text file (as :func:`~evalprism.io.text.open_text` requires)."""

    def check(path: Path) -> None:
        readable_file(existing_trec_file(path, what))

    return check


def model_directory(path: Path) -> Path:
    """``path`` when it is a directory (a model from `evalprism p2l train`, or a released lmarena checkpoint)."""
    if not path.is_dir():
        raise EvalprismError(f"{path}: no such model directory (train one with `evalprism p2l train`)")
    return path


def pool_directory(path: Path) -> Path:
    """``path`` when it is a directory (a pool from `evalprism stem pool`)."""
    if not path.is_dir():
        raise EvalprismError(f"{path}: no such pool directory (write one with `evalprism stem pool`)")
    return path


def plan_directory(path: Path) -> Path:
    """``path`` when it holds a plan file (a plan from `evalprism stem plan`)."""
    if not (path / PLAN_FILE).is_file():
        raise EvalprismError(f"{path}: not a plan directory (no {PLAN_FILE}; write one with `evalprism stem plan`)")
    return path


_CHECKS: dict[Expect, Callable[[Path], object]] = {
    Expect.TABLE: table_file,
    Expect.TEXT: readable_file,
    Expect.PROMPTS: prompts_file,
    Expect.RESULTS: results_path,
    Expect.BATTLES: battles_path,
    Expect.QRELS: trec_file(QRELS),
    Expect.TOPICS: trec_file(TOPICS),
    Expect.PASSAGES: trec_file(PASSAGES),
    Expect.MODEL_DIR: model_directory,
    Expect.POOL_DIR: pool_directory,
    Expect.PLAN_DIR: plan_directory,
}
