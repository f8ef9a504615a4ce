"""A real Slurm cluster on this one machine, for tests and for trying synergy-slurm.

``up`` installs Slurm and munge from Debian's packages when they are missing, writes the
config (``conf``), starts a private munged (own key, own socket), slurmctld and one
slurmd per node (``slurmd -N``), and waits until every node is idle. Everything lives under
one state directory; nothing touches a system Slurm or munge. ``down`` cancels the jobs,
ends only the processes whose pid files it wrote (after checking that each pid still runs
our command) and removes the directory.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pwd
import shutil
import signal
import socket
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import SynergyError
from ..hook import install
from ..owndir import own_dir
from ..shipped import HOOK_LUA, HOOK_MODULE, shipped_file
from ..site import SiteError, site_from_dict
from ..slurm.commands import SlurmCLI
from . import accounting, proc, releases
from .conf import DevClusterSpec, local_spec, slurm_conf, slurmdbd_conf, write_config
from .releases import ReleaseError, SlurmInstall

log = logging.getLogger(__name__)

PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "lua-filesystem")
BINARIES = ("slurmctld", "slurmd", "munged", "sinfo", "squeue", "sbatch", "scontrol", "scancel")
ACCOUNTING_PACKAGES = ("slurmdbd", *accounting.DB_PACKAGES)
DEFAULT_DIR = Path("/tmp/synergy-dev-cluster")
RELEASE_FILE = "release.json"


class DevClusterError(SynergyError, RuntimeError):
    """The cluster could not be started, stopped or read; the message says why."""


@dataclass(frozen=True)
class NodeState:
    name: str
    state: str


def slurm_cli(spec: DevClusterSpec, timeout_s: float = 30.0) -> SlurmCLI:
    """Slurm's commands for this cluster (its config; its release's wrappers if any)."""
    return SlurmCLI(str(spec.conf_path), timeout_s,
                    str(spec.bindir) if spec.bindir.is_dir() else None)


def env_for(spec: DevClusterSpec) -> dict[str, str]:
    """The environment that points Slurm's commands at this cluster (its config, and its
    release's commands first on PATH when it runs from a cached root)."""
    env = dict(os.environ)
    env["SLURM_CONF"] = str(spec.conf_path)
    if spec.bindir.is_dir():
        env["PATH"] = f"{spec.bindir}:{env.get('PATH', '')}"
    return env


# -- install -----------------------------------------------------------------------------
def missing_binaries(accounting_too: bool = False) -> list[str]:
    want = BINARIES + (("slurmdbd", "sacctmgr", *accounting.DB_PROGRAMS) if accounting_too
                       else ())
    return [b for b in want if _which(b) is None]


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def ensure_installed(install: bool = True, accounting_too: bool = False) -> None:
    """Debian's Slurm and munge (and slurmdbd and MariaDB for accounting) when missing."""
    missing = missing_binaries(accounting_too)
    if not missing:
        return
    packages = PACKAGES + (ACCOUNTING_PACKAGES if accounting_too else ())
    if not install:
        raise DevClusterError(f"missing {', '.join(missing)}: install "
                              f"{' '.join(packages)} (Debian) or run without --no-install")
    if os.geteuid() != 0 or _which("apt-get") is None:
        raise DevClusterError(f"missing {', '.join(missing)}; installing needs root and apt-get: "
                              f"apt-get install {' '.join(packages)}")
    log.warning("installing %s from Debian's packages", " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update", "-qq"], env=env, timeout=300)
    _run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], env=env,
         timeout=600)
    # Debian starts the system munged/slurm/mariadb services where systemd runs; ours are
    # private (own ports, sockets, data), so leave theirs alone.
    still = missing_binaries(accounting_too)
    if still:
        raise DevClusterError(f"still missing after install: {', '.join(still)}")


