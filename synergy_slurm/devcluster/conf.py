"""The configuration of the local test cluster: slurm.conf, gres.conf, cgroup.conf.

One generator serves the single-machine cluster (every slurmd on this host, each on its own
port) and the docker-compose cluster (one container per node): the node shape, partition
defaults and plugins are the same, only addresses and paths differ.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path

from ..site import Site, default_site
from . import releases

DEFAULT_PORT = 16817

# The paper's servers (the default layout): 8 GPUs, 24 cores, 500 GB; GPU-proportional
# partition defaults.
NODE_GPUS = 8
DEF_CPU_PER_GPU = 3
DEF_MEM_PER_GPU_MB = 62_500
# Slurm's main and backfill passes (what the demo's prediction models them at).
SCHED_INTERVAL_S = 5


@dataclass(frozen=True)
class DevClusterSpec:
    """Where and how the local cluster runs."""

    state_dir: Path
    nodes: int = 4
    ctld_port: int = 16817
    node_port_base: int = 17001
    hostname: str = "localhost"
    address: str = "127.0.0.1"
    hook: bool = False
    cluster_name: str = "synergydev"
    # docker-compose: each node is its own host named after the node, default ports.
    containers: bool = False
    # Which Slurm (releases.RELEASES) and, for one from a cached root, its plugin directory.
    slurm: str = "system"
    plugin_dir: str = ""
    # Host directories jobs need inside a release's root besides the usual ones
    # (releases.job_binds): data and shared file systems, as a site mounts them on nodes.
    binds: tuple[str, ...] = ()
    # A site's accounting: slurmdbd over a private MariaDB, associations and QOS enforced,
    # priority/multifactor with fair-share, job accounting gathered (accounting.py).
    accounting: bool = False
    # Memory limits that bite, as at most sites: task/cgroup with ConstrainRAMSpace, so a
    # job over its memory is killed (cores stay unconstrained: the fake nodes have more
    # cores than the machine).
    enforce_memory: bool = False
    # Node kinds and partitions (synergy_slurm.site); None: ``nodes`` of the paper's servers
    # in one partition ``gpu``.
    site: Site | None = None

    @property
    def layout(self) -> Site:
        return self.site if self.site is not None else default_site(self.nodes)

    @property
    def node_names(self) -> list[str]:
        return [n for n, _ in self.layout.nodes]

    @property
    def etc(self) -> Path:
        return self.state_dir / "etc"

    @property
    def conf_path(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def bindir(self) -> Path:
        """Wrappers for the client commands of a Slurm from a cached root."""
        return self.state_dir / "bin"

    @property
    def munge_socket(self) -> Path:
        return self.state_dir / "munge" / "munge.socket.2"

    @property
    def gpu_dir(self) -> Path:
        return self.state_dir / "gpu"

    def node_port(self, index: int) -> int:
        return self.node_port_base + index

    @property
    def dbd_port(self) -> int:
        return self.ctld_port + 1

    @property
    def db_port(self) -> int:
        return self.ctld_port + 2

    @property
    def first_job_id(self) -> int:
        """Job ids of local clusters on one host never meet: their nodes share names (n1,
        ...) and task/cgroup names a job's cgroup after its node and job id, so two
        clusters' job 5 would share one memory limit. Each local cluster counts from its
        port times 1000 (its own port; containers have their own hosts and start at 1)."""
        return 1 if self.containers else self.ctld_port * 1000

    def ports(self) -> list[int]:
        extra = [self.dbd_port, self.db_port] if self.accounting else []
        return [self.ctld_port, *extra] + [self.node_port(i) for i in range(self.nodes)]


def local_spec(state_dir: Path, nodes: int = 4, port: int = DEFAULT_PORT,
               hook: bool = False, slurm: str = "system", binds: tuple[str, ...] = (),
               accounting: bool = False, site: Site | None = None,
               enforce_memory: bool = False) -> DevClusterSpec:
    """The single-machine cluster: slurmctld on ``port``, slurmd n1..nN on port + 184 + i,
    with accounting slurmdbd on port + 1 and MariaDB on port + 2, all on this host."""
    host = socket.gethostname().split(".")[0] or "localhost"
    if site is not None:
        nodes = len(site.nodes)
    # Absolute, links kept: up() refuses a link or another user's directory there.
    return DevClusterSpec(Path(os.path.abspath(state_dir)), nodes=nodes, ctld_port=port,
                          node_port_base=port + 184, hostname=host, hook=hook, slurm=slurm,
                          binds=tuple(binds), accounting=accounting, site=site,
                          enforce_memory=enforce_memory)


def _version(spec: DevClusterSpec) -> tuple[int, int]:
    """The cluster's Slurm release as (year, month): what its slurm.conf may use."""
    text = releases.system_version() if spec.slurm == releases.SYSTEM else spec.slurm
    try:
        year, month = (text or "0.0").split(".")[:2]
        return int(year), int(month)
    except ValueError:
        return 0, 0


