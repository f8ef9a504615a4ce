"""Requeueing running jobs into a larger shape, only when it pays.

The decision is the core's (:func:`synergy_slurm.core.upgrade.upgrades`); here the running
jobs that may be requeued (opted in, not requeued within the configured interval) are
described to it with what they hold now, and its upgrades become requeue actions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core import Allocation, ClusterState, JobSpec, PerGpu, Plan
from ..core.upgrade import upgrades
from ..slurm.model import SlurmJob
from ..vocabulary import MB_PER_GB
from .actions import REQUEUE, Action, current_shape, to_shape
from .classify import UNKNOWN_REMAINING_S


@dataclass(frozen=True)
class RequeuePolicy:
    restart_cost_s: float
    min_interval_s: float
    budget: int


def requeue_upgrades(running: list[tuple[SlurmJob, JobSpec]], cluster: ClusterState,
                     plan: Plan, policy: RequeuePolicy, last_requeue: Mapping[int, float],
                     now: float) -> list[Action]:
    fair = cluster.fair
    held: list[tuple[JobSpec, Allocation]] = []
    by_id: dict[int, SlurmJob] = {}
    for job, spec in running:
        if spec.profile is None or spec.remaining_s >= UNKNOWN_REMAINING_S:
            continue   # without a profile or a time limit the gain is unknown
        if now - last_requeue.get(job.job_id, -1e18) < policy.min_interval_s:
            continue
        placement = tuple((a.node, a.gpus) for a in job.alloc if a.gpus > 0)
        if not placement:
            continue
        cur = current_shape(job, fair)
        share = PerGpu(cur.cpus_per_gpu, cur.mem_per_gpu_mb / MB_PER_GB)
        held.append((spec, Allocation(job.job_id, job.gpus, share, placement,
                                      spec.profile.speedup(share, fair), "running")))
        by_id[job.job_id] = job
    out = []
    for up in upgrades(held, cluster, plan, policy.restart_cost_s, policy.budget):
        job = by_id[up.job_id]
        out.append(Action(job.job_id, REQUEUE, current_shape(job, fair),
                          to_shape(up.demand.share),
                          f"{up.demand.speedup:.2f}x share saves {up.saves_s:.0f} s "
                          f"(restart costs {policy.restart_cost_s:.0f} s)", job.user))
    return out
