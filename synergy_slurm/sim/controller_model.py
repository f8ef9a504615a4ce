"""The controller model: a site's Slurm, with or without synergy's hook and controller.

What ``synergy whatif`` and ``synergy simulate --no-preempt`` replay, in continuous time
(the paper's rounds are :mod:`.engine`'s):

* **Slurm** (:mod:`..core.backfill`): a job is in the queue from its submission (or the
  time it asked to wait for); on every event (a submission, an end, a release) the main
  scheduler starts what fits in priority order, each partition stopping at its first job
  that does not; every ``round_s`` (sched_interval / bf_interval) the backfill scheduler
  also starts lower-priority jobs that end, by their time limits, before the reservations
  of the jobs before them. A running job keeps its allocation until it ends; jobs are
  placed as cons_tres places them, in their partition (and GPU type); from 24.11 on an
  idle node first where one holds them (``idle_first``).
* **A job's run**: its start-up (not sped up), then its work at the speed its profile
  gives at its share. A job whose outcome is fixed (it hit its time limit, failed or was
  cancelled in the history) runs exactly as long as it did.
* **synergy** (allocator other than ``proportional``): the hook tags every job; on a
  release that ignores lowering a scheduled job (22.05) it holds them all, on one that
  honours it (``lowers_pending``: 26.05) only jobs without a known profile, and gives
  known ones their ideal share, capped at a node. Every ``controller_interval_s`` the
  controller plans the pending jobs of every pool (``core.plan_pools``, the call the real
  controller makes) into what is free: a held job it plans is given its share and
  released (Slurm sees it ``release_delay_s`` later; the controller's next rounds see it
  pending in Slurm's queue already, so they plan it first and give its GPUs to no other
  held job), a visible one is raised (or lowered
  where the release honours it, never a job it requeued before it runs again); held jobs
  are invisible to Slurm's backfill. It plans as the controller does, keeping room for
  the GPUs jobs wait for (``Allocator.keeps_room``: a running job is never lowered). It
  requeues running jobs that opted in when the time saved beats ``restart_cost_s``, and lowers
  running jobs' memory in place where asked (``shrink_memory``: 26.05).
* **Without synergy** (``proportional``): no hook, no controller; each job asks for the
  share it asked for in the history (``TraceJob.share``), else its partition's default.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace

from ..core import (
    Allocation,
    ClusterState,
    JobSpec,
    PerGpu,
    Profile,
    RequeueRule,
    Resources,
    Server,
    get_policy,
    reshape_candidates,
)
from ..core.backfill import Busy, Start, Waiting, backfill_pass, main_pass
from ..core.demand import ideal_demand
from ..core.plan import How
from ..core.pools import Pool, PoolJobs, plan_pools, smallest_fair
from ..core.shrink import memory_shrinks
from ..core.usage import UsageSample, busy_share, judge, marks_after
from ..decide import Change, PendingView, Step, by_pool, needs_no_hold, no_hold_share, reconcile
from ..decide.view import Facts, Left, job_spec
from .config import Occupancy, SlurmConfig
from .results import JobResult, SimResult, check_capped, scheduler
from .trace import TraceJob

# A job without a time limit: Slurm plans with INFINITE, i.e. never back within the
# backfill window.
UNLIMITED_S = 365 * 24 * 3600.0


@dataclass
class _Run:
    """One trace job in the model."""

    trace: TraceJob
    pool: Pool
    profile: Profile | None        # what synergy plans it by (None: unknown)
    true: Profile | None           # what it runs as (a mislabelled job's own)
    work_s: float                  # work left, seconds at the pool's proportional share
    debt_s: float                  # start-up or restart time still to pay (not sped up)
    share: PerGpu                  # what it asks Slurm for now
    held: bool = False
    eligible_at: float = 0.0
    alloc: Allocation | None = None
    run_start: float = 0.0
    rate: float = 1.0
    end_at: float = math.inf
    start: float | None = None
    finish: float | None = None
    restarts: int = 0
    requeued_at: float = -math.inf

    @property
    def fair(self) -> PerGpu:
        return self.pool.cluster.fair

    limit_s: float = UNLIMITED_S   # its time limit, what Slurm's backfill plans with
    total_s: float = 0.0           # its whole run at the proportional share
    # Whether the core lowers its memory in place (``_Model._shrinkable``), and for which
    # allocation that was asked: a new allocation (a start, a shrink) asks again.
    shrinks: bool = False
    shrinks_asked: Allocation | None = None
    # Its poorest node's cores per GPU where the history shows Slurm laid it out unevenly
    # (TraceJob.spread_cpus), for a job that keeps the shape it was submitted with; 0.0
    # for one synergy reshapes (its explicit share is laid out per GPU, TraceJob).
    spread_cpus: float = 0.0

    def speed(self, share: PerGpu, placement: tuple[tuple[str, int], ...] = ()) -> float:
        if self.trace.fixed_s:
            return 1.0
        real = self.true or self.profile
        if real is None:
            return 1.0
        # spread_cpus is set only for a job that keeps its history's own share.
        cpus = self.spread_cpus if self.spread_cpus and len(placement) > 1 and \
            share == self.trace.share else share.cpus
        return real.speedup_at(cpus, share.mem_gb, self.fair)

    def done_by(self, t: float) -> tuple[float, float]:
        """(work left, debt left) at ``t`` of the current run."""
        ran = max(0.0, t - self.run_start)
        paid = min(ran, self.debt_s)
        return max(0.0, self.work_s - (ran - paid) * self.rate), self.debt_s - paid


@dataclass
class _Seen:
    """What Slurm and the controller see of the cluster now: what running jobs and the
    background hold per server, as a cluster and as each pool, built on the first read
    after a change (a job or the background takes or gives back) and shared by every
    pass and round until the next. A replay reads it several times per event; building
    it on every read was a tenth of a large whatif's replay time (#17)."""

    holdings: tuple[tuple[str, Resources], ...] | None = None
    cluster: ClusterState | None = None
    pools: dict[str, Pool] = field(default_factory=dict)


