"""Start a program inside a Slurm root: bind the host paths it needs, chroot, exec.

Run as ``unshare --mount --propagation private python -m synergy_slurm.devcluster.enter
ROOT [--bind PATH]... -- PROGRAM ARGS...`` (see ``releases.SlurmInstall.daemon``). The
mounts live in the private namespace only: they end with the last process in it and never
show on the host, so removing a root can never reach through a bind into the host's files.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

# Kernel file systems, mounted recursively: slurmd reads /proc and cgroups, jobs need /dev.
SYSTEM_BINDS = ("/proc", "/sys", "/dev")


def bind(root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    if os.path.isdir(path):
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.touch()
    subprocess.run(["mount", "--rbind", path, str(target)], check=True)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(prog="synergy_slurm.devcluster.enter",
                                 usage="%(prog)s ROOT [--bind PATH]... -- PROGRAM [ARG]...")
    ap.add_argument("root", type=Path)
    ap.add_argument("--bind", action="append", default=[])
    if "--" not in argv:
        ap.error("no program: put it after --")
    split = argv.index("--")
    args, cmd = ap.parse_args(argv[:split]), argv[split + 1:]
    if not cmd:
        ap.error("no program after --")
    if not _private_mounts():
        sys.exit("enter: refusing to mount outside a private mount namespace (use unshare)")
    root = args.root.resolve()
    for path in (*SYSTEM_BINDS, *args.bind):
        bind(root, path)
    os.chroot(root)
    os.chdir("/")
    os.execv(cmd[0], cmd)


def _private_mounts() -> bool:
    """True when this process's mount namespace is not its parent's (unshare execs us, so
    the parent is whoever ran unshare)."""
    try:
        return os.readlink("/proc/self/ns/mnt") != os.readlink(f"/proc/{os.getppid()}/ns/mnt")
    except OSError:
        return False


if __name__ == "__main__":
    main()
