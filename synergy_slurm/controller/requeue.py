"""Running jobs described to the core's round planner, and its requeues and memory
shrinks made actions.

Which running jobs may be requeued into a larger shape, and when it pays, and which hold
memory their profiles do not need, is the core's decision
(:func:`synergy_slurm.core.reshape_candidates`, then :func:`synergy_slurm.core.plan_round`);
here each running job is described with what it holds now and the facts only Slurm tells
(``may_requeue``: opted in, restartable, a time limit; ``may_shrink``: its use measured and
no resize in flight), and each decision becomes an action.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from ..core import Allocation, JobSpec, PerGpu, RequeueRule
from ..core.plan import How
from ..core.requeue import Requeue
from ..core.shrink import Shrink
from ..slurm.model import SlurmJob
from ..vocabulary import MB_PER_GB
from .actions import REQUEUE, SHRINK, Action, current_shape, to_shape
from .classify import UNKNOWN_REMAINING_S, requeue_ok


def running_jobs(running: Iterable[tuple[SlurmJob, JobSpec]], fair: PerGpu,
                 floors: Mapping[int, float]) -> list[tuple[JobSpec, Allocation]]:
    """Each running job with what it holds now and what Slurm says of it: it may be
    requeued when it opted in and Slurm may restart it (``classify.requeue_ok``) and its
    time limit tells how long it has left (else its gain is unknown); it may be shrunk when
    its use was measured (``floors``: job id -> the least memory per GPU it may be lowered
    to) and no resize is in flight (Slurm refuses a second one until the first is done)."""
    return held_now([(j, replace(s, may_requeue=requeue_ok(j)
                                 and s.remaining_s < UNKNOWN_REMAINING_S,
                                 may_shrink=j.job_id in floors and not j.resizing,
                                 mem_floor_gb=floors.get(j.job_id, 0.0)))
                     for j, s in running], fair)


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
        source = f" by {rq.left_from}" if rq.left_from else ""
        out.append(Action(job.job_id, REQUEUE, current_shape(job, fair),
                          to_shape(rq.demand.share),
                          f"{rq.left_s:.0f} s left{source}: {rq.demand.speedup:.2f}x as fast "
                          f"as proportional, it ends {rq.saves_s:.0f} s sooner (a restart "
                          f"costs {rule.restart_cost_s:.0f} s)", job.user))
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
