"""From a site's job history to what the simulator replays.

Each GPU job that ran becomes a trace job as Slurm saw it: it arrives at its submission
(a job's JCT runs from there), or at the time it asked to wait for itself (``--begin``, a
dependency, its user's hold: an eligible time later than its submission on a job synergy's
hook did not tag; a job the hook tagged was held by synergy, not by its user). It asks for
the GPUs it had, in its partition, with its time limit and, without synergy, the cores and
memory it had. Its run is its start-up (no share speeds it up) and then its work, measured
at its partition's proportional share: a job that ran with more (or fewer) cores than
proportional did its work faster (slower) by its profile's speedup there. A job that hit its
time limit, failed or was cancelled runs as long as it did in every replay (nothing says it
would have done otherwise). Its profile key comes from the hook's tag or its comment
(``synergy:profile=KEY``), else from the admin's rules (a regex on a field), else it is
unknown: proportional in every run (synergy changes nothing for it) unless a forecast
guesses one (whatif/forecast.py: from its measured use, or drawn from a class mix). The
profile for a key is the one the controller would use: among those ``[profiles] trust``
lets shape the job's user, the one measured on the GPU type it asked for (or its
partition's only type), else an untyped one (``core.pick_profile``).

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
from typing import Protocol

from ..core import PerGpu, Profile, Resources, pick_profile
from ..core.pools import Pool
from ..decide import Change, Decision, JobFacts, opted_in_to_requeue, what_synergy_changes
from ..errors import BadInputError
from ..profiles.resolve import trusted
from ..sim.config import Occupancy
from ..sim.engine import UNKNOWN_ITER_S
from ..sim.jobsets import CLASSES
from ..sim.trace import TraceJob
from ..slurm.sacct import HistoryJob
from ..vocabulary import (
    KEY_RE,
    MB_PER_GB,
    OWN_SHAPE,
    comment_profile_key,
    synergy_tags,
)

RULE_FIELDS = ("name", "account", "user", "partition", "comment", "qos")
WORK_UNIT_S = UNKNOWN_ITER_S
# Outcomes that end a job whatever its speed: it ran as long as it did in every replay.
FIXED_STATES = frozenset({"TIMEOUT", "FAILED", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
                          "PREEMPTED", "DEADLINE", "BOOT_FAIL"})
# An eligible time this much after the submission is a wait the job asked for.
ASKED_WAIT_S = 1.0
# No Slurm history is older than this (2000-01-01): an earlier time is a broken clock.
PLAUSIBLE_SINCE = 946_684_800.0
_RULE = re.compile(r"^(\w+):(.+)=([^=]+)$")


class HistoryError(BadInputError):
    """A rule or an option that cannot be used; the message says which and why."""


class Guess(Protocol):
    """What a forecast says of a job's profile, given the one the controller would find
    (``prof``, None for an unknown job) and where it came from (``how``); ``mine``: the
    profiles trust lets shape the job, ``types``: the GPU types it may run on. Returns the
    profile to replay it with and its source (whatif/forecast.py has the three forecasts')."""

    def __call__(self, job: HistoryJob, prof: Profile | None, how: str,
                 mine: Mapping[str, Profile], types: frozenset[str]
                 ) -> tuple[Profile | None, str]: ...


@dataclass
class MixGuess:
    """Unknown jobs drawn from a class mix (image, language, speech weights), round-robin
    over the class's models: the optimistic forecast, an assumption and labelled so."""

    weights: Sequence[float]
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)
    _turn: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._turn = dict.fromkeys(CLASSES, 0)

    def __call__(self, job: HistoryJob, prof: Profile | None, how: str,
                 mine: Mapping[str, Profile], types: frozenset[str]
                 ) -> tuple[Profile | None, str]:
        if prof is not None:
            return prof, how
        cls = self._rng.choices(list(CLASSES), weights=list(self.weights))[0]
        models = [p for m in CLASSES[cls] if (p := pick_profile(mine, m, types))]
        if not models:
            return None, how
        self._turn[cls] += 1
        return models[(self._turn[cls] - 1) % len(models)], "assumed"


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
class ReplayInput:
    """A history made replayable: the trace (ids are the Slurm job ids), the jobs behind
    it, how each got its profile (and the profiles its trace names, by slot), the
    background, what was left out and why, and how many of the GPU jobs synergy's hook had
    tagged (it was running then)."""

    t0: float
    trace: list[TraceJob]
    jobs: dict[int, HistoryJob]
    source: dict[int, str]                       # job -> tag | comment | rule | assumed | unknown
    background: list[Occupancy]
    left_out: Counter[str] = field(default_factory=Counter)
    notes: Counter[str] = field(default_factory=Counter)
    end: float = 0.0
    managed: int = 0
    profiles: dict[str, Profile] = field(default_factory=dict)
    # What synergy changes about each job (decide.what_synergy_changes), by job id.
    changes: dict[int, Decision] = field(default_factory=dict)

    @property
    def under_synergy(self) -> bool:
        """Whether synergy ran in this window: most GPU jobs carry the hook's tag."""
        return bool(self.trace) and self.managed * 2 > len(self.trace)


