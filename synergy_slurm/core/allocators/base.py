"""The allocator interface, and the admission loop of the allocators that admit.

Jobs arrive already ordered by a policy. An allocator turns them into a plan; those that
admit (all but OPT, which solves for every job at once) offer each job GPUs in turn: a job
that does not fit is skipped with its reason and later jobs are still tried (backfill).
Nothing here raises for "does not fit": the job is simply absent from the plan.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence

from ..job import JobSpec
from ..ledger import Ledger
from ..plan import Plan
from ..resources import ClusterState


class Allocator(ABC):
    """Turns policy-ordered jobs and a cluster into a :class:`Plan`."""

    name: str = "allocator"
    # How GPUs are chosen (ledger.PLACEMENTS); set by get_allocator(..., placement=...).
    placement: str = "fullest"
    # Whether running jobs are reshaped to what they need: requeued into idle resources
    # (core.requeue) and their unused memory lowered in place (core.shrink). Every Synergy
    # allocator; not the GPU-proportional baseline, which gives every job its share.
    reshapes_running: bool = True

    @abstractmethod
    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        """The plan for ``jobs`` (in policy order) on ``cluster``."""


class AdmittingAllocator(Allocator):
    """An allocator that admits jobs one at a time, in policy order."""

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        ledger = Ledger(cluster, self.placement)
        skipped: dict[int, str] = {}
        for job in admissible(jobs, ledger.cluster, lambda: ledger.free_gpus, skipped):
            reason = self.admit(job, ledger)
            if reason is not None:
                skipped[job.id] = reason
        self.finish(ledger)
        return ledger.to_plan(skipped, self.name)

    @abstractmethod
    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        """Place ``job`` in ``ledger``; return None on success or why it was not placed."""

    def finish(self, ledger: Ledger) -> None:
        """After every job was offered its GPUs (nothing by default)."""


def admissible(jobs: Sequence[JobSpec], cluster: ClusterState, free_gpus: Callable[[], int],
               skipped: dict[int, str]) -> Iterator[JobSpec]:
    """Yield the jobs that can be offered GPUs, recording why the others cannot.

    ``free_gpus`` is asked before each job: the caller places each yielded job (or counts
    it as placed) before the next is considered, so the count is the one left by the jobs
    before it. Duplicated job ids are skipped after the first: a plan holds a job once.
    """
    total = sum(s.capacity.gpus for s in cluster.servers)
    seen: set[int] = set()
    for job in jobs:
        if job.id in seen:
            skipped.setdefault(job.id, "duplicate job id in this round")
            continue
        seen.add(job.id)
        reason = gpu_shortfall(job.gpus, total, free_gpus())
        if reason is None:
            yield job
        else:
            skipped[job.id] = reason


def admitted_at_once(jobs: Sequence[JobSpec], cluster: ClusterState, free_gpus: int,
                     skipped: dict[int, str]) -> list[JobSpec]:
    """The jobs an allocator that places all at once (OPT) may consider: each admissible
    one counted against the ``free_gpus`` left by the jobs before it."""
    left = [free_gpus]
    out = []
    for job in admissible(jobs, cluster, lambda: left[0], skipped):
        out.append(job)
        left[0] -= job.gpus
    return out


def gpu_shortfall(gpus: int, total: int, free: int) -> str | None:
    if gpus > total:
        return f"needs {gpus} GPUs, the cluster has {total}"
    if gpus > free:
        return f"needs {gpus} GPUs, {free} free this round"
    return None
