"""The paper's rounds (SYNERGY.md "Rounds"; :class:`.config.RoundsConfig`): every
``round_s`` seconds the plan is made afresh from all runnable jobs. A job in the plan
runs the whole round and is credited floor(available time / effective iteration time)
iterations; it completes at the end of the round in which its iterations run out. A job
whose GPUs, cores, memory and servers are unchanged keeps running (lease extension); any
other change, or resuming after a pause, costs ``restart_cost_s`` (0 by default, as in
the paper; carried into later rounds when longer than one). The first start costs nothing.

The other simulator, the controller model (Slurm's queue, backfill and placement with
synergy's hook and controller on top, in continuous time), is :mod:`.controller_model`;
:func:`.simulate.simulate` runs the one a config names.

The engine has no scheduling logic of its own: the order and the shares come from
``synergy_slurm.core``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..core import (
    Allocation,
    ClusterState,
    JobSpec,
    PerGpu,
    Profile,
    RequeueRule,
    Resources,
    Server,
    plan_round,
)
from ..core.allocators.tune_ref import reference_speedup
from ..core.plan import How
from ..core.usage import UsageSample, busy_share, judge, marks_after
from ..decide.view import Facts, job_spec
from .config import Occupancy, RoundsConfig, SimConfig
from .results import JobResult, SimResult, check_capped, scheduler
from .trace import TraceJob

_NO_REQUEUE = RequeueRule()
# A trace job without a model (a history's job whose profile is unknown): its iterations
# are milliseconds of work at the proportional share, fine enough that whole iterations
# per round lose nothing measurable.
UNKNOWN_ITER_S = 0.001


@dataclass
class _Job:
    trace: TraceJob
    profile: Profile | None   # None: unknown, always proportional (a history's jobs)
    iter_s: float          # seconds per iteration where the true profile's throughput is 1.0
    prop_tput: float       # the true profile's throughput at the cluster's proportional share
    true: Profile | None = None   # a mislabelled job's own profile (None: ``profile``)
    done: int = 0
    attained_s: float = 0.0
    start: float | None = None
    finish: float | None = None
    shape: tuple[PerGpu, tuple[tuple[str, int], ...]] | None = None   # (share, placement)
    alloc: Allocation | None = None
    requeued_at: float = float("-inf")
    restart_debt: float = 0.0   # restart time not yet paid (a cost longer than a round)
    restarts: int = 0

    def spec(self, caps: Mapping[tuple[str, str], PerGpu] | None = None) -> JobSpec:
        """The core's view (``decide.job_spec``): the paper's rounds know each job's work,
        so its time left is that work, at the proportional speed."""
        it = self.iter_s / self.prop_tput
        total = self.trace.iterations
        cap = caps.get((self.trace.model, self.trace.user)) if caps else None
        return job_spec(Facts(self.trace.job_id, self.trace.gpus, self.trace.arrival, None,
                              self.attained_s, (total - self.done) * it,
                              profile=self.profile, key=self.trace.model,
                              user=self.trace.user, priority=self.trace.priority, cap=cap,
                              duration_s=total * it))


def simulate_rounds(trace: Iterable[TraceJob], profiles: Mapping[str, Profile],
                    config: SimConfig, on_round: Callable[[float, int], None] | None = None,
                    max_rounds: int = 10_000_000) -> SimResult:
    """The paper's rounds: the trace (sorted by arrival; may be endless when a window is
    given) to the end, every job finished or every job of the window finished, every round
    planned and credited, as SYNERGY.md's rounds describe. ``config``: a
    :class:`.config.RoundsConfig` (a plain :class:`.config.SimConfig` runs without the
    reference's speedups)."""
    return check_capped(_rounds(trace, profiles, config, on_round, max_rounds), max_rounds)


def _rounds(trace: Iterable[TraceJob], profiles: Mapping[str, Profile], config: SimConfig,
            on_round: Callable[[float, int], None] | None, max_rounds: int) -> SimResult:
    started = time.perf_counter()
    policy, allocator = scheduler(config)
    cluster = config.cluster
    fair = cluster.fair
    total = cluster.total
    rnd = config.round_s
    arrivals, first, now = _first_arrival(trace, rnd)
    upcoming: TraceJob | None = first
    active: dict[int, _Job] = {}
    seen: list[_Job] = []
    window_left = None
    if config.window is not None:
        window_left = config.window[1] - config.window[0] + 1
    rounds = 0
    util: list[tuple[float, float, float, float]] = []
    background = _Background(cluster, config.background) if config.background else None
    samples: dict[int, UsageSample] = {}
    caps: dict[tuple[str, str], PerGpu] = dict(config.caps)
    marks: dict[tuple[str, str], PerGpu] = {}     # the closed loop's, kept (marks_after)
    while rounds < max_rounds:
        upcoming = _arrive(upcoming, arrivals, now, profiles, fair, active, seen)
        if window_left == 0 or (not active and upcoming is None):
            break
        if not active:
            assert upcoming is not None
            now = max(now + rnd, math.ceil(upcoming.arrival / rnd) * rnd)
            continue
        here = background.at(now) if background else cluster
        allocations = list(plan_round([j.spec(caps) for j in active.values()], (), here,
                                      policy, allocator, _NO_REQUEUE, {}, now
                                      ).plan.allocations)
        running: set[int] = set()
        for alloc in allocations:
            job = active[alloc.job_id]
            running.add(alloc.job_id)
            if _credit(job, alloc, now, config):
                job.finish = now + rnd
                del active[alloc.job_id]
                if config.window and config.window[0] <= job.trace.job_id <= config.window[1]:
                    assert window_left is not None
                    window_left -= 1
        for job_id, job in active.items():
            if job_id not in running:
                job.shape = None
                job.alloc = None
        if config.usage is not None:
            _watch(allocations, {j.trace.job_id: j for j in seen}, fair, now + rnd, samples)
            marks = marks_after(marks, judge(samples.values(), config.usage))
            caps = {**config.caps, **marks}
        util.append((now, *_used_share(allocations, total)))
        rounds += 1
        now += rnd
        if on_round is not None:
            on_round(now, len(seen) - len(active))
    results = [JobResult(j.trace.job_id, j.trace.model, j.trace.gpus, j.trace.arrival, j.start,
                         j.finish, j.restarts) for j in seen]
    return SimResult(config, results, rounds, now, time.perf_counter() - started, util)


def _credit(job: _Job, alloc: Allocation, now: float, config: SimConfig) -> bool:
    """A round of ``alloc`` credited to ``job``: the iterations it runs in the round, less
    what a restart costs; whether the job is done."""
    rnd = config.round_s
    shape = (alloc.share, alloc.placement)
    if shape != job.shape and job.start is not None:
        # A restart (new shape, or resuming after a pause) costs; the first start
        # does not (the paper's simulator charges nothing at all).
        job.restarts += 1
        job.restart_debt = config.restart_cost_s
    paid = min(job.restart_debt, rnd)
    job.restart_debt -= paid
    avail = rnd - paid
    job.shape = shape
    job.alloc = alloc
    if job.start is None:
        job.start = now
    reference = isinstance(config, RoundsConfig) and config.reference_speedups
    eff = effective_iter_s(job, alloc, config.cluster.fair, reference,
                           config.cluster.servers)
    job.done += math.floor(avail / eff) if avail > 0 else 0
    job.attained_s += rnd
    return job.done >= job.trace.iterations


def _used_share(allocations: Sequence[Allocation], total: Resources
                ) -> tuple[float, float, float]:
    """The share of the cluster's GPUs, cores and memory a round's allocations hold."""
    used_g = used_c = 0
    used_m = 0.0
    for alloc in allocations:
        used_g += alloc.gpus
        used_c += alloc.share.cpus * alloc.gpus
        used_m += alloc.share.mem_gb * alloc.gpus
    return used_g / total.gpus, used_c / total.cpus, used_m / total.mem_gb


def _first_arrival(trace: Iterable[TraceJob], rnd: float
                   ) -> tuple[Iterator[TraceJob], TraceJob, float]:
    """The trace as an iterator, its first job, and the first round's time."""
    arrivals = iter(trace)
    upcoming = next(arrivals, None)
    if upcoming is None:
        raise ValueError("empty trace")
    return arrivals, upcoming, math.ceil(upcoming.arrival / rnd) * rnd


def _arrive(upcoming: TraceJob | None, arrivals: Iterator[TraceJob], now: float,
            profiles: Mapping[str, Profile], fair: PerGpu, into: dict[int, _Job],
            seen: list[_Job]) -> TraceJob | None:
    """Every trace job that has arrived by ``now`` joins ``into`` (and ``seen``); returns
    the first one still to come. A trace job without a model is one whose profile is
    unknown."""
    while upcoming is not None and upcoming.arrival <= now:
        prof = profiles[upcoming.model] if upcoming.model else None
        true = profiles[upcoming.true_model] if upcoming.true_model else prof
        job = _Job(upcoming, prof, iter_seconds(true) if true else UNKNOWN_ITER_S,
                   true.at(fair.cpus, fair.mem_gb) if true else 1.0,
                   true if true is not prof else None)
        into[upcoming.job_id] = job
        seen.append(job)
        last = upcoming.arrival
        upcoming = next(arrivals, None)
        if upcoming is not None and upcoming.arrival < last:
            raise ValueError(f"trace not sorted by arrival at job {upcoming.job_id}")
    return upcoming


def _watch(allocations: list[Allocation], jobs: Mapping[int, _Job], fair: PerGpu,
           now: float, samples: dict[int, UsageSample]) -> None:
    """Sample each running job's use at the end of the round: what its true profile keeps
    busy of its share (core.usage.busy_share), over the time it has run."""
    for alloc in allocations:
        job = jobs[alloc.job_id]
        real = job.true or job.profile
        if real is None or job.start is None:
            continue
        busy = busy_share(real, alloc.share, fair)
        samples[alloc.job_id] = UsageSample(alloc.job_id, job.trace.model, job.trace.user,
                                            alloc.share, fair, float(busy.cpus), busy.mem_gb,
                                            now - job.start)


class _Background:
    """The cluster as each round finds it: its own reservations plus the occupancies
    running then. Rounds only move forward, so one sweep over the sorted starts serves."""

    def __init__(self, cluster: ClusterState, occupancies: tuple[Occupancy, ...]) -> None:
        names = {s.name for s in cluster.servers}
        unknown = {o.server for o in occupancies} - names
        if unknown:
            raise ValueError(f"background on unknown servers: {', '.join(sorted(unknown))}")
        self.cluster = cluster
        self.todo = sorted(occupancies, key=lambda o: o.start)
        self.next = 0
        self.running: list[Occupancy] = []

    def at(self, now: float) -> ClusterState:
        while self.next < len(self.todo) and self.todo[self.next].start <= now:
            self.running.append(self.todo[self.next])
            self.next += 1
        self.running = [o for o in self.running if o.end > now]
        if not self.running:
            return self.cluster
        return ClusterState(self.cluster.servers, self.cluster.reserved + tuple(
            (o.server, o.resources) for o in self.running), self.cluster.fair)


def iter_seconds(profile: Profile) -> float:
    """Seconds per iteration where the profile's throughput is 1.0 (the reference
    profiles' proportional point); 1 s when the profile does not say."""
    return profile.iter_time_s if profile.iter_time_s else 1.0


def effective_iter_s(job: _Job, alloc: Allocation, fair: PerGpu, reference: bool,
                     servers: tuple[Server, ...] = ()) -> float:
    """Seconds per iteration with the allocated share.

    ``reference``: the reference simulator's rule, where a job runs at its ideal speedup
    when it got at least its ideal share (or its demand cut to a server, at the speedup the
    allocator estimated for it) and at 1.0 (proportional) otherwise.
    """
    prop_iter = job.iter_s / job.prop_tput
    if reference and job.profile is not None:
        ideal = job.profile.ideal
        if alloc.how == How.CAPPED:
            return prop_iter / reference_speedup(job.spec(), fair, servers)
        at_ideal = alloc.how == How.IDEAL or (ideal is not None and ideal.within(alloc.share))
        return prop_iter / (alloc.speedup if at_ideal else 1.0)
    if job.true is not None:   # mislabelled: it runs as what it is, not as planned
        return prop_iter / job.true.speedup(alloc.share, fair)
    return prop_iter / alloc.speedup
