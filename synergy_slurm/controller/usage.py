"""The closed loop in the controller: read what running managed jobs use, judge each
user's keys, and cap the suspect ones (:mod:`synergy_slurm.core.usage` decides).

Every ``[usage] every_rounds`` rounds one ``sstat`` call reads the CPU time and peak
memory of up to ``max_jobs`` running managed jobs that have a profile (the longest-running
first); a job's use per GPU is its CPU seconds over its running time and GPUs, and its
peak memory over its GPUs. The latest use of each job is kept in the state database, so
the evidence outlives the job and a restart. A new mark is logged, written to the audit
log and counted (``synergy_suspect_keys_total``); the cap holds until an admin clears it
(``synergy profile suspects --clear KEY``).

Where jobs report progress (``[usage] progress_dir``: ``<dir>/<job id>.progress``, lines
``<seconds> <samples>`` from ``profiler.progress``), a job's recent throughput is set
beside what its profile predicts at its share (measured profiles only: their throughput is
in samples per second). A profile ``throughput_off`` times off is stale: with automatic
profiling on, its key is profiled again.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import UsageSection
from ..core import PerGpu, Profile
from ..core.usage import UNLIMITED, KeyVerdict, UsageRule, UsageSample, judge
from ..slurm.model import SlurmJob, SlurmNode
from ..slurm.sstat import JobUse
from ..userfiles import read_user_tail, user_uid
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
    profile: Profile | None = None     # the profile its plan used


def rule_of(section: UsageSection) -> UsageRule:
    return UsageRule(section.threshold, section.min_jobs, section.min_observed_s,
                     section.headroom)


def due(section: UsageSection, round_id: int) -> bool:
    return section.enabled and round_id % section.every_rounds == 0


def pick(watched: Iterable[Watched], limit: int) -> list[Watched]:
    """The jobs to read this time: the longest-running first (their evidence weighs most),
    at most ``limit``."""
    return sorted(watched, key=lambda w: (w.job.start_time, w.job.job_id))[:limit]


@dataclass(frozen=True)
class HostLoad:
    """A host's cores and its load (runnable tasks, 1-minute average)."""

    cores: float
    load: float


def this_host() -> tuple[str, HostLoad]:
    """This machine's name, the cores this process may run on and its load: the truth for
    nodes that run here (a test cluster's, whose cores Slurm's ``config_overrides`` shows
    as configured, not as they are)."""
    return socket.gethostname(), HostLoad(len(os.sched_getaffinity(0)), os.getloadavg()[0])


def could_cpus(job: SlurmJob, nodes: Mapping[str, SlurmNode],
               here: tuple[str, HostLoad] | None = None) -> float | None:
    """The cores per GPU ``job`` could keep busy now: on each of its nodes, what it holds,
    no more than its host's cores, times the host's cores per runnable task where it has
    more runnable tasks than cores (slurmd's load; this machine's own for nodes on it).
    None where that is all it holds (nothing contended, or nothing known)."""
    total, short = 0.0, False
    for a in job.alloc:
        node = nodes.get(a.node)
        hl = None
        if node is not None and here is not None and node.host and node.host == here[0]:
            hl = here[1]
        elif node is not None and node.load is not None:
            hl = HostLoad(node.cpus, node.load)
        if hl is None or hl.cores <= 0 or a.cpus <= 0:
            total += a.cpus
            continue
        room = min(a.cpus, hl.cores) * min(1.0, hl.cores / max(hl.load, 1e-9))
        short = short or room < a.cpus
        total += min(a.cpus, room)
    return total / job.gpus if short and job.gpus > 0 else None


def _over_time(prev: Mapping[str, Any] | None, could: float | None, granted: float,
               observed_s: float) -> float | None:
    """The cores a job could have had over all its running time: this sample's and the
    earlier ones' (the latest row), weighted by time; None where never short."""
    before = prev.get("could_cpus") if prev else None
    if could is None and before is None:
        return None
    then = min(float(prev["observed_s"]), observed_s) if prev else 0.0
    mean = ((before if before is not None else granted) * then
            + (could if could is not None else granted) * (observed_s - then)) / observed_s
    return mean if mean < granted else None


