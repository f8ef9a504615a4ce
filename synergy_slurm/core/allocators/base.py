"""The allocator interface, and the admission loop of the allocators that admit.

Jobs arrive already ordered by a policy. An allocator turns them into a plan; those that
admit (all but OPT, which solves for every job at once) offer each job GPUs in turn: a job
that does not fit is skipped with its reason and later jobs are still tried (backfill).
Nothing here raises for "does not fit": the job is simply absent from the plan.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence

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
    # Whether a share above the proportional one must leave the other free GPUs of its
    # servers their proportional room, for as many as jobs wait for (Ledger.keep_room):
    # set where running jobs cannot be lowered (the controller, and the simulator's model
    # of it), not in the paper's rounds. Honoured by the allocators that admit (tune,
    # greedy, tune-ref); OPT and TUNE+ plan the whole queue at once.
    keeps_room: bool = False

    @abstractmethod
    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        """The plan for ``jobs`` (in policy order) on ``cluster``."""

    def room_kept(self, cluster: ClusterState) -> tuple[float, float] | None:
        """The cores and GB per free GPU a share above the proportional one leaves on its
        servers (Ledger.keep_room), or None where running jobs can be lowered later."""
        return (float(cluster.fair.cpus), cluster.fair.mem_gb) if self.keeps_room else None


class AdmittingAllocator(Allocator):
    """An allocator that admits jobs one at a time, in policy order."""

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        ledger = Ledger(cluster, self.placement, self.room_kept(cluster))
        skipped: dict[int, str] = {}
        waiting = Waiting(jobs, skipped)
        for job in admissible(jobs, ledger.cluster, lambda: ledger.free_gpus, skipped):
            ledger.waiting_gpus = waiting.besides(job)
            reason = self.admit(job, ledger)
            if reason is not None:
                skipped[job.id] = reason
        ledger.waiting_gpus = waiting.besides(None)
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


class Waiting:
    """GPUs the jobs of a round still wait for while one is offered its own: those after
    it in order, and those before it that found no room (Ledger.waiting_gpus: room is kept
    for no more free GPUs than that; with nothing waiting, on a draining cluster, a job
    takes all it can use)."""

    def __init__(self, jobs: Sequence[JobSpec], skipped: Mapping[int, str]) -> None:
        self._skipped = skipped
        self._gpus = {j.id: j.gpus for j in jobs}
        self._after: dict[int, int] = {}
        total = 0
        for j in reversed(jobs):
            self._after[j.id] = total
            total += j.gpus
        self._seen: set[int] = set()
        self._skipped_gpus = 0

    def besides(self, job: JobSpec | None) -> int:
        """Waiting GPUs when ``job`` is offered its own (None: after the last job)."""
        for jid in self._skipped.keys() - self._seen:
            self._seen.add(jid)
            self._skipped_gpus += self._gpus.get(jid, 0)
        return self._skipped_gpus + (self._after.get(job.id, 0) if job is not None else 0)


def gpu_shortfall(gpus: int, total: int, free: int) -> str | None:
    if gpus > total:
        return f"needs {gpus} GPUs, the cluster has {total}"
    if gpus > free:
        return f"needs {gpus} GPUs, {free} free this round"
    return None
