"""What synergy reads from Slurm: jobs, nodes and partitions, version-independent."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..vocabulary import OWN_SHAPE, GpuRequest, synergy_tags

PENDING = "PENDING"
RUNNING = "RUNNING"
# Slurm's reasons for a pending job that waits only for nodes (or its turn).
_WAITING_REASONS = frozenset({"None", "Resources", "Priority", ""})
# Slurm's reasons for a job over a QOS or association limit on cores or memory
# (QOSMaxCpuPerUserLimit, AssocGrpMemLimit, ...).
_CORE_MEM_LIMIT_REASON = re.compile(r"^(QOS|Assoc)\w*(Cpu|Mem)\w*Limit$")


@dataclass(frozen=True)
class NodeAlloc:
    """What one job holds on one node."""

    node: str
    cpus: int
    mem_mb: int
    gpus: int


@dataclass(frozen=True)
class SlurmJob:
    """A job as Slurm reports it. GPU fields are None for jobs without GPUs.

    ``gpus_per_job`` is set for ``--gpus`` jobs, ``gpus_per_node`` for ``--gres`` /
    ``--gpus-per-node`` jobs, ``gpus_per_task`` for ``--gpus-per-task``. ``gpus`` is the
    total the job uses (known once nodes/tasks are known, or from the request).
    """

    job_id: int
    user: str
    state: str
    partition: str
    gpus: int = 0
    account: str = ""
    qos: str = ""
    gpus_per_job: int | None = None
    gpus_per_node: int | None = None
    gpus_per_task: int | None = None
    gpus_per_socket: int | None = None
    gpu_type: str | None = None
    num_nodes: int = 1
    num_tasks: int | None = None
    cpus: int = 0
    cpus_per_gpu: int | None = None
    mem_per_gpu_mb: int | None = None
    mem_per_node_mb: int | None = None
    mem_per_cpu_mb: int | None = None
    nodes: tuple[str, ...] = ()
    alloc: tuple[NodeAlloc, ...] = ()
    restarts: int = 0
    requeue: bool = False
    batch: bool = True
    held: bool = False
    priority: int = 0
    reason: str = ""
    comment: str = ""
    admin_comment: str = ""
    name: str = ""
    submit_time: int = 0
    start_time: int = 0
    array_job_id: int | None = None
    array_task_id: int | None = None
    # A pending array record stands for its tasks that have not started: how many
    # (Slurm's array_task_string counted) and how many may run at once (``%N``; 0: no cap).
    array_pending_tasks: int = 0
    array_throttle: int = 0
    het_job_id: int | None = None
    time_limit_s: int | None = None
    eligible_time: int = 0
    reservation: str = ""     # the reservation it runs in (--reservation), "" for none
    # A resize in flight (26.05 lowers a running job's memory asynchronously: its
    # allocation shows the old memory until every node has applied the new limit).
    resizing: bool = False

    @property
    def home_partition(self) -> str:
        """The partition synergy plans the job in: the first of a multi-partition request
        (``-p a,b``), as Slurm lists them."""
        return self.partition.split(",")[0]

    @property
    def tags(self) -> dict[str, str]:
        """synergy's own ``synergy.key=value`` tags in admin_comment (hook and controller)."""
        return synergy_tags(self.admin_comment)

    @property
    def held_by_synergy(self) -> bool:
        """Held by the hook and not released since (the controller clears the tag when it
        releases). An admin's hold (JobHeldAdmin) is never ours, even on a job the hook
        held: the hook's hold, like ``sbatch --hold``, shows as the user's (JobHeldUser)."""
        return (self.pending and self.priority == 0 and self.tags.get("held") == "1"
                and self.reason != "JobHeldAdmin")

    @property
    def gpu_request(self) -> GpuRequest:
        return GpuRequest(self.gpus_per_job, self.gpus_per_node, self.gpus_per_task,
                          self.gpus_per_socket, self.num_nodes, self.het_job_id is not None,
                          bool(self.reservation), self._own_shape())

    def _own_shape(self) -> str:
        """How it sets its own cores or memory, as the hook tagged it (synergy.own=KEY):
        Slurm's JSON does not show every such option on every release, and a site's
        DefMemPerCPU would make memory per CPU look asked for by every job."""
        tag = self.tags.get("own", "")
        return tag if tag in OWN_SHAPE else ""

    @property
    def pending_array(self) -> bool:
        """The record of an array's tasks that have not started (one record for them all:
        ``scontrol update/release`` on the array's id applies to every one)."""
        return self.pending and self.array_job_id is not None and self.array_task_id is None

    @property
    def waits_for_resources(self) -> bool:
        """Pending for nodes or its turn only (not held, not a dependency, not a limit)."""
        return self.pending and self.reason in _WAITING_REASONS

    @property
    def waits_on_core_or_memory_limit(self) -> bool:
        """Pending because of its QOS's or association's limit on cores or memory."""
        return self.pending and _CORE_MEM_LIMIT_REASON.match(self.reason) is not None

    @property
    def has_gpus(self) -> bool:
        return self.gpus > 0

    @property
    def pending(self) -> bool:
        return self.state == PENDING

    @property
    def running(self) -> bool:
        return self.state == RUNNING


@dataclass(frozen=True)
class SlurmNode:
    name: str
    cpus: int
    mem_mb: int
    gpus: int
    alloc_cpus: int = 0
    alloc_mem_mb: int = 0
    alloc_gpus: int = 0
    state: str = ""
    partitions: tuple[str, ...] = ()
    gpu_type: str | None = None     # "a100" for Gres=gpu:a100:4; None for untyped GPUs
    reservation: str = ""           # the active reservation it is in (23.02+ shows it)
    # What slurmd last reported: the host's 1-minute load average (None where not shown)
    # and the host it runs on (several nodes of a test cluster may share one).
    load: float | None = None
    host: str = ""

    @property
    def usable(self) -> bool:
        """Up and schedulable: not down, drained, failing or unreachable."""
        bad = ("down", "drain", "fail", "not_responding", "unknown", "future", "inval",
               "maint", "reboot", "power")
        s = self.state.lower()
        return not any(b in s for b in bad)

    @property
    def reserved(self) -> bool:
        """In an active reservation (state flag RESERVED, or a reservation named): only
        jobs that ask for the reservation run there."""
        return bool(self.reservation) or "reserved" in self.state.lower()


@dataclass(frozen=True)
class SlurmPartition:
    name: str
    nodes: tuple[str, ...] = ()
    def_cpu_per_gpu: int | None = None
    def_mem_per_gpu_mb: int | None = None
    default: bool = False
    # Partition limits on what one job may use per node (None: UNLIMITED).
    max_cpus_per_node: int | None = None
    max_mem_per_node_mb: int | None = None


@dataclass(frozen=True)
class Skipped:
    """A record Slurm returned that we could not use, and why (logged, never fatal)."""

    what: str
    reason: str


@dataclass(frozen=True)
class Snapshot:
    """One batched read of the cluster."""

    jobs: tuple[SlurmJob, ...]
    nodes: tuple[SlurmNode, ...]
    partitions: tuple[SlurmPartition, ...]
    version: str = ""
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)

    def job(self, job_id: int) -> SlurmJob | None:
        for j in self.jobs:
            if j.job_id == job_id:
                return j
        return None
