"""From a site's job history to what the simulator replays.

Each GPU job that ran becomes a trace job: it arrives when it became eligible, asks for the
GPUs it had, and needs as much work as it did. Its work is measured at the proportional
share: a job that ran with more (or fewer) cores than proportional did its work faster
(slower) by its profile's speedup there, so its proportional duration is its elapsed time
times that speedup. Its profile key comes from the comment synergy-sbatch writes, else from
the admin's rules (a regex on a field), else it is unknown: proportional in every run
(synergy changes nothing for it), or, with an assumed class mix, drawn from that mix.

What is not replayed is counted with its reason: jobs that never started, and jobs that
were still running at the export (replayed with the time they had run, a lower bound).
Jobs without GPUs are not scheduled by synergy, but they held cores and memory on their
nodes: they become background occupancy at the times they really ran.
"""

from __future__ import annotations

import random
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..core import PerGpu, Profile, Resources
from ..sim.engine import UNKNOWN_ITER_S, Occupancy
from ..sim.jobsets import CLASSES
from ..sim.trace import TraceJob
from ..slurm.sacct import HistoryJob
from ..vocabulary import KEY_RE, MB_PER_GB, comment_profile_key

RULE_FIELDS = ("name", "account", "user", "partition", "comment", "qos")
WORK_UNIT_S = UNKNOWN_ITER_S
_RULE = re.compile(r"^(\w+):(.+)=([^=]+)$")


