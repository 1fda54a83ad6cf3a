"""Output directories: all of one appears at once or none of it does, and evalprism never deletes
or overwrites what it did not create.

Every directory evalprism writes carries a ``run.json`` whose ``"output"`` entry names the kind of
output (the command that wrote it), the evalprism version and output format that wrote it, and lists
every file written (the manifest). That marker is what
lets a later run recognise its own output. The rules, checked by :func:`claim_output` before any
work starts and again just before the finished output is moved into place:

- a missing directory is created; an existing empty directory is used;
- a previous evalprism output of the same kind is replaced atomically;
- a previous evalprism output of another kind is replaced only with ``overwrite=True``;
- anything else is refused with one :class:`EvalprismError` and nothing on disk changes: a
  non-empty directory without the marker or holding files its manifest does not list, a file, a
  symbolic link, the working directory, the home directory, the file-system root, or a directory
  holding one of the run's inputs (``--overwrite`` never lifts these).

Files are written into a hidden sibling ``.<name>.partial-<pid>-<token>`` that replaces the target
only when complete. The move is recoverable at every instant, and the next run of the same output
(even one refused afterwards for bad input) finishes or undoes what a killed run left, only among
directories evalprism named and marked, only of dead processes, and says so:

1. staging being written (it holds the ``.evalprism-staging`` marker): incomplete, removed; the
   previous output in place is untouched;
2. staging complete (its manifest written, then the marker removed), previous output still in place:
   the move is finished (the previous output goes aside, then is deleted file by file);
3. previous output renamed aside to ``.<name>.old-<pid>-<token>``, target missing: the complete
   staging is moved in, then the aside output deleted; with no complete staging left the aside
   output is renamed back;
4. new output in place, the aside one partly deleted: its deletion is finished (its ``run.json``
   goes last, so the manifest that lists what to delete survives until the end).

Nothing a run finished is deleted unless another finished output has replaced it in the target.

A file evalprism appends to (the router service's decision log) keeps the same promises, checked by
:func:`check_output_file` before anything loads: it may be a new file or an empty one or a file the
caller recognises as its own (every line a decision of the service); never a symbolic link, a
directory, one of the run's inputs or a path inside one (a model directory, the config file).
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from evalprism.errors import EvalprismError, shorten
from evalprism.io.record import RUN_FORMAT, Provenance, RunRecord

if TYPE_CHECKING:  # pandas loads with the analysis, not with this module
    import pandas as pd

MARKER_FILE = "run.json"
STAGING_MARKER = ".evalprism-staging"  # written first into every staging directory, removed before the move


class OutputKind(str, Enum):
    """Every kind of directory evalprism writes; the value is the command that writes it."""

    ECDF = "ecdf"
    JUDGES = "judges"
    P2L_FIT = "p2l fit"
    P2L_SPLIT = "p2l split"
    P2L_TRAIN = "p2l train"
    P2L_CHECKPOINT = "p2l train checkpoint"
    P2L_LEADERBOARD = "p2l leaderboard"
    P2L_EVALUATE = "p2l evaluate"
    P2L_ROUTE = "p2l route"
    P2L_BENCH = "p2l bench"
    STEM_POOL = "stem pool"
    STEM_LOCATE = "stem locate"
    STEM_AUDIT = "stem audit"
    STEM_PLAN = "stem plan"
    DEMO = "demo"
    COMPARE = "compare"


@dataclass(frozen=True)
class OutputTarget:
    """Where one run writes: the directory, the kind of output, and what the run may replace."""

    path: Path
    kind: OutputKind
    overwrite: bool = False
    inputs: tuple[Path, ...] = ()


def as_target(out: str | Path | OutputTarget, kind: OutputKind) -> OutputTarget:
    """``out`` as a target of ``kind`` (a plain path from library code gets the default rules)."""
    if isinstance(out, OutputTarget):
        return out
    return OutputTarget(_as_path(out), kind)


def claim_output(
    out: str | Path,
    kind: OutputKind,
    *,
    inputs: Iterable[str | Path | None] = (),
    overwrite: bool = False,
    progress: bool = True,
) -> OutputTarget:
    """Check, before any work, that ``out`` may receive an output of ``kind``; return the target to
    pass to ``save``. Refusals raise :class:`EvalprismError` and change nothing on disk; leftovers of
    interrupted earlier runs of the same output are removed (and reported)."""
    recover_interrupted_move(_as_path(out), progress)
    target = check_output(out, kind, inputs=inputs, overwrite=overwrite)
    _probe_writable(target.path)
    return target


def check_output(
    out: str | Path, kind: OutputKind, *, inputs: Iterable[str | Path | None] = (), overwrite: bool = False
) -> OutputTarget:
    """The rules alone (see the module docstring): raise unless ``out`` may receive ``kind``."""
    target = OutputTarget(
        _as_path(out), kind, overwrite, tuple(Path(p) for p in inputs if p is not None and str(p) != "")
    )
    _check_target(target)
    return target


@contextlib.contextmanager
def atomic_output_dir(out: str | Path | OutputTarget, kind: OutputKind) -> Iterator[Path]:
    """Yield an empty staging directory; when the block finishes, record the manifest in its
    ``run.json`` and move it to the target (replacing a previous output the rules allow)."""
    target = as_target(out, kind)
    recover_interrupted_move(target.path, progress=False)  # a library save, without claim_output first
    _check_target(target)
    path = target.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = _new_sibling(path, "partial")
        staging.mkdir()
        (staging / STAGING_MARKER).write_text(f"{os.getpid()}\n", encoding="utf-8")
        umask = os.umask(0)
        os.umask(umask)
        staging.chmod(0o777 & ~umask)
    except OSError as exc:
        raise _write_error(path, exc) from None
    try:
        yield staging
        _write_manifest(staging, target.kind)
        _check_target(target)  # the directory may have changed while the analysis ran
        (staging / STAGING_MARKER).unlink()  # from here on the staging is a finished output (see the docstring)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _write_error(path, exc) from None
        raise
    try:
        _move_into_place(staging, path)
    except OSError as exc:  # _move_into_place put the previous output back; the finished staging goes
        shutil.rmtree(staging, ignore_errors=True)
        raise _write_error(path, exc) from None


class AnalysisResult(Protocol):
    """The contract every analysis result keeps, so that one :func:`save_result` writes them all.

    ``output_kind``: which command's output the directory is (the manifest's kind); ``frames()``: the
    tables, one ``<name>.csv`` each; ``record``: the run record (:class:`~evalprism.io.record.RunRecord`)
    written as ``run.json``; ``report()``: the ``report.html`` (an object with ``write(path)``);
    ``write_extra(directory)``: any other file (a model's weights, a JSON headline).
    """

    output_kind: ClassVar[OutputKind]

    def frames(self) -> dict[str, Any]: ...

    @property
    def record(self) -> RunRecord: ...

    def report(self) -> Any: ...

    def write_extra(self, directory: Path) -> None: ...


class SavableResult(Protocol):
    """What a command writes: a result that carries its run record and saves itself (an analysis
    result, a split, a pool, a plan)."""

    @property
    def record(self) -> RunRecord: ...

    def save(self, out_dir: str | Path | OutputTarget) -> Path: ...


class SavedResult:
    """Mixin giving an :class:`AnalysisResult` its ``save`` and the usual defaults (no extra files)."""

    output_kind: ClassVar[OutputKind]

    @property
    def record(self) -> RunRecord:
        """The run record (:func:`result_record`)."""
        return result_record(self)

    def write_extra(self, directory: Path) -> None:
        """No files beyond the tables, ``run.json`` and the report."""

    def save(self, out_dir: str | Path | OutputTarget) -> Path:
        """Write the result into ``out_dir`` atomically (:func:`save_result`); returns the directory."""
        return save_result(self, out_dir)  # type: ignore[arg-type]


def result_record(result: Any) -> RunRecord:
    """The one way a typed result becomes its run record: the command (its output kind), its options
    object (:meth:`~evalprism.io.options.Options.record`), its ``provenance`` (what the readers read and
    chose), its ``notes``, its ``findings()`` (the headline) and its ``summary`` (a dataclass of what the
    run counted and decided) as the results."""
    summary = getattr(result, "summary", None)
    return RunRecord(
        result.output_kind.value,
        options=result.options.record(),
        provenance=getattr(result, "provenance", Provenance()),
        notes=tuple(getattr(result, "notes", ())),
        findings=tuple(result.findings()) if hasattr(result, "findings") else (),
        results=dataclasses.asdict(summary) if summary is not None else {},
    )


#: tables longer than this are written by pyarrow's CSV writer (about 8x faster than pandas' on compare's
#: items.csv of 19 M rows); shorter ones by pandas, whose float format ("1.0") the outputs have always had
LARGE_TABLE_ROWS = 500_000


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """One output table as CSV: pandas' writer, or for a long table pyarrow's (the same values: strings
    quoted only where needed, missing values empty, a float written in its shortest form, ``1`` for 1.0)."""
    if len(frame) <= LARGE_TABLE_ROWS:
        frame.to_csv(path, index=False)
        return
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    table = pa.Table.from_pandas(frame, preserve_index=False)
    pa_csv.write_csv(table, path, write_options=pa_csv.WriteOptions(quoting_style="needed"))


def save_result(result: AnalysisResult, out: str | Path | OutputTarget) -> Path:
    """An analysis output directory, atomically: ``<name>.csv`` per frame, the result's extra files,
    ``run.json`` (the run record, its inputs described, plus the manifest) and ``report.html``."""
    kind = result.output_kind
    target = as_target(out, kind)
    record = result.record.completed(target.inputs)
    with atomic_output_dir(target, kind) as tmp:
        for name, frame in result.frames().items():
            write_csv(frame, tmp / f"{name}.csv")
        result.write_extra(tmp)
        write_json(tmp / MARKER_FILE, record.as_json())
        result.report().write(tmp / "report.html")
    return target.path


def written_files(directory: str | Path) -> list[str]:
    """The files an evalprism output directory holds, from its manifest (what the run wrote)."""
    manifest = read_manifest(Path(directory))
    return manifest[1] if manifest else sorted(p.name for p in Path(directory).iterdir())


def write_json(path: Path, data: Any) -> None:
    """JSON as evalprism writes it: indented; numpy scalars as numbers, other non-JSON values as strings."""
    path.write_text(json.dumps(data, indent=2, default=_jsonable) + "\n", encoding="utf-8")


def _jsonable(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else str(value)


def open_work_dir(path: str | Path, kind: OutputKind, files: Iterable[str]) -> Path:
    """A directory that a run fills bit by bit (checkpoints): checked by the same rules as an
    output, created if missing, and marked as evalprism's with the ``files`` it may hold."""
    target = OutputTarget(_as_path(path), kind)
    _check_target(target)
    try:
        target.path.mkdir(parents=True, exist_ok=True)
        run_file = target.path / MARKER_FILE
        if not run_file.exists():
            write_json(run_file, {"output": output_entry(kind, sorted({MARKER_FILE, *files}))})
    except OSError as exc:
        raise _write_error(target.path, exc) from None
    return target.path


def remove_output(path: str | Path, kind: OutputKind) -> bool:
    """Delete an evalprism output of ``kind``, file by file from its manifest; anything else in it
    stays (and so does the directory). True when the directory is gone."""
    path = Path(path)
    manifest = read_manifest(path)
    if manifest is None or manifest[0] != kind.value:
        return False
    _delete_listed(path, manifest[1])
    return not path.exists()


def read_manifest(path: Path) -> tuple[str, list[str]] | None:
    """(kind, files) from the ``run.json`` marker of an evalprism output, or None."""
    try:
        data = json.loads((path / MARKER_FILE).read_text(encoding="utf-8"))
        output = data["output"]
        return str(output["kind"]), [str(f) for f in output["files"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_output_file(
    path: str | Path, what: str, *, inputs: Iterable[str | Path | None] = (), not_ours: Callable[[Path], str | None]
) -> Path:
    """The rules for a file evalprism appends to (see the module docstring), before any work: raise
    unless ``path`` may receive the ``what`` (e.g. "decision log"). ``not_ours(path)`` reads an
    existing non-empty file and says why it is not one evalprism wrote for this purpose (None: it is)."""
    path = Path(path)
    if str(path).strip() == "":
        raise EvalprismError(f"the {what} path is empty (''): name a file, e.g. decisions.jsonl")
    if path.is_symlink():
        raise EvalprismError(f"{path}: cannot be the {what}: it is a symbolic link; name the file itself")
    try:
        resolved = path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:
        raise EvalprismError(f"{path}: cannot be the {what}: the path cannot be resolved ({exc})") from None
    for item in (Path(p) for p in inputs if p is not None and str(p) != ""):
        item_resolved = item.resolve(strict=False)
        if item_resolved == resolved or item_resolved in resolved.parents:
            where = "is" if item_resolved == resolved else "is inside"
            raise EvalprismError(
                f"{path}: cannot be the {what}: it {where} the input {item}, which appending "
                f"would change; name a file outside the run's inputs"
            )
    if path.exists():
        if not path.is_file():
            kind = "a directory" if path.is_dir() else "not a regular file"
            raise EvalprismError(f"{path}: cannot be the {what}: it is {kind}")
        if not os.access(path, os.R_OK | os.W_OK):
            raise EvalprismError(f"{path}: cannot be the {what}: it is not a readable and writable file")
        if path.stat().st_size > 0:
            reason = not_ours(path)
            if reason is not None:
                raise EvalprismError(
                    f"{path}: cannot be the {what}: the file exists and is not a {what} evalprism "
                    f"wrote ({reason}); evalprism appends only to its own {what}s; name a new file"
                )
        return path
    nearest = _nearest_existing(path.parent)
    if not nearest.is_dir():
        raise EvalprismError(f"{path}: cannot be the {what}: {nearest} is a file, not a directory")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise EvalprismError(f"{path}: cannot be the {what}: the directory {nearest} is not writable")
    return path


def describe_write_error(exc: OSError) -> str:
    """Why a write failed, in words (the disk is full, permission denied, ...)."""
    return {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exceeded",
        errno.EROFS: "the file system is read-only",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
        errno.EFBIG: "a file would exceed the file-size limit (ulimit -f) or the file system's largest file",
    }.get(exc.errno or 0, exc.strerror or str(exc))


def why_write_stopped(path: Path, exc: BaseException) -> str:
    """Why a writer that hides the OS error (torch.save raises "unexpected pos 2240 vs 2134" when a
    write comes up short) failed to write ``path``: a file-size limit the file reached, a full disk,
    else the writer's own words (shortened)."""
    import resource

    if isinstance(exc, OSError):
        return describe_write_error(exc)
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    if limit != resource.RLIM_INFINITY and size >= limit > 0:
        return describe_write_error(OSError(errno.EFBIG, "File too large"))
    try:
        if shutil.disk_usage(_nearest_existing(path.parent)).free < max(size, 1 << 20):
            return describe_write_error(OSError(errno.ENOSPC, "No space left on device"))
    except OSError:
        pass
    return f"the write stopped short: {shorten(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}"


# --- the rules ---------------------------------------------------------------------------------


def _as_path(out: str | Path) -> Path:
    if str(out).strip() == "":
        raise EvalprismError("the output directory is empty (''): name a new directory, e.g. out/run1")
    return Path(out)


_HOW_TO_PROCEED = (
    "choose a new output directory (overwrite replaces only a previous evalprism output, and never "
    "a directory holding an input)"
)


def _check_target(target: OutputTarget) -> None:
    """Raise unless the rules allow writing ``target`` (see the module docstring): the path itself, the
    run's inputs, then what the directory already holds."""
    path = target.path
    resolved = _check_path(path)
    _check_inputs(path, resolved, target.inputs)
    nearest = _nearest_existing(path)
    if nearest != path and not nearest.is_dir():
        raise EvalprismError(f"{path}: {nearest} is not a directory; nothing was changed")
    if path.exists():
        _check_existing(target)


def _check_path(path: Path) -> Path:
    """The resolved output path, unless its names are too long, it is a link, or it is the working
    directory, the home directory or the file-system root."""
    _check_name_lengths(path)
    if path.is_symlink():
        raise EvalprismError(f"{path}: is a symbolic link; name the output directory itself; nothing was changed")
    try:
        resolved = path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop further up the path
        raise EvalprismError(f"{path}: cannot be resolved ({exc}); nothing was changed") from None
    protected = {
        Path.cwd().resolve(): "the working directory",
        Path.home().resolve(): "your home directory",
        Path(resolved.anchor): "the file-system root",
    }
    if resolved in protected:
        raise EvalprismError(
            f"{path}: is {protected[resolved]}; evalprism writes a whole directory and never "
            f"replaces that one; {_HOW_TO_PROCEED}",
            parameter="overwrite",
        )
    return resolved


def _check_inputs(path: Path, resolved: Path, inputs: Iterable[Path]) -> None:
    """The output is none of the run's inputs and holds none of them."""
    for item in inputs:
        try:
            item_resolved = item.resolve(strict=False)
        except (OSError, RuntimeError):  # a symlink loop: no directory can be inside it; its reader says what it is
            continue
        if item_resolved == resolved and not item_resolved.is_dir():
            raise EvalprismError(
                f"{path}: is the input file {item} itself; the output is a directory of its own: name a new one, "
                "e.g. out/run1 (evalprism never writes over an input)"
            )
        if item_resolved == resolved or resolved in item_resolved.parents:
            raise EvalprismError(
                f"{path}: holds the input {item}; writing the output there would replace it; {_HOW_TO_PROCEED}",
                parameter="overwrite",
            )


def _check_existing(target: OutputTarget) -> None:
    """An existing output path is an empty directory, or evalprism's output of this kind (another kind
    with ``overwrite``) holding only the files its manifest lists."""
    path = target.path
    if not path.is_dir():
        raise EvalprismError(f"{path}: exists and is not a directory; {_HOW_TO_PROCEED}", parameter="overwrite")
    try:
        present = _files_below(path)
    except OSError as exc:
        raise EvalprismError(f"{path}: cannot be read ({exc.strerror}); nothing was changed") from None
    if not present:
        return
    manifest = read_manifest(path)
    if manifest is None:
        raise EvalprismError(
            f"{path}: the directory is not empty and was not written by evalprism; nothing was "
            f"changed; {_HOW_TO_PROCEED}",
            parameter="overwrite",
        )
    kind, listed = manifest
    foreign = sorted(set(present) - set(listed))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise EvalprismError(
            f"{path}: holds an earlier evalprism output plus files evalprism did not write "
            f"({shown}); nothing was changed; move those files away or choose a new output directory"
        )
    if kind != target.kind.value and not target.overwrite:
        raise EvalprismError(
            f"{path}: holds the output of `evalprism {kind}`; pass overwrite to replace it, "
            "or choose a new output directory",
            parameter="overwrite",
        )


#: how much longer than the output's name its staging sibling's name is: ".", ".partial-", a pid of up
#: to 7 digits (Linux's pid_max is at most 4194304), "-" and 8 hex digits
_SIBLING_EXTRA = 1 + len(".partial-") + 7 + 1 + 8


def _check_name_lengths(path: Path) -> None:
    """Refuse a path with a name longer than its file system allows, counting the staging sibling
    the output is first written to (the OS would say only "File name too long", and late)."""
    try:
        limit = os.pathconf(_nearest_existing(path.parent), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in path.parts[:-1]:
        if len(os.fsencode(part)) > limit:
            raise EvalprismError(
                f"{shorten(path)}: the folder name '{shorten(part, 40)}' is {len(os.fsencode(part))} "
                f"bytes long; this file system allows at most {limit}; nothing was changed"
            )
    size = len(os.fsencode(path.name))
    if size + _SIBLING_EXTRA > limit:
        raise EvalprismError(
            f"{shorten(path)}: the name '{shorten(path.name, 40)}' is {size} bytes long; this file "
            f"system allows {limit} bytes per name and evalprism first writes the output beside it "
            f"under a name {_SIBLING_EXTRA} bytes longer: use a name of at most "
            f"{limit - _SIBLING_EXTRA} bytes; nothing was changed"
        )


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (as anything: a file counts)."""
    for candidate in (path, *path.parents):
        if os.path.lexists(candidate):
            return candidate
    return Path(".")


def _files_below(path: Path) -> list[str]:
    """Relative POSIX paths of every file, link or special file below ``path`` (not directories)."""
    found = []
    for root, dirs, files in os.walk(path, onerror=_raise):
        base = Path(root)
        for name in files + [d for d in dirs if (base / d).is_symlink()]:
            found.append((base / name).relative_to(path).as_posix())
    return found


def _raise(exc: OSError) -> None:
    raise exc


def _probe_writable(path: Path) -> None:
    """Fail now, not after the analysis, when the output cannot be created (read-only or missing
    permissions): make and remove a probe directory where the output's parent is or will be."""
    nearest = _nearest_existing(path.parent)
    try:
        probe = _new_sibling(nearest / path.name, "probe")
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        raise _write_error(path, exc) from None


def _write_error(path: Path, exc: OSError) -> EvalprismError:
    return EvalprismError(f"{path}: cannot write the output ({describe_write_error(exc)}); nothing was written")


# --- staging, moving, cleaning -------------------------------------------------------------------

_LEFTOVER = re.compile(r"^\.(?P<name>.+)\.(?P<what>partial|old|probe)-(?P<pid>\d+)-[0-9a-f]{8}$")


def _new_sibling(path: Path, what: str) -> Path:
    return path.with_name(f".{path.name}.{what}-{os.getpid()}-{secrets.token_hex(4)}")


def output_entry(kind: OutputKind, files: list[str]) -> dict[str, Any]:
    """``run.json``'s ``output`` entry: what wrote the directory (kind, evalprism version, format) and
    every file it wrote (the manifest)."""
    from evalprism import __version__

    return {"kind": kind.value, "files": files, "evalprism": __version__, "format": RUN_FORMAT}


def _write_manifest(staging: Path, kind: OutputKind) -> None:
    """Add the ``output`` marker (kind and every file written) to the staging directory's run.json."""
    run_file = staging / MARKER_FILE
    run = json.loads(run_file.read_text(encoding="utf-8")) if run_file.exists() else {}
    if not isinstance(run, dict):
        run = {"run": run}
    files = sorted((set(_files_below(staging)) - {STAGING_MARKER}) | {MARKER_FILE})
    temporary = staging / (MARKER_FILE + ".tmp")
    write_json(temporary, {**run, "output": output_entry(kind, files)})
    os.replace(temporary, run_file)  # a kill mid-write leaves the previous run.json whole


def _move_into_place(staging: Path, path: Path) -> None:
    """Replace ``path`` by the finished ``staging``: the previous output (if any) is renamed aside,
    the staging renamed in, then the aside output deleted. If the second rename fails the previous
    output is renamed back; a kill at any step is finished by :func:`recover_interrupted_move`."""
    old = None
    if path.is_dir():
        if any(path.iterdir()):
            old = _new_sibling(path, "old")
            path.rename(old)
        else:
            path.rmdir()
    try:
        staging.rename(path)
    except OSError:
        if old is not None:
            old.rename(path)
        raise
    if old is not None:
        manifest = read_manifest(old)
        _delete_listed(old, manifest[1] if manifest else [])


def _delete_listed(path: Path, files: list[str]) -> None:
    """Remove the listed files below ``path`` (its ``run.json`` last: until then the manifest says
    what is left to delete), then every directory left empty (bottom up)."""
    for name in sorted(files, key=lambda f: f == MARKER_FILE):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError):
            (path / name).unlink()
    for root, _dirs, _ in sorted(os.walk(path), key=lambda w: -len(Path(w[0]).parts)):
        with contextlib.suppress(OSError):
            Path(root).rmdir()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_interrupted_move(path: Path, progress: bool = True) -> None:
    """Finish or undo what killed runs of the output ``path`` left beside it (see the module docstring
    for the states): incomplete staging and probe directories are removed; a finished staging
    replaces the target, or a previous output renamed aside is put back when the target is missing;
    an aside output whose replacement is in place is deleted. Only names evalprism gives, only marked
    directories, only of dead processes; anything else is left alone. Each step is reported."""
    parent = path.parent
    try:
        if not parent.is_dir():
            return
        entries = sorted(parent.iterdir(), key=_mtime)
    except OSError:  # a name too long, a parent that cannot be read: the checks that follow say why
        return
    finished, aside = [], []
    for entry in entries:
        match = _LEFTOVER.match(entry.name)
        if not match or match["name"] != path.name or not entry.is_dir() or entry.is_symlink():
            continue
        if _pid_alive(int(match["pid"])):
            continue
        what = match["what"]
        if what == "partial" and (entry / STAGING_MARKER).is_file():
            from evalprism.progress import status  # here: rich's progress display loads only to say something

            shutil.rmtree(entry, ignore_errors=True)
            status(f"removed {entry}, the unfinished output of an interrupted earlier run", progress)
        elif what == "probe" and not any(entry.iterdir()):
            entry.rmdir()
        elif what == "partial" and read_manifest(entry) is not None:
            finished.append(entry)
        elif what == "old" and read_manifest(entry) is not None:
            aside.append(entry)
        elif what == "old" and os.path.lexists(path) and not _files_below(entry):  # deleted but for its folders
            _delete_listed(entry, [])
    try:
        _finish_moves(path, finished, aside, progress)
    except OSError as exc:
        raise _write_error(path, exc) from None


def _finish_moves(path: Path, finished: list[Path], aside: list[Path], progress: bool) -> None:
    """The roll-forward (or back) of :func:`recover_interrupted_move`, oldest leftovers first."""
    from evalprism.progress import status

    for staging in finished:  # each finished output replaces the one in place, as its run was doing
        if os.path.lexists(path) and not _replaceable(path):
            status(
                f"left {staging} alone: a finished output of an interrupted earlier run; {path} now holds "
                f"files evalprism did not write, so it was not moved in",
                progress,
            )
            continue
        _move_into_place(staging, path)
        status(f"moved {staging} into {path}: the finished output of an interrupted earlier run", progress)
    for old in reversed(aside):  # the newest aside output first: it is what the target held last
        if not os.path.lexists(path):
            old.rename(path)
            status(f"restored {path} from {old}, where an interrupted earlier run had moved it aside", progress)
        elif _replaceable(path):
            manifest = read_manifest(old)
            _delete_listed(old, manifest[1] if manifest else [])
            status(f"removed {old}, the previous output an interrupted earlier run had replaced", progress)


def _replaceable(path: Path) -> bool:
    """``path`` is an empty directory or an evalprism output holding only the files it lists."""
    if path.is_symlink() or not path.is_dir():
        return False
    present = _files_below(path)
    manifest = read_manifest(path)
    return not present or (manifest is not None and set(present) <= set(manifest[1]))


def _mtime(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:
        return 0.0
