"""synergy inside a release's root: a venv where that Slurm's own libraries are, with pyslurm.

pyslurm binds one Slurm release and links against its libslurm, so it runs where that Slurm
is installed: for the dev cluster, inside the release's root, as on a site's controller
host. The venv (``ROOT/opt/synergy-venv``) is built once and kept with the root; it is
rebuilt when the pyslurm source or the dependency list changes. Building it:

1. Debian's build tools into the root (``apt-get`` in a chroot: libslurm-dev, python3-dev,
   cython3, gcc; about 15 s);
2. the project's run-time dependencies, as wheels this host's pip fetches for the root's
   Python (so the chroot needs no PyPI access of its own), installed with ``--no-index``;
3. pyslurm compiled from the given source tarball against the root's libslurm (about 3
   minutes on 2 cores).

The project itself is not installed there: :func:`command` puts this checkout on
``PYTHONPATH``, so the venv never goes stale when the code changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import sys
import time
from importlib import metadata
from pathlib import Path

from . import proc
from .releases import ReleaseError, SlurmInstall, package_version

log = logging.getLogger(__name__)

VENV = "/opt/synergy-venv"          # inside the root
STAMP = ".synergy-venv.json"
BUILD_PACKAGES = ("libslurm-dev", "python3-dev", "python3-venv", "cython3", "gcc",
                  "python3-setuptools", "python3-wheel", "python3-packaging")
# Plots are drawn on an admin's workstation, not by the controller.
LEFT_OUT = ("matplotlib",)
CHECKOUT = Path(__file__).resolve().parents[2]


def runtime_requirements() -> list[str]:
    """The project's dependencies (its installed metadata), less the plotting ones."""
    try:
        reqs = metadata.requires("synergy-slurm") or []
    except metadata.PackageNotFoundError:
        raise ReleaseError("synergy-slurm's metadata is missing: install the project "
                           "(pip install -e .) before building a venv in a root") from None
    out = []
    for req in reqs:
        if "extra ==" in req:
            continue
        name = req.split(";")[0].strip()
        if not any(name.lower().startswith(x) for x in LEFT_OUT):
            out.append(name)
    return sorted(out)


def venv_ready(install: SlurmInstall) -> bool:
    """True when the root has a built venv (whatever source it was built from)."""
    return install.root is not None and (_venv_dir(install) / STAMP).exists()


def ensure_venv(install: SlurmInstall, pyslurm_src: Path) -> Path:
    """The root's venv with pyslurm built from ``pyslurm_src`` (a source tarball), built
    when missing or stale; returns its path inside the root. One builder at a time."""
    if install.root is None:
        raise ReleaseError("pyslurm is built inside a release's root: use --slurm 24.11 "
                           "(or another release that is not the system's)")
    src = pyslurm_src.resolve()
    if not src.is_file():
        raise ReleaseError(f"no pyslurm source at {src}")
    want = {"pyslurm_sha256": _sha256(src), "requirements": runtime_requirements(),
            "packages": sorted(BUILD_PACKAGES)}
    venv = _venv_dir(install)
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / ".synergy-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _stamp(venv) == want:
            return Path(VENV)
        t0 = time.monotonic()
        log.warning("building a venv with pyslurm in %s (once; about 4 minutes)", venv)
        shutil.rmtree(venv, ignore_errors=True)
        _build(install, src, want["requirements"])
        (venv / STAMP).write_text(json.dumps(want))
        log.warning("venv with pyslurm built in %.0f s", time.monotonic() - t0)
    return Path(VENV)


def command(install: SlurmInstall, argv: list[str], env: dict[str, str],
            binds: tuple[str, ...] = (), cwd: Path | None = None) -> list[str]:
    """The argument list that runs ``argv`` inside the root: the venv's bin first on PATH
    (``python`` is the venv's), this checkout importable, ``env`` set (SLURM_CONF, ...),
    the usual host paths bound and ``cwd`` (a bound path) as the working directory. Needs
    root, like the daemons."""
    if install.root is None:
        raise ReleaseError("the system's Slurm needs no root: run the command directly")
    environ = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "PYTHONPATH": str(CHECKOUT),
               "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8", **env}
    chdir = ["-C", str(cwd)] if cwd else []
    return install.daemon("/usr/bin/env", ["-i", *chdir,
                                           *(f"{k}={v}" for k, v in environ.items()),
                                           *argv],
                          host_binds(binds))