@dataclass
class _Inputs:
    """What comes from outside the cluster, consumed as time passes: the trace's next job,
    the background load still to start, and the window's jobs still to finish."""

    arrivals: Iterator[TraceJob]
    upcoming: TraceJob | None
    background: list[Occupancy]
    bg_next: int
    window_left: int | None

    @classmethod
    def start(cls, arrivals: Iterator[TraceJob], cfg: SlurmConfig) -> _Inputs:
        window_left = None
        if cfg.window is not None:
            window_left = cfg.window[1] - cfg.window[0] + 1
        return cls(arrivals, next(arrivals, None),
                   sorted(cfg.background, key=lambda o: o.start), 0, window_left)

    def first_arrival(self) -> float:
        if self.upcoming is None:
            raise ValueError("empty trace")
        return self.upcoming.arrival

    def background_left(self) -> bool:
        return self.bg_next < len(self.background)


def simulate_slurm(trace: Iterable[TraceJob], profiles: Mapping[str, Profile],
                   config: SlurmConfig, on_round: Callable[[float, int], None] | None = None,
                   max_passes: int = 10_000_000) -> SimResult:
    """Replay ``trace`` (sorted by submission) through the model."""
    started = time.perf_counter()
    model = _Model(profiles, config, on_round)
    runs, passes, end = model.run(iter(trace), max_passes)
    results = [JobResult(r.trace.job_id, r.trace.model, r.trace.gpus, r.trace.arrival,
                         r.start, r.finish, r.restarts) for r in runs]
    return check_capped(SimResult(config, results, passes, end, time.perf_counter() - started,
                                  model.util), max_passes)


