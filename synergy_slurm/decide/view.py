"""The core's view of a job (``core.JobSpec``), built by one function for both drivers: the
controller from Slurm's record, the controller model from its simulated job.

Its time left (what SRTF and FTF order by, and what a requeue is worth) comes from the best
source the driver has: the job's own progress reports, else its key's typical run where it
has not run past it, else its time limit less what it has run, else what the driver knows
otherwise (the controller: a week; the model: the work it has left). Its duration is its
time limit where it has one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import JobSpec, PerGpu, Profile


@dataclass(frozen=True)
class Left:
    """What says how long a running job has left, besides its time limit: the wall seconds
    its own progress reports give at its current speed (inf: it said how far it goes, not
    yet how fast), the typical run of its key's earlier jobs (seconds at the proportional
    speed, and how many), and its current speed (its profile's speedup at its share)."""

    progress_s: float | None = None
    typical_s: float | None = None
    typical_jobs: int = 0
    speed: float = 1.0


def time_left(limit_s: float | None, elapsed_s: float, left: Left | None,
              otherwise_s: float, otherwise_why: str = "no time limit"
              ) -> tuple[float, str]:
    """The seconds a job has left at the proportional speed, and what says so (module
    docstring)."""
    left = left or Left()
    if left.progress_s is not None and math.isinf(left.progress_s):
        # It says how far it goes, not yet how fast: unknown for a round or two (no
        # requeue is priced on its limit meanwhile).
        return otherwise_s, "its progress reports (too few steps yet)"
    if left.progress_s is not None:
        return left.progress_s * left.speed, "its progress reports"
    done = elapsed_s * left.speed
    if left.typical_s is not None and left.typical_s > done:
        return left.typical_s - done, (f"the typical run of its key's last "
                                       f"{left.typical_jobs} jobs")
    if limit_s:
        return max(0.0, limit_s - elapsed_s), "its time limit"
    return otherwise_s, otherwise_why


@dataclass(frozen=True)
class Facts:
    """What a driver knows of a job for the core: who and what it is, when it came, its
    time limit (None: none), how long it has run (``elapsed_s``: this run;
    ``attained_s``: in all), what else says how long it has left, and what the driver
    assumes where nothing does (``otherwise_s``, also its duration without a limit)."""

    job_id: int
    gpus: int
    submitted: float
    limit_s: float | None
    elapsed_s: float
    otherwise_s: float
    profile: Profile | None = None
    key: str = ""
    user: str = ""
    priority: int = 0
    gpus_per_node: int = 0
    attained_s: float | None = None
    left: Left | None = None
    cap: PerGpu | None = None
    may_requeue: bool = False
    may_shrink: bool = False
    # Its duration where it has no time limit, where the driver knows it apart from its
    # time left (the model: its whole run); None: ``otherwise_s``.
    duration_s: float | None = None


def job_spec(f: Facts) -> JobSpec:
    """The core's view of the job (module docstring)."""
    rem, source = time_left(f.limit_s, f.elapsed_s, f.left, f.otherwise_s)
    return JobSpec(f.job_id, f.gpus, submitted=f.submitted,
                   duration_s=f.limit_s or (f.otherwise_s if f.duration_s is None
                                            else f.duration_s),
                   remaining_s=rem,
                   remaining_from=source,
                   attained_s=f.elapsed_s if f.attained_s is None else f.attained_s,
                   profile=f.profile, profile_key=f.key, user=f.user, priority=f.priority,
                   limit=f.cap, gpus_per_node=f.gpus_per_node, may_requeue=f.may_requeue,
                   may_shrink=f.may_shrink)