def slurm_conf(spec: DevClusterSpec) -> str:
    lines = [
        "# Generated by synergy-slurm (synergy_slurm/devcluster/conf.py): the local test",
        "# cluster. Do not edit; re-run 'synergy dev-cluster up'.",
        *_daemon_lines(spec),
        *_scheduling_lines(spec),
        *(_accounting_lines(spec) if spec.accounting else
          ["AccountingStorageType=accounting_storage/none",
           "JobAcctGatherType=jobacct_gather/none"]),
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        f"FirstJobId={spec.first_job_id}",
        "MinJobAge=300",
        # Slurm's default (10000) is below what benchmarks/slurm_read.py holds pending.
        "MaxJobCount=30000",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "Waittime=0",
        "RebootProgram=/bin/true",
    ]
    if spec.hook:
        lines.append("JobSubmitPlugins=lua")
    if spec.plugin_dir:
        lines.append(f"PluginDir={spec.plugin_dir}")
    return "\n".join([*lines, *_node_lines(spec), *_partition_lines(spec)]) + "\n"


def _daemon_lines(spec: DevClusterSpec) -> list[str]:
    """Where slurmctld and the slurmd listen, who they run as, and their files."""
    d = spec.state_dir
    ctld_host = "slurmctld" if spec.containers else f"{spec.hostname}({spec.address})"
    return [
        f"ClusterName={spec.cluster_name}",
        f"SlurmctldHost={ctld_host}",
        f"SlurmctldPort={spec.ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={spec.munge_socket},cred_expire=10",
        f"StateSaveLocation={d}/spool/ctld",
        f"SlurmdSpoolDir={d}/spool/%n",
        f"SlurmctldPidFile={d}/run/slurmctld.pid",
        f"SlurmdPidFile={d}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
    ]


def _scheduling_lines(spec: DevClusterSpec) -> list[str]:
    """How jobs are contained, placed and scheduled, with what the release allows."""
    return [
        "ProctrackType=proctrack/linuxproc",
        f"TaskPlugin={'task/cgroup' if spec.enforce_memory else 'task/none'}",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "GresTypes=gpu",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "SchedulerType=sched/backfill",
        f"SchedulerParameters=sched_interval={SCHED_INTERVAL_S},"
        f"bf_interval={SCHED_INTERVAL_S}",
        *(["SlurmctldParameters=enable_expedited_requeue"]
          if _version(spec) >= (25, 11) else []),
        *(["PrologFlags=Contain"] if _version(spec) >= (26, 5) else []),
    ]


def _node_lines(spec: DevClusterSpec) -> list[str]:
    """One NodeName line per node of the layout: a container by its name, or a slurmd of
    this host on its own port."""
    lines = []
    for i, (name, kind) in enumerate(spec.layout.nodes):
        if spec.containers:
            where = f"NodeHostname={name}"
            port = 6818
        else:
            where = f"NodeHostname={spec.hostname} NodeAddr={spec.address}"
            port = spec.node_port(i)
        gres = f"gpu:{kind.gpu_type}:{kind.gpus}" if kind.gpu_type else f"gpu:{kind.gpus}"
        lines.append(f"NodeName={name} {where} Port={port} CPUs={kind.cpus} "
                     f"RealMemory={kind.mem_mb} Gres={gres} State=UNKNOWN")
    return lines


def _partition_lines(spec: DevClusterSpec) -> list[str]:
    site = spec.layout
    return [f"PartitionName={part.name} Nodes={','.join(site.partition_nodes(part))} "
            f"Default={'YES' if part.default else 'NO'} MaxTime=INFINITE State=UP "
            f"DefCpuPerGPU={part.def_cpu_per_gpu} "
            f"DefMemPerGPU={round(part.def_mem_gb_per_gpu * 1000)}"
            for part in site.partitions]