class _Model:
    def __init__(self, profiles: Mapping[str, Profile], config: SlurmConfig,
                 on_round: Callable[[float, int], None] | None) -> None:
        self.cfg = config
        self.profiles = profiles
        self.on_round = on_round
        self.policy, self.allocator = scheduler(config, keeps_room=True)
        self.slurm_order = get_policy(config.slurm_order or config.policy)
        self.synergy = config.allocator != "proportional"
        self.pools = config.pools or (Pool("", config.cluster),)
        self.by_partition = {p.partition: p for p in self.pools}
        # What the hook's table holds known shapes to (decide.needs_no_hold).
        self.least_fair = smallest_fair(self.pools) or config.cluster.fair
        # The table's no-hold share as the last round wrote it (decide.no_hold_share).
        self.no_hold: PerGpu | None = no_hold_share(self.least_fair, False)
        # Each partition's nodes: what the main scheduler closes when one of its jobs waits.
        self.partition_nodes = {p.partition: p.server_names() for p in self.pools}
        self.servers = config.cluster.servers
        self.total = config.cluster.total
        self.rule = RequeueRule(config.restart_cost_s, config.requeue_interval_s,
                                config.requeue_budget)
        self.interval = config.controller_interval_s or config.round_s
        self.waiting: dict[int, _Run] = {}
        self.visible: dict[int, _Run] = {}       # waiting, not held, eligible: Slurm's queue
        self._soon: list[tuple[float, int]] = []  # (eligible time, job) still to come
        # Jobs the controller released (or requeued) that Slurm starts only after the
        # release delay: pending in Slurm's queue for the controller's next round already.
        self.released: set[int] = set()
        self._ends: list[tuple[float, int]] = []  # (end, job) of running jobs (some stale)
        self.running: dict[int, _Run] = {}
        self.seen: list[_Run] = []
        self.occupied_bg: list[tuple[float, str, Resources]] = []   # (end, server, resources)
        # What running jobs (``jobs``) and background (``bg``) hold per server, kept as
        # they start and end: the cluster Slurm sees, without a sum over every job.
        self.jobs_used: dict[str, Resources] = {}
        self.used_total = Resources()
        self.bg_used: dict[str, Resources] = {}
        self._seen = _Seen()
        self._fits_empty: dict[tuple[str, str, int, int, PerGpu], bool] = {}
        self.finished = 0
        # Whether the controller's next round, and Slurm's next backfill pass, may find
        # something new (see _ticks_anyway for the rounds that may even when nothing did).
        self._tick_due = self._pass_due = True
        self._updated = False
        self._time_policy = self.policy.name not in ("fifo", "slurm")
        # Running jobs a round may requeue (their requeue interval permitting).
        self._movable: set[int] = set()
        self._last_round = -math.inf
        self.samples: dict[int, UsageSample] = {}
        self.caps: dict[tuple[str, str], PerGpu] = dict(config.caps)
        self.marks: dict[tuple[str, str], PerGpu] = {}    # the closed loop's, kept
        self.util: list[tuple[float, float, float, float]] = []

    # -- the loop ----------------------------------------------------------------------
    def run(self, arrivals: Iterator[TraceJob], max_passes: int) -> tuple[list[_Run], int, float]:
        inputs = _Inputs.start(arrivals, self.cfg)
        t = next_pass = next_tick = inputs.first_arrival()
        passes = 0
        while passes < max_passes:
            event = self._end_jobs(t, inputs) | self._background(t, inputs) \
                | self._arrivals(t, inputs)
            if inputs.window_left == 0 or (not self.waiting and not self.running
                                           and inputs.upcoming is None):
                break
            if self._due_now(t):
                event = True
            visible = self._visible()
            if event:
                # A round or a pass finds what it found last time unless something changed
                # (the core is deterministic, and with time nothing frees up by itself).
                self._tick_due = self._pass_due = True
            # Rounds and passes keep their period: one skipped while nothing changed comes
            # back at its next time on the grid, not at the event that made it due (the
            # controller sleeps its interval; Slurm's main scheduler takes a freed GPU at
            # once and would beat a round run at the event, #42).
            next_tick, next_pass = _on_grid(t, next_tick, self.interval), \
                _on_grid(t, next_pass, self.cfg.round_s)
            if self.synergy and t >= next_tick and (self._tick_due or self._ticks_anyway(t)):
                self._tick_due = False
                self._updated = False
                self._controller(t)
                self._last_round = t
                next_tick = _next_on_grid(t, self.interval)
                visible = self._visible()
                if self._updated:       # an update wakes Slurm's scheduler, as an event does
                    event = self._pass_due = True
            if visible and event:
                self._start(main_pass(self._queue(visible, t), self._cluster(), t,
                                      self.partition_nodes, self.cfg.idle_first), t)
            if t >= next_pass and self._pass_due:
                self._pass_due = False
                visible = self._visible()
                if visible:
                    self._start(backfill_pass(self._queue(visible, t), self._cluster(),
                                              self._busy(), t, self.cfg.bf_max_job_test,
                                              idle_first=self.cfg.idle_first), t)
                next_pass = _next_on_grid(t, self.cfg.round_s)
                passes += 1
            self._record(t)
            if self.on_round is not None:
                self.on_round(t, self.finished)
            if self._stalled(t, inputs):
                break
            t = self._next_time(t, inputs, next_pass, next_tick)
        return self.seen, passes, t

    def _end_jobs(self, t: float, inputs: _Inputs) -> bool:
        """End the running jobs whose end is due; whether any did."""
        event = False
        while self._ends and self._ends[0][0] <= t:
            end, jid = heapq.heappop(self._ends)
            run = self.running.get(jid)
            if run is None or run.end_at != end:
                continue          # requeued, or its end moved (a shrink): stale
            self._finish(run)
            event = True
            if self.cfg.window and self.cfg.window[0] <= jid <= self.cfg.window[1]:
                assert inputs.window_left is not None
                inputs.window_left -= 1
        return event

    def _background(self, t: float, inputs: _Inputs) -> bool:
        """Release the background load whose end is due (an event) and take what starts."""
        event = False
        if self.occupied_bg and min(e for e, _, _ in self.occupied_bg) <= t:
            for end, server, res in self.occupied_bg:
                if end <= t:
                    _add(self.bg_used, server, res, -1)
                    self._seen = _Seen()
            self.occupied_bg = [b for b in self.occupied_bg if b[0] > t]
            event = True
        while inputs.bg_next < len(inputs.background) and \
                inputs.background[inputs.bg_next].start <= t:
            o = inputs.background[inputs.bg_next]
            if o.end > t:
                self.occupied_bg.append((o.end, o.server, o.resources))
                _add(self.bg_used, o.server, o.resources, 1)
                self._seen = _Seen()
            inputs.bg_next += 1
        return event

    def _arrivals(self, t: float, inputs: _Inputs) -> bool:
        """Submit the trace's jobs that arrived by ``t``; whether any did."""
        event = False
        while inputs.upcoming is not None and inputs.upcoming.arrival <= t:
            self._arrive(inputs.upcoming)
            last = inputs.upcoming.arrival
            inputs.upcoming = next(inputs.arrivals, None)
            if inputs.upcoming is not None and inputs.upcoming.arrival < last:
                raise ValueError(f"trace not sorted by arrival at job {inputs.upcoming.job_id}")
            event = True
        return event

    def _ticks_anyway(self, t: float) -> bool:
        """Whether the controller's round at ``t`` may act though nothing started, ended or
        came since the last one: it watches use, its policy orders by time (LAS, SRTF, FTF),
        or a running job's requeue interval ended since the last round. Otherwise a round
        finds what the last found (the core is deterministic), and skipping it changes
        nothing but the replay's speed: a requeue the last round did not make does not pay
        later either, as what a restart saves only shrinks while the job runs (its remaining
        work) and nothing frees room without an event; a round that changed anything
        (released, reshaped, requeued or shrank a job) is followed by one (``_reshape``,
        ``_requeue``, ``_rerate``), as the budget is per round and the next round plans from
        what this one did. Rounds every interval while any job may be requeued were most of
        a requeue-heavy replay's time (#42: 55,889 rounds for 1,000 jobs)."""
        return (self.cfg.usage is not None or self._time_policy
                or self._next_requeue_due() <= t)

    def _next_requeue_due(self) -> float:
        """When a running job that may be requeued next reaches its requeue interval
        after the last round (``math.inf``: none will)."""
        if not self.rule.budget:
            return math.inf
        due = (self.running[jid].requeued_at + self.rule.min_interval_s
               for jid in self._movable)
        return min((d for d in due if d > self._last_round), default=math.inf)

    def _stalled(self, t: float, inputs: _Inputs) -> bool:
        """Nothing runs, nothing will come or be released, and what waits did not start
        on the empty cluster: the run is over (those jobs never run)."""
        if self.running or inputs.upcoming is not None or inputs.background_left() or \
                self.occupied_bg or any(r.held or r.eligible_at > t
                                    for r in self.waiting.values()):
            return False
        return bool(self.waiting)

    def _next_time(self, t: float, inputs: _Inputs, next_pass: float,
                   next_tick: float) -> float:
        while self._ends and (self.running.get(self._ends[0][1]) is None
                              or self.running[self._ends[0][1]].end_at != self._ends[0][0]):
            heapq.heappop(self._ends)          # stale
        soon = [self._ends[0][0]] if self._ends else []
        if inputs.upcoming is not None:
            soon.append(inputs.upcoming.arrival)
        if inputs.background_left():
            soon.append(inputs.background[inputs.bg_next].start)
        soon += [e for e, _, _ in self.occupied_bg]
        if self._soon:
            soon.append(self._soon[0][0])
        if self._pass_due and self.visible:
            soon.append(next_pass if next_pass > t else _next_on_grid(t, self.cfg.round_s))
        if self.synergy and ((self._tick_due and (self.waiting or self.running)) or (
                (self.cfg.usage is not None or self._time_policy) and self.running)):
            soon.append(next_tick if next_tick > t else _next_on_grid(t, self.interval))
        due = self._next_requeue_due() if self.synergy else math.inf
        if due < math.inf:
            soon.append(max(next_tick, math.ceil(due / self.interval - 1e-9) * self.interval)
                        if due > t else (next_tick if next_tick > t
                                         else _next_on_grid(t, self.interval)))
        nxt = min(soon) if soon else t + self.cfg.round_s
        return max(nxt, t + 1e-9) if nxt <= t else nxt

    # -- a job's life ------------------------------------------------------------------
    def _arrive(self, tj: TraceJob) -> None:
        pool = self.by_partition.get(tj.partition, self.pools[0])
        prof = self.profiles[tj.model] if tj.model else None
        true = self.profiles[tj.true_model] if tj.true_model else prof
        fair = pool.cluster.fair
        if tj.fixed_s:
            work = tj.fixed_s
        elif tj.work_s:
            work = tj.work_s
        elif true is not None:
            work = tj.iterations * (true.iter_time_s or 1.0) / true.at(fair.cpus, fair.mem_gb)
        else:
            work = tj.iterations * 0.001
        run = _Run(tj, pool, prof, true if true is not prof else None, work,
                   0.0 if tj.fixed_s else tj.startup_s, tj.share or fair,
                   eligible_at=max(tj.arrival, tj.eligible or 0.0),
                   limit_s=tj.time_limit_s or self.cfg.default_time_limit_s or UNLIMITED_S,
                   total_s=work + tj.startup_s)
        self.seen.append(run)
        servers = pool.of_type(tj.gpu_type or None).servers
        if not self._could_run(run):
            # Asked for more cores or memory per GPU than these nodes have (a history
            # replayed on other nodes): its partition's default instead.
            run.share = run.fair
            if not self._could_run(run):
                return   # Slurm refuses it at submission: never runs (counted unfinished)
        if self.synergy:
            self._hook(run, servers)
        if tj.spread_cpus and not (self.synergy and _change(run) is Change.RESHAPE):
            run.spread_cpus = tj.spread_cpus
        self.waiting[tj.job_id] = run
        if not run.held:
            self._to_slurm(run, tj.arrival)

    def _could_run(self, run: _Run) -> bool:
        """Whether the job fits its partition's nodes when they are empty."""
        tj = run.trace
        key = (run.pool.partition, tj.gpu_type, tj.gpus, tj.gpus_per_node, run.share)
        if key not in self._fits_empty:
            empty = ClusterState(run.pool.cluster.servers, (), run.fair)
            self._fits_empty[key] = bool(main_pass([self._waiting(run)], empty, 0.0))
        return self._fits_empty[key]

    def _hook(self, run: _Run, servers: Iterable[Server]) -> None:
        """The job_submit hook, by the one rule (``decide``): a job synergy leaves keeps
        the share it asked for and is never held; a known profile gets its ideal share
        (capped at a node), held (``hold_known``) unless the release honours lowering or
        its ideal is within the proportional share and no held job waits
        (``decide.needs_no_hold``, ``decide.no_hold_share``); an unknown
        one keeps the share it has, held (``hold_unknown``) until the controller releases
        it, and so does a known one whose key the closed loop suspects (the controller
        leaves it out of the hook's table)."""
        change = _change(run)
        if change is Change.LEAVE:
            run.held = False
        elif change is Change.RESHAPE and self._suspect(run.trace.model):
            # Out of the table (controller/daemon.py): the hook holds it as unknown, with
            # the share it asked for; a round shapes it by its own user's cap.
            run.held = self.cfg.hold_unknown
        elif change is Change.RESHAPE:
            spec = self._spec(run, 0.0)
            run.share = ideal_demand(spec, run.fair, tuple(servers)).share
            ideal = spec.profile.ideal if spec.profile is not None else None
            run.held = (self.cfg.hold_known and not self.cfg.lowers_pending
                        and not (ideal is not None and self.no_hold is not None
                                 and needs_no_hold(ideal, self.no_hold)))
        else:
            run.held = self.cfg.hold_unknown

    def _suspect(self, key: str) -> bool:
        """Whether the closed loop caps ``key`` for some user: the controller then leaves
        it out of the hook's table for every user."""
        return any(k == key for k, _ in self.marks)

    def _start(self, starts: Iterable[Start], t: float) -> None:
        for s in starts:
            run = self.waiting.pop(s.job_id)
            self.visible.pop(s.job_id, None)
            run.rate = run.speed(run.share, s.placement)
            run.alloc = Allocation(run.trace.job_id, run.trace.gpus, run.share, s.placement,
                                   run.rate, How.SLURM)
            run.run_start = t
            run.end_at = t + run.debt_s + run.work_s / run.rate
            if run.start is None:
                run.start = t
            self.running[s.job_id] = run
            self._hold(run.alloc, 1)
            heapq.heappush(self._ends, (run.end_at, s.job_id))
            if not run.trace.fixed_s and (run.trace.requeue_ok
                                          or not self.cfg.requeue_opt_in):
                self._movable.add(s.job_id)
            # Less room for what waits, and a start the next round may shrink.
            self._tick_due = True

    def _finish(self, run: _Run) -> None:
        del self.running[run.trace.job_id]
        self._movable.discard(run.trace.job_id)
        self._hold(run.alloc, -1)
        self.finished += 1
        run.finish = run.end_at
        run.work_s, run.debt_s = 0.0, 0.0

    def _hold(self, alloc: Allocation | None, sign: int) -> None:
        assert alloc is not None
        for name, n in alloc.placement:
            _add(self.jobs_used, name, alloc.share.times(n), sign)
        self.used_total = _add_to(self.used_total, alloc.total, sign)
        self._seen = _Seen()

    # -- what Slurm sees ---------------------------------------------------------------
    def _visible(self) -> list[_Run]:
        return list(self.visible.values())

    def _to_slurm(self, run: _Run, t: float) -> None:
        """A waiting job Slurm sees (not held) from its eligible time: now, or later."""
        if run.eligible_at <= t:
            self.visible[run.trace.job_id] = run
        else:
            heapq.heappush(self._soon, (run.eligible_at, run.trace.job_id))

    def _due_now(self, t: float) -> bool:
        """Jobs whose eligible time has come join Slurm's queue; whether any did."""
        came = False
        while self._soon and self._soon[0][0] <= t:
            when, jid = heapq.heappop(self._soon)
            run = self.waiting.get(jid)
            if run is not None and not run.held and run.eligible_at == when:
                self.visible[jid] = run
                self.released.discard(jid)
                came = True
        return came

    def _queue(self, runs: list[_Run], t: float) -> Iterator[Waiting]:
        """Slurm's queue in its order, made as the passes read it (they often stop early)."""
        if self.slurm_order.name in ("fifo", "slurm"):
            # Keys that do not change with time, read off the trace (core.policies' order).
            slurm = self.slurm_order.name == "slurm"
            ordered = sorted(runs, key=lambda r: (-r.trace.priority if slurm
                                                  else r.trace.arrival,
                                                  r.trace.arrival, r.trace.job_id))
        else:
            by_id = {r.trace.job_id: r for r in runs}
            ordered = [by_id[s.id] for s in self.slurm_order.order(
                [self._spec(r, t) for r in runs], t)]
        return (self._waiting(r) for r in ordered)

    def _waiting(self, run: _Run) -> Waiting:
        gpu_type = run.trace.gpu_type or None
        return Waiting(run.trace.job_id, run.trace.gpus, run.share, run.limit_s,
                       run.pool.partition, run.pool.server_names(gpu_type),
                       run.trace.gpus_per_node)

    def _holdings(self) -> tuple[tuple[str, Resources], ...]:
        if self._seen.holdings is None:
            self._seen.holdings = tuple(   # r != Resources(), without a dataclass __eq__
                (n, r) for used in (self.jobs_used, self.bg_used) for n, r in used.items()
                if r.gpus or r.cpus or r.mem_gb)
        return self._seen.holdings

    def _cluster(self) -> ClusterState:
        if self._seen.cluster is None:
            self._seen.cluster = ClusterState(self.servers, self._holdings(),
                                              self.cfg.cluster.fair)
        return self._seen.cluster

    def _pool_now(self, pool: Pool) -> Pool:
        """``pool`` with what is held on its nodes now, as the controller's round plans."""
        if pool.partition not in self._seen.pools:
            self._seen.pools[pool.partition] = pool.with_reserved(self._holdings())
        return self._seen.pools[pool.partition]

    def _busy(self) -> list[Busy]:
        out = [Busy(name, r.alloc.share.times(n), r.run_start + r.limit_s)
               for r in self.running.values() if r.alloc is not None
               for name, n in r.alloc.placement]
        return out + [Busy(server, res, end) for end, server, res in self.occupied_bg]

    # -- the controller ----------------------------------------------------------------
    def _spec(self, run: _Run, t: float, may_requeue: bool = False,
              may_shrink: bool = False) -> JobSpec:
        """The core's view, as the controller has it: remaining time from a running job's
        progress reports where jobs send them (the work it has left), else from the time
        limit where the job has one, else the model's own; a held job's priority is 0, as
        Slurm shows it until the release."""
        tj = run.trace
        work, debt = run.done_by(t) if run.alloc is not None else (run.work_s, run.debt_s)
        limited = run.limit_s < UNLIMITED_S
        return job_spec(Facts(
            tj.job_id, tj.gpus, tj.arrival, run.limit_s if limited else None,
            t - run.run_start if run.alloc is not None else 0.0, work + debt,
            profile=run.profile, key=tj.model, user=tj.user,
            priority=0 if run.held else tj.priority, gpus_per_node=tj.gpus_per_node,
            attained_s=max(0.0, t - run.start) if run.start is not None else 0.0,
            left=Left(progress_s=work) if self.cfg.progress_reports and run.alloc is not None
            else None, cap=self.caps.get((tj.model, tj.user)), may_requeue=may_requeue,
            may_shrink=may_shrink, duration_s=run.total_s))

    def _controller(self, t: float) -> None:
        if self.cfg.usage is not None:
            self._watch(t)
        # The hook's table, written before the round acts (controller/daemon.py).
        self.no_hold = no_hold_share(self.least_fair,
                                     any(r.held for r in self.waiting.values()))
        # Each pool's pending jobs (held, or in Slurm's queue) and running ones synergy
        # manages, by GPU type, grouped as the controller groups them (decide.by_pool).
        jobs = [(r, False) for r in self.waiting.values()
                if (r.held or r.trace.job_id in self.visible or r.trace.job_id in self.released)
                and _change(r) is not Change.LEAVE]
        running = self._reshapable(t)
        jobs += [(r, True) for r in running]
        groups: list[PoolJobs] = []
        for pool, gpu_type, mine in by_pool(self.pools, jobs, lambda rj: (
                rj[0].pool.partition, rj[0].trace.gpu_type or None)):
            # What the model knows of each running job: a fixed outcome (a history's job
            # that failed or was cancelled) is never requeued, nor one that did not opt in
            # where opting in is asked for; any may be shrunk where the replay lowers
            # memory. The core decides the rest (reshape_candidates).
            held = [(self._spec(r, t, may_requeue=bool(self.rule.budget)
                                and not r.trace.fixed_s
                                and (r.trace.requeue_ok or not self.cfg.requeue_opt_in),
                                may_shrink=self.cfg.shrink_memory), r.alloc)
                    for r, on in mine if on and r.alloc is not None]
            groups.append(PoolJobs(self._pool_now(pool), gpu_type,
                                   [self._spec(r, t) for r, on in mine if not on], held))
        last = {r.trace.job_id: r.requeued_at for r in running}
        for pp in plan_pools(groups, self.policy, self.allocator, self.rule, last, t):
            if pp.round is None:
                continue
            for sh in pp.round.shrinks:
                self._rerate(self.running[sh.job_id], t, sh.share)
            for a in pp.round.plan.allocations:
                self._reshape(self.waiting[a.job_id], a.share, t)
            for rq in pp.round.requeues:
                self._requeue(self.running[rq.job_id], rq.demand.share, t)

    def _reshapable(self, t: float) -> list[_Run]:
        """The running jobs synergy manages that this round may requeue or shrink, the only
        running jobs the core reads (``core.round.reshape_candidates``: a profile and the
        driver's ``may_requeue`` or ``may_shrink``, an allocator that reshapes running
        jobs, and for a requeue ``requeue_interval_s`` since the last). Building every
        running job's view every round for nothing was most of a large replay's time
        (#17: 3,000 jobs, 2.5 million views, 91 of 126 s). Kept in ``running``'s order,
        which the policy's ties keep."""
        if not self.allocator.reshapes_running or not (
                self.cfg.shrink_memory or (self.rule.budget and self._movable)):
            return []
        return [r for r in self.running.values()
                if r.profile is not None and _change(r) is not Change.LEAVE
                and (self._requeue_due(r, t) or self._shrinkable(r, t))]

    def _requeue_due(self, run: _Run, t: float) -> bool:
        """Whether the round may requeue the job (the model's may_requeue, and the
        requeue interval since its last)."""
        return bool(self.rule.budget) and run.trace.job_id in self._movable \
            and t - run.requeued_at >= self.rule.min_interval_s

    def _shrinkable(self, run: _Run, t: float) -> bool:
        """Whether the core lowers the job's memory in place where the replay lowers it
        (``core.shrink.memory_shrinks``, asked as the round asks it): that depends on its
        profile and its allocation alone, so it is asked once per allocation, not every
        round (a view of every running job per round was most of a 26.05 replay's time,
        #17)."""
        if not self.cfg.shrink_memory or run.alloc is None:
            return False
        if run.shrinks_asked is not run.alloc:
            _, shrinkable = reshape_candidates([(self._spec(run, t, may_shrink=True),
                                                 run.alloc)])
            run.shrinks = bool(memory_shrinks(shrinkable, run.fair))
            run.shrinks_asked = run.alloc
        return run.shrinks

    def _reshape(self, run: _Run, share: PerGpu, t: float) -> None:
        """A planned pending job, by the controller's own reconcile rule
        (``decide.reconcile``): a held one gets its share and is released; a visible one
        is raised, and lowered only where Slurm honours it. A job whose profile is unknown
        keeps the share it has (``decide.Change.RELEASE``)."""
        got = reconcile(_view(run), share, self.cfg.lowers_pending)
        if got is None or got.step is Step.CANNOT:
            return
        run.share = got.after
        # Every change is one the next round must see (it plans from what this one did:
        # a released job's priority, the table's no-hold lines), and an update wakes
        # Slurm's scheduler: a job released with no delay is in its queue now, where no
        # event would otherwise start it before the next backfill pass.
        self._updated = self._tick_due = True
        if run.held:
            run.held = False
            run.eligible_at = t + self.cfg.release_delay_s
            self.released.add(run.trace.job_id)
            self._to_slurm(run, t)

    def _rerate(self, run: _Run, t: float, share: PerGpu) -> None:
        """A running job's memory lowered in place: no restart, its speed from now on."""
        assert run.alloc is not None
        run.work_s, run.debt_s = run.done_by(t)
        run.run_start = t
        self._hold(run.alloc, -1)
        run.alloc = replace(run.alloc, share=share, how=How.SHRUNK)
        self._hold(run.alloc, 1)
        self._updated = self._tick_due = True
        run.share = share
        run.rate = run.speed(share)
        run.end_at = t + run.debt_s + run.work_s / run.rate
        heapq.heappush(self._ends, (run.end_at, run.trace.job_id))

    def _requeue(self, run: _Run, share: PerGpu, t: float) -> None:
        """Requeued with a larger share: back in the queue (released at once, seen by Slurm
        after the release delay), its progress kept, its restart to pay."""
        run.work_s, _ = run.done_by(t)
        run.debt_s = self.cfg.restart_cost_s
        del self.running[run.trace.job_id]
        self._movable.discard(run.trace.job_id)
        self._hold(run.alloc, -1)
        run.alloc, run.end_at = None, math.inf
        run.share, run.held = share, False
        run.eligible_at = t + self.cfg.release_delay_s
        run.restarts += 1
        run.requeued_at = t
        self.waiting[run.trace.job_id] = run
        self.released.add(run.trace.job_id)
        self._to_slurm(run, t)
        self._updated = self._tick_due = True

    def _watch(self, t: float) -> None:
        """The closed loop: what each running job's true profile keeps busy of its share,
        judged per user and key; a suspect key is capped for that user's later jobs."""
        for run in self.running.values():
            real = run.true or run.profile
            if real is None or run.alloc is None or run.start is None:
                continue
            busy = busy_share(real, run.alloc.share, run.fair)
            self.samples[run.trace.job_id] = UsageSample(
                run.trace.job_id, run.trace.model, run.trace.user, run.alloc.share, run.fair,
                float(busy.cpus), busy.mem_gb, t - run.start)
        assert self.cfg.usage is not None
        self.marks = marks_after(self.marks, judge(self.samples.values(), self.cfg.usage))
        self.caps = {**self.cfg.caps, **self.marks}

    def _record(self, t: float) -> None:
        used = self.used_total
        row = (t, used.gpus / self.total.gpus, used.cpus / self.total.cpus,
               used.mem_gb / self.total.mem_gb)
        if not self.util or self.util[-1][1:] != row[1:]:
            self.util.append(row)


