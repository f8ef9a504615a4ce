"""``synergy dev-cluster``: a local 4-node Slurm with fake GPUs, for tests and trials."""

from __future__ import annotations

import json
from pathlib import Path

import click

from .. import devcluster
from ..devcluster.conf import DEFAULT_PORT, DevClusterSpec, local_spec
from .errors import BadInput, Failed

DIR_OPTION = click.option(
    "--dir", "state_dir", type=click.Path(file_okay=False, path_type=Path),
    default=devcluster.DEFAULT_DIR, show_default=True,
    help="State directory: config, spool, logs, munge key and socket, pid files.")
PORT_OPTION = click.option("--port", default=DEFAULT_PORT, show_default=True,
                           type=click.IntRange(1024, 65000),
                           help="slurmctld's port; slurmd n1..nN use 17001.. (port + 184 + i).")


@click.group("dev-cluster")
def dev_cluster() -> None:
    """A real Slurm cluster on this machine: slurmctld, N slurmd with 8 fake GPUs,
    24 cores and 500 GB each, GPU-proportional partition defaults (DefCpuPerGPU=3,
    DefMemPerGPU=62500), its own munged. Needs root (slurmd runs jobs as their users).
    Installs slurmctld, slurmd, slurm-client and munge from Debian when missing."""


@dev_cluster.command("up")
@DIR_OPTION
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(1, 64))
@PORT_OPTION
@click.option("--hook", is_flag=True, help="Install job_submit_hook/job_submit.lua "
              "(JobSubmitPlugins=lua).")
@click.option("--no-install", is_flag=True, help="Fail instead of installing packages.")
@click.option("--timeout", default=60.0, show_default=True, type=click.FloatRange(1),
              help="Seconds to wait for all nodes to be idle.")
def up_cmd(state_dir: Path, nodes: int, port: int, hook: bool, no_install: bool,
           timeout: float) -> None:
    """Start the cluster (or report the one already running there).

    The last line printed is ``export SLURM_CONF=...``: eval it to use the cluster.
    """
    spec = local_spec(state_dir, nodes, port, hook)
    try:
        seconds = devcluster.up(spec, install=not no_install, timeout_s=timeout)
    except devcluster.DevClusterError as exc:
        raise Failed(str(exc)) from None
    click.echo(f"{nodes} nodes idle after {seconds:.2f} s "
               f"({nodes * 8} GPUs); state in {spec.state_dir}", err=True)
    click.echo(f"export SLURM_CONF={spec.conf_path}")


@dev_cluster.command("config")
@DIR_OPTION
@click.option("--nodes", default=4, show_default=True, type=click.IntRange(1, 64))
@PORT_OPTION
@click.option("--containers", is_flag=True,
              help="For docker-compose: one host per node (n1..nN), controller 'slurmctld', "
              "default slurmd port.")
@click.option("--hook", is_flag=True, help="Also install the job_submit hook.")
def config_cmd(state_dir: Path, nodes: int, port: int, containers: bool, hook: bool) -> None:
    """Only write the cluster's config files (slurm.conf, gres.conf, cgroup.conf, fake GPU
    files) under DIR/etc; start nothing. docker-compose.slurm.yml uses this."""
    spec = DevClusterSpec(state_dir.resolve(), nodes=nodes, ctld_port=6817, hook=hook,
                          containers=True) if containers else local_spec(state_dir, nodes, port,
                                                                      hook)
    for path in devcluster.write_all_config(spec):
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
        click.echo(f"state dir: {info['state_dir']}  running: {info['running']}")
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
