"""The closed loop: what jobs really use against what their profile got them.

A profile is trusted from the moment it is measured; on a site that trust breaks when a
user names a key that is not their job's (by mistake, or to get more cores), or a job's
code changes under an old key. Each running job's use is sampled (its cores and peak
memory per GPU, from Slurm's own accounting in the controller, from the job's true profile
in the simulator); a key whose jobs from one user, given more than the proportional share,
use far less of it is *suspect* for that user: that user's later jobs with that key get no
more than was seen used (with some headroom), never less than proportional. Judging per
user keeps one user's mislabelled jobs from capping everyone else's honest ones. Pure: the
controller and the simulator both judge with :func:`judge`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .profile import Profile
from .resources import PerGpu
from .shrink import memory_needed

UNLIMITED = PerGpu(1 << 20, float(1 << 40))


@dataclass(frozen=True)
class UsageRule:
    """A key is suspect when at least ``min_jobs`` of its jobs, each given more than the
    proportional share and watched for ``min_observed_s``, used on average less than
    ``threshold`` of what they were given (cores, or memory). Its cap is the most any of
    them used, times ``headroom``."""

    threshold: float = 0.3
    min_jobs: int = 1
    min_observed_s: float = 300.0
    headroom: float = 1.25

    def __post_init__(self) -> None:
        if not 0 < self.threshold < 1:
            raise ValueError("the usage threshold must be between 0 and 1")
        if self.min_jobs < 1 or self.min_observed_s < 0 or self.headroom < 1:
            raise ValueError("min_jobs >= 1, min_observed_s >= 0 and headroom >= 1")


@dataclass(frozen=True)
class UsageSample:
    """One job's use so far: per GPU, the cores it kept busy on average and its peak
    memory (GB), against what it was given and its partition's proportional share
    (``fair``), over ``observed_s`` seconds of running."""

    job_id: int
    key: str
    user: str
    granted: PerGpu
    fair: PerGpu
    used_cpus: float
    peak_mem_gb: float
    observed_s: float
    # The cores per GPU the job could have kept busy, where its nodes were contended (more
    # runnable work than cores: a noisy neighbour, no ConstrainCores, oversubscription):
    # its use is judged against this, not against what it was given. None: uncontended.
    could_cpus: float | None = None

    @property
    def cpu_use(self) -> float:
        """The share of the cores it could have kept busy that it did (at most 1)."""
        room = float(self.granted.cpus)
        if self.could_cpus is not None and self.could_cpus > 0:
            room = min(room, self.could_cpus)
        return min(1.0, self.used_cpus / room)


@dataclass(frozen=True)
class KeyVerdict:
    """What a user's watched jobs of a key show: how many counted, the mean share of the
    given cores and memory they used, and the cap (None: not suspect)."""

    key: str
    user: str
    jobs: int
    cpu_use: float
    mem_use: float
    cap: PerGpu | None

    @property
    def suspect(self) -> bool:
        return self.cap is not None

    def why(self) -> str:
        return (f"{self.jobs} job(s) used {self.cpu_use:.0%} of the cores and "
                f"{self.mem_use:.0%} of the memory they were given")


def judge(samples: Iterable[UsageSample], rule: UsageRule
          ) -> dict[tuple[str, str], KeyVerdict]:
    """Per (key, user), the verdict over those jobs' latest samples. Only jobs given more
    than the proportional share in a dimension count for that dimension: below it, using
    little is no evidence (a language model is content with a third of its share). A job
    on contended nodes is judged on the cores it could get there (``could_cpus``): an
    honest user is not capped because the machine was busy."""
    latest: dict[int, UsageSample] = {}
    for s in samples:
        if s.observed_s >= rule.min_observed_s and s.granted.cpus > 0:
            old = latest.get(s.job_id)
            if old is None or s.observed_s >= old.observed_s:
                latest[s.job_id] = s
    by_key: dict[tuple[str, str], list[UsageSample]] = {}
    for s in latest.values():
        by_key.setdefault((s.key, s.user), []).append(s)
    out = {}
    for (key, user), jobs in sorted(by_key.items()):
        cpu = [s for s in jobs if s.granted.cpus > s.fair.cpus]
        mem = [s for s in jobs if s.granted.mem_gb > s.fair.mem_gb + 1e-6]
        cpu_use = _mean(s.cpu_use for s in cpu)
        mem_use = _mean(min(1.0, s.peak_mem_gb / s.granted.mem_gb) for s in mem)
        cap_cpus, cap_mem = UNLIMITED.cpus, UNLIMITED.mem_gb
        if len(cpu) >= rule.min_jobs and cpu_use < rule.threshold:
            most = max(s.used_cpus for s in cpu) * rule.headroom
            cap_cpus = max(max(s.fair.cpus for s in cpu), math.ceil(most))
        if len(mem) >= rule.min_jobs and mem_use < rule.threshold:
            most = max(s.peak_mem_gb for s in mem) * rule.headroom
            cap_mem = max(max(s.fair.mem_gb for s in mem), most)
        suspect = cap_cpus < UNLIMITED.cpus or cap_mem < UNLIMITED.mem_gb
        out[key, user] = KeyVerdict(key, user, len(jobs), cpu_use, mem_use,
                                    PerGpu(cap_cpus, cap_mem) if suspect else None)
    return out


def marks_after(marked: Mapping[tuple[str, str], PerGpu],
                found: Mapping[tuple[str, str], KeyVerdict]) -> dict[tuple[str, str], PerGpu]:
    """The closed loop's marks after a round's verdicts, the one rule every driver keeps:
    a (key, user) is marked once a verdict caps it, and stays marked, capped as its latest
    capping verdict says, until an admin clears it (``synergy profile suspects --clear``;
    a replay never clears). A verdict without a cap leaves a mark as it is: jobs held to the cap
    cannot show that they would use more."""
    out = dict(marked)
    for key, verdict in found.items():
        if verdict.cap is not None:
            out[key] = verdict.cap
    return out


def capped_limit(limit: PerGpu | None, cap: PerGpu | None) -> PerGpu | None:
    """A job's site limit (``JobSpec.limit``) cut further by its key's usage cap."""
    if cap is None:
        return limit
    return cap if limit is None else limit.capped(cap)


def _mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 1.0


def busy_share(profile: Profile, share: PerGpu, fair: PerGpu) -> PerGpu:
    """What a job whose real profile is ``profile`` keeps busy of ``share``: the fewest
    cores, then the least memory, at which it runs as fast (the simulator's stand-in for
    what Slurm's accounting measures of a running job)."""
    speed = profile.speedup(share, fair) * (1 - 1e-9)
    cpus = share.cpus
    for c in sorted({*profile.cpu_grid, float(share.cpus)}):
        if c >= share.cpus:
            break
        if c >= 1 and profile.speedup(PerGpu(math.ceil(c), share.mem_gb), fair) >= speed:
            cpus = math.ceil(c)
            break
    return PerGpu(cpus, memory_needed(profile, PerGpu(cpus, share.mem_gb), fair))