_NOTHING = Resources()


def _view(run: _Run) -> PendingView:
    """A pending job as the reconcile rule sees it: its request names its cores where the
    history gave it its own share or synergy's hook shaped it (a known profile)."""
    unknown = _change(run) is Change.RELEASE
    return PendingView(run.held, run.share, run.trace.share is not None or not unknown,
                       unknown, requeued=run.restarts > 0)


def _change(run: _Run) -> Change:
    """What synergy changes about the job: the history's decision where it has one, else
    by its profile (``decide.what_synergy_changes`` with a known or unknown profile)."""
    if run.trace.change:
        return Change(run.trace.change)
    return Change.RESHAPE if run.profile is not None else Change.RELEASE


def _add(used: dict[str, Resources], server: str, res: Resources, sign: int) -> None:
    used[server] = _add_to(used.get(server, _NOTHING), res, sign)


def _add_to(total: Resources, res: Resources, sign: int) -> Resources:
    return total + res if sign > 0 else total - res


def _on_grid(t: float, due: float, step: float) -> float:
    """``due`` where it is still ahead of ``t``, else the first multiple of ``step`` at
    or after ``t``: when a skipped round or pass may run next."""
    if due >= t:
        return due
    return math.ceil(t / step - 1e-9) * step


def _next_on_grid(t: float, step: float) -> float:
    """The first multiple of ``step`` after ``t``."""
    return (math.floor(t / step + 1e-9) + 1) * step