# -- start -------------------------------------------------------------------------------
def up(spec: DevClusterSpec, install: bool = True, timeout_s: float = 60.0,
       cache: Path = releases.DEFAULT_CACHE, mirror: str = releases.DEFAULT_MIRROR
       ) -> tuple[float, DevClusterSpec]:
    """Start the cluster (or find it running); returns the seconds until all nodes were
    idle (a root's first build included) and the spec it runs with."""
    if os.geteuid() != 0:
        raise DevClusterError("the dev cluster runs slurmd as root: run as root")
    t0 = time.monotonic()
    slurm = _slurm_for(spec, install, cache, mirror)
    spec = replace(spec, plugin_dir=slurm.plugin_dir)
    if is_running(spec):
        if spec.conf_path.read_text() != slurm_conf(spec):
            raise DevClusterError(
                f"a dev cluster with another configuration (nodes, ports, --hook, --slurm) runs "
                f"in {spec.state_dir}; stop it first: synergy dev-cluster down --dir "
                f"{spec.state_dir}")
        log.info("dev cluster already running in %s", spec.state_dir)
        wait_idle(spec, timeout_s)
        return time.monotonic() - t0, spec
    busy = [p for p in spec.ports() if not _port_free(p)]
    if busy:
        raise DevClusterError(
            f"port(s) {', '.join(map(str, busy))} already in use (another Slurm or an old dev "
            f"cluster?); stop it, or choose others with --port")
    _check_reachable(spec.state_dir)
    _fresh_state_dir(spec, slurm)
    try:
        _start_daemons(spec, slurm, timeout_s)
    except DevClusterError:
        # Nothing half-started stays behind (its ports would block the next try); the
        # state directory, logs included, does.
        _stop_processes(spec)
        raise
    return time.monotonic() - t0, spec


def _slurm_for(spec: DevClusterSpec, install: bool, cache: Path, mirror: str
               ) -> SlurmInstall:
    """The Slurm release the spec names, with what it needs on the host installed."""
    if spec.slurm == releases.SYSTEM:
        ensure_installed(install, spec.accounting)   # Debian's Slurm and munge, when missing
    try:
        slurm = releases.resolve(spec.slurm, cache, mirror)
    except ReleaseError as exc:
        raise DevClusterError(str(exc)) from None
    if slurm.root is None:
        ensure_installed(install, spec.accounting)   # the system's release asked by number
    elif spec.accounting and any(_which(p) is None for p in accounting.DB_PROGRAMS):
        ensure_installed(install, True)              # the database server runs on the host
    return slurm


def _fresh_state_dir(spec: DevClusterSpec, slurm: SlurmInstall) -> None:
    """An empty state directory with the configuration, the command wrappers and the
    release it runs (what ``down`` and a later ``up`` read). The directory is made here,
    or is one the caller owns that no one else may write to (``owndir``): the cluster's
    files are written as root, and a directory another user made first (or a link) would
    let them choose where. An old one is emptied only where it holds a dev cluster."""
    own_dir(spec.state_dir, 0o755)
    if any(spec.state_dir.iterdir()):
        if not (spec.etc / "slurm.conf").exists():
            raise DevClusterError(f"{spec.state_dir} is not empty and does not look like a "
                                  "dev cluster; not removing it")
        _stop_processes(spec)   # leftovers of a cluster that died: ours by pid file only
        shutil.rmtree(spec.state_dir)
        own_dir(spec.state_dir, 0o755)
    for sub in ("etc", "spool/ctld", "run", "log", "munge"):
        (spec.state_dir / sub).mkdir(parents=True, exist_ok=True)
    spec.state_dir.chmod(0o755)
    for name in spec.node_names:
        (spec.state_dir / "spool" / name).mkdir(parents=True, exist_ok=True)
    write_all_config(spec)
    slurm.write_wrappers(spec.bindir)
    (spec.state_dir / RELEASE_FILE).write_text(json.dumps(
        {"slurm": spec.slurm, "version": slurm.version,
         "root": str(slurm.root) if slurm.root else None, "plugin_dir": spec.plugin_dir,
         "binds": list(spec.binds), "accounting": spec.accounting,
         "site": spec.site.to_dict() if spec.site else None}))


