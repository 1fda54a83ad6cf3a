"""The run record: what one run read, how it was told to run, what it noted and what it found.

Every analysis result carries one :class:`RunRecord` (its ``record``), built from the result's own
typed fields; :func:`record_json` writes it as ``run.json`` in the same layout for every command, and
the command line prints its lines from it (:meth:`RunRecord.said`): what the readers chose ("read"),
what the run changed or left out ("note"), what it found. Nothing reads a result's options back by a
string key to say what happened.

The layout (format :data:`RUN_FORMAT`), in this order::

    format      the layout's number (2; format 1 is the per-command layout of evalprism before it)
    command     the command whose output the directory is (``p2l fit``)
    evalprism   the version that wrote it; ``versions``: Python and the numeric libraries loaded
    inputs      every input: path, kind (file, directory, table), bytes and SHA-256 (a directory's
                over its files' relative paths and contents)
    read        the provenance: files read, readers that ran, every choice they made, what they
                changed or left out while reading (:class:`Provenance`)
    options     the options as resolved (every field of the command's options class)
    notes       what the analysis left out or changed from what was asked
    findings    the run's headline, one sentence each, as the command prints it
    results     the command's own numbers (counts, chosen values, the health of a clustering)
    output      the manifest (:mod:`evalprism.io.outputs`): kind, files written, version, format
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import platform
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

#: the layout of ``run.json``; a reader of format N reads every format up to N
RUN_FORMAT = 2

#: libraries whose versions a record names when the run loaded them (never imported for it)
_LIBRARIES = ("numpy", "scipy", "pandas", "sklearn", "torch", "transformers", "sentence_transformers", "openvino")

InputKind = Literal["file", "directory", "table"]


@dataclass(frozen=True)
class Provenance:
    """What the readers read and chose. ``files``: the files read, in reading order; ``readers``: the
    readers that ran: the harness readers (``lm-eval samples``, ``inspect_ai logs``), else the format a
    table was read as (``score table``, ``ECDF responses file``, ...); ``choices``: every choice a
    reader made where the input left it open (metric, filter, scorer, epochs, the layout a file was
    read as), one sentence each; ``notes``: what reading changed or left out (no-answer scores counted
    as wrong, rows without a response, files ignored)."""

    files: tuple[str, ...] = ()
    readers: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def __add__(self, other: Provenance) -> Provenance:
        """Both provenances, this one's first (a reader met twice is named once)."""
        return Provenance(
            files=self.files + tuple(f for f in other.files if f not in self.files),
            readers=self.readers + tuple(r for r in other.readers if r not in self.readers),
            choices=self.choices + other.choices,
            notes=self.notes + other.notes,
        )

    def as_json(self) -> dict[str, Any]:
        return {k: list(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, data: Any) -> Provenance:
        """The provenance ``run.json`` holds (format 1 kept only the choices, as a list)."""
        if isinstance(data, list):
            return cls(choices=tuple(map(str, data)))
        if not isinstance(data, Mapping):
            return cls()
        return cls(**{f.name: tuple(map(str, data.get(f.name, ()))) for f in dataclasses.fields(cls)})


@dataclass
class ProvenanceBuilder:
    """A :class:`Provenance` in the making: the readers add to it as they read (a file opened, a
    reader that ran, a choice, a note), in reading order, and :meth:`build` gives the typed value (each
    file and reader once). One builder is passed down a read instead of lists that readers extend."""

    files: list[str] = field(default_factory=list)
    readers: list[str] = field(default_factory=list)
    choices: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def file(self, path: str | Path) -> None:
        """A file the read opened."""
        self.files.append(str(path))

    def reader(self, name: str) -> None:
        """A reader that ran: a harness reader (``lm-eval samples``, ``inspect_ai logs``), or the format a
        table was read as."""
        self.readers.append(name)

    def choice(self, line: str) -> None:
        """A choice the reader made where the input left it open, one sentence."""
        self.choices.append(line)

    def note(self, line: str) -> None:
        """Something reading changed or left out, one sentence."""
        self.notes.append(line)

    def build(self) -> Provenance:
        return Provenance(
            files=tuple(dict.fromkeys(self.files)),
            readers=tuple(dict.fromkeys(self.readers)),
            choices=tuple(self.choices),
            notes=tuple(self.notes),
        )


@dataclass(frozen=True)
class InputFile:
    """One input of a run: its path as given, its kind, its size in bytes and its SHA-256 (a
    directory: over the relative paths and contents of its files, in path order; ``files`` counts
    them); an in-memory table has neither path nor hash."""

    path: str | None
    kind: InputKind
    bytes: int | None = None
    sha256: str | None = None
    files: int | None = None

    @classmethod
    def of(cls, path: str | Path) -> InputFile:
        """The record of the file or directory at ``path`` (hashed now)."""
        p = Path(path)
        if p.is_dir():
            digest, size, count = hashlib.sha256(), 0, 0
            for item in sorted(f for f in p.rglob("*") if f.is_file()):
                digest.update(item.relative_to(p).as_posix().encode() + b"\0")
                digest.update(_file_digest(item).encode())
                size += item.stat().st_size
                count += 1
            return cls(str(path), "directory", size, digest.hexdigest(), count)
        return cls(str(path), "file", p.stat().st_size, _file_digest(p))

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None or k == "path"}


