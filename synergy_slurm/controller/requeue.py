"""Requeueing running jobs into a larger shape, only when it pays.

After the pending jobs are planned, cores and memory may be left idle on a node. A running
job there that opted in to requeue (and whose profile says more resources help) may be
restarted with the best share that fits: only if the time it saves over its remaining work
beats the restart cost, it was not requeued within the configured interval, and the
round's requeue budget is not spent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ..core import ClusterState, JobSpec, PerGpu, Plan, Profile
from ..core.demand import Demand, ideal_demand, intermediate_points
from ..slurm.model import SlurmJob
from .actions import REQUEUE, Action, current_shape, to_shape
from .classify import UNKNOWN_REMAINING_S
from .observe import MB_PER_GB


@dataclass(frozen=True)
class RequeuePolicy:
    restart_cost_s: float
    min_interval_s: float
    budget: int


def leftover(cluster: ClusterState, plan: Plan) -> dict[str, list[float]]:
    """Free [cores, GB] per node after the running jobs and this round's plan."""
    free = {s.name: [float(r.cpus), r.mem_gb]
            for s, r in zip(cluster.servers, cluster.free(), strict=True)}
    for a in plan.allocations:
        for name, n in a.placement:
            free[name][0] -= n * a.share.cpus
            free[name][1] -= n * a.share.mem_gb
    return free


def requeue_upgrades(running: list[tuple[SlurmJob, JobSpec]], cluster: ClusterState,
                     plan: Plan, policy: RequeuePolicy, last_requeue: Mapping[int, float],
                     now: float, profiles: Mapping[str, Profile]) -> list[Action]:
    fair = cluster.fair
    free = leftover(cluster, plan)
    out: list[Action] = []
    for job, spec in running:
        if len(out) >= policy.budget:
            break
        if spec.profile is None or spec.remaining_s >= UNKNOWN_REMAINING_S:
            continue
        if now - last_requeue.get(job.job_id, -1e18) < policy.min_interval_s:
            continue
        cur = current_shape(job, fair)
        cur_share = PerGpu(cur.cpus_per_gpu, cur.mem_per_gpu_mb / MB_PER_GB)
        cur_speed = spec.profile.speedup(cur_share, fair)
        per_node = {a.node: a.gpus for a in job.alloc if a.gpus > 0}
        if not per_node or any(n not in free for n in per_node):
            continue
        wanted = ideal_demand(spec, fair, cluster.servers)
        here = Demand(cur_share, cur_speed, "running")
        for d in [wanted, *intermediate_points(spec, wanted.share, here, fair)]:
            if d.speedup <= cur_speed * 1.0001:
                continue
            dc = d.share.cpus - cur_share.cpus
            dm = d.share.mem_gb - cur_share.mem_gb
            if not all(free[n][0] >= g * dc and free[n][1] + 1e-6 >= g * dm
                       for n, g in per_node.items()):
                continue
            gain = spec.remaining_s * (1 - cur_speed / d.speedup)
            if gain <= policy.restart_cost_s:
                break  # the best that fits does not pay; smaller ones pay even less
            for n, g in per_node.items():
                free[n][0] -= g * dc
                free[n][1] -= g * dm
            out.append(Action(job.job_id, REQUEUE, cur, to_shape(d.share),
                              f"{d.speedup / cur_speed:.2f}x faster saves {gain:.0f} s of "
                              f"{spec.remaining_s:.0f} s left (restart costs "
                              f"{policy.restart_cost_s:.0f} s)", job.user))
            break
    return out
