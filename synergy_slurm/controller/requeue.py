"""Running jobs described to the core's round planner, and its requeues made actions.

Which running jobs may be requeued into a larger shape, and when it pays, is the core's
decision (:func:`synergy_slurm.core.plan_round`); here each running job that may be
requeued (opted in, with a profile and a time limit) is described with what it holds now,
and each requeue the core chose becomes an action.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..core import Allocation, JobSpec, PerGpu, RequeueRule
from ..core.requeue import Requeue
from ..slurm.model import SlurmJob
from ..vocabulary import MB_PER_GB
from .actions import REQUEUE, Action, current_shape, to_shape
from .classify import UNKNOWN_REMAINING_S


def holdings(running: Iterable[tuple[SlurmJob, JobSpec]], fair: PerGpu
             ) -> list[tuple[JobSpec, Allocation]]:
    """Each running job whose gain from a requeue can be known, with what it holds now
    (its per-GPU share and its GPUs per node); the others are left out."""
    out = []
    for job, spec in running:
        if spec.profile is None or spec.remaining_s >= UNKNOWN_REMAINING_S:
            continue   # without a profile or a time limit the gain is unknown
        placement = tuple((a.node, a.gpus) for a in job.alloc if a.gpus > 0)
        if not placement:
            continue
        cur = current_shape(job, fair)
        share = PerGpu(cur.cpus_per_gpu, cur.mem_per_gpu_mb / MB_PER_GB)
        out.append((spec, Allocation(job.job_id, job.gpus, share, placement,
                                     spec.profile.speedup(share, fair), "running")))
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
