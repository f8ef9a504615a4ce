"""The result of one planning round: who runs where, with how much, and who does not."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .resources import PerGpu, Resources


class How(StrEnum):
    """Which step gave a job its shape. A string (the audit log, the state database and
    ``synergy plan --json`` show the value); the simulator reads some of them."""

    PROPORTIONAL = "proportional"
    IDEAL = "ideal"                      # its ideal share
    CAPPED = "capped"                    # its ideal share, cut to what one server has
    SELF_DOWNGRADE = "self-downgrade"    # lowered by TUNE to fit
    INTERPOLATED = "interpolated"        # a grid point between ideal and proportional
    PEER_DOWNGRADED = "peer-downgraded"  # lowered to let a later job in
    OPT = "opt"                          # chosen by OPT's LP
    SHRUNK = "shrunk"                    # its unused memory lowered while it runs
    RUNNING = "running"                  # as it runs now (a requeue's starting point)
    SLURM = "slurm"                      # as Slurm started it (the replays' model of Slurm)
    UNSET = ""


@dataclass(frozen=True)
class Allocation:
    """One admitted job: every GPU of it gets the same per-GPU share (Slurm's model).

    ``placement`` lists (server name, GPUs on that server). ``speedup`` is the job's
    throughput relative to its proportional share. ``how`` says which step gave the shape.
    """

    job_id: int
    gpus: int
    share: PerGpu
    placement: tuple[tuple[str, int], ...]
    speedup: float
    how: How = How.UNSET

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

