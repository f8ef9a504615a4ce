"""The admission loop every allocator shares, and the allocator interface.

Jobs arrive already ordered by a policy. Each is offered GPUs in turn; a job that does not
fit is skipped with its reason and later jobs are still tried (backfill). Nothing here
raises for "does not fit": the job is simply absent from the plan.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from ..job import JobSpec
from ..ledger import Ledger
from ..plan import Plan
from ..resources import ClusterState


class Allocator(ABC):
    """Turns policy-ordered jobs and a cluster into a :class:`Plan`."""

    name: str = "allocator"
    # How GPUs are chosen (ledger.PLACEMENTS); set by get_allocator(..., placement=...).
    placement: str = "fullest"
    # Whether running jobs may be requeued into idle resources (core.requeue): every Synergy
    # allocator; not the GPU-proportional baseline.
    grows_running: bool = True

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        return self._allocate_then(jobs, cluster, None)

    def _allocate_then(self, jobs: Sequence[JobSpec], cluster: ClusterState,
                       finish: Callable[[Ledger], None] | None) -> Plan:
        ledger = Ledger(cluster, self.placement)
        skipped: dict[int, str] = {}
        for job in admissible(jobs, ledger, skipped):
            reason = self.admit(job, ledger)
            if reason is not None:
                skipped[job.id] = reason
        if finish is not None:
            finish(ledger)
        return ledger.to_plan(skipped, self.name)

    @abstractmethod
    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        """Place ``job`` in ``ledger``; return None on success or why it was not placed."""


def admissible(jobs: Sequence[JobSpec], ledger: Ledger, skipped: dict[int, str]):
    """Yield the jobs that can be offered GPUs, recording why the others cannot.

    The caller places each yielded job (or not) before the next is considered, so the free
    GPU count seen here is the one left by the jobs before it. Duplicated job ids are
    skipped after the first: a plan holds a job once.
    """
    total = sum(s.capacity.gpus for s in ledger.cluster.servers)
    seen: set[int] = set()
    for job in jobs:
        if job.id in seen:
            skipped.setdefault(job.id, "duplicate job id in this round")
            continue
        seen.add(job.id)
        reason = gpu_shortfall(job.gpus, total, ledger.free_gpus)
        if reason is None:
            yield job
        else:
            skipped[job.id] = reason


def gpu_shortfall(gpus: int, total: int, free: int) -> str | None:
    if gpus > total:
        return f"needs {gpus} GPUs, the cluster has {total}"
    if gpus > free:
        return f"needs {gpus} GPUs, {free} free this round"
    return None
