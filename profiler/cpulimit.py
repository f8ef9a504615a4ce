"""Fractional core allotments through a CFS quota (cgroup v2 ``cpu.max`` or v1 ``cpu``).

CPU affinity can only give whole cores, and on a small or busy machine 1 vs 2 cores is
drowned in noise. A CFS quota gives a clean, fine-grained allotment: 0.25 of a core is
25 ms of CPU per 100 ms period, whoever else runs. The profiler uses it when asked
(``--core-fraction``) to measure the *shape* of a job's curve on a machine smaller than
the one it will run on. Creating a group needs root or a delegated cgroup; when neither
is there, :func:`quota_group` raises :class:`QuotaUnavailable` with the reason.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")
V1_CPU = Path("/sys/fs/cgroup/cpu")


class QuotaUnavailable(RuntimeError):
    """No cgroup this process may create a CPU-quota group in (the message says why)."""


def _own_v2_dir() -> Path | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        if line.startswith("0::"):
            return V2_ROOT / line[3:].lstrip("/")
    return None


def _parent_dir() -> tuple[Path, str]:
    """Where to make the group, and which interface it speaks ("v2" or "v1")."""
    if (V2_ROOT / "cgroup.controllers").exists():
        own = _own_v2_dir()
        for cand in (own.parent if own else None, V2_ROOT):
            if cand is not None and "cpu" in _read(cand / "cgroup.subtree_control").split():
                return cand, "v2"
        raise QuotaUnavailable("cgroup v2 without the cpu controller delegated here")
    if (V1_CPU / "cpu.cfs_quota_us").exists():
        return V1_CPU, "v1"
    raise QuotaUnavailable("no cgroup cpu controller mounted")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


@contextlib.contextmanager
def quota_group(cores: float) -> Iterator[Path]:
    """A fresh cgroup limited to ``cores`` CPUs' worth of time; yields its ``cgroup.procs``
    path (write a pid there to put a process in). Removed on exit."""
    if cores <= 0:
        raise ValueError("cores must be > 0")
    parent, kind = _parent_dir()
    group = parent / f"synergy-profile-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        group.mkdir()
    except OSError as exc:
        raise QuotaUnavailable(f"cannot create {group}: {exc.strerror}") from None
    quota = max(1000, round(cores * PERIOD_US))
    try:
        if kind == "v2":
            (group / "cpu.max").write_text(f"{quota} {PERIOD_US}\n")
        else:
            (group / "cpu.cfs_period_us").write_text(f"{PERIOD_US}\n")
            (group / "cpu.cfs_quota_us").write_text(f"{quota}\n")
        yield group / "cgroup.procs"
    except OSError as exc:
        raise QuotaUnavailable(f"cannot set the quota in {group}: {exc.strerror}") from None
    finally:
        _remove(group, parent)


def _remove(group: Path, parent: Path) -> None:
    """Move stragglers to the parent, then remove the group (best effort)."""
    for _ in range(3):
        pids = _read(group / "cgroup.procs").split()
        for pid in pids:
            with contextlib.suppress(OSError):
                (parent / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            group.rmdir()
            return


def join(procs_file: Path) -> None:
    """Put the calling process in the group (used between fork and exec)."""
    fd = os.open(procs_file, os.O_WRONLY)
    try:
        os.write(fd, b"0")   # "0" means the writing process
    finally:
        os.close(fd)