def _start_daemons(spec: DevClusterSpec, slurm: SlurmInstall, timeout_s: float) -> None:
    """munge, accounting (if asked), slurmctld and each slurmd; then wait for the nodes."""
    binds = _binds(spec)
    env = env_for(spec)
    _start_munge(spec, slurm, binds)
    if spec.accounting:
        _start_accounting(spec, slurm, binds, env)
    _run(_daemon(slurm, "slurmctld", ["-f", str(spec.conf_path)], binds), env=env, timeout=30)
    for name in spec.node_names:
        _run(_daemon(slurm, "slurmd", ["-N", name, "-f", str(spec.conf_path)], binds),
             env=env, timeout=30)
    try:
        wait_idle(spec, timeout_s)
    except DevClusterError:
        tail = _tail(spec.state_dir / "log" / "slurmctld.log", 15)
        raise DevClusterError(f"nodes did not become idle within {timeout_s:.0f} s; "
                              f"slurmctld.log ends:\n{tail}") from None


def _start_accounting(spec: DevClusterSpec, slurm: SlurmInstall, binds: list[str],
                      env: dict[str, str]) -> None:
    """MariaDB, slurmdbd, then the site's associations: before slurmctld, which registers
    the cluster with slurmdbd as it starts."""
    t0 = time.monotonic()
    try:
        password = accounting.start_database(
            spec, {p: _bin(p) for p in accounting.DB_PROGRAMS})
        accounting.write_slurmdbd_conf(spec, slurmdbd_conf(spec, password))
        _run(_daemon(slurm, "slurmdbd", [], binds), env=env, timeout=30)
        sacctmgr = _client(spec, "sacctmgr")
        accounting.wait_dbd(sacctmgr, env)
        accounting.provision(spec, sacctmgr, env)
    except accounting.AccountingError as exc:
        tail = _tail(spec.state_dir / "log" / "slurmdbd.log", 10)
        raise DevClusterError(f"accounting: {exc}\nslurmdbd.log ends:\n{tail}") from None
    log.info("accounting (MariaDB, slurmdbd, associations) up in %.1f s",
             time.monotonic() - t0)


def add_user(spec: DevClusterSpec, user: str) -> None:
    """Let ``user`` submit to a cluster with accounting (an association in both accounts);
    nothing to do without accounting."""
    if not spec.accounting:
        return
    try:
        accounting.add_user(_client(spec, "sacctmgr"), env_for(spec), user)
    except accounting.AccountingError as exc:
        raise DevClusterError(str(exc)) from None


def start_slurmctld(spec: DevClusterSpec) -> None:
    """Start this cluster's slurmctld again (after it was stopped), from its own release."""
    info = release_info(spec)
    slurm = SlurmInstall(info.get("version", ""), Path(info["root"]) if info.get("root")
                         else None)
    _run(_daemon(slurm, "slurmctld", ["-f", str(spec.conf_path)], _binds(spec)),
         env=env_for(spec), timeout=30)


def _binds(spec: DevClusterSpec) -> list[str]:
    """Host paths the daemons of a release from a root see (its jobs run there)."""
    return releases.job_binds((str(spec.state_dir), *spec.binds))


def _daemon(slurm: SlurmInstall, name: str, args: list[str], binds: list[str]) -> list[str]:
    path = f"/usr/sbin/{name}" if slurm.root else _bin(name)
    return slurm.daemon(path, args, binds)


def _check_reachable(state_dir: Path) -> None:
    """munged and slurmctld run as their own users: every directory above the state
    directory must let others through (a 0700 home or pytest tmp dir does not)."""
    for parent in state_dir.resolve().parents:
        if parent.exists() and not parent.stat().st_mode & 0o001:
            raise DevClusterError(
                f"{parent} is not searchable by other users (mode "
                f"{parent.stat().st_mode & 0o777:o}), so munge and slurm cannot reach "
                f"{state_dir}; choose a directory under /tmp or /var/tmp with --dir")


def write_all_config(spec: DevClusterSpec) -> list[Path]:
    """slurm.conf, gres.conf, cgroup.conf, the fake GPU files, and the hook if asked."""
    written = write_config(spec)
    if spec.hook:
        written.append(_install_hook(spec))
    return written


