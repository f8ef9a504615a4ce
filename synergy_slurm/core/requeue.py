"""Requeueing running jobs into idle resources, only when the restart pays.

Where running jobs keep their shape (Slurm cannot reshape a running job; it can only requeue
it), cores and memory freed by finished jobs would sit idle while the jobs that run lowered
keep running slowly. A job whose profile says more helps may be requeued with the best
share that now fits on its own servers, if the time that saves on its remaining work is
larger than what a restart costs. The controller sends the result as requeues; the
simulator applies it to model the controller. ``round.plan_round`` is the one caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .demand import Demand, ideal_demand, intermediate_points, server_kinds
from .job import JobSpec
from .plan import Allocation, Plan
from .resources import MEM_EPS, ClusterState, PerGpu


@dataclass(frozen=True)
class Requeue:
    """Restart ``job_id`` with ``demand``'s share: its remaining work ends ``saves_s``
    sooner than at its current share (before the restart's cost, which it exceeds)."""

    job_id: int
    demand: Demand
    saves_s: float
    left_s: float = 0.0          # its remaining work at its current share (wall seconds)
    left_from: str = ""          # what says so (JobSpec.remaining_from)


def free_after(cluster: ClusterState, plan: Plan | None) -> dict[str, list[float]]:
    """Free [cores, GB, GPUs] per server after the reservations and a plan's allocations."""
    free = {s.name: [float(r.cpus), r.mem_gb, float(r.gpus)]
            for s, r in zip(cluster.servers, cluster.free(), strict=True)}
    for a in plan.allocations if plan else ():
        for name, n in a.placement:
            free[name][0] -= n * a.share.cpus
            free[name][1] -= n * a.share.mem_gb
            free[name][2] -= n
    return free


def room_left(free: list[float], fair: PerGpu, share: PerGpu, dc: float, dm: float,
              waiting_gpus: int) -> bool:
    """Whether a server with ``free`` [cores, GB, GPUs] can give a job ``dc`` more cores and
    ``dm`` more memory, and still leave its free GPUs, as many as jobs wait for
    (``waiting_gpus``), their proportional share in each dimension where ``share`` is above
    it (as Ledger.keep_room: cores a requeued job takes while jobs wait would strand them)."""
    cores, mem, free_gpus = free
    if cores < dc or mem + MEM_EPS < dm:
        return False
    gpus = min(free_gpus, waiting_gpus)
    if gpus <= 0:
        return True
    if dc > 0 and share.cpus > fair.cpus and cores - dc < fair.cpus * gpus:
        return False
    return not (dm > MEM_EPS and share.mem_gb > fair.mem_gb + MEM_EPS
                and mem - dm + MEM_EPS < fair.mem_gb * gpus)


def requeues(running: Sequence[tuple[JobSpec, Allocation]], cluster: ClusterState,
             plan: Plan | None, restart_cost_s: float, budget: int,
             waiting_gpus: int = 0) -> list[Requeue]:
    """At most ``budget`` requeues, in the given order (the policy's).

    ``running`` pairs each running job with what it holds now; their resources must be in
    ``cluster.reserved``. A job is requeued to the best point between its share and its
    ideal that fits in what is free on each of its servers, if its remaining work
    (``remaining_s`` at proportional speed) then ends more than ``restart_cost_s`` sooner.
    ``waiting_gpus``: GPUs that pending jobs the plan could not place wait for; the larger
    share leaves that many free GPUs on each server their proportional room.
    """
    fair = cluster.fair
    free = free_after(cluster, plan)
    kinds = server_kinds(cluster.servers)
    out: list[Requeue] = []
    for spec, alloc in running:
        if len(out) >= budget:
            break
        if spec.profile is None or any(name not in free for name, _ in alloc.placement):
            continue
        cur_speed = spec.profile.speedup(alloc.share, fair)
        here = Demand(alloc.share, cur_speed, alloc.how)
        wanted = ideal_demand(spec, fair, cluster.servers, kinds)
        for d in [wanted, *intermediate_points(spec, wanted.share, here, fair)]:
            if d.speedup <= cur_speed * (1 + 1e-6):
                continue
            dc = d.share.cpus - alloc.share.cpus
            dm = d.share.mem_gb - alloc.share.mem_gb
            if not all(room_left(free[name], fair, d.share, n * dc, n * dm, waiting_gpus)
                       for name, n in alloc.placement):
                continue
            saves = spec.remaining_s * (1 / cur_speed - 1 / d.speedup)
            if saves <= restart_cost_s:
                break  # the best point that fits does not pay; the smaller ones less so
            for name, n in alloc.placement:
                free[name][0] -= n * dc
                free[name][1] -= n * dm
            out.append(Requeue(spec.id, d, saves, spec.remaining_s / cur_speed,
                               spec.remaining_from))
            break
    return out
