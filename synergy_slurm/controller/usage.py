"""The closed loop in the controller: read what running managed jobs use, judge each
user's keys, and cap the suspect ones (:mod:`synergy_slurm.core.usage` decides).

Every ``[usage] every_rounds`` rounds one ``sstat`` call reads the CPU time and peak
memory of up to ``max_jobs`` running managed jobs that have a profile (the longest-running
first); a job's use per GPU is its CPU seconds over its running time and GPUs, and its
peak memory over its GPUs. The latest use of each job is kept in the state database, so
the evidence outlives the job and a restart. A new mark is logged, written to the audit
log and counted (``synergy_suspect_keys_total``); the cap holds until an admin clears it
(``synergy profile suspects --clear KEY``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..config import UsageSection
from ..core import PerGpu
from ..core.usage import UNLIMITED, KeyVerdict, UsageRule, UsageSample, judge
from ..slurm.model import SlurmJob
from ..slurm.sstat import JobUse
from ..vocabulary import MB_PER_GB
from .actions import current_shape
from .state import StateStore

log = logging.getLogger(__name__)
CONFIRMED = "confirmed"
SUSPECT = "suspect"


@dataclass(frozen=True)
class Watched:
    """A running managed job with a profile key, and its partition's proportional share."""

    job: SlurmJob
    key: str
    fair: PerGpu


def rule_of(section: UsageSection) -> UsageRule:
    return UsageRule(section.threshold, section.min_jobs, section.min_observed_s,
                     section.headroom)


def due(section: UsageSection, round_id: int) -> bool:
    return section.enabled and round_id % section.every_rounds == 0


def pick(watched: Iterable[Watched], limit: int) -> list[Watched]:
    """The jobs to read this time: the longest-running first (their evidence weighs most),
    at most ``limit``."""
    return sorted(watched, key=lambda w: (w.job.start_time, w.job.job_id))[:limit]


def samples(watched: Iterable[Watched], used: Mapping[int, JobUse], now: float
            ) -> list[dict]:
    """State rows (``StateStore.note_usage``) for the jobs sstat reported."""
    rows = []
    for w in watched:
        u = used.get(w.job.job_id)
        if u is None or not w.job.start_time or w.job.gpus < 1:
            continue
        elapsed = max(1.0, now - w.job.start_time)
        shape = current_shape(w.job, w.fair)
        rows.append({"job_id": w.job.job_id, "key": w.key, "user": w.job.user,
                     "granted_cpus": shape.cpus_per_gpu,
                     "granted_mem_gb": shape.mem_per_gpu_mb / MB_PER_GB,
                     "fair_cpus": w.fair.cpus, "fair_mem_gb": w.fair.mem_gb,
                     "used_cpus": u.cpu_s / elapsed / w.job.gpus,
                     "peak_mem_gb": u.peak_mem_mb / MB_PER_GB / w.job.gpus,
                     "observed_s": elapsed, "at": now})
    return rows


def verdicts(state: StateStore, rule: UsageRule) -> dict[tuple[str, str], KeyVerdict]:
    return judge((UsageSample(r["job_id"], r["key"], r["user"],
                              PerGpu(r["granted_cpus"], r["granted_mem_gb"]),
                              PerGpu(r["fair_cpus"], r["fair_mem_gb"]),
                              r["used_cpus"], r["peak_mem_gb"], r["observed_s"])
                  for r in state.usage()), rule)


def record(state: StateStore, found: Mapping[tuple[str, str], KeyVerdict], now: float
           ) -> list[KeyVerdict]:
    """Store the marks; returns the new ones (an existing mark's cap follows new use)."""
    known = {(s["key"], s["user"]): s for s in state.suspects()}
    new = []
    for (key, user), v in found.items():
        if v.cap is None:
            continue
        old = known.get((key, user))
        fields = {"cap_cpus": v.cap.cpus, "cap_mem_gb": v.cap.mem_gb, "jobs": v.jobs,
                  "cpu_use": v.cpu_use, "mem_use": v.mem_use, "note": v.why()}
        if old is None:
            state.mark_suspect(key, user, status=SUSPECT, since=now, **fields)
            new.append(v)
        else:
            state.mark_suspect(key, user, **fields)
    return new


def suspect_caps(state: StateStore) -> dict[tuple[str, str], PerGpu]:
    """Each marked (key, user)'s cap: what the plan gives their later jobs at most."""
    return {(s["key"], s["user"]): PerGpu(int(s["cap_cpus"]), float(s["cap_mem_gb"]))
            for s in state.suspects()}


def cap_text(cap: PerGpu | None) -> str:
    """``3 cores`` / ``62.5 GB`` / ``3 cores and 62.5 GB`` per GPU (a dimension not capped
    is left out)."""
    if cap is None:
        return "no cap"
    parts = []
    if cap.cpus < UNLIMITED.cpus:
        parts.append(f"{cap.cpus} cores")
    if cap.mem_gb < UNLIMITED.mem_gb:
        parts.append(f"{cap.mem_gb:g} GB")
    return " and ".join(parts) + " per GPU"