def _file_digest(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def describe_inputs(paths: Iterable[str | Path | None]) -> tuple[InputFile, ...]:
    """The records of the ``paths`` that exist (each once, in order); a path not there is left out (an
    embedding cache not yet made)."""
    seen: dict[str, InputFile] = {}
    for p in paths:
        if p is None or str(p) == "" or str(p) in seen or not Path(p).exists():
            continue
        seen[str(p)] = InputFile.of(p)
    return tuple(seen.values())


def loaded_versions() -> dict[str, str]:
    """Python's version and those of the numeric libraries this process loaded."""
    out = {"python": platform.python_version()}
    for name in _LIBRARIES:
        module = sys.modules.get(name)
        version = getattr(module, "__version__", None)
        if version is not None:
            out[name] = str(version)
    return out


@dataclass(frozen=True)
class RunRecord:
    """What one run read, was told, noted and found (see the module docstring for the layout).

    ``options``: the options as resolved (:meth:`evalprism.io.options.Options.record`); ``results``:
    the command's own numbers, JSON values; ``inputs`` and ``versions`` are filled when the output is
    saved (:func:`evalprism.io.outputs.save_result`)."""

    command: str
    options: Mapping[str, Any] = field(default_factory=dict)
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    findings: tuple[str, ...] = ()
    results: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[InputFile, ...] = ()
    versions: Mapping[str, str] = field(default_factory=dict)

    def said(self) -> list[tuple[str, str]]:
        """The lines a command prints about the run, in order, each with its kind: ``read`` (a
        reader's choice), ``note`` (something changed or left out, by a reader or the analysis),
        ``found`` (the headline)."""
        return (
            [("read", line) for line in self.provenance.choices]
            + [("note", line) for line in (*self.provenance.notes, *self.notes)]
            + [("found", line) for line in self.findings]
        )

    def completed(self, inputs: Sequence[str | Path | None]) -> RunRecord:
        """The record as saved: every input described (the files the readers read, then the other
        ``inputs``) and the versions of this process."""
        return dataclasses.replace(
            self,
            inputs=self.inputs or describe_inputs([*self.provenance.files, *inputs]),
            versions=self.versions or loaded_versions(),
        )

    def as_json(self) -> dict[str, Any]:
        """``run.json`` without its manifest (which the output writer adds)."""
        from evalprism import __version__

        return {
            "format": RUN_FORMAT,
            "command": self.command,
            "evalprism": __version__,
            "versions": dict(self.versions),
            "inputs": [i.as_json() for i in self.inputs],
            "read": self.provenance.as_json(),
            "options": _jsonable(self.options),
            "notes": list(self.notes),
            "findings": list(self.findings),
            "results": _jsonable(self.results),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """The record of a ``run.json`` of any format up to :data:`RUN_FORMAT` (format 1: the options,
        the readers' choices under ``read`` and the notes, where the command kept them)."""
        output = data.get("output") if isinstance(data.get("output"), Mapping) else {}
        inputs = tuple(
            InputFile(i.get("path"), _input_kind(i.get("kind")), i.get("bytes"), i.get("sha256"), i.get("files"))
            for i in data.get("inputs", [])
            if isinstance(i, Mapping)
        )
        options = data.get("options") if isinstance(data.get("options"), Mapping) else {}
        return cls(
            command=str(data.get("command") or (output or {}).get("kind") or ""),
            options=options,  # type: ignore[arg-type]
            provenance=Provenance.from_json(data.get("read", options.get("read", []))),  # type: ignore[union-attr]
            notes=tuple(map(str, data.get("notes", []))),
            findings=tuple(map(str, data.get("findings", []))),
            results=data.get("results") if isinstance(data.get("results"), Mapping) else {},  # type: ignore[arg-type]
            inputs=inputs,
            versions=data.get("versions") if isinstance(data.get("versions"), Mapping) else {},  # type: ignore[arg-type]
        )


def _input_kind(value: object) -> InputKind:
    return "directory" if value == "directory" else "table" if value == "table" else "file"


def _jsonable(value: Any) -> Any:
    """``value`` through JSON's eyes: numpy scalars as numbers, paths and other objects as text."""
    return json.loads(json.dumps(value, default=lambda v: v.item() if hasattr(v, "item") else str(v)))
