"""What the core knows about a job: its GPUs, its profile and how far it has come."""

from __future__ import annotations

from dataclasses import dataclass

from .profile import Profile
from .resources import PerGpu


@dataclass(frozen=True)
class JobSpec:
    """A runnable GPU job as the core sees it.

    Times are seconds on the driver's clock (simulated or wall). ``duration_s`` and
    ``remaining_s`` are measured at the job's proportional speed, which is what SRTF and FTF
    order by. ``profile`` is None when the job's profile is unknown: such a job is only ever
    given its proportional share.
    """

    id: int
    gpus: int
    submitted: float = 0.0
    duration_s: float = 0.0
    remaining_s: float = 0.0
    # What ``remaining_s`` of a running job comes from, in words (its progress reports, its
    # key's history, its time limit): a requeue's reason names it.
    remaining_from: str = ""
    attained_s: float = 0.0
    profile: Profile | None = None
    profile_key: str = ""
    user: str = ""
    # Slurm's priority for the job (higher starts first), where the driver knows it; 0 for
    # a held job (Slurm computes its priority on release) and in the simulator.
    priority: int = 0
    # The largest per-GPU share the site's limits let this job start with (QOS and
    # association limits on cores and memory), never below the proportional share; None
    # where nothing limits it but the servers. The core never plans the job past it.
    limit: PerGpu | None = None
    # How Slurm places the GPUs: 0 where Slurm chooses the nodes (``--gpus=N``: on one
    # node if one has room, the fullest such, else spread over several); k for a request
    # per node (``--gres=gpu:k``, ``--gpus-per-node=k``): exactly gpus / k nodes, k GPUs
    # on each.
    gpus_per_node: int = 0
    # The least memory per GPU (GB) a running job may be lowered to: what it was measured
    # to use at its peak, with headroom. A limit that bites (cgroups) kills a job lowered
    # below what it really uses, whatever its profile says it needs.
    mem_floor_gb: float = 0.0
    # Facts about a running job that only its driver knows (the controller from Slurm, the
    # simulator from its trace): whether it may be requeued into a larger shape (it opted
    # in, Slurm may restart it, the time it has left is known) and whether its memory may
    # be lowered in place now (Slurm can resize it: no resize in flight, the site allows
    # it). What the core then requeues or shrinks is one rule for every driver
    # (core.round.reshape_candidates).
    may_requeue: bool = False
    may_shrink: bool = False

    def __post_init__(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"job {self.id}: a GPU job needs at least one GPU, got {self.gpus}")
        if self.gpus_per_node < 0 or (self.gpus_per_node
                                      and self.gpus % self.gpus_per_node):
            raise ValueError(f"job {self.id}: {self.gpus} GPUs are not whole nodes of "
                             f"{self.gpus_per_node}")
