"""Three forecasts for a site that never ran synergy, each with what it assumes.

A site without profiles still records what its jobs used (slurm/sacct_usage.py). From that:

- **guaranteed**: only what measured use proves. Each job asks for the cores and memory it
  really used (its key's most, times ``[usage] headroom``, never more than it had) and runs
  exactly as fast as it did with any share at or above that: no job is sped up, the cores
  and memory jobs held idle go to GPU jobs that waited for them. Profiles are not used.
- **expected**: profiled keys with their profiles; every other key by the sensitivity class
  its jobs' use suggests (whatif/infer.py), replayed with that class's median model (by
  how much more cores speed it up). Keys whose use says nothing stay proportional.
- **optimistic**: unknown jobs drawn from an explicit class mix (``--assume-mix``; the
  paper's is 20/70/10): an assumption about the site, not a measurement of it, so only
  when one is given.

Each is a replay of the synergy side (hook and controller as on the site's release); its
gain is the plain replay's mean JCT over the forecast's. Measured against one replay of
the other, the model's own error on what happened cancels: where nothing can be
reclaimed the guaranteed forecast is exactly 1.0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core import PerGpu, Profile, pick_profile
from ..core.pools import Pool
from ..core.usage import UsageRule, UsageSample, judge
from ..sim.jobsets import CLASSES
from ..slurm.sacct import HistoryJob
from ..slurm.sacct_usage import JobUsage
from ..vocabulary import MB_PER_GB
from .history import ReplayInput
from .infer import MIN_ELAPSED_S, candidates, key_of

# Where a replayed job's profile came from when it is a stored one the controller would use.
STORED = ("tag", "comment", "rule")

FORECASTS = ("guaranteed", "expected", "optimistic")
ASSUMES = {
    "guaranteed": "jobs ask only for the cores and memory they were measured to use (x "
                  "headroom); none runs faster than it did; profiles unused",
    "expected": "profiled keys by their profiles; others by the class their measured use "
                "suggests, at that class's median model",
    "optimistic": "unknown jobs drawn from the class mix {mix} (image, language, speech %)",
}
# The edges of a measured-use profile's grid: wide enough to hold any server's share.
_CPU_TOP = 4096.0
_MEM_LOW, _MEM_TOP = 0.01, 1e6
# Below the memory it was seen to use a job does not run well (it would be killed).
_SHORT_OF_MEMORY = 0.5


def representative(profiles: Mapping[str, Profile], cls: str, types: frozenset[str]
                   ) -> Profile | None:
    """The class's median model among ``profiles`` (for a job on ``types``), ranked by how
    much the most cores speed it up over the fewest at full memory."""
    models = [p for m in CLASSES[cls] if (p := pick_profile(profiles, m, types))]
    models.sort(key=lambda p: (p.at(p.cpu_grid[-1], p.mem_grid[-1])
                               / p.at(p.cpu_grid[0], p.mem_grid[-1]), p.key))
    return models[len(models) // 2] if models else None


@dataclass
class InferredGuess:
    """The expected forecast: a job without a profile replayed with the median model of
    the class its key's use suggests (``classes``: key -> class)."""

    classes: Mapping[str, str]
    # (the user's profile keys, class, GPU types) -> the class's representative
    _reps: dict[tuple[frozenset[str], str, frozenset[str]], Profile | None] = field(
        default_factory=dict, repr=False)

    def __call__(self, job: HistoryJob, prof: Profile | None, how: str,
                 mine: Mapping[str, Profile], types: frozenset[str]
                 ) -> tuple[Profile | None, str]:
        if prof is not None:
            return prof, how
        cls = self.classes.get(key_of(job))
        if cls is None:
            return None, how
        memo = (frozenset(mine), cls, types)      # trust may give each user other profiles
        if memo not in self._reps:
            self._reps[memo] = representative(mine, cls, types)
        rep = self._reps[memo]
        return (rep, "inferred") if rep is not None else (None, how)