def _install_hook(spec: DevClusterSpec) -> Path:
    """Install the hook beside slurm.conf (where job_submit/lua looks) as `synergy hook
    install --write` does, with the same joining line: the table in the cluster's etc, where
    its controller config ([hook] state_dir) has the controller write it. (A bare chain()
    here, the table beside the module, once differed from a site's without a word.)"""
    for rel in (HOOK_MODULE, HOOK_LUA):
        if not shipped_file(rel).exists():
            raise DevClusterError(f"--hook: {shipped_file(rel)} not found")
    steps = install.plan(spec.etc, spec.etc, shipped_file(HOOK_LUA),
                         shipped_file(HOOK_MODULE), force=True)
    install.apply(steps, time.strftime("%Y%m%d-%H%M%S"))
    return spec.etc / install.SCRIPT


def _start_munge(spec: DevClusterSpec, slurm: SlurmInstall, binds: list[str]) -> None:
    mdir = spec.munge_socket.parent
    key = mdir / "munge.key"
    key.write_bytes(os.urandom(1024))
    try:
        pw = pwd.getpwnam("munge")
        uid, gid = pw.pw_uid, pw.pw_gid
    except KeyError:
        uid = gid = 0
    os.chown(mdir, uid, gid)
    os.chown(key, uid, gid)
    key.chmod(0o400)
    mdir.chmod(0o755)
    args = [f"--socket={spec.munge_socket}", f"--key-file={key}",
            f"--pid-file={mdir / 'munged.pid'}", f"--log-file={mdir / 'munged.log'}",
            f"--seed-file={mdir / 'munged.seed'}"]
    if slurm.root is not None:
        # The root's munged, as root (its --force accepts that); the host needs no munge.
        cmd = _daemon(slurm, "munged", [*args, "--force"], binds)
    elif uid != 0:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
               _bin("munged"), *args]
    else:
        cmd = [_bin("munged"), *args, "--force"]
    _run(cmd, timeout=30)
    deadline = time.monotonic() + 10
    while not spec.munge_socket.exists():
        if time.monotonic() > deadline:
            raise DevClusterError("munged did not create its socket; see "
                                  f"{mdir / 'munged.log'}:\n{_tail(mdir / 'munged.log', 5)}")
        time.sleep(0.05)