def host_binds(extra: tuple[str, ...] = ()) -> list[str]:
    """What synergy inside the root sees of the host, at the same paths: temporary
    directories and homes (configs, state, the cluster's files), users and groups, this
    checkout and ``extra``. Not the host's Python (unlike a job's binds): the root's own
    python3 runs the venv."""
    out: list[str] = []
    for p in ("/tmp", "/var/tmp", "/home", "/etc/passwd", "/etc/group", str(CHECKOUT), *extra):
        if os.path.exists(p) and p not in out and p != "/":
            out.append(p)
    return out


def _build(install: SlurmInstall, src: Path, requirements: list[str]) -> None:
    root = install.root
    assert root is not None
    apt_env = "DEBIAN_FRONTEND=noninteractive"
    _in_root(install, ["/usr/bin/env", apt_env, "apt-get", "-qq",
                       "-o", "Acquire::Check-Valid-Until=false", "update"], 300)
    _in_root(install, ["/usr/bin/env", apt_env, "apt-get", "install", "-y", "-qq",
                       "--no-install-recommends", *BUILD_PACKAGES], 900)
    wheels = root / "opt" / "synergy-wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    py = ".".join(package_version(root, "python3").split(".")[:2])     # 3.13
    proc.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:",
              "--python-version", py, "--implementation", "cp", "--abi", f"cp{py.replace('.', '')}",
              *(f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64",
                                            "manylinux2014_x86_64", "manylinux_2_12_x86_64",
                                            "manylinux2010_x86_64", "any")),
              "-d", str(wheels), *requirements], ReleaseError, 600)
    tarball = root / "opt" / src.name
    shutil.copyfile(src, tarball)
    _in_root(install, ["/usr/bin/python3", "-m", "venv", "--system-site-packages", VENV], 120)
    _in_root(install, [f"{VENV}/bin/pip", "install", "-q", "--no-index", "--find-links",
                       "/opt/synergy-wheels", *requirements], 600)
    lib = "/usr/lib/x86_64-linux-gnu/slurm-wlm"
    _in_root(install, ["/usr/bin/env", f"SLURM_LIB_DIR={lib}", "SLURM_INCLUDE_DIR=/usr/include",
                       f"PYSLURM_BUILD_JOBS={os.cpu_count() or 2}", f"{VENV}/bin/pip",
                       "install", "-q", "--no-build-isolation", "--no-index",
                       f"/opt/{src.name}"], 1800)
    shutil.rmtree(wheels, ignore_errors=True)
    tarball.unlink(missing_ok=True)


def _in_root(install: SlurmInstall, argv: list[str], timeout: float) -> str:
    return proc.run(install.daemon(argv[0], argv[1:], []), ReleaseError, timeout)


def _venv_dir(install: SlurmInstall) -> Path:
    assert install.root is not None
    return install.root / VENV.lstrip("/")


def _stamp(venv: Path) -> dict | None:
    try:
        return json.loads((venv / STAMP).read_text())
    except (OSError, ValueError):
        return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cluster_command(spec, argv: list[str], env: dict[str, str] | None = None,
                    cwd: Path | None = None) -> list[str]:
    """:func:`command` for the dev cluster whose spec is ``spec``: its root, its config."""
    from .cluster import release_info

    info = release_info(spec)
    if not info:
        raise ReleaseError(f"no dev cluster in {spec.state_dir}: start one with synergy "
                           "dev-cluster up --slurm 24.11 --dir DIR")
    if not info.get("root"):
        raise ReleaseError(f"the dev cluster in {spec.state_dir} runs the system's Slurm, "
                           "not one from a root: start it with --slurm 24.11 (or another "
                           "release than the system's)")
    install = SlurmInstall(info["version"], Path(info["root"]))
    if not venv_ready(install):
        raise ReleaseError(f"no venv in {install.root}: build it first with synergy "
                           f"dev-cluster venv --slurm {install.release} --pyslurm SOURCE")
    return command(install, argv, {"SLURM_CONF": str(spec.conf_path), **(env or {})},
                   tuple(spec.binds), cwd)