def _accounting_lines(spec: DevClusterSpec) -> list[str]:
    """A site's accounting and priorities. Fair-share is recalculated every minute (the
    least Slurm allows) and usage halves every hour, so a test sees it within minutes.
    Job accounting uses jobacct_gather/linux (reads /proc): the cgroup gatherer needs one
    cgroup tree per slurmd, which N slurmd on one host do not have."""
    host = "slurmctld" if spec.containers else "localhost"
    return [
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={host}",
        f"AccountingStoragePort={spec.dbd_port}",
        # The munge socket for talking to slurmdbd (AuthInfo does not cover that link).
        f"AccountingStoragePass={spec.munge_socket}",
        "AccountingStorageEnforce=associations,limits,qos",
        # Each GPU type too, as a site with several should: the history then says which
        # type a job asked for (ReqTRES gres/gpu:h100), what whatif replays.
        "AccountingStorageTRES=" + ",".join(
            ["gres/gpu", *(f"gres/gpu:{t}" for t in sorted(
                {k.gpu_type for k in spec.layout.kinds if k.gpu_type}))]),
        # Keep the comment (synergy's profile token) in the history: synergy whatif reads it.
        "AccountingStoreFlags=job_comment",
        "JobAcctGatherType=jobacct_gather/linux",
        "JobAcctGatherFrequency=task=5",
        "PriorityType=priority/multifactor",
        "PriorityCalcPeriod=1",
        "PriorityDecayHalfLife=1:00:00",
        "PriorityWeightFairshare=100000",
        "PriorityWeightAge=1000",
        "PriorityWeightQOS=10000",
        "PriorityMaxAge=1-0",
    ]


def slurmdbd_conf(spec: DevClusterSpec, db_password: str) -> str:
    """slurmdbd over the cluster's own MariaDB (TCP on db_port, a password user)."""
    d = spec.state_dir
    lines = [
        "# Generated by synergy-slurm (synergy_slurm/devcluster/conf.py). Do not edit.",
        "AuthType=auth/munge",
        f"AuthInfo=socket={spec.munge_socket}",
        "DbdHost=localhost",
        f"DbdPort={spec.dbd_port}",
        "SlurmUser=root",
        f"LogFile={d}/log/slurmdbd.log",
        f"PidFile={d}/run/slurmdbd.pid",
        "DebugLevel=info",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={spec.db_port}",
        "StorageUser=slurm",
        f"StoragePass={db_password}",
        "StorageLoc=slurm_acct_db",
    ]
    if spec.plugin_dir:
        lines.append(f"PluginDir={spec.plugin_dir}")
    return "\n".join(lines) + "\n"


def gres_conf(spec: DevClusterSpec) -> str:
    """Fake GPUs: Slurm drops a GPU that has no File=, plain files are enough."""
    lines = ["AutoDetect=off"]
    for kind in spec.layout.kinds:
        typed = f" Type={kind.gpu_type}" if kind.gpu_type else ""
        lines.append(f"NodeName={','.join(kind.node_names)} Name=gpu{typed} "
                     f"File={spec.gpu_dir}/gpu[0-{kind.gpus - 1}]")
    return "\n".join(lines) + "\n"


def memory_cgroups() -> str:
    """Why this machine cannot give the cluster memory limits that bite ("" when it can):
    task/cgroup needs the memory controller, cgroup v1's mounted and writable, or v2's
    enabled at the root."""
    v1 = Path("/sys/fs/cgroup/memory")
    if (v1 / "memory.limit_in_bytes").exists():
        return "" if os.access(v1, os.W_OK) else f"{v1} is not writable"
    controllers = Path("/sys/fs/cgroup/cgroup.controllers")
    if controllers.exists():
        return ("" if "memory" in controllers.read_text().split()
                else "cgroup v2 without the memory controller")
    return "no cgroup memory controller mounted at /sys/fs/cgroup"


def cgroup_conf(spec: DevClusterSpec) -> str:
    # slurmd loads a cgroup plugin even with proctrack/linuxproc and task/none; keep it
    # from touching systemd (there is none in a container or a sandbox).
    text = "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"
    if spec.enforce_memory:
        # A job's memory is its allocation, swap included (no swap beyond it); cores and
        # devices are not constrained (fake nodes, fake GPU files).
        text += ("ConstrainRAMSpace=yes\nAllowedRAMSpace=100\nConstrainSwapSpace=yes\n"
                 "AllowedSwapSpace=0\nConstrainCores=no\nConstrainDevices=no\n")
    return text


def write_config(spec: DevClusterSpec) -> list[Path]:
    """Write every config file (and the fake GPU files) under the state directory."""
    spec.etc.mkdir(parents=True, exist_ok=True)
    spec.gpu_dir.mkdir(parents=True, exist_ok=True)
    for i in range(max(k.gpus for k in spec.layout.kinds)):
        (spec.gpu_dir / f"gpu{i}").touch()
    out = []
    for name, text in (("slurm.conf", slurm_conf(spec)), ("gres.conf", gres_conf(spec)),
                       ("cgroup.conf", cgroup_conf(spec))):
        path = spec.etc / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(path)
        out.append(path)
    return out
