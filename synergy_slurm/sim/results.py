"""What a simulation returns, whichever simulator ran it."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import Allocator, Policy, get_allocator, get_policy
from .config import SimConfig


@dataclass(frozen=True)
class JobResult:
    job_id: int
    model: str
    gpus: int
    arrival: float
    start: float | None
    finish: float | None
    restarts: int

    @property
    def jct_s(self) -> float | None:
        return None if self.finish is None else self.finish - self.arrival


@dataclass
class SimResult:
    config: SimConfig
    jobs: list[JobResult]
    rounds: int
    end_s: float
    wall_s: float
    # (time, GPU, CPU, memory) fraction of the cluster allocated, one row per round.
    utilisation: list[tuple[float, float, float, float]] = field(default_factory=list)

    @property
    def makespan_s(self) -> float:
        done = [j.finish for j in self.jobs if j.finish is not None]
        first = min((j.arrival for j in self.jobs), default=0.0)
        return (max(done) - first) if done else 0.0


class SimulationCapped(ValueError):
    """A run that reached its round cap before its jobs ended: no result to report."""


def check_capped(out: SimResult, max_rounds: int) -> SimResult:
    """``out``, unless the run stopped at its cap with jobs still running."""
    left = [(j.job_id, j.start) for j in out.jobs if j.finish is None and j.start is not None]
    if out.rounds >= max_rounds and left:
        job_id, start = left[0]
        raise SimulationCapped(
            f"the simulation stopped at its cap of {max_rounds:,} rounds with {len(left)} "
            f"jobs still running (e.g. job {job_id}, started at "
            f"{start / 3600:.0f} h): a trace that long needs longer rounds")
    return out


def scheduler(config: SimConfig, keeps_room: bool = False) -> tuple[Policy, Allocator]:
    """The policy and allocator a simulation plans with (both simulators); ``keeps_room``
    for the controller model, whose running jobs cannot be lowered (Allocator.keeps_room)."""
    return get_policy(config.policy), get_allocator(config.allocator, config.placement,
                                                    config.opt_time_limit_s, keeps_room)
