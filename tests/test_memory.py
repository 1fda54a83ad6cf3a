"""evalprism.memory: available memory as the kernel reports it (page cache counts as available), and
the tightest cgroup limit. Parsers run on literal /proc and /sys/fs/cgroup contents in tmp_path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from evalprism.memory import available_memory, cgroup_available, meminfo_available

GiB = 1024**3
MiB = 1024**2

MEMINFO = """MemTotal:       32594864 kB
MemFree:          512000 kB
MemAvailable:   15728640 kB
Buffers:          204800 kB
Cached:         14680064 kB
"""


def _files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_meminfo_available_reads_memavailable_not_memfree(tmp_path: Path) -> None:
    _files(tmp_path, {"meminfo": MEMINFO})
    assert meminfo_available(tmp_path / "meminfo") == 15728640 * 1024  # 15 GiB, not MemFree's 0.5 GiB
    _files(tmp_path, {"meminfo": "MemTotal: 100 kB\nMemFree: 50 kB\n"})  # kernels before 3.14
    assert meminfo_available(tmp_path / "meminfo") is None
    assert meminfo_available(tmp_path / "missing") is None


def test_no_cgroup_limit_leaves_the_machine_figure(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(proc, {"meminfo": MEMINFO, "self/cgroup": "0::/user.slice/app\n"})
    _files(cg, {"user.slice/app/memory.max": "max\n", "user.slice/app/memory.current": "123\n", "memory.max": "max\n"})
    assert cgroup_available(proc, cg) is None
    assert available_memory(proc, cg) == 15 * GiB


def test_cgroup_v2_limit_minus_usage_plus_inactive_file(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(proc, {"meminfo": MEMINFO, "self/cgroup": "0::/user.slice/app\n"})
    _files(
        cg,
        {
            "user.slice/app/memory.max": f"{4 * GiB}\n",
            "user.slice/app/memory.current": f"{1 * GiB}\n",
            "user.slice/app/memory.stat": f"anon 12345\ninactive_file {100 * MiB}\nactive_file 999\n",
            "user.slice/memory.max": "max\n",
            "user.slice/memory.current": "5\n",
        },
    )
    assert cgroup_available(proc, cg) == 3 * GiB + 100 * MiB
    assert available_memory(proc, cg) == 3 * GiB + 100 * MiB  # tighter than the machine's 15 GiB


def test_a_parent_groups_limit_binds_its_children(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(proc, {"meminfo": MEMINFO, "self/cgroup": "0::/batch/job7\n"})
    _files(
        cg,
        {
            "batch/job7/memory.max": "max\n",
            "batch/job7/memory.current": f"{GiB}\n",
            "batch/memory.max": f"{2 * GiB}\n",
            "batch/memory.current": f"{GiB + 512 * MiB}\n",
        },
    )
    assert available_memory(proc, cg) == 512 * MiB


def test_cgroup_v1_limit_and_usage(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(
        proc,
        {
            "meminfo": MEMINFO,
            "self/cgroup": "9:name=systemd:/\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n",
        },
    )
    _files(
        cg,
        {
            "memory/docker/abc/memory.limit_in_bytes": f"{8 * GiB}\n",
            "memory/docker/abc/memory.usage_in_bytes": f"{6 * GiB}\n",
            "memory/docker/abc/memory.stat": f"cache 1\ninactive_file 7\ntotal_inactive_file {GiB}\n",
            "memory/memory.limit_in_bytes": "9223372036854771712\n",  # v1's "no limit"
            "memory/memory.usage_in_bytes": f"{20 * GiB}\n",
        },
    )
    assert cgroup_available(proc, cg) == 3 * GiB
    assert available_memory(proc, cg) == 3 * GiB


def test_cgroup_v1_in_a_container_whose_mount_is_the_group_itself(tmp_path: Path) -> None:
    """/proc/self/cgroup names the host's path, but the container mounts its own group at the root:
    the walk up from the (absent) host path reaches the mount and its limit still applies."""
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(proc, {"meminfo": MEMINFO, "self/cgroup": "4:memory:/kubepods/pod1/ctr9\n"})
    _files(cg, {"memory/memory.limit_in_bytes": f"{GiB}\n", "memory/memory.usage_in_bytes": f"{256 * MiB}\n"})
    assert available_memory(proc, cg) == 768 * MiB


def test_over_the_limit_is_zero_not_negative(tmp_path: Path) -> None:
    proc, cg = tmp_path / "proc", tmp_path / "cg"
    _files(proc, {"meminfo": MEMINFO, "self/cgroup": "0::/\n"})
    _files(cg, {"memory.max": f"{GiB}\n", "memory.current": f"{GiB + 4096}\n"})
    assert available_memory(proc, cg) == 0


def test_nothing_known_is_none(tmp_path: Path) -> None:
    assert available_memory(tmp_path / "proc", tmp_path / "cg") is None


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/proc/meminfo").exists(), reason="reads the real /proc/meminfo"
)
def test_page_cache_counts_as_available_on_this_machine(tmp_path: Path) -> None:
    """Fill the page cache with a 256 MiB file written and read back: the figure stays near the
    kernel's MemAvailable and well above the free pages (what os.sysconf reported before)."""
    size = 256 * MiB
    block = os.urandom(MiB)
    big = tmp_path / "cache-filler.bin"
    with big.open("wb") as f:
        for _ in range(size // MiB):
            f.write(block)
    with big.open("rb") as f:
        while f.read(8 * MiB):
            pass
    have = available_memory()
    kernel = meminfo_available(Path("/proc/meminfo"))
    free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert have is not None and kernel is not None
    cg = cgroup_available()
    if cg is None:  # no limit here: the kernel's figure (other processes move it a little meanwhile)
        assert abs(have - kernel) < max(0.1 * kernel, 512 * MiB)
    else:
        assert have <= cg
    # the 256 MiB just cached are reclaimable: available, but not free
    assert cg is not None or have - free >= size // 2, (have, free)