def build_replay(history: Sequence[HistoryJob], profiles: Mapping[str, Profile],
                 pools: Sequence[Pool], rules: Sequence[Rule] = (),
                 guess: Guess | None = None, export_time: float | None = None,
                 startup_s: float = 0.0, default_limit_s: float = 0.0,
                 owners: Mapping[str, str] | None = None, trust: str = "all") -> ReplayInput:
    """The replay of ``history`` (every job with GPUs that started; the rest counted) on
    ``pools`` (the replayed cluster's partitions; a job of a partition it lacks is replayed
    in the first). ``guess``: a forecast's say on each job's profile (unknown jobs stay
    proportional without one); ``export_time``: when the history was read (ends the
    still-running jobs; default the latest time in it); ``startup_s``: each job's
    start-up, which no share speeds up; ``default_limit_s``: the time limit of jobs
    without one (0: unlimited)."""
    if not pools:
        raise HistoryError("no partition to replay on")
    n_records = len(history)
    history = _last_runs(history)
    times = [t for j in history for t in (j.submit, j.start, j.end) if t is not None]
    if not times:
        raise HistoryError("the history has no jobs")
    end = export_time if export_time is not None else max(times)
    started = [j for j in history if j.start is not None]
    t0 = min((j.submit for j in started if j.gpus > 0), default=min(times))
    servers = [s.name for p in pools for s in p.cluster.servers]
    by_name = {p.partition: p for p in pools}
    out = ReplayInput(t0, [], {}, {}, [], end=end)
    if len(history) < n_records:
        out.notes["records of earlier runs of requeued jobs: only the last run is "
                  "replayed, from the first submission"] += n_records - len(history)
    for job in sorted(history, key=lambda j: (j.submit, j.job_id)):
        if not PLAUSIBLE_SINCE <= job.submit <= end + 86400:
            out.notes[f"submitted in {_year(job.submit)}, outside the window's time: check "
                      "the export's clock and -S/-E"] += 1
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
        pool = by_name.get(job.partition)
        if pool is None:
            pool = pools[0]
            if pool.partition:      # a pool without a name stands for every partition
                out.notes[f"partition {job.partition or '?'} is not in the replayed "
                          f"cluster: replayed in {pool.partition}"] += 1
        tags = synergy_tags(job.admin_comment)
        out.managed += tags.get("managed") == "1"
        mine = profiles if trust == "all" else trusted(profiles, owners or {}, job.user, trust)
        types = pool.types(job.gpu_type or None)
        prof, how = _profile(job, tags, mine, rules, types)
        if guess is not None:
            prof, how = guess(job, prof, how, mine, types)
        if prof is not None:
            out.profiles[prof.slot] = prof
        decision = job_change(job, tags, prof is not None)
        out.changes[job.job_id] = decision
        out.trace.append(_trace_job(job, finish, t0, pool, prof, tags, startup_s,
                                    default_limit_s, decision.change))
        out.jobs[job.job_id] = job
        out.source[job.job_id] = how if prof is not None else "unknown"
        if job.state in FIXED_STATES:
            out.notes[f"{job.state.lower()}: replayed for as long as it ran"] += 1
        if out.trace[-1].spread_cpus:
            out.notes["spread over nodes with fewer cores per GPU on one (its batch "
                      "step's): its work measured at that node's pace, and replayed at it "
                      "where it keeps its shape and is spread again"] += 1
    return out


