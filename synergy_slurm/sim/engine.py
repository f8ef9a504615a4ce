"""The simulator: the paper's rounds, or the controller model.

The paper's rounds (``preemptive``, SYNERGY.md "Rounds"): every ``round_s`` seconds the
plan is made afresh from all runnable jobs. A job in the plan runs the whole round and is
credited floor(available time / effective iteration time) iterations; it completes at the
end of the round in which its iterations run out. A job whose GPUs, cores, memory and
servers are unchanged keeps running (lease extension); any other change, or resuming after
a pause, costs ``restart_cost_s`` (0 by default, as in the paper; carried into later rounds
when longer than one). The first start costs nothing.

The controller model (``preemptive=False``; :mod:`.controller_model`): Slurm's queue,
backfill and placement, with synergy's hook and controller on top, in continuous time.

The engine has no scheduling logic of its own: the order and the shares come from
``synergy_slurm.core``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from ..core import (
    Allocation,
    Allocator,
    ClusterState,
    JobSpec,
    PerGpu,
    Policy,
    Profile,
    RequeueRule,
    Resources,
    Server,
    get_allocator,
    get_policy,
    plan_round,
)
from ..core.allocators.tune_ref import reference_speedup
from ..core.backfill import BF_MAX_JOB_TEST
from ..core.plan import How
from ..core.pools import Pool
from ..core.usage import UsageRule, UsageSample, busy_share, judge, marks_after
from .controller_model import simulate_controller
from .trace import TraceJob

_NO_REQUEUE = RequeueRule()
# A trace job without a model (a history's job whose profile is unknown): its iterations
# are milliseconds of work at the proportional share, fine enough that whole iterations
# per round lose nothing measurable.
UNKNOWN_ITER_S = 0.001


@dataclass(frozen=True)
class Occupancy:
    """``resources`` held on ``server`` from ``start`` to ``end`` (simulated seconds)."""

    start: float
    end: float
    server: str
    resources: Resources


@dataclass(frozen=True)
class SimConfig:
    cluster: ClusterState
    policy: str = "fifo"
    allocator: str = "tune"
    round_s: float = 300.0
    restart_cost_s: float = 0.0
    reference_speedups: bool = False
    window: tuple[int, int] | None = None
    opt_time_limit_s: float = 1.5
    # False: the controller model (.controller_model): Slurm's scheduler, and synergy's
    # hook and controller unless the allocator is proportional; ``round_s`` is then
    # Slurm's scheduling interval (sched_interval / bf_interval).
    preemptive: bool = True
    # With preemptive=False: requeue running jobs into idle resources when it pays (as the
    # controller does), at most this many per round, each job at most every interval.
    requeue_budget: int = 0
    requeue_interval_s: float = 0.0
    # Requeue only trace jobs that opted in (TraceJob.requeue_ok), as the controller does
    # with a site's jobs; False: any running job (the simulator's generated traces).
    requeue_opt_in: bool = False
    # Running jobs report their progress ([usage] progress_dir, with a total): the
    # controller knows the work they have left, not only their time limits.
    progress_reports: bool = False
    # With preemptive=False: lower running jobs' memory to what their profiles need, in
    # place (as the controller does where Slurm can: 26.05).
    shrink_memory: bool = False
    # With preemptive=False: the site's partitions (core.pools.Pool; empty: one pool over
    # ``cluster``), the controller's round (0: ``round_s``), how long after a release Slurm
    # sees the job, whether the release honours lowering a pending job (26.05: known
    # profiles start unheld, shaped by the hook) and the backfill's depth
    # (bf_max_job_test).
    pools: tuple[Pool, ...] = ()
    controller_interval_s: float = 0.0
    release_delay_s: float = 0.0
    lowers_pending: bool = False
    bf_max_job_test: int = BF_MAX_JOB_TEST
    # The hook's [hook] hold_known / hold_unknown (known profiles are never held where the
    # release honours lowering, as the controller tells the hook).
    hold_known: bool = True
    hold_unknown: bool = True
    # With preemptive=False: the order of Slurm's queue ("": ``policy``, which is also the
    # order of the controller's plan), and the time limit of trace jobs without one (0:
    # unlimited).
    slurm_order: str = ""
    default_time_limit_s: float = 0.0
    # How GPUs are chosen (core.ledger.PLACEMENTS); None: the allocator's own default.
    placement: str | None = None
    # Resources held at given times whatever the scheduler does (a history's jobs without
    # GPUs, which synergy never moves): each reserved on its server while it runs.
    background: tuple[Occupancy, ...] = ()
    # The closed loop (core.usage): each round, running jobs' use is sampled and a user's
    # key whose jobs use far less than they are given is capped for that user's later
    # jobs. None: profiles are trusted.
    usage: UsageRule | None = None
    # Marks the closed loop made before the run (whatif: from the history's measured use):
    # (profile key, user) -> the cap on those jobs; the controller keeps a mark until an
    # admin clears it.
    caps: Mapping[tuple[str, str], PerGpu] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.round_s <= 0:
            raise ValueError("round length must be positive")
        if self.restart_cost_s < 0:
            raise ValueError("restart cost must not be negative")
        if self.controller_interval_s < 0 or self.release_delay_s < 0:
            raise ValueError("the controller's interval and release delay must not be "
                             "negative")
        if not self.preemptive and self.reference_speedups:
            raise ValueError("the reference's speedups belong to the paper's rounds, not "
                             "the controller model")


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
    shape: tuple | None = None
    alloc: Allocation | None = None
    requeued_at: float = float("-inf")
    restart_debt: float = 0.0   # restart time not yet paid (a cost longer than a round)
    restarts: int = 0

    def spec(self, caps: Mapping[tuple[str, str], PerGpu] | None = None) -> JobSpec:
        it = self.iter_s / self.prop_tput
        total = self.trace.iterations
        cap = caps.get((self.trace.model, self.trace.user)) if caps else None
        return JobSpec(self.trace.job_id, self.trace.gpus, submitted=self.trace.arrival,
                       duration_s=total * it, remaining_s=(total - self.done) * it,
                       attained_s=self.attained_s, profile=self.profile,
                       profile_key=self.trace.model, user=self.trace.user,
                       priority=self.trace.priority, limit=cap)


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


def simulate(trace: Iterable[TraceJob], profiles: Mapping[str, Profile], config: SimConfig,
             on_round: Callable[[float, int], None] | None = None,
             max_rounds: int = 10_000_000) -> SimResult:
    """Run the trace (sorted by arrival; may be endless when a window is given) to the end:
    every job finished, or every job of the window finished."""
    if config.preemptive:
        out = _simulate_rounds(trace, profiles, config, on_round, max_rounds)
    else:
        started = time.perf_counter()
        res = simulate_controller(trace, profiles, config, on_round, max_rounds)
        results = [JobResult(r.trace.job_id, r.trace.model, r.trace.gpus, r.trace.arrival,
                             r.start, r.finish, r.restarts) for r in res.runs]
        out = SimResult(config, results, res.passes, res.end_s,
                        time.perf_counter() - started, res.utilisation)
    left = [j for j in out.jobs if j.finish is None and j.start is not None]
    if out.rounds >= max_rounds and left:
        raise SimulationCapped(
            f"the simulation stopped at its cap of {max_rounds:,} rounds with {len(left)} "
            f"jobs still running (e.g. job {left[0].job_id}, started at "
            f"{left[0].start / 3600:.0f} h): a trace that long needs longer rounds")
    return out


class SimulationCapped(ValueError):
    """A run that reached its round cap before its jobs ended: no result to report."""


def _simulate_rounds(trace: Iterable[TraceJob], profiles: Mapping[str, Profile],
                     config: SimConfig, on_round: Callable[[float, int], None] | None,
                     max_rounds: int) -> SimResult:
    """Every round planned and credited, as SYNERGY.md's rounds describe."""
    started = time.perf_counter()
    policy, allocator = _scheduler(config)
    cluster = config.cluster
    fair = cluster.fair
    total = cluster.total
    rnd = config.round_s
    arrivals, upcoming, now = _first_arrival(trace, rnd)
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
    eff = effective_iter_s(job, alloc, config.cluster.fair, config.reference_speedups,
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


def _scheduler(config: SimConfig) -> tuple[Policy, Allocator]:
    return get_policy(config.policy), get_allocator(config.allocator, config.placement,
                                                    config.opt_time_limit_s)


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
            (o.server, o.resources) for o in self.running), self.cluster.fair_share)


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
