"""Running jobs described to the core's round planner, and its requeues and memory
shrinks made actions.

Which running jobs may be requeued into a larger shape, and when it pays, and which hold
memory their profiles do not need, is the core's decision
(:func:`synergy_slurm.core.plan_round`); here each running job that may be requeued
(opted in, with a profile and a time limit) or shrunk (a profile, the same GPUs on each
node) is described with what it holds now, and each decision becomes an action.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..core import Allocation, JobSpec, PerGpu, RequeueRule
from ..core.plan import How
from ..core.requeue import Requeue
from ..core.shrink import Shrink
from ..slurm.model import SlurmJob
from ..vocabulary import MB_PER_GB
from .actions import REQUEUE, SHRINK, Action, current_shape, to_shape
from .classify import UNKNOWN_REMAINING_S


def holdings(running: Iterable[tuple[SlurmJob, JobSpec]], fair: PerGpu
             ) -> list[tuple[JobSpec, Allocation]]:
    """Each running job whose gain from a requeue can be known, with what it holds now
    (its per-GPU share and its GPUs per node); the others are left out."""
    # Without a time limit the gain is unknown.
    return held_now([(j, s) for j, s in running if s.remaining_s < UNKNOWN_REMAINING_S],
                    fair)


def shrinkable(running: Iterable[tuple[SlurmJob, JobSpec]], fair: PerGpu
               ) -> list[tuple[JobSpec, Allocation]]:
    """Each running job whose memory may be lowered in place, with what it holds now: one
    with the same GPUs on each of its nodes (Slurm sets a running job's memory per node),
    and no resize in flight (Slurm refuses a second one until the first is done)."""
    return held_now([(j, s) for j, s in running
                     if not j.resizing and len({a.gpus for a in j.alloc if a.gpus > 0}) == 1],
                    fair)


def held_now(running: Iterable[tuple[SlurmJob, JobSpec]], fair: PerGpu
             ) -> list[tuple[JobSpec, Allocation]]:
    """Each running job with a profile and what it holds now (its per-GPU share and its
    GPUs per node); jobs without a profile are left out (nothing says what they gain)."""
    out = []
    for job, spec in running:
        if spec.profile is None:
            continue
        placement = tuple((a.node, a.gpus) for a in job.alloc if a.gpus > 0)
        if not placement:
            continue
        cur = current_shape(job, fair)
        share = PerGpu(cur.cpus_per_gpu, cur.mem_per_gpu_mb / MB_PER_GB)
        out.append((spec, Allocation(job.job_id, job.gpus, share, placement,
                                     spec.profile.speedup(share, fair), How.RUNNING)))
    return out


def requeue_actions(requeues: Iterable[Requeue], jobs: Mapping[int, SlurmJob], fair: PerGpu,
                    rule: RequeueRule) -> list[Action]:
    out = []
    for rq in requeues:
        job = jobs[rq.job_id]
        out.append(Action(job.job_id, REQUEUE, current_shape(job, fair),
                          to_shape(rq.demand.share),
                          f"{rq.demand.speedup:.2f}x share saves {rq.saves_s:.0f} s "
                          f"(restart costs {rule.restart_cost_s:.0f} s)", job.user))
    return out


def shrink_actions(shrinks: Iterable[Shrink], jobs: Mapping[int, SlurmJob], fair: PerGpu
                   ) -> list[Action]:
    out = []
    for sh in shrinks:
        job = jobs[sh.job_id]
        before = current_shape(job, fair)
        out.append(Action(job.job_id, SHRINK, before, to_shape(sh.share),
                          f"its profile runs as fast ({sh.speedup:.2f}x) with "
                          f"{sh.share.mem_gb:g} GB per GPU: the rest goes to pending jobs",
                          job.user))
    return out
