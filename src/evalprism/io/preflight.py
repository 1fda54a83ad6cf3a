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
from evalprism.io.formats import FORMATS, table_format
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
    made when missing); the first refusal raises the reader's :class:`EvalprismError`. Two inputs given in
    each other's place (a battles file where the P2L model goes and the model where the battles go) are
    said as such first."""
    given = [item for item in inputs if isinstance(item, Input) and item.path is not None]
    _check_swapped(given)
    for item in given:
        _CHECKS[item.expect](Path(item.path))  # type: ignore[arg-type]  # path checked above


def _check_swapped(given: list[Input]) -> None:
    """A saved directory (P2L model, pool, plan) expected at one input and found at another, while the
    first holds a file: the user swapped them."""
    for wanted in given:
        kind = _SAVED_KINDS.get(wanted.expect)
        if kind is None or Path(wanted.path).is_dir():  # type: ignore[arg-type]
            continue
        for other in given:
            if other is not wanted and other.path is not None and directory_kind(Path(other.path)) == kind:
                raise EvalprismError(
                    f"{other.path} is a {kind} and {wanted.path} is not: the two look swapped; give the {kind} "
                    f"where {wanted.path} is, and {wanted.path} where {other.path} is (nothing was read)"
                )


#: the saved directories a command takes, by what it expects
_SAVED_KINDS = {Expect.MODEL_DIR: "P2L model directory", Expect.POOL_DIR: "STEM pool directory"}


def directory_kind(path: Path) -> str | None:
    """What a directory evalprism knows holds, in words (None: nothing it knows, or not a directory):
    a P2L model, a STEM pool or plan, another evalprism output, lm-eval or inspect_ai logs."""
    if not path.is_dir():
        return None
    if (path / "config.json").is_file() and (
        (path / "head.safetensors").is_file() or (path / "model_list.json").is_file()
    ):
        return "P2L model directory"
    if (path / "pool.csv").is_file() and (path / "models.csv").is_file():
        return "STEM pool directory"
    if (path / PLAN_FILE).is_file():
        return "STEM plan directory"
    kind = _output_kind(path)
    if kind is not None:
        return f"output directory of `evalprism {kind}`"
    names = [p.name for p in _some_files(path)]
    if any(n.startswith("samples_") and n.endswith(".jsonl") for n in names):
        return "directory of lm-eval samples"
    if any(n.endswith(".eval") for n in names):
        return "directory of inspect_ai logs"
    return None


def _output_kind(path: Path) -> str | None:
    import json

    try:
        kind = json.loads((path / "run.json").read_text(encoding="utf-8"))["output"]["kind"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return str(kind)


def _some_files(path: Path, most: int = 2000) -> list[Path]:
    """Up to ``most`` files below ``path`` (a look, not a walk of a whole disk)."""
    found: list[Path] = []
    for item in path.rglob("*"):
        if item.is_file():
            found.append(item)
            if len(found) >= most:
                break
    return found


#: what to run on a directory that holds a known layout instead of the table a command reads
_CONVERTERS = {
    "renze": "it looks like the Renze & Guven temperature study: convert it to one responses table with "
    "`python scripts/renze.py convert DIR out/renze.parquet` (a script of evalprism's repository)",
}


def directory_hint(path: Path) -> str:
    """What a directory given where a table is expected holds, and what to do (empty: nothing known)."""
    kind = directory_kind(path)
    if kind is not None:
        article = "an" if kind[0] in "aeiou" else "a"
        return f"it is {article} {kind}, which this argument does not take"
    if path.name == "renze-temperature" or ((path / "responses").is_dir() and (path / "exams").is_dir()):
        return _CONVERTERS["renze"].replace("DIR", str(path))
    return ""


def table_file(path: Path) -> None:
    """What :func:`~evalprism.io.tables.read_table` refuses before reading: a directory (with what it
    holds, when evalprism knows the layout), an unknown format, a path that is no regular file, a file
    that does not open."""
    if path.is_dir():
        hint = directory_hint(path)
        raise EvalprismError(
            f"{path}: is a directory; expected a table file ({', '.join(sorted(FORMATS))})"
            + (f": {hint}" if hint else "")
        )
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
