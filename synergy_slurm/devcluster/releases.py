"""Which Slurm the dev cluster runs: the system's own, or a Debian release from a cached root.

Debian ships one Slurm per suite: 22.05 in bookworm, 24.11 in trixie, 26.05 in sid. A
release other than the system's runs from a minimal Debian root filesystem built once with
``mmdebstrap`` from Debian's package registry and cached (one directory per release,
rebuilt when its package list changes). Inside that root the daemons run under ``chroot``
in a private mount namespace (``enter``), so whatever they start (slurmstepd, the jobs)
runs there too. Commands run on the host, unprivileged, through the root's own dynamic
loader and libraries: each client gets a small wrapper in the cluster's ``bin/`` directory,
which is what ``[slurm] bindir`` (and ``PATH``) point at.

The root holds a link to itself at its own absolute path, so one path (the plugin
directory, the wrappers) means the same files inside the chroot and on the host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import SynergyError
from . import proc

log = logging.getLogger(__name__)

SYSTEM = "system"
SUITES = {"22.05": "bookworm", "24.11": "trixie", "26.05": "sid"}
RELEASES = (SYSTEM, *SUITES)
ROOT_PACKAGES = ("slurmctld", "slurmd", "slurmdbd", "slurm-client", "munge", "lua5.1",
                 "lua-posix", "lua-filesystem", "python3")
CLIENTS = ("sinfo", "squeue", "sbatch", "scontrol", "scancel", "srun", "salloc", "sacct",
           "sstat", "sacctmgr", "sprio", "sshare", "sdiag")
DEFAULT_CACHE = Path(os.environ.get("SYNERGY_ROOT_CACHE", "/var/cache/synergy-slurm/roots"))
DEFAULT_MIRROR = os.environ.get("SYNERGY_DEBIAN_MIRROR", "http://deb.debian.org/debian")
STAMP = ".synergy-root.json"
LIBDIR = "usr/lib/x86_64-linux-gnu"
PLUGINS = f"{LIBDIR}/slurm-wlm"
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_SAFE_PATH = re.compile(r"^/[A-Za-z0-9_./+\-]*$")


class ReleaseError(SynergyError, RuntimeError):
    """The release cannot be provided; the message says why and what to do."""


@dataclass(frozen=True)
class SlurmInstall:
    """Where one Slurm release's programs are. ``root`` is None for the system's own."""

    version: str                 # as the daemons report it, e.g. "26.05.5"
    root: Path | None = None

    @property
    def release(self) -> str:
        return ".".join(self.version.split(".")[:2])

    @property
    def plugin_dir(self) -> str:
        return str(self.root / PLUGINS) if self.root else ""

    def daemon(self, path: str, args: list[str], binds: list[str]) -> list[str]:
        """The argument list that starts the daemon at ``path`` (e.g. /usr/sbin/slurmd)."""
        if self.root is None:
            return [path, *args]
        enter = [sys.executable, "-m", "synergy_slurm.devcluster.enter", str(self.root)]
        for b in binds:
            enter += ["--bind", b]
        return ["unshare", "--mount", "--propagation", "private", *enter, "--", path, *args]

    def write_wrappers(self, bindir: Path) -> list[Path]:
        """One wrapper per client command in ``bindir``; nothing for the system's Slurm."""
        if self.root is None:
            return []
        root = str(self.root)
        if not _SAFE_PATH.match(root):
            raise ReleaseError(f"root path {root!r} has characters a wrapper cannot carry")
        bindir.mkdir(parents=True, exist_ok=True)
        loader = f"{root}/{LIBDIR}/ld-linux-x86-64.so.2"
        libs = f"{root}/{PLUGINS}:{root}/{LIBDIR}"
        out = []
        for name in CLIENTS:
            path = bindir / name
            path.write_text(f"#!/bin/sh\n# Slurm {self.version} from {root} (synergy dev-cluster)"
                            f"\nexec {loader} --library-path {libs} {root}/usr/bin/{name} "
                            '"$@"\n')
            path.chmod(0o755)
            out.append(path)
        return out