def samples(watched: Iterable[Watched], used: Mapping[int, JobUse], now: float,
            progress_dir: str = "", nodes: Mapping[str, SlurmNode] | None = None,
            prev: Mapping[int, Mapping[str, Any]] | None = None,
            here: tuple[str, HostLoad] | None = None) -> list[dict[str, Any]]:
    """State rows (``StateStore.note_usage``) for the jobs sstat reported, each with the
    cores it could have kept busy on its contended nodes (``nodes``, ``here``: see
    :func:`could_cpus`), over its time so far (``prev``: the latest rows, by job)."""
    rows = []
    uids: dict[str, int | None] = {}
    for w in watched:
        u = used.get(w.job.job_id)
        if u is None or not w.job.start_time or w.job.gpus < 1:
            continue
        elapsed = max(1.0, now - w.job.start_time)
        shape = current_shape(w.job, w.fair)
        if progress_dir and w.job.user not in uids:
            uids[w.job.user] = user_uid(w.job.user)
        uid = uids.get(w.job.user)
        tput = read_progress(progress_dir, w.job.job_id, uid) \
            if progress_dir and uid is not None else None
        prof = w.profile if w.profile is not None and w.profile.task == "measured" else None
        predicted = (prof.at(shape.cpus_per_gpu, shape.mem_per_gpu_mb / MB_PER_GB)
                     if prof is not None and tput is not None else None)
        rows.append({"job_id": w.job.job_id, "key": w.key, "user": w.job.user,
                     "granted_cpus": shape.cpus_per_gpu,
                     "granted_mem_gb": shape.mem_per_gpu_mb / MB_PER_GB,
                     "fair_cpus": w.fair.cpus, "fair_mem_gb": w.fair.mem_gb,
                     "used_cpus": u.cpu_s / elapsed / w.job.gpus,
                     "peak_mem_gb": u.peak_mem_mb / MB_PER_GB / w.job.gpus,
                     "observed_s": elapsed, "at": now, "throughput": tput,
                     "could_cpus": _over_time(
                         (prev or {}).get(w.job.job_id),
                         could_cpus(w.job, nodes or {}, here), shape.cpus_per_gpu, elapsed),
                     "predicted": predicted,
                     "slot": w.profile.slot if w.profile is not None else None})
    return rows


# At most this much of a progress file's end is read, and its lines over this window.
PROGRESS_TAIL_BYTES = 16384
PROGRESS_WINDOW_S = 120.0
MIN_PROGRESS_LINES = 5


@dataclass(frozen=True)
class Steps:
    """What a job's progress file says of its latest run: its steps (seconds, samples) and,
    where the job says how far it goes (its last ``total <samples> <done>`` line, less the
    steps after it), the samples it has left."""

    steps: list[tuple[float, float]]
    left: float | None = None