def job_change(job: HistoryJob, tags: Mapping[str, str], profile_known: bool) -> Decision:
    """What synergy changes (or changed) about a job of the history: the one rule
    (``decide.what_synergy_changes``) on what accounting kept. Where the hook tagged the
    job, its tag says what the hook decided (``synergy.managed=0``: left as submitted);
    else the rule runs on the job's comment (opt-out) and, where sacct kept the submit
    line, how it asked for its GPUs."""
    if tags.get("managed") == "0":
        own = OWN_SHAPE.get(tags.get("own", ""), "")
        return Decision(Change.LEAVE, f"left as submitted by the hook ({own} sets the job's "
                        "cores or memory itself)" if own else "left as submitted by the hook")
    if tags.get("managed") == "1":
        return Decision(Change.RESHAPE, "reshaped by its profile") if profile_known else \
            Decision(Change.RELEASE, "profile unknown: released with the shape it has")
    return what_synergy_changes(JobFacts(job.gpus, job.request, comment=job.comment,
                                         profile_known=profile_known))


def _trace_job(job: HistoryJob, finish: float, t0: float, pool: Pool, prof: Profile | None,
               tags: Mapping[str, str], startup_s: float, default_limit_s: float,
               change: Change) -> TraceJob:
    assert job.start is not None
    fair = pool.cluster.fair
    elapsed = max(1.0, finish - job.start)
    had = PerGpu(max(1, job.cpus // job.gpus),
                 job.mem_mb / job.gpus / MB_PER_GB) if job.cpus and job.mem_mb else None
    startup = min(startup_s, elapsed)
    fixed = elapsed if job.state in FIXED_STATES else 0.0
    work = elapsed - startup
    # A job Slurm laid out unevenly over its nodes ran at its poorest node's pace (where
    # that is below the share it is replayed with, and its pace mattered: it has a
    # profile and ran to its end), if it kept its own shape. A shape synergy gave is
    # measured and replayed as laid out evenly, as the model places it (on 22.05 such a
    # job spread onto a node short of cores is not: a gap of the model, docs/results §8).
    poorest = job.poorest_cores_per_gpu if had is not None and prof is not None \
        and not fixed and tags.get("managed") != "1" else None
    if poorest is not None and had is not None and poorest >= had.cpus:
        poorest = None
    if prof is not None and had is not None:
        work *= prof.speedup_at(poorest or had.cpus, had.mem_gb, fair)
    # A job the hook did not tag that became eligible after its submission asked to wait.
    asked = job.eligible - t0 if (not tags and job.eligible > job.submit + ASKED_WAIT_S) \
        else None
    return TraceJob(job.job_id, prof.slot if prof is not None else "", job.submit - t0,
                    max(1, round(work / WORK_UNIT_S)), job.gpus, job.priority,
                    user=job.user,
                    requeue_ok=opted_in_to_requeue(job.comment),
                    partition=pool.partition, gpu_type=job.gpu_type or "",
                    time_limit_s=job.time_limit_s or default_limit_s,
                    share=None if tags.get("managed") == "1" else had, eligible=asked,
                    work_s=work, startup_s=startup, fixed_s=fixed, change=str(change),
                    spread_cpus=poorest or 0.0)


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


def _profile(job: HistoryJob, tags: Mapping[str, str], profiles: Mapping[str, Profile],
             rules: Sequence[Rule], types: frozenset[str]) -> tuple[Profile | None, str]:
    """The job's profile, where the controller would find its key (the hook's tag, the
    job's comment, then the admin's rules) and as it would pick it for the GPU types the
    job may run on; and where the key came from."""
    for key, how in ((tags.get("profile"), "tag"), (comment_profile_key(job.comment),
                                                      "comment")):
        if key and KEY_RE.match(key):
            prof = pick_profile(profiles, key, types)
            if prof is not None:
                return prof, how
    for rule in rules:
        if rule.matches(job):
            prof = pick_profile(profiles, rule.key, types)
            if prof is not None:
                return prof, "rule"
    return None, "unknown"


def _year(t: float) -> int:
    return 1970 + int(t // (365.2425 * 86400))


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
