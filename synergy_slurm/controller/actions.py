"""Reconcile: compare the plan with what Slurm has, and produce the fewest actions.

- A pending job the hook held (never scheduled, so Slurm can still lower it): give it the
  planned shape and release it when the plan runs it this round; keep it held otherwise.
- A pending job Slurm has already scheduled: raise its cores; lower them only on a release
  that honours it (``Release.lowers_pending``: 26.05, not 22.05, which ignores it); memory
  follows when the cores are not lowered.
- A running job that holds more memory than its profile needs: lowered in place where
  Slurm can (26.05, ``Release.lowers_running_memory``), so pending jobs get the rest.
- A running job: requeued into a larger shape only when it opted in, the gain over its
  remaining time beats the restart cost, it was not requeued recently and the round's
  budget allows (see :func:`synergy_slurm.core.plan_round`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core import PerGpu, Plan
from ..decide import PendingView, Step, reconcile
from ..slurm.model import SlurmJob
from ..slurm.writer import Shape
from ..vocabulary import MB_PER_GB

SHAPE_RELEASE = str(Step.SHAPE_RELEASE)
RELEASE = str(Step.RELEASE)
RAISE = str(Step.RAISE)
LOWER = str(Step.LOWER)
REQUEUE = "requeue"
SHRINK = "shrink-memory"   # a running job's memory lowered in place (26.05)
CANNOT = str(Step.CANNOT)   # a wanted change Slurm would ignore; recorded, not sent


@dataclass(frozen=True)
class Action:
    job_id: int
    kind: str
    before: Shape | None
    after: Shape | None
    reason: str
    user: str = ""

    @property
    def mutating(self) -> bool:
        return self.kind in (SHAPE_RELEASE, RELEASE, RAISE, LOWER, REQUEUE, SHRINK)

    def as_dict(self) -> dict[str, Any]:
        def shape(s: Shape | None) -> dict[str, Any] | None:
            return None if s is None else {"cpus_per_gpu": s.cpus_per_gpu,
                                           "mem_per_gpu_mb": s.mem_per_gpu_mb}
        return {"job_id": self.job_id, "action": self.kind, "before": shape(self.before),
                "after": shape(self.after), "reason": self.reason}


def to_shape(share: PerGpu) -> Shape:
    return Shape(int(share.cpus), max(1, round(share.mem_gb * MB_PER_GB)))


def current_shape(job: SlurmJob, fair: PerGpu) -> Shape:
    """The shape the job has or will get: its own request, else the partition defaults; a
    running job's memory is what its allocation holds (lowered in place on 26.05, where
    the request still shows the old value)."""
    c = job.cpus_per_gpu or fair.cpus
    held = [a for a in job.alloc if a.gpus > 0 and a.mem_mb > 0] if job.running else []
    if held:
        m = min(a.mem_mb // a.gpus for a in held)
    elif job.mem_per_gpu_mb:
        m = job.mem_per_gpu_mb
    elif job.mem_per_node_mb and job.gpus:
        per_node = job.gpus_per_node or job.gpus
        m = max(1, job.mem_per_node_mb // max(1, per_node))
    else:
        m = round(fair.mem_gb * MB_PER_GB)
    return Shape(int(c), int(m))


def reconcile_pending(jobs: list[SlurmJob], plan: Plan, fair: PerGpu,
                      can_lower: bool = False, unknown: frozenset[int] = frozenset(),
                      requeued: frozenset[int] = frozenset()) -> list[Action]:
    """The actions that bring ``jobs`` to ``plan``, by the one reconcile rule
    (``decide.reconcile``, which the controller model applies too). A job in ``unknown``
    (no profile) keeps the shape it has (``decide.Change.RELEASE``); one in ``requeued``
    (synergy requeued it, it waits to run again) is not lowered."""
    planned = plan.by_job()
    out: list[Action] = []
    for job in jobs:
        alloc = planned.get(job.job_id)
        if alloc is None:
            continue
        before = current_shape(job, fair)
        view = PendingView(job.held_by_synergy, share_of(before), job.cpus_per_gpu is not None,
                           job.job_id in unknown, job.job_id in requeued)
        got = reconcile(view, alloc.share, can_lower)
        if got is None:
            continue
        after = before if view.unknown else to_shape(got.after)
        why = ("profile unknown: released with the shape it has" if view.unknown
               else f"{alloc.how} share, speedup {alloc.speedup:.2f}x")
        if got.step is Step.CANNOT:
            why = ("lowering the cores of a job Slurm already scheduled is ignored by this "
                   "Slurm release; left as submitted")
        out.append(Action(job.job_id, str(got.step), before, after, why, job.user))
    return out


def share_of(shape: Shape) -> PerGpu:
    """A shape as the core's per-GPU share (cores, GB)."""
    return PerGpu(shape.cpus_per_gpu, shape.mem_per_gpu_mb / MB_PER_GB)