def read_steps(directory: str, job_id: int, uid: int) -> Steps | None:
    """The latest run's steps from ``<directory>/<job id>.progress``. The directory is
    everyone's (mode 1777) and job ids are predictable, so the file counts only if it is the
    job's own: a regular file owned by ``uid`` (the job's user), opened without following a
    link or blocking, its end only, any malformed line ignored. Another user's file (planted
    first, to mark the job's profile stale or to make a requeue look worth it) is not
    read."""
    path = Path(directory) / f"{int(job_id)}.progress"
    try:
        raw, cut = read_user_tail(path, uid, PROGRESS_TAIL_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.debug("progress of job %d not read: %s", job_id, exc)
        return None
    lines = raw.decode("ascii", "replace").splitlines()
    if cut:
        lines = lines[1:]          # the first may be cut
    steps: list[tuple[float, float]] = []
    left: float | None = None
    for line in lines:
        parts = line.split()
        if parts[:1] == ["total"]:      # how far the run goes, and what is done so far
            total = _number(parts[1]) if len(parts) > 1 else None
            base = (_number(parts[2]) if len(parts) > 2 else 0.0) or 0.0
            left = max(0.0, total - base) if total is not None else None
            if parts[3:4] == ["run"]:
                steps = []           # a new run (a restart): its own speed only
            continue
        try:
            t, n = float(parts[0]), float(parts[1])
        except (IndexError, ValueError):
            continue
        if not (math.isfinite(t) and math.isfinite(n) and 0 <= n < 1e9):
            continue
        if steps and t < steps[-1][0]:
            steps, left = [], None   # a restart without a total line: how far is unknown
        steps.append((t, n))
        if left is not None:
            left = max(0.0, left - n)
    return Steps(steps, left)


def _number(text: str) -> float | None:
    """A sample count from a progress line, or None where it is not one."""
    try:
        v = float(text)
    except ValueError:
        return None
    return v if math.isfinite(v) and 0 <= v < 1e15 else None


def throughput(seen: Steps | None) -> float | None:
    """Recent throughput (samples/s): the samples of the last steps (up to two minutes)
    over their time; None without enough progress."""
    steps = seen.steps if seen is not None else []
    recent = [s for s in steps if s[0] >= steps[-1][0] - PROGRESS_WINDOW_S] if steps else []
    if len(recent) < MIN_PROGRESS_LINES or recent[-1][0] - recent[0][0] <= 0:
        return None
    return sum(n for _, n in recent[1:]) / (recent[-1][0] - recent[0][0])


def read_progress(directory: str, job_id: int, uid: int) -> float | None:
    """A job's recent throughput (samples/s) from its progress file (:func:`read_steps`)."""
    return throughput(read_steps(directory, job_id, uid))


def progress_left_s(directory: str, job_id: int, uid: int) -> float | None:
    """The wall seconds a job has left at its current speed, from its own progress: the
    samples it says it has left over its recent throughput; infinite where it says how
    far it goes (``total``) but has not made enough steps yet to tell how fast (it will
    soon: nothing else is a fair guess meanwhile); None where it does not say."""
    seen = read_steps(directory, job_id, uid)
    if seen is None or seen.left is None:
        return None
    rate = throughput(seen)
    return seen.left / rate if rate else math.inf


def stale_slots(rows: Iterable[dict[str, Any]], rule: UsageRule, off: float) -> dict[str, str]:
    """Measured profiles (by slot) a watched job's throughput is ``off`` times off, with
    why."""
    out = {}
    for r in rows:
        tput, pred = r.get("throughput"), r.get("predicted")
        if (tput is None or not pred or r["observed_s"] < rule.min_observed_s
                or not r.get("slot")):
            continue
        ratio = tput / pred
        if ratio > off or ratio < 1 / off:
            out[r["slot"]] = (f"job {r['job_id']} ran at {tput:.3g} samples/s where the "
                              f"profile predicts {pred:.3g} at its share ({ratio:.2f}x)")
    return out


def verdicts(state: StateStore, rule: UsageRule) -> dict[tuple[str, str], KeyVerdict]:
    return judge((UsageSample(r["job_id"], r["key"], r["user"],
                              PerGpu(r["granted_cpus"], r["granted_mem_gb"]),
                              PerGpu(r["fair_cpus"], r["fair_mem_gb"]),
                              r["used_cpus"], r["peak_mem_gb"], r["observed_s"],
                              r.get("could_cpus"))
                  for r in state.usage()), rule)


def record(state: StateStore, found: Mapping[tuple[str, str], KeyVerdict], now: float
           ) -> list[KeyVerdict]:
    """Store the marks by the closed loop's one rule (``core.usage.marks_after``, which
    the simulator keeps too: a mark stays until an admin clears it, its cap follows the
    latest capping verdict); returns the new ones."""
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
