"""The result of one planning round: who runs where, with how much, and who does not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .resources import PerGpu, Resources


@dataclass(frozen=True)
class Allocation:
    """One admitted job: every GPU of it gets the same per-GPU share (Slurm's model).

    ``placement`` lists (server name, GPUs on that server). ``speedup`` is the job's
    throughput relative to its proportional share. ``how`` says which step gave the shape
    (``proportional``, ``ideal``, ``capped``, ``self-downgrade``, ``interpolated``,
    ``peer-downgraded``, ``opt``).
    """

    job_id: int
    gpus: int
    share: PerGpu
    placement: tuple[tuple[str, int], ...]
    speedup: float
    how: str = ""

    @property
    def total(self) -> Resources:
        return self.share.times(self.gpus)

    def on(self, server: str) -> Resources:
        for name, n in self.placement:
            if name == server:
                return self.share.times(n)
        return Resources()

    @property
    def servers(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.placement)


@dataclass(frozen=True)
class Plan:
    """All allocations of one round, in admission order, and the reasons for the rest."""

    allocations: tuple[Allocation, ...]
    skipped: Mapping[int, str] = field(default_factory=dict)
    allocator: str = ""
    policy: str = ""
    bound: float | None = None
    fallback: str | None = None

    def get(self, job_id: int) -> Allocation | None:
        for a in self.allocations:
            if a.job_id == job_id:
                return a
        return None

    def by_job(self) -> dict[int, Allocation]:
        return {a.job_id: a for a in self.allocations}

    @property
    def total_speedup(self) -> float:
        """Total normalised throughput: the sum of the admitted jobs' speedups."""
        return sum(a.speedup for a in self.allocations)

    def used_on(self, server: str) -> Resources:
        tot = Resources()
        for a in self.allocations:
            tot = tot + a.on(server)
        return tot