def wait_idle(spec: DevClusterSpec, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    last: list[NodeState] = []
    while time.monotonic() < deadline:
        with contextlib.suppress(DevClusterError):
            last = node_states(spec)
            # Exactly "idle": "idle*" is a node slurmctld has not heard from yet.
            if len(last) == len(spec.node_names) and all(n.state == "idle" for n in last):
                return
        time.sleep(0.2)
    raise DevClusterError(f"nodes not idle: {[(n.name, n.state) for n in last]}")


def node_states(spec: DevClusterSpec) -> list[NodeState]:
    out = _run([_client(spec, "sinfo"), "-h", "-N", "-o", "%N %t"], env=env_for(spec),
               timeout=10)
    states: dict[str, NodeState] = {}     # sinfo -N lists a node once per partition
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states.setdefault(parts[0], NodeState(parts[0], parts[1]))
    return list(states.values())


# -- status ------------------------------------------------------------------------------
def pid_files(spec: DevClusterSpec) -> dict[str, Path]:
    run = spec.state_dir / "run"
    files = {"munged": spec.munge_socket.parent / "munged.pid",
             "slurmctld": run / "slurmctld.pid"}
    if spec.accounting:
        files["mariadbd"] = accounting.Database(spec).pid_file
        files["slurmdbd"] = run / "slurmdbd.pid"
    for name in spec.node_names:
        files[f"slurmd-{name}"] = run / f"slurmd-{name}.pid"
    return files


def _our_pid(path: Path, spec: DevClusterSpec) -> int | None:
    """The pid in ``path`` if that process is alive and runs with our state directory."""
    try:
        pid = int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return None
    # Ours only if its command line names our state directory (slurmctld and slurmd get
    # -f <conf>, munged and mariadbd their files there) or, for slurmdbd (started with no
    # arguments), its environment names our slurm.conf. A pid file alone proves nothing:
    # whoever could write it could name the site's real slurmctld.
    if str(spec.state_dir) + "/" in cmd:
        return pid
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if f"SLURM_CONF={spec.conf_path}".encode() in environ else None


def existing_spec(state_dir: Path) -> DevClusterSpec:
    """The spec of the cluster whose state is in ``state_dir`` (node count and release read
    back from what ``up`` wrote there), to read or stop it."""
    spec = local_spec(state_dir)
    if spec.conf_path.exists():
        nodes = sum(1 for line in spec.conf_path.read_text().splitlines()
                    if line.startswith("NodeName="))
        spec = local_spec(state_dir, max(nodes, 1))
    info = release_info(spec)
    if info:
        spec = replace(spec, slurm=info.get("slurm", "system"),
                       plugin_dir=info.get("plugin_dir") or "",
                       binds=tuple(info.get("binds", ())),
                       accounting=bool(info.get("accounting")))
        if info.get("site"):
            with contextlib.suppress(SiteError):
                site = site_from_dict(info["site"])
                spec = replace(spec, site=site, nodes=len(site.nodes))
    return spec


def release_info(spec: DevClusterSpec) -> dict:
    """What ``up`` recorded about the Slurm it started: release asked, version, root."""
    try:
        return json.loads((spec.state_dir / RELEASE_FILE).read_text())
    except (OSError, ValueError):
        return {}


def is_running(spec: DevClusterSpec) -> bool:
    files = pid_files(spec)
    return bool(files) and all(_our_pid(p, spec) is not None for p in files.values())


def status(spec: DevClusterSpec) -> dict:
    procs = {name: _our_pid(path, spec) for name, path in pid_files(spec).items()}
    rel = release_info(spec)
    info: dict = {"state_dir": str(spec.state_dir), "slurm_conf": str(spec.conf_path),
                  "slurm": rel.get("version"), "root": rel.get("root"),
                  "accounting": bool(rel.get("accounting")),
                  "processes": procs, "running": all(procs.values()), "nodes": []}
    if info["running"]:
        with contextlib.suppress(DevClusterError):
            info["nodes"] = [{"name": n.name, "state": n.state} for n in node_states(spec)]
    return info


# -- stop --------------------------------------------------------------------------------
def down(spec: DevClusterSpec, keep: bool = False) -> list[str]:
    """Cancel every job, end our daemons, remove the state directory; returns what ended."""
    ended: list[str] = []
    if _our_pid(pid_files(spec)["slurmctld"], spec) is not None:
        _cancel_all(spec)
    ended = _stop_processes(spec)
    if not keep and spec.state_dir.exists():
        if not (spec.state_dir / "etc" / "slurm.conf").exists() and any(
                spec.state_dir.iterdir()):
            raise DevClusterError(f"{spec.state_dir} does not look like a dev cluster; "
                                  "not removing it")
        shutil.rmtree(spec.state_dir, ignore_errors=True)
    return ended


def _cancel_all(spec: DevClusterSpec) -> None:
    env = env_for(spec)
    try:
        # By user: a heterogeneous job's components cannot be cancelled one by one.
        squeue = _client(spec, "squeue")
        users = set(_run([squeue, "-h", "-o", "%u"], env=env, timeout=10).split())
        for user in sorted(users):
            _run([_client(spec, "scancel"), "-u", user], env=env, timeout=10, check=False)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if not _run([squeue, "-h", "-o", "%A"], env=env, timeout=10).split():
                return
            time.sleep(0.3)
    except DevClusterError as exc:
        log.warning("could not cancel jobs before stopping: %s", exc)


def _stop_processes(spec: DevClusterSpec) -> list[str]:
    files = pid_files(spec)
    order = [n for n in files if n.startswith("slurmd-")] + [
        n for n in ("slurmctld", "slurmdbd", "mariadbd", "munged") if n in files]
    ended = []
    for name in order:
        pid = _our_pid(files[name], spec)
        if pid is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        ended.append(f"{name} ({pid})")
    return ended


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.split(")", 1)[-1].split()[0] != "Z"


# -- helpers -----------------------------------------------------------------------------
def _client(spec: DevClusterSpec, name: str) -> str:
    """A client command of this cluster's release: its wrapper, or the system's."""
    wrapper = spec.bindir / name
    return str(wrapper) if wrapper.exists() else _bin(name)


def _bin(name: str) -> str:
    path = _which(name)
    if path is None:
        raise DevClusterError(f"{name} not found")
    return path


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return False
    return True


def _run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 30,
         check: bool = True) -> str:
    return proc.run(cmd, DevClusterError, timeout, env, check)


def _tail(path: Path, n: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"
