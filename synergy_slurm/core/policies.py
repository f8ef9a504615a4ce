"""Base policies: the order in which jobs are offered GPUs (ties by arrival, then id).

``slurm`` is the order Slurm's own scheduler tries jobs in within a partition: by the
priority it computed (multifactor: fair-share, age, QOS, ...), higher first, then by
submission time, then by job id (job_scheduler.c's queue sort). Planning in that order keeps
the plan from counting on a job that Slurm will not start next.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .job import JobSpec


@dataclass(frozen=True)
class Policy:
    """Orders jobs by an ascending key computed at time ``now``."""

    name: str
    key: Callable[[JobSpec, float], float]

    def order(self, jobs: Iterable[JobSpec], now: float) -> list[JobSpec]:
        return sorted(jobs, key=lambda j: (self.key(j, now), j.submitted, j.id))


def _slurm(job: JobSpec, now: float) -> float:
    return -float(job.priority)


def _fifo(job: JobSpec, now: float) -> float:
    return job.submitted


def _srtf(job: JobSpec, now: float) -> float:
    return job.remaining_s


def _las(job: JobSpec, now: float) -> float:
    return job.attained_s * job.gpus


def _ftf(job: JobSpec, now: float) -> float:
    """Finish-time fairness as the reference orders it (ascending, SYNERGY.md)."""
    ideal = job.duration_s if job.duration_s > 0 else 1.0
    return (now - job.submitted + job.remaining_s) / ideal


POLICIES: dict[str, Policy] = {
    "slurm": Policy("slurm", _slurm),
    "fifo": Policy("fifo", _fifo),
    "srtf": Policy("srtf", _srtf),
    "las": Policy("las", _las),
    "ftf": Policy("ftf", _ftf),
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name.lower()]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
