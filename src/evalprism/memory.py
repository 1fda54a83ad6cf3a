"""How much memory this process can still use: the one place that answers it.

An analysis that is about to build something large (ECDF's n x n distance matrix) asks
:func:`available_memory` first and refuses with a clear message instead of failing later with a
traceback. The answer must be the kernel's own estimate, not the free pages: the page cache is given
back on demand, so "free" memory (``os.sysconf('SC_AVPHYS_PAGES')``) can be a few hundred MB on a
machine with 15 GB to spare and would refuse work that fits. The figure is the smallest of:

- the machine: ``MemAvailable`` in ``/proc/meminfo`` on Linux (what ``free`` reports as available and
  what psutil returns there), else psutil's ``virtual_memory().available`` where psutil is installed;
- the control groups this process is in, where they set a limit: cgroup v2 ``memory.max`` minus
  ``memory.current``, cgroup v1 ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes``, for the
  process's own group (the path in ``/proc/self/cgroup``) and each ancestor (a parent's limit binds
  its children). The group's inactive file cache (``inactive_file`` in ``memory.stat``) counts as
  available, as the kernel reclaims it before it declares the group out of memory.

None when nothing can tell (then no check is made: better no refusal than a wrong one).
The roots are parameters so the parsers can be tested on literal file contents.
"""

from __future__ import annotations

from pathlib import Path

PROC = Path("/proc")
CGROUP = Path("/sys/fs/cgroup")
_NO_LIMIT = 1 << 60  # v1 reports "no limit" as a huge page-rounded number (9223372036854771712)


def available_memory(proc: Path = PROC, cgroup: Path = CGROUP) -> int | None:
    """Bytes of memory this process can still allocate: the smallest of the machine's available
    memory and what each enclosing cgroup's limit leaves; None if neither is known."""
    figures = [f for f in (system_available(proc), cgroup_available(proc, cgroup)) if f is not None]
    return min(figures) if figures else None


def system_available(proc: Path = PROC) -> int | None:
    """The machine's available memory: ``MemAvailable`` from ``<proc>/meminfo``, else psutil's."""
    found = meminfo_available(proc / "meminfo")
    if found is not None:
        return found
    if proc != PROC:  # a test pointed at its own files: never consult the real machine
        return None
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def meminfo_available(path: Path) -> int | None:
    """``MemAvailable`` in bytes from a ``/proc/meminfo`` file (``MemAvailable:  22873232 kB``);
    None if the file or the line is missing (kernels before 3.14, other systems)."""
    text = _read(path)
    if text is None:
        return None
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        if key.strip() == "MemAvailable":
            parts = rest.split()
            if parts and parts[0].isdigit():
                unit = parts[1].lower() if len(parts) > 1 else "b"
                return int(parts[0]) * {"kb": 1024, "mb": 1024**2, "gb": 1024**3}.get(unit, 1)
    return None


def cgroup_available(proc: Path = PROC, cgroup: Path = CGROUP) -> int | None:
    """What the tightest memory limit among this process's cgroups (v2 and v1) and their ancestors
    leaves; None where no group sets a limit."""
    text = _read(proc / "self" / "cgroup")
    if text is None:
        return None
    figures = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":  # cgroup v2: "0::/path", the unified hierarchy
            figures += [_v2_left(d) for d in _ancestors(cgroup, path)]
        elif "memory" in controllers.split(","):  # cgroup v1: "4:memory:/path"
            figures += [_v1_left(d) for d in _ancestors(cgroup / controllers, path)]
    known = [f for f in figures if f is not None]
    return max(0, min(known)) if known else None


def _ancestors(mount: Path, path: str) -> list[Path]:
    """The group's directory under the mount and each parent up to the mount itself, those that exist.
    In a container the mount is often the group itself while /proc/self/cgroup names the host's path;
    the walk up still reaches the mount then."""
    rel = [p for p in path.strip().split("/") if p and p not in (".", "..")]
    dirs = [mount.joinpath(*rel[:i]) for i in range(len(rel), -1, -1)]
    return [d for d in dirs if d.is_dir()]


def _v2_left(group: Path) -> int | None:
    """cgroup v2: ``memory.max`` (``max`` is no limit) minus ``memory.current`` plus inactive file cache."""
    limit = _read(group / "memory.max")
    used = _number(_read(group / "memory.current"))
    if limit is None or limit.strip() == "max" or used is None:
        return None
    cap = _number(limit)
    return None if cap is None else cap - used + _stat(group / "memory.stat", "inactive_file")


def _v1_left(group: Path) -> int | None:
    """cgroup v1: ``memory.limit_in_bytes`` minus ``memory.usage_in_bytes`` plus inactive file cache."""
    cap = _number(_read(group / "memory.limit_in_bytes"))
    used = _number(_read(group / "memory.usage_in_bytes"))
    if cap is None or used is None or cap >= _NO_LIMIT:
        return None
    stat = group / "memory.stat"
    return cap - used + (_stat(stat, "total_inactive_file") or _stat(stat, "inactive_file"))


def _stat(path: Path, key: str) -> int:
    """One counter of a ``memory.stat`` file (``inactive_file 380928``); 0 if absent."""
    for line in (_read(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _number(value) or 0
    return 0


def _number(text: str | None) -> int | None:
    text = (text or "").strip()
    return int(text) if text.isdigit() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None