def job_need(job: HistoryJob, use: JobUsage | None, headroom: float) -> PerGpu | None:
    """Per GPU, what the job was measured to use times ``headroom``, never more than it
    had (a measure missing: what it had); None where nothing was measured."""
    if (use is None or job.gpus <= 0 or job.cpus <= 0 or job.mem_mb <= 0
            or use.elapsed_s < MIN_ELAPSED_S):
        return None
    had_c = max(1, job.cpus // job.gpus)
    had_m = job.mem_mb / job.gpus / MB_PER_GB
    core = use.core_use
    if core is None and use.peak_mem_mb is None:
        return None
    c = had_c if core is None else min(had_c, max(1, math.ceil(core * had_c * headroom
                                                                - 1e-9)))
    m = had_m if use.peak_mem_mb is None else min(
        had_m, max(_MEM_LOW * 2, use.peak_mem_mb / job.gpus / MB_PER_GB * headroom))
    return PerGpu(c, round(m, 3))


def key_needs(history: Iterable[HistoryJob], usage: Mapping[int, JobUsage],
              headroom: float) -> dict[str, PerGpu]:
    """Per key, the most any of its jobs was measured to need (job_need)."""
    out: dict[str, PerGpu] = {}
    for j in history:
        need = job_need(j, usage.get(j.job_id), headroom)
        if need is None:
            continue
        k = key_of(j)
        was = out.get(k)
        out[k] = need if was is None else PerGpu(max(was.cpus, need.cpus),
                                                 max(was.mem_gb, need.mem_gb))
    return out


def used_profile(name: str, need: PerGpu) -> Profile:
    """Flat at and above ``need`` (more changes nothing), slower below it: the profile
    that says only what measured use proves."""
    cg = tuple(sorted({1.0, float(need.cpus), _CPU_TOP}))
    mg = tuple(sorted({_MEM_LOW, need.mem_gb, _MEM_TOP}))
    tp = tuple(tuple(min(1.0, c / need.cpus) * (1.0 if m >= need.mem_gb else _SHORT_OF_MEMORY)
                     for m in mg) for c in cg)
    return Profile(name, cg, mg, tp, ideal=need)


@dataclass
class UsedGuess:
    """The guaranteed forecast: every job of a key with measured use replayed with a
    :func:`used_profile` at its key's need (capped at what the job had); others unknown."""

    needs: Mapping[str, PerGpu]
    _made: dict[str, Profile] = field(default_factory=dict, repr=False)   # by name

    def __call__(self, job: HistoryJob, prof: Profile | None, how: str,
                 mine: Mapping[str, Profile], types: frozenset[str]
                 ) -> tuple[Profile | None, str]:
        key = key_of(job)
        need = self.needs.get(key)
        if need is None or job.gpus <= 0 or job.cpus <= 0 or job.mem_mb <= 0:
            return None, "unknown"
        need = PerGpu(min(need.cpus, max(1, job.cpus // job.gpus)),
                      min(need.mem_gb, round(job.mem_mb / job.gpus / MB_PER_GB, 3)))
        name = f"used:{key}:{need.cpus}:{need.mem_gb:g}"
        if name not in self._made:
            self._made[name] = used_profile(name, need)
        return self._made[name], "measured use"


def suspect_caps(replay: ReplayInput, usage: Mapping[int, JobUsage], pools: Sequence[Pool],
                 rule: UsageRule) -> dict[tuple[str, str], PerGpu]:
    """What the controller's closed loop would have marked suspect from this history: per
    (profile, user), the cap on later jobs where jobs that ran with a stored profile (a
    tag, a comment or a rule: not a guess) and more than the proportional share used far
    less of it (core.usage.judge, with the site's ``[usage]`` rule). The replays give
    those users' jobs of that profile no more, as the controller would."""
    fair = {p.partition: p.cluster.fair for p in pools}
    samples = []
    for tj in replay.trace:
        job, use = replay.jobs[tj.job_id], usage.get(tj.job_id)
        if (not tj.model or replay.source.get(tj.job_id) not in STORED or use is None
                or job.gpus <= 0 or job.cpus <= 0 or job.mem_mb <= 0):
            continue
        core = use.core_use
        granted = PerGpu(max(1, job.cpus // job.gpus), job.mem_mb / job.gpus / MB_PER_GB)
        samples.append(UsageSample(
            tj.job_id, tj.model, tj.user, granted,
            fair.get(tj.partition, pools[0].cluster.fair),
            granted.cpus if core is None else core * job.cpus / job.gpus,
            granted.mem_gb if use.peak_mem_mb is None
            else use.peak_mem_mb / job.gpus / MB_PER_GB, use.elapsed_s))
    return {k: v.cap for k, v in judge(samples, rule).items() if v.cap is not None}


def key_classes(history: Iterable[HistoryJob], usage: Mapping[int, JobUsage]
                ) -> dict[str, str]:
    """Each key's class by its jobs' measured use (the class most of its GPU-hours show)."""
    return {c.key: c.cls for c in candidates(history, usage) if c.cls is not None}


def gain(plain_jct_h: float, forecast_jct_h: float) -> float | None:
    """The plain replay's mean JCT over the forecast's (None where either is unknown)."""
    if not (plain_jct_h == plain_jct_h and forecast_jct_h == forecast_jct_h) \
            or forecast_jct_h <= 0:
        return None
    return round(plain_jct_h / forecast_jct_h, 3)


def credited_speedup(profiles: Mapping[str, Profile], cls: str | None, fair: PerGpu) -> float:
    """What the expected forecast credits a key of class ``cls`` beyond the guaranteed one:
    its class's median model's best throughput over its throughput at the proportional
    share, less one (an unclassified key: the mean over the classes)."""
    if cls is None:
        known = [credited_speedup(profiles, c, fair) for c in CLASSES]
        return sum(known) / len(known)
    rep = representative(profiles, cls, frozenset({""}))
    if rep is None:
        return 0.0
    return max(0.0, rep.best / rep.at(fair.cpus, fair.mem_gb) - 1.0)


def to_profile(history: Iterable[HistoryJob], usage: Mapping[int, JobUsage],
               profiles: Mapping[str, Profile], fair: PerGpu, top: int = 10
               ) -> list[dict[str, Any]]:
    """The ``top`` keys without a profile whose profiling would most narrow the gap between
    the guaranteed and the expected forecast: GPU-hours times the speedup the expected
    forecast credits their class (credited_speedup), with the lines that profile them."""
    ranked = []
    for c in candidates(history, usage):
        weight = credited_speedup(profiles, c.cls, fair)
        ranked.append((c.gpu_hours * weight, c))
    ranked.sort(key=lambda sc: (-sc[0], -sc[1].gpu_hours, sc[1].key))
    return [{"key": c.key, "gpu_hours": round(c.gpu_hours, 2), "jobs": len(c.jobs),
             "class": c.cls, "agree": round(c.agree, 2), "score": round(score, 2),
             "users": list(c.users),
             "profile_run": f"synergy profile run --key {c.key} --gpus {c.gpus} --submit "
                            f"-- {c.command or 'COMMAND'}",
             "command_from": "sacct's SubmitLine" if c.command else
             f"not recorded: 'sacct -j {c.jobs[0]} -o SubmitLine' (23.02 and later) or "
             f"ask {', '.join(c.users[:3])}{' ...' if len(c.users) > 3 else ''}",
             "sbatch": f"synergy-sbatch --profile-key {c.key} ..."}
            for score, c in ranked[:top]]
