"""Lowering a running job's memory to what its profile needs, in place.

A job often runs with more memory than its profile says it uses to advantage: it started
with its partition's proportional share before its profile was known, or the plan gave it
the proportional share when nothing better fitted. Where Slurm can lower a running job's
memory (26.05: downward only, the job keeps running), that memory can go to pending jobs
at no cost to the job: its throughput at the lower point is the same. Where Slurm cannot,
only a requeue would take it back, and a requeue for that alone never pays.
``round.plan_round`` is the one caller; the controller sends the result as memory updates
and the simulator applies it to its model of the controller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .job import JobSpec
from .plan import Allocation
from .profile import Profile
from .resources import MEM_EPS, ClusterState, PerGpu, Resources

# Below this much freed per GPU a shrink is not worth a Slurm update (GB).
MIN_SHRINK_GB = 1.0
SPEED_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Shrink:
    """Lower ``job_id`` to ``share`` (its cores, less memory) on the servers it holds:
    ``freed`` comes back on each, at no loss of throughput (``speedup`` is unchanged)."""

    job_id: int
    share: PerGpu
    speedup: float
    freed: tuple[tuple[str, Resources], ...]


def memory_needed(profile: Profile, share: PerGpu, fair: PerGpu) -> float:
    """The least memory per GPU, at ``share``'s cores, at which the job runs as fast as at
    ``share`` and never slower than proportional: the lowest such point of the profile's
    memory grid (throughput is linear between grid points, so no point between two grid
    values is lower and as fast), or ``share``'s own memory when none is."""
    target = max(profile.speedup(share, fair), 1.0) * (1 - SPEED_TOLERANCE)
    for m in sorted({*profile.mem_grid, fair.mem_gb}):
        if m >= share.mem_gb - MEM_EPS:
            break
        if profile.speedup(PerGpu(share.cpus, m), fair) >= target:
            return m
    return share.mem_gb


def memory_shrinks(running: Sequence[tuple[JobSpec, Allocation]], fair: PerGpu
                   ) -> list[Shrink]:
    """For each running job with a profile that holds at least ``MIN_SHRINK_GB`` per GPU
    more than :func:`memory_needed` (and than its measured floor, ``mem_floor_gb``), the
    shrink; jobs without a profile keep what they hold (nothing says what they need)."""
    out = []
    for spec, alloc in running:
        if spec.profile is None:
            continue
        need = max(memory_needed(spec.profile, alloc.share, fair), spec.mem_floor_gb)
        if alloc.share.mem_gb - need < MIN_SHRINK_GB:
            continue
        share = PerGpu(alloc.share.cpus, need)
        out.append(Shrink(spec.id, share, spec.profile.speedup(share, fair), tuple(
            (name, Resources(0, 0, (alloc.share.mem_gb - need) * n))
            for name, n in alloc.placement)))
    return out


def after_shrinks(cluster: ClusterState, shrinks: Sequence[Shrink]) -> ClusterState:
    """``cluster`` with the memory the shrinks free no longer reserved."""
    if not shrinks:
        return cluster
    back = tuple((name, Resources(0, 0, -r.mem_gb)) for s in shrinks for name, r in s.freed)
    return ClusterState(cluster.servers, cluster.reserved + back, cluster.fair)