class HistoryError(ValueError):
    """A rule or an option that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Rule:
    """``FIELD:REGEX=KEY``: jobs whose FIELD matches REGEX (searched) have profile KEY."""

    field: str
    pattern: re.Pattern[str]
    key: str

    @classmethod
    def parse(cls, text: str) -> Rule:
        m = _RULE.match(text.strip())
        if not m:
            raise HistoryError(f"rule {text!r}: expected FIELD:REGEX=KEY, e.g. "
                               "name:^resnet=res50")
        fld, regex, key = m.groups()
        if fld not in RULE_FIELDS:
            raise HistoryError(f"rule {text!r}: field must be one of {', '.join(RULE_FIELDS)}")
        if not KEY_RE.match(key):
            raise HistoryError(f"rule {text!r}: {key!r} is not a profile key")
        try:
            pattern = re.compile(regex)
        except re.error as exc:
            raise HistoryError(f"rule {text!r}: bad regex: {exc}") from None
        return cls(fld, pattern, key)

    def matches(self, job: HistoryJob) -> bool:
        return self.pattern.search(str(getattr(job, self.field))) is not None


@dataclass
class Replay:
    """A history made replayable: the trace (ids are the Slurm job ids), the jobs behind
    it, how each got its profile, the background, and what was left out and why."""

    t0: float
    trace: list[TraceJob]
    jobs: dict[int, HistoryJob]
    source: dict[int, str]                       # job -> comment | rule | assumed | unknown
    background: list[Occupancy]
    left_out: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    end: float = 0.0


def build_replay(history: Sequence[HistoryJob], profiles: Mapping[str, Profile], fair: PerGpu,
                 servers: Sequence[str], rules: Sequence[Rule] = (),
                 assume: Sequence[float] | None = None, seed: int = 0,
                 export_time: float | None = None) -> Replay:
    """The replay of ``history`` (every job with GPUs that started; the rest counted).
    ``assume``: image, language, speech weights to draw unknown jobs' profiles from;
    ``export_time``: when the history was read (ends the still-running jobs; default the
    latest time in it)."""
    n_records = len(history)
    history = _last_runs(history)
    times = [t for j in history for t in (j.submit, j.start, j.end) if t is not None]
    if not times:
        raise HistoryError("the history has no jobs")
    end = export_time if export_time is not None else max(times)
    started = [j for j in history if j.start is not None]
    t0 = min((j.eligible for j in started if j.gpus > 0), default=min(times))
    rng = random.Random(seed)
    out = Replay(t0, [], {}, {}, [], end=end)
    if len(history) < n_records:
        out.notes["records of earlier runs of requeued jobs: only the last run is "
                  "replayed, from the first submission"] += n_records - len(history)
    turn = dict.fromkeys(CLASSES, 0)
    for job in sorted(history, key=lambda j: (j.eligible, j.job_id)):
        if job.start is None:
            out.left_out["never started (" + (job.state.lower() or "unknown") + ")"] += 1
            continue
        finish = job.end
        if finish is None:
            finish = end
            out.notes["still running at the export: replayed with its run so far"] += 1
        if job.gpus <= 0:
            out.background.extend(_occupancy(job, finish, t0, servers))
            out.notes["without GPUs: held their cores and memory as they did"] += 1
            continue
        key, how = _key(job, profiles, rules)
        if key is None and assume is not None:
            cls = rng.choices(list(CLASSES), weights=list(assume))[0]
            models = [m for m in CLASSES[cls] if m in profiles]
            if models:
                key, how = models[turn[cls] % len(models)], "assumed"
                turn[cls] += 1
        prof = profiles.get(key) if key else None
        elapsed = max(1.0, finish - job.start)
        if prof is None:
            work, model, how = elapsed, "", "unknown"
        else:
            share = PerGpu(max(1, job.cpus // job.gpus),
                           job.mem_mb / job.gpus / MB_PER_GB) if job.cpus else fair
            work = elapsed * (prof.speedup(share, fair) if job.mem_mb else 1.0)
            model = prof.key
        # Work in milliseconds at the proportional share (replay_profiles makes a
        # profile's iteration that long), so whole iterations per round lose nothing.
        iterations = round(work / WORK_UNIT_S)
        out.trace.append(TraceJob(job.job_id, model, job.eligible - t0, max(1, iterations),
                                  job.gpus, job.priority,
                                  requeue_ok="synergy:requeue-ok" in job.comment.split()))
        out.jobs[job.job_id] = job
        out.source[job.job_id] = how
    return out


def replay_profiles(profiles: Mapping[str, Profile], fair: PerGpu) -> dict[str, Profile]:
    """The profiles as the replay runs them: the same curves, with an iteration of
    :data:`WORK_UNIT_S` at the proportional share (the trace counts work in that unit)."""
    return {k: replace(p, iter_time_s=WORK_UNIT_S * p.at(fair.cpus, fair.mem_gb))
            for k, p in profiles.items()}


def _last_runs(history: Sequence[HistoryJob]) -> list[HistoryJob]:
    """One record per job: a requeued job's last run, arriving when its first did."""
    by_id: dict[int, list[HistoryJob]] = {}
    for j in history:
        by_id.setdefault(j.job_id, []).append(j)
    out = []
    for runs in by_id.values():
        last = max(runs, key=lambda r: (r.start or 0.0, r.submit))
        if len(runs) > 1:
            first = min(r.eligible for r in runs)
            last = replace(last, submit=min(r.submit for r in runs), eligible=first)
        out.append(last)
    return out


def _key(job: HistoryJob, profiles: Mapping[str, Profile], rules: Sequence[Rule]
         ) -> tuple[str | None, str]:
    key = comment_profile_key(job.comment)
    if key and key in profiles:
        return key, "comment"
    for rule in rules:
        if rule.matches(job) and rule.key in profiles:
            return rule.key, "rule"
    return None, "unknown"


def _occupancy(job: HistoryJob, finish: float, t0: float, servers: Sequence[str]
               ) -> list[Occupancy]:
    """The job's cores and memory, split evenly over its nodes; a node the replayed cluster
    does not have is stood in for by one it has (the same one each time)."""
    assert job.start is not None
    nodes = job.nodes or (f"job{job.job_id}",)
    n = len(nodes)
    res = Resources(0, job.cpus // n, job.mem_mb / n / MB_PER_GB)
    known = set(servers)
    out = []
    for node in nodes:
        where = node if node in known else servers[zlib.crc32(node.encode()) % len(servers)]
        out.append(Occupancy(job.start - t0, finish - t0, where, res))
    return out