def system_version() -> str | None:
    """The system Slurm's version (from ``slurmctld -V``), or None when not installed."""
    exe = shutil.which("slurmctld", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(out)
    return m.group(0) if m else None


def resolve(release: str, cache: Path = DEFAULT_CACHE, mirror: str = DEFAULT_MIRROR
            ) -> SlurmInstall:
    """The install for ``release``: "system" (which must be installed), or one of SUITES:
    the system's own when it is that release, else a cached root (built on first use)."""
    if release not in RELEASES:
        raise ReleaseError(f"unknown Slurm release {release!r}; choose from "
                           f"{', '.join(RELEASES)}")
    version = system_version()
    if release == SYSTEM or (version and version.startswith(release + ".")):
        if version is None:
            raise ReleaseError("no Slurm installed on this system (slurmctld not found)")
        return SlurmInstall(version)
    root = ensure_root(release, cache, mirror)
    return SlurmInstall(root_version(root), root)


def root_version(root: Path) -> str:
    """The version of the Slurm in ``root``, from its package database (no chroot needed)."""
    return package_version(root, "slurmctld")


def package_version(root: Path, package: str) -> str:
    """``package``'s upstream version in ``root`` (``24.11.5``, ``3.13.5``), from its
    package database."""
    status = root / "var/lib/dpkg/status"
    try:
        text = status.read_text(errors="replace")
    except OSError as exc:
        raise ReleaseError(f"{root} is not a Debian root: {exc}") from None
    for block in text.split("\n\n"):
        if re.search(rf"^Package: {re.escape(package)}$", block, re.M):
            m = re.search(r"^Version: (\S+)", block, re.M)
            if m and (v := _VERSION.search(m.group(1))):
                return v.group(0)
    raise ReleaseError(f"{root} has no {package} package")


def ensure_root(release: str, cache: Path, mirror: str) -> Path:
    """The cached root for ``release``, built when missing or when its package list (or
    suite) changed. One builder at a time per cache (a lock file)."""
    suite = SUITES[release]
    want = {"suite": suite, "packages": sorted(ROOT_PACKAGES)}
    root = cache / release
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp(root) == want:
            return root
        _build(root, suite, mirror)
        _self_link(root)
        (root / STAMP).write_text(json.dumps(want))
    version = root_version(root)
    if not version.startswith(release + "."):
        raise ReleaseError(f"Debian {suite} now ships Slurm {version}, not {release}: "
                           f"choose --slurm {'.'.join(version.split('.')[:2])} if it is listed")
    return root


def _stamp(root: Path) -> dict | None:
    try:
        return json.loads((root / STAMP).read_text())
    except (OSError, ValueError):
        return None


def _build(root: Path, suite: str, mirror: str) -> None:
    if shutil.which("mmdebstrap") is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise ReleaseError("mmdebstrap is needed to build a Slurm root: "
                               "apt-get install mmdebstrap")
        log.warning("installing mmdebstrap from Debian's packages")
        _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", "mmdebstrap"],
             600, dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    tmp = root.with_name(root.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    t0 = time.monotonic()
    log.warning("building a Debian %s root with Slurm in %s (once; about 30 s)", suite, root)
    # The registry's copy of sid can carry a Release file past its Valid-Until date.
    _run(["mmdebstrap", "--variant=minbase", "--quiet",
          "--aptopt=Acquire::Check-Valid-Until \"false\"",
          f"--include={','.join(ROOT_PACKAGES)}", suite, str(tmp), mirror], 1200)
    old = root.with_name(root.name + ".old")
    if root.exists():
        root.rename(old)
    tmp.rename(root)
    shutil.rmtree(old, ignore_errors=True)
    log.warning("root for %s built in %.0f s", suite, time.monotonic() - t0)


def _self_link(root: Path) -> None:
    """``root/<root's absolute path>`` -> "/": one path names the same file inside and out."""
    inside = root / str(root).lstrip("/")
    inside.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        inside.unlink()
    inside.symlink_to("/")


def job_binds(extra: tuple[str, ...] = ()) -> list[str]:
    """What a job inside the root needs from the host, mounted at the same paths: the
    temporary directories and homes (job scripts, outputs), users and groups, and this
    Python with its standard library and environment (the emulated jobs and templates run
    it) and the libraries it links from outside the system's directories (a pyenv or conda
    Python's own libpython: :func:`own_libraries`), plus the checkout this package is in."""
    paths = ["/tmp", "/var/tmp", "/home", "/etc/passwd", "/etc/group",
             *_interpreter_links(sys.executable), sysconfig.get_paths()["stdlib"], sys.prefix,
             *own_libraries(os.path.realpath(sys.executable)),
             str(Path(__file__).resolve().parents[2]), *extra]
    out: list[str] = []
    for p in paths:
        if os.path.exists(p) and p not in out and p != "/":
            out.append(p)
    return out


# Where a root has its own libraries: a library the host's interpreter finds there comes
# from the root inside it, never from the host.
SYSTEM_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")


def own_libraries(exe: str) -> list[str]:
    """The directories of the shared libraries ``exe`` links (as ``ldd`` resolves them)
    that lie outside SYSTEM_LIB_DIRS: a pyenv, conda or module-system Python built with
    --enable-shared finds its libpython there, and a root without them cannot start it."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        res = subprocess.run([ldd, exe], capture_output=True, text=True, timeout=30,
                             check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return library_dirs(res.stdout)


def library_dirs(ldd_output: str) -> list[str]:
    """From ``ldd``'s output, the directories of resolved libraries outside
    SYSTEM_LIB_DIRS, in order, once each."""
    out: list[str] = []
    for line in ldd_output.splitlines():
        _, arrow, rest = line.partition("=>")
        path = (rest if arrow else line).strip().split(" (")[0].strip()
        if not path.startswith("/"):
            continue                            # "not found", the vdso
        d = os.path.dirname(os.path.realpath(path)) if os.path.exists(path) else \
            os.path.dirname(path)
        if not any(d == s or d.startswith(s + "/") for s in SYSTEM_LIB_DIRS) and d not in out:
            out.append(d)
    return out


def _interpreter_links(exe: str) -> list[str]:
    """Every absolute name on the way from ``exe`` to the interpreter's file (a venv's
    python -> /usr/bin/python3 -> python3.11): the root's own python3 must not answer."""
    out, path = [], os.path.abspath(exe)
    for _ in range(40):
        if not os.path.islink(path):
            break
        path = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        if not path.startswith(sys.prefix + os.sep):
            out.append(path)
    out.append(os.path.realpath(exe))
    return out


def _run(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> None:
    proc.run(cmd, ReleaseError, timeout, env)
