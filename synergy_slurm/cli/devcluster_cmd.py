"""``synergy dev-cluster``: a local 4-node Slurm with fake GPUs, for tests and trials."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import click

from .. import devcluster
from ..devcluster import inroot
from ..devcluster.conf import DEFAULT_PORT, DevClusterSpec, local_spec
from ..devcluster.controller_config import controller_toml
from ..devcluster.releases import DEFAULT_CACHE, RELEASES, SUITES, ReleaseError, resolve
from ..site import shipped_sites
from .errors import BadInput, Failed
from .options import cluster_option_value, default_profiles_path

DIR_OPTION = click.option(
    "--dir", "state_dir", type=click.Path(file_okay=False, path_type=Path),
    default=devcluster.DEFAULT_DIR, show_default=True,
    help="State directory: config, spool, logs, munge key and socket, pid files.")
PORT_OPTION = click.option("--port", default=DEFAULT_PORT, show_default=True,
                           type=click.IntRange(1024, 65000),
                           help="slurmctld's port; slurmd n1..nN use 17001.. (port + 184 + i).")
SLURM_OPTION = click.option(
    "--slurm", "release", type=click.Choice(RELEASES), default="system", show_default=True,
    help="Which Slurm: the system's own, or Debian's 22.05 (bookworm), 24.11 (trixie) or "
    "26.05 (sid), run from a root filesystem built once with mmdebstrap and cached "
    "(unless it is the system's own release).")
CLUSTER_OPTION = click.option(
    "--cluster", "cluster", metavar="FILE|NAME", default=None,
    help="A cluster description (node kinds and partitions, docs/dev-cluster.md) instead of "
    "the paper's 8-GPU servers (24 cores, 500 GB, one partition gpu); shipped: "
    f"{', '.join(shipped_sites())}.")


CACHE_OPTION = click.option(
    "--cache", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_CACHE,
    show_default=True, help="Where the releases' root filesystems are kept "
    "($SYNERGY_ROOT_CACHE).")


@click.group("dev-cluster")
def dev_cluster() -> None:
    """A real Slurm cluster on this machine: slurmctld, N slurmd with 8 fake GPUs,
    24 cores and 500 GB each, GPU-proportional partition defaults (DefCpuPerGPU=3,
    DefMemPerGPU=62500), or the node kinds and partitions of --cluster; its own munged.
    Needs root (slurmd runs jobs as their users). Installs slurmctld, slurmd, slurm-client
    and munge from Debian when missing."""


@dev_cluster.command("up")
@DIR_OPTION
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(1, 64))
@PORT_OPTION
@click.option("--hook", is_flag=True, help="Install job_submit_hook/job_submit.lua "
              "(JobSubmitPlugins=lua).")
@SLURM_OPTION
@CLUSTER_OPTION
@CACHE_OPTION
@click.option("--bind", "binds", multiple=True, type=click.Path(exists=True, file_okay=False,
              resolve_path=True), help="With a release from a cached root: a host directory "
              "jobs need (data, a shared file system), at the same path inside. /tmp, "
              "/var/tmp, /home, this Python and this checkout always are. Repeatable.")
@click.option("--accounting", is_flag=True,
              help="A site's accounting: slurmdbd over a private MariaDB (port + 2, data in "
              "DIR/mariadb), associations and QOS enforced, priority/multifactor with "
              "fair-share, job accounting gathered. Accounts lab-a (root's default) and "
              "lab-b; QOS normal, standard, urgent. Adds a few seconds to start-up.")
@click.option("--enforce-memory", is_flag=True,
              help="Memory limits that bite, as most sites run: task/cgroup with "
              "ConstrainRAMSpace (cgroup v1 or v2, whichever the machine has), so a job "
              "using more than its allocation is killed (OUT_OF_MEMORY). Cores are not "
              "constrained: the fake nodes have more cores than the machine.")
@click.option("--no-install", is_flag=True, help="Fail instead of installing packages.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1),
              help="Seconds to wait for all nodes to be idle.")
def up_cmd(state_dir: Path, nodes: int, port: int, hook: bool, release: str, cluster: str | None,
           cache: Path, binds: tuple[str, ...], accounting: bool, enforce_memory: bool,
           no_install: bool, timeout: float) -> None:
    """Start the cluster (or report the one already running there).

    The last line printed is ``export SLURM_CONF=...`` (with ``PATH=`` for a release from a
    cached root, whose commands are wrappers in DIR/bin): eval it to use the cluster. For
    synergy itself, set ``[slurm] conf`` and ``[slurm] bindir`` in synergy.toml to the same.
    """
    if enforce_memory and devcluster.memory_cgroups():
        raise Failed(f"--enforce-memory: {devcluster.memory_cgroups()}")
    spec = local_spec(state_dir, nodes, port, hook, release, binds, accounting,
                      cluster_option_value(cluster), enforce_memory)
    try:
        seconds, spec = devcluster.up(spec, install=not no_install, timeout_s=timeout,
                                      cache=cache.resolve())
    except devcluster.DevClusterError as exc:
        raise Failed(str(exc)) from None
    version = devcluster.release_info(spec).get("version", "?")
    total = spec.layout.cluster_state().total
    click.echo(f"Slurm {version}: {len(spec.node_names)} nodes idle after {seconds:.2f} s "
               f"({total.gpus} GPUs, partitions "
               f"{', '.join(p.name for p in spec.layout.partitions)}"
               f"{', accounting' if accounting else ''}); state in {spec.state_dir}", err=True)
    if spec.bindir.is_dir():
        click.echo(f"export SLURM_CONF={spec.conf_path} PATH={spec.bindir}:$PATH")
    else:
        click.echo(f"export SLURM_CONF={spec.conf_path}")


@dev_cluster.command("config")
@DIR_OPTION
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(1, 64))
@PORT_OPTION
@click.option("--containers", is_flag=True,
              help="For docker-compose: one host per node (n1..nN), controller 'slurmctld', "
              "default slurmd port.")
@click.option("--hook", is_flag=True, help="Also install the job_submit hook.")
@click.option("--controller", is_flag=True,
              help="Also write DIR/synergy.toml, the config of synergy's controller beside "
              "this cluster's slurmctld, as the demo runs it (enforce, FIFO + TUNE, a 2-s "
              "round; state and audit log in DIR; the profiles of $SYNERGY_PROFILES, else the "
              "shipped ones).")
@CLUSTER_OPTION
def config_cmd(state_dir: Path, nodes: int, port: int, containers: bool, hook: bool,
               controller: bool, cluster: str | None) -> None:
    """Only write the cluster's config files (slurm.conf, gres.conf, cgroup.conf, fake GPU
    files) under DIR/etc; start nothing. docker-compose.slurm.yml uses this."""
    site = cluster_option_value(cluster)
    spec = DevClusterSpec(Path(os.path.abspath(state_dir)), nodes=nodes, ctld_port=6817, hook=hook,
                          containers=True, site=site) if containers else local_spec(
        state_dir, nodes, port, hook, site=site)
    for path in devcluster.write_all_config(spec):
        click.echo(str(path))
    if controller:
        path = spec.state_dir / "synergy.toml"
        path.write_text(controller_toml(spec, default_profiles_path(), spec.state_dir,
                                        "synergy dev-cluster config --controller"))
        click.echo(str(path))


@dev_cluster.command("status")
@DIR_OPTION
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def status_cmd(state_dir: Path, fmt: str) -> None:
    """Which of the cluster's daemons run, and the nodes' states."""
    spec = devcluster.existing_spec(state_dir)
    info = devcluster.status(spec)
    if fmt == "json":
        click.echo(json.dumps(info, indent=1))
    else:
        click.echo(f"state dir: {info['state_dir']}  running: {info['running']}  "
                   f"Slurm: {info['slurm'] or 'unknown'}"
                   + (f" (root {info['root']})" if info["root"] else "")
                   + ("  accounting: slurmdbd + MariaDB" if info["accounting"] else ""))
        for name, pid in info["processes"].items():
            click.echo(f"  {name:<12} {pid if pid else 'not running'}")
        for n in info["nodes"]:
            click.echo(f"  node {n['name']}: {n['state']}")
    if not info["running"]:
        raise SystemExit(3)


@dev_cluster.command("down")
@DIR_OPTION
def down_cmd(state_dir: Path) -> None:
    """Cancel all jobs, stop the daemons this cluster started (by pid) and remove its
    state directory."""
    spec = devcluster.existing_spec(state_dir)
    try:
        ended = devcluster.down(spec)
    except devcluster.DevClusterError as exc:
        raise BadInput(str(exc)) from None
    click.echo("stopped: " + (", ".join(ended) if ended else "nothing was running"), err=True)


@dev_cluster.command("venv")
@click.option("--slurm", "release", type=click.Choice(sorted(SUITES)), required=True,
              help="The release whose root gets the venv (not the system's own).")
@click.option("--pyslurm", "source", required=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="pyslurm's source tarball for that release (each pyslurm release binds "
              "one Slurm release: 24.11.x for Slurm 24.11).")
@CACHE_OPTION
def venv_cmd(release: str, source: Path, cache: Path) -> None:
    """Build, once, a Python venv inside a release's root with synergy's dependencies and
    pyslurm compiled from SOURCE against that root's libslurm (about 4 minutes on 2 cores;
    kept with the root and rebuilt only when SOURCE or the dependencies change). Needs
    root and Debian's package registry (the build tools go into the root).

    Then ``synergy dev-cluster exec`` runs synergy there, beside the cluster's Slurm,
    where ``[slurm] reader = "pyslurm"`` can read it. Prints the venv's path in the root.
    """
    _need_root("build a venv inside a root")
    try:
        install = resolve(release, cache.resolve())
        if install.root is None:
            raise BadInput(f"Slurm {release} is this system's own: build pyslurm for it on "
                           "the host (docs/admin-guide.md)")
        venv = inroot.ensure_venv(install, source)
    except ReleaseError as exc:
        raise Failed(str(exc)) from None
    click.echo(f"{install.root}{venv}")


@dev_cluster.command("exec", context_settings={"ignore_unknown_options": True})
@DIR_OPTION
@click.argument("argv", nargs=-1, required=True, type=click.UNPROCESSED)
def exec_cmd(state_dir: Path, argv: tuple[str, ...]) -> None:
    """Run ARGV inside the cluster's root, with the venv of ``synergy dev-cluster venv``
    first on PATH, this checkout importable and SLURM_CONF set: as a controller host
    with that Slurm installed would. For example:

    \b
        synergy dev-cluster exec --dir D -- \\
            python -m synergy_slurm -v controller run --once --config synergy.toml

    It runs in the current directory, which must be inside what the root sees of the
    host (/tmp, /home, this checkout, the cluster's --bind directories). Exits with
    ARGV's exit code. Needs root (the root is entered with chroot).
    """
    _need_root("enter the cluster's root")
    spec = devcluster.existing_spec(state_dir)
    try:
        cmd = inroot.cluster_command(spec, list(argv), cwd=Path.cwd())
    except ReleaseError as exc:
        raise BadInput(str(exc)) from None
    raise SystemExit(subprocess.run(cmd, check=False).returncode)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        raise Failed(f"only root can {what} (chroot, private mounts): run as root")
