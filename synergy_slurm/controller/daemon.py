"""One controller round, and the loop around it.

A round is five steps over one :class:`RoundContext`: observe (one batched read of Slurm,
the profiles, the pools) -> classify (which jobs are synergy's) -> plan (the core, with the
configured policy and allocator, reconciled into the fewest actions that make Slurm match
the plan) -> act (through the writer, which refuses unless enforcing; each action ends as a
typed :class:`ActionOutcome`) -> record (SQLite, audit log, metrics). Between classify and plan,
side steps run in one isolation wrapper (:meth:`Controller._side_step`): watching usage,
writing the hook table, automatic profiling; a failure there is logged and counted, never
the end of the round. What this Slurm allows is worked out once (:mod:`.capabilities`).

A failed read skips the round and backs off; a failed action is logged, counted and retried
by the next round's plan. Stopping (SIGTERM) ends after the current round and, when
enforcing, releases every job the hook held so that none waits for a controller that is
gone.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from ..config import DEFAULT_PATH, Config, check_config
from ..core import (
    JobSpec,
    PerGpu,
    Plan,
    Profile,
    ProfileError,
    RequeueRule,
    get_allocator,
    get_policy,
    pick_profile,
    usable_profiles,
)
from ..core.pools import Pool, PoolJobs, merged, merged_plan, plan_pools, smallest_fair
from ..core.usage import capped_limit
from ..decide import by_pool, no_hold_share
from ..errors import SynergyError
from ..hook.export import build_table, table_path
from ..hook.install import installed_table_dir, join_line
from ..hook.table import TableError, stale_temporaries
from ..profiles import load_profiles
from ..profiles.resolve import trusted, with_owners
from ..slurm.access import Access, read_access
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.limits import SiteLimits
from ..slurm.model import SlurmJob, SlurmNode, Snapshot
from ..slurm.ports import Reader, Writer
from ..slurm.reader import make_reader
from ..slurm.writer import ChangeIgnored, NotEnforcing, SlurmWriter, Unsupported
from ..vocabulary import MB_PER_GB
from .actions import (
    CANNOT,
    LOWER,
    RAISE,
    RELEASE,
    REQUEUE,
    SHAPE_RELEASE,
    SHRINK,
    Action,
    current_shape,
    reconcile_pending,
)
from .audit import AuditLog
from .autoprofile import AutoProfiler, ProfilingEvent
from .capabilities import UNKNOWN, Capabilities, capabilities
from .classify import (
    array_tasks,
    classify,
    job_spec,
    limit_blocked,
    profile_key,
    requeue_ok,
    runnable,
)
from .failsafe import release_held
from .heartbeat import Heartbeat
from .left import Run, note_runs, runs, with_left
from .limits import Usage, job_limits, occupied
from .lowered import LoweredWatch
from .metrics import Metrics
from .observe import pools
from .outcome import ActionOutcome, Result
from .requeue import requeue_actions, running_jobs, shrink_actions
from .state import StateStore
from .tagwatch import TagWatch
from .usage import (
    Watched,
    cap_text,
    due,
    pick,
    record,
    rule_of,
    samples,
    stale_slots,
    suspect_caps,
    this_host,
    verdicts,
)
from .views import view_dir, write_views

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long the site's QOS and association limits read from slurmdbd stand (SIGHUP reads
# them at the next round): an admin's change applies within 5 minutes.
LIMITS_MAX_AGE_S = 300.0


class RoundFailed(RuntimeError):
    pass


class TableElsewhere(SynergyError):
    """The installed hook reads its table where the controller does not write it."""


@dataclass
class RoundResult:
    round_id: int
    actions: list[Action]
    results: dict[int, ActionOutcome]
    errors: int
    duration_s: float
    managed: int
    skipped: dict[int, str] = field(default_factory=dict)
    profiling: list[ProfilingEvent] = field(default_factory=list)


@dataclass
class RoundContext:
    """What one round knows, filled step by step."""

    rid: int
    started: float                          # time.monotonic()
    now: float                              # the controller's clock
    caps: Capabilities
    snap: Snapshot
    profiles: dict[str, Profile]
    pools: list[Pool]
    managed: list[SlurmJob] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    strays: list[Action] = field(default_factory=list)
    stale: frozenset[str] = frozenset()
    events: list[ProfilingEvent] = field(default_factory=list)
    plan: Plan | None = None
    actions: list[Action] = field(default_factory=list)
    results: dict[int, ActionOutcome] = field(default_factory=dict)
    errors: int = 0


# How often a wait between rounds looks for a SIGHUP (reload) that came in.
RELOAD_CHECK_S = 0.5


def _restart_only(running: Config, new: Config) -> tuple[Config, list[str]]:
    """``new`` with what only a restart may change put back as ``running`` has it, and
    the names of those that differed."""
    rc, nc = running.controller, new.controller
    keys = ("state_db", "audit_log", "metrics_port", "metrics_address")
    kept = [f"[controller] {k}" for k in keys if getattr(rc, k) != getattr(nc, k)]
    if running.slurm != new.slurm:
        kept.append("[slurm]")
    controller = replace(nc, **{k: getattr(rc, k) for k in keys})
    return replace(new, slurm=running.slurm, controller=controller), kept


class Controller:
    """The daemon. Its parts come from the config unless passed in (tests pass a reader
    of recorded snapshots, a recording writer, an in-memory state, their own clock)."""

    def __init__(self, cfg: Config, cli: SlurmCLI | None = None, mode: str | None = None,
                 clock: Callable[[], float] = time.time, *,
                 reader: Reader | None = None, writer: Writer | None = None,
                 state: StateStore | None = None, audit: AuditLog | None = None,
                 metrics: Metrics | None = None) -> None:
        self.cfg = cfg
        c = cfg.controller
        self._mode_override = mode      # --mode, --dry-run: kept across reloads
        self.mode = mode or c.mode
        self.cli = cli or SlurmCLI.for_config(cfg.slurm)
        self.reader: Reader = reader or make_reader(self.cli, cfg.slurm.reader)
        self.writer: Writer = writer or SlurmWriter(self.cli, enforce=self.mode == "enforce")
        self.state = state or StateStore(c.state_db)
        self.audit = audit or AuditLog(c.audit_log)
        self.metrics = metrics or Metrics()
        self.clock = clock
        self._derive(cfg)
        self.heartbeat = Heartbeat(table_path(cfg.hook), clock=clock)
        self.metrics.config(self.mode, c.interval_s, cfg.hook.max_age_s)
        self.metrics.watch_table(table_path(cfg.hook), clock)
        # When this configuration was read (status, metrics: a reload that did not take
        # shows as an old configuration), and a SIGHUP not yet acted on.
        self.config_loaded = time.time()
        self.metrics.loaded(self.config_loaded)
        self.reload_pending = False
        self._serving = False         # run() as a daemon (not --once)
        self._beating = False         # the heartbeat thread runs
        self.last_error: str | None = None   # why the last round failed, for --once
        self.failures = 0                     # rounds failed in a row (backoff, metrics)
        self.lowered = LoweredWatch()
        # Since when this controller has kept the hook table fresh (None: it has not, or a
        # round failed since), and the new jobs that arrive without the hook's tag.
        self._fresh_since: float | None = None
        self.tags = TagWatch()
        # Held jobs a round decided to start: when the first release was sent (metrics).
        self._releasing: dict[int, float] = {}
        self._profiles: dict[str, Profile] = {}
        self._profiles_stamp: tuple[object, ...] | None = None
        self._owners: dict[str, str] = {}
        self._stale_seen: set[str] = set()
        self._caps: Capabilities | None = None
        # Running jobs the writer says can never be lowered in place (started before
        # PrologFlags=Contain): not asked again while they run.
        self._shrink_refused: set[int] = set()
        # This round's running jobs with a profile, for their key's history of durations.
        self._runs: list[Run] = []
        # When the site's limits were read, and what they were (see _site_limits).
        self._site: tuple[float, SiteLimits | None] | None = None
        # Who may see every job (PrivateData, admins), and when it was read: the views.
        self.read_access: Callable[[], Access] = lambda: read_access(self.cli)
        self._access: tuple[float, Access] | None = None
        self._views_warned = False

    def capabilities(self) -> Capabilities:
        """What this Slurm allows, worked out at the first round that can read it (logged
        once) and kept until :meth:`refresh`; UNKNOWN while Slurm cannot be read."""
        if self._caps is None:
            try:
                caps = capabilities(self.reader.release,
                                    self.cfg.controller.shrink_running_memory,
                                    self.reader.contains_jobs())
            except SlurmError as exc:
                log.warning("cannot tell what this Slurm allows yet (%s): changing nothing "
                            "it might ignore", exc)
                return UNKNOWN
            self._caps = caps
            log.info("%s", caps.describe())
        return self._caps

    def refresh(self) -> None:
        """Work out the capabilities and read the site's limits again at the next round
        (SIGHUP)."""
        self._caps = None
        self._site = None
        self._access = None
        self._shrink_refused.clear()

    def reload(self) -> bool:
        """SIGHUP, between rounds: read and check the configuration file again and run
        by it (mode, interval, policy, allocator, profiles, hook table, usage, profiling),
        and read Slurm's capabilities and limits again. A file with a problem changes
        nothing: one log line says why and the running configuration stays. What is
        opened once at start (the state, the audit log, the metrics port, how Slurm is
        read) needs a restart; a change there is named and kept as it was."""
        path = self.cfg.path or None
        cfg, problems = check_config(path)
        if cfg is None:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.config_loaded))
            log.error("reload: %s; keeping the running configuration (loaded %s, %s mode)",
                      "; ".join(problems) or f"{path or DEFAULT_PATH}: unreadable", when,
                      self.mode)
            self.metrics.reloads.labels("failed").inc()
            return False
        cfg, kept = _restart_only(self.cfg, cfg)
        before = (self.mode, self.cfg.controller.interval_s)
        self._run_by(cfg)
        self.refresh()
        self.metrics.reloads.labels("ok").inc()
        log.info("reload: %s: %s mode, a round every %g s, policy %s, allocator %s "
                 "(was %s mode, %g s)%s", cfg.path or "defaults", self.mode,
                 cfg.controller.interval_s, cfg.controller.policy, cfg.controller.allocator,
                 *before, f"; needs a restart to change: {', '.join(kept)}" if kept else "")
        return True

    def _derive(self, cfg: Config) -> None:
        """What the daemon builds from its configuration, at start and on each reload: the
        policy, the allocator, the requeue and usage rules, the opt-outs, the profiler."""
        c = cfg.controller
        self.policy = get_policy(c.policy)
        # Slurm never lowers a running job's cores: a share above the proportional one
        # must not strand the free GPUs beside it (Allocator.keeps_room).
        self.allocator = get_allocator(c.allocator, keeps_room=True)
        self.requeue_rule = RequeueRule(c.restart_cost_s, c.requeue_min_interval_s,
                                        c.requeue_budget)
        self.usage_rule = rule_of(cfg.usage)
        self.optout = frozenset(cfg.hook.optout_users)
        self.autoprofiler = AutoProfiler(cfg, self.writer, self.state, self.mode)

    def _run_by(self, cfg: Config) -> None:
        """Run by ``cfg`` from the next round on (see :meth:`reload`)."""
        old, c = self.cfg, cfg.controller
        self.cfg = cfg
        was = self.mode
        self.mode = self._mode_override or c.mode
        self.writer.enforce = self.mode == "enforce"
        self._derive(cfg)
        if cfg.profiles.file != old.profiles.file:
            self._profiles = {}
        self._profiles_stamp = None          # the profiles file is read again
        path = table_path(cfg.hook)
        if path != self.heartbeat.path or (was == "enforce") != (self.mode == "enforce"):
            self._restart_heartbeat(path, enforcing_before=was == "enforce")
        self.metrics.config(self.mode, c.interval_s, cfg.hook.max_age_s)
        self.metrics.watch_table(path, self.clock)
        self.config_loaded = time.time()
        self.metrics.loaded(self.config_loaded)

    def _restart_heartbeat(self, path: Path, enforcing_before: bool) -> None:
        """The table moved, or the mode changed: the old table expires (the hook holds
        nothing more on it) and, where the controller now leaves enforce mode, the jobs
        the hook held are released, as at a stop; a controller that now enforces starts
        beating."""
        if self._beating:
            self.heartbeat.stop(expire=True)
            self._beating = False
        if enforcing_before and self.mode != "enforce" and self._serving:
            self.release_held()
        self.heartbeat = Heartbeat(path, clock=self.clock)
        self._fresh_since = None
        if self._serving and self.mode == "enforce":
            self.clean_temporaries()
            self.heartbeat.start()
            self._beating = True

    # -- inputs ---------------------------------------------------------------------------
    def profiles(self) -> dict[str, Profile]:
        """The profiles file (re-read when it changes; a bad file keeps the last good one)
        and the profile store (measured profiles win over the file's)."""
        path = self.cfg.profiles.file
        if path:
            try:
                st = Path(path).stat()
                stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
                if stamp != self._profiles_stamp:
                    self._profiles = load_profiles(path)
                    self._profiles_stamp = stamp
            except (OSError, ProfileError) as exc:
                log.error("profiles: %s (keeping %d known profiles)", exc, len(self._profiles))
        merged, self._owners, problems = with_owners(self._profiles, self.cfg.profiles.store)
        for p in problems:
            log.error("%s", p)
        return merged

    def _for_user(self, profiles: dict[str, Profile], user: str | None) -> dict[str, Profile]:
        """The profiles that may shape ``user``'s jobs (``[profiles] trust``); None: the
        hook's table, which cannot tell users apart."""
        if self.cfg.profiles.trust == "all":
            return profiles
        return trusted(profiles, self._owners, user, self.cfg.profiles.trust)

    # -- one round ------------------------------------------------------------------------
    def run_round(self) -> RoundResult:
        self.heartbeat.round_started()
        ok = False
        try:
            result = self._round()
            ok = True
            return result
        finally:
            self.heartbeat.round_finished(ok)

    def _round(self) -> RoundResult:
        ctx = self._observe()
        self._note_held(ctx)
        self._side_step("lowered", None, self._ignored_lowerings, ctx)
        self._classify(ctx)
        ctx.stale = self._side_step("usage", frozenset(), self._watch_usage, ctx)
        if self.cfg.controller.write_hook_table and self.mode == "enforce":
            # After the closed loop, so a key it marks this round leaves the table now.
            # The table is the hook's heartbeat: only an enforcing controller, which will
            # shape and release what the hook holds, may keep it fresh.
            self._side_step("hook-table", None, self._write_hook_table, ctx)
            self._side_step("hook-tags", None, self._watch_tags, ctx)
        ctx.events = self._side_step("profiling", [], self._profile_unknown, ctx)
        if any(e.what == "stored" for e in ctx.events):
            ctx.profiles = self.profiles()
        self._plan(ctx)
        self._act(ctx)
        result = self._record(ctx)
        if self.mode == "enforce":
            self._side_step("tags", None, self._clear_stale_tags, ctx)
        self._side_step("views", None, self._write_views, ctx)
        return result

    def _side_step(self, name: str, failed: T, step: Callable[[RoundContext], T],
                   ctx: RoundContext) -> T:
        """Run a step the round does not depend on: an error is logged and counted under
        ``name`` and gives ``failed``; the round goes on."""
        try:
            return step(ctx)
        except Exception:
            self.metrics.errors.labels(name).inc()
            log.exception("%s failed this round", name)
            return failed

    def _note_held(self, ctx: RoundContext) -> None:
        """How many jobs the hook holds and how long the oldest has waited (an alert fires
        when one waits past two rounds: nothing is releasing them)."""
        held = [j for j in ctx.snap.jobs if j.held_by_synergy]
        self.metrics.held.set(len(held))
        self.metrics.held_oldest.set(max((ctx.now - j.submit_time for j in held
                                          if j.submit_time), default=0.0))
        ids = {j.job_id for j in held}
        self._releasing = {k: t for k, t in self._releasing.items() if k in ids}
        self.metrics.held_released.set(max((ctx.now - t for t in self._releasing.values()),
                                           default=0.0))

    # -- observe, classify ------------------------------------------------------------------
    def _observe(self) -> RoundContext:
        started = time.monotonic()
        rid = self.state.start_round(self.mode, interval_s=self.cfg.controller.interval_s,
                                     config_loaded=self.config_loaded,
                                     config_path=self.cfg.path or "defaults")
        try:
            snap = self.reader.snapshot()
        except SlurmError as exc:
            self.metrics.rounds.labels("failed").inc()
            self.metrics.errors.labels("slurm-read").inc()
            self.state.finish_round(rid, duration_s=time.monotonic() - started,
                                    error=str(exc)[:500])
            raise RoundFailed(str(exc)) from exc
        except Exception as exc:
            self.state.finish_round(rid, duration_s=time.monotonic() - started,
                                    error=f"internal: {exc}"[:500])
            raise
        return RoundContext(rid, started, self.clock(), self.capabilities(), snap,
                            self.profiles(), pools(snap, self.cfg))

    def _classify(self, ctx: RoundContext) -> None:
        for job in ctx.snap.jobs:
            v = classify(job, self.cfg, self.optout)
            if v.managed:
                ctx.managed.append(job)
                continue
            ctx.skipped[job.job_id] = v.reason
            if job.held_by_synergy:
                # Held by the hook (an older table, another version of the rules, a config
                # change) but not ours to shape: nobody else would release it.
                ctx.strays.append(Action(job.job_id, RELEASE, None, None,
                                         f"not managed ({v.reason}): released as submitted",
                                         job.user))

    # -- plan -------------------------------------------------------------------------------
    def _plan(self, ctx: RoundContext) -> None:
        plan, planned = self._plan_pools(ctx.snap, ctx.pools, ctx.managed, ctx.profiles,
                                         ctx.caps.lowers_pending, ctx.caps.shrinks_running,
                                         ctx.now)
        ctx.plan = plan
        ctx.actions = ctx.strays + planned

    def _plan_pools(self, snap: Snapshot, found: list[Pool], managed: list[SlurmJob],
                    profiles: dict[str, Profile], can_lower: bool, can_shrink: bool,
                    now: float) -> tuple[Plan, list[Action]]:
        """Plan every managed partition's pool, by GPU type (``core.plan_pools``: each into
        its nodes less what earlier pools took, the requeue budget shared). Returns the
        merged plan and the actions."""
        groups = by_pool(found, managed, lambda j: (j.home_partition, j.gpu_type))
        caps = self._limits(groups, snap, can_lower, now)
        suspect = suspect_caps(self.state)
        # A refused job is remembered while it runs only.
        self._shrink_refused &= {j.job_id for j in managed if j.running}
        peaks = self._memory_floors([j for j in managed if j.running
                                     and j.job_id not in self._shrink_refused]) \
            if can_shrink else {}
        started = Counter(j.array_job_id for j in snap.jobs
                          if j.array_job_id is not None and not j.pending)
        inputs: list[PoolJobs] = []
        jobs_of: list[list[SlurmJob]] = []
        specs_of: dict[int, JobSpec] = {}
        typical = self.state.typical_runs(j.job_id for j in snap.jobs)
        self._runs = []
        for pool, gpu_type, mine in groups:
            fair = pool.of_type(gpu_type).fair
            types = pool.types(gpu_type)
            specs = {j.job_id: with_left(j, self._spec(j, now, profiles, types, caps, suspect),
                                         fair, self.cfg.usage.progress_dir, typical)
                     for j in mine}
            self._runs += runs((j, specs[j.job_id], fair) for j in mine)
            specs_of.update(specs)
            running = [j for j in mine if j.running]
            pool_gpus = sum(sv.capacity.gpus for sv in pool.of_type(gpu_type).servers)
            inputs.append(PoolJobs(
                pool, gpu_type, [task for j in mine if runnable(j, can_lower)
                                 for task in array_tasks(j, specs[j.job_id], started,
                                                         pool_gpus)],
                running_jobs([(j, specs[j.job_id]) for j in running], fair, peaks)))
            jobs_of.append(mine)
        last_requeues = self.state.last_requeues()
        plans = plan_pools(inputs, self.policy, self.allocator, self.requeue_rule,
                           last_requeues, now)
        actions: list[Action] = []
        for pp, mine in zip(plans, jobs_of, strict=True):
            if pp.round is None:
                continue
            fair = pp.cluster.fair
            running_by_id = {j.job_id: j for j in mine if j.running}
            pending = [j for j in mine if runnable(j, can_lower)]
            actions += shrink_actions(pp.round.shrinks, running_by_id, fair)
            unknown = frozenset(j.job_id for j in pending
                                if specs_of[j.job_id].profile is None)
            requeued = frozenset(j.job_id for j in pending if j.job_id in last_requeues)
            actions += reconcile_pending(pending, pp.round.plan, fair, can_lower, unknown,
                                         requeued)
            if not can_lower:
                actions += [Action(j.job_id, CANNOT, current_shape(j, fair), None,
                                   f"waits on {j.reason} with the shape synergy gave it; "
                                   "this Slurm ignores lowering a job it has scheduled: "
                                   "raise the limit, or cancel and resubmit", j.user)
                            for j in mine if limit_blocked(j)]
            actions += requeue_actions(pp.round.requeues, running_by_id, fair,
                                       self.requeue_rule)
        plan = merged_plan(plans, self.allocator.name, self.policy.name)
        return plan, actions

    def _memory_floors(self, running: list[SlurmJob]) -> dict[int, float]:
        """Per running job whose use the closed loop measured, the least memory per GPU it
        may be lowered to: its peak so far with ``[usage] headroom``. Only these jobs are
        lowered in place: where memory limits bite (cgroups), a job lowered below what it
        really uses is killed, and its profile is no proof of that."""
        if not self.cfg.usage.enabled:
            return {}
        return {j: max(0.0, peak) * self.cfg.usage.headroom
                for j, peak in self.state.peak_mem(r.job_id for r in running).items()}

    def _spec(self, job: SlurmJob, now: float, profiles: dict[str, Profile],
              types: frozenset[str], caps: dict[int, PerGpu],
              suspect: dict[tuple[str, str], PerGpu]) -> JobSpec:
        """The core's view of a job: the profile its user may use for its key on its GPU
        types, capped by the site's limits and by its key's closed-loop mark."""
        cap = capped_limit(caps.get(job.job_id), suspect.get((profile_key(job) or "",
                                                                job.user)))
        return replace(job_spec(job, now, self._for_user(profiles, job.user), types),
                       limit=cap)

    # -- side steps -------------------------------------------------------------------------
    def _watch_usage(self, ctx: RoundContext) -> frozenset[str]:
        """The closed loop (:mod:`.usage`): every few rounds, read what running managed
        jobs with a profile key use, judge each user's keys and mark the suspect ones.
        Returns the measured profiles (slots) a job's progress says are stale."""
        if not self.cfg.usage.enabled:
            return frozenset()
        if due(self.cfg.usage, ctx.rid):
            self._read_usage(ctx.rid, ctx.managed, ctx.pools, ctx.profiles, ctx.now,
                             {n.name: n for n in ctx.snap.nodes})
        return self._stale(ctx.rid)

    def _read_usage(self, rid: int, managed: list[SlurmJob], found: list[Pool],
                    profiles: dict[str, Profile], now: float,
                    nodes: dict[str, SlurmNode]) -> None:
        u = self.cfg.usage
        by_name = {p.partition: p for p in found if p.cluster.servers}
        watched = []
        for j in managed:
            pool = by_name.get(j.home_partition)
            key = profile_key(j)
            if j.running and key and pool is not None:
                prof = pick_profile(self._for_user(profiles, j.user), key,
                                    pool.types(j.gpu_type))
                watched.append(Watched(j, key, pool.cluster.fair, prof))
        watched = pick(watched, u.max_jobs)
        if not watched:
            return
        used = self.reader.usage([w.job for w in watched])
        prev = {r["job_id"]: r for r in self.state.usage()}
        rows = samples(watched, used, now, u.progress_dir, nodes, prev, this_host())
        self.state.note_usage(rows)
        new = record(self.state, verdicts(self.state, self.usage_rule), now)
        self.metrics.watched.set(len(rows))
        for v in new:
            self.metrics.suspects.inc()
            log.warning("profile %s is suspect for user %s: %s; their later jobs with it get "
                        "at most %s", v.key, v.user, v.why(), cap_text(v.cap))
            self.audit.write(rid, self.mode, {
                "job_id": None, "action": "suspect", "before": None,
                "after": {"profile_key": v.key,
                          "cap_cpus_per_gpu": v.cap.cpus if v.cap else None,
                          "cap_mem_gb_per_gpu": round(v.cap.mem_gb, 2) if v.cap else None},
                "reason": v.why()}, v.user, "marked")

    def _stale(self, rid: int) -> frozenset[str]:
        """Measured profiles a job's progress is far off (logged and audited once each);
        none to look for where jobs report no progress (no ``progress_dir``)."""
        if not self.cfg.usage.progress_dir:
            return frozenset()
        found = stale_slots(self.state.usage(), self.usage_rule, self.cfg.usage.throughput_off)
        for slot, why in found.items():
            if slot not in self._stale_seen:
                self._stale_seen.add(slot)
                again = ("site-wide: an admin re-profiles it (synergy profile run) or "
                         "imports a new one" if not self._owners.get(slot)
                         else "profiled again" if self.cfg.profiling.auto else
                         "set [profiling] auto to profile it again")
                log.warning("profile %s looks stale: %s; %s", slot, why, again)
                self.audit.write(rid, self.mode, {
                    "job_id": None, "action": "stale-profile", "before": None,
                    "after": {"profile_key": slot}, "reason": why}, "", again)
        return frozenset(found)

    def _site_limits(self, now: float) -> SiteLimits | None:
        """The site's QOS and association limits, read from slurmdbd at most once per
        ``LIMITS_MAX_AGE_S`` (and again after SIGHUP): they change by an admin's hand, and
        each read is two sacctmgr calls to slurmdbd that a 30-s round need not repeat."""
        if self._site is None or now - self._site[0] >= LIMITS_MAX_AGE_S:
            self._site = (now, self.reader.limits())
        return self._site[1]

    def _limits(self, groups: list[tuple[Pool, str | None, list[SlurmJob]]], snap: Snapshot,
                can_lower: bool, now: float) -> dict[int, PerGpu]:
        """The cap the site's QOS and association limits put on each job being planned
        (:mod:`.limits`), computed every round over every pool together (a user's limit
        spans partitions); none where there is no accounting."""
        site = self._site_limits(now)
        if site is None:
            return {}
        subjects: dict[int, tuple[SlurmJob, Usage]] = {}
        fairs: dict[int, PerGpu] = {}
        for pool, _, mine in groups:
            fair = pool.cluster.fair
            if fair is None or not pool.cluster.servers:
                continue
            for j in mine:
                if runnable(j, can_lower):
                    subjects[j.job_id] = (j, Usage(fair.cpus * j.gpus,
                                                   fair.mem_gb * j.gpus * MB_PER_GB))
                elif j.running and requeue_ok(j):
                    subjects[j.job_id] = (j, occupied(j))
                else:
                    continue
                fairs[j.job_id] = fair
        return job_limits(subjects, [j for j in snap.jobs if j.running], site, fairs)

    def _profile_unknown(self, ctx: RoundContext) -> list[ProfilingEvent]:
        """Submit profiling jobs for keys unknown on the jobs' GPU types and import finished
        ones."""
        rid = ctx.rid
        by_name = {p.partition: p for p in ctx.pools}

        def types_of(job: SlurmJob) -> frozenset[str]:
            pool = by_name.get(job.home_partition)
            return pool.types(job.gpu_type) if pool else frozenset({job.gpu_type or ""})

        events = self.autoprofiler.round(ctx.snap, ctx.managed, ctx.profiles, types_of, ctx.now,
                                         ctx.stale, self._owners)
        for e in events:
            if e.what == "stored":
                self.state.forget_usage(e.key)      # measured against the old profile
                self._stale_seen.discard(e.key)
            self.metrics.actions.labels("profile", e.what).inc()
            self.audit.write(rid, self.mode, {
                "job_id": e.for_job, "action": "profile", "before": None,
                "after": {"profile_key": e.key, "profiling_job": e.slurm_job},
                "reason": f"profile {e.key} unknown"},
                e.user, f"{e.what}: {e.detail}" if e.detail else e.what)
        return events

    def _write_hook_table(self, ctx: RoundContext) -> None:
        """The table's node shape is the smallest managed server's, partition limits
        applied (observe.cluster_state), so the hook never shapes past them either. The
        hook shapes by key alone: only profiles that hold on every managed node's GPU type
        (core.usable_profiles)."""
        types = frozenset[str]().union(*(p.types(None) for p in ctx.pools))
        profiles = usable_profiles(self._for_user(ctx.profiles, None), types)
        now = ctx.now
        caps = [s.capacity for s in merged(ctx.pools).servers]
        if not caps:
            return
        hook = self.cfg.hook
        if hook.hold_known and ctx.caps.lowers_pending:
            # This Slurm honours lowering a job it has scheduled: a known profile may start
            # at once with its table shape, the controller can still shrink it later.
            hook = replace(hook, hold_known=False)
        # A key the closed loop caps for some user is left out of the table: the hook
        # (which knows no users' caps) holds such jobs as unknown, and the round shapes
        # each by its own user's cap before it can start at the profile's shape.
        suspect = {m["key"] for m in self.state.suspects()}
        profiles = {k: p for k, p in profiles.items() if k not in suspect}
        try:
            table = build_table(hook, profiles, min(c.cpus for c in caps),
                                round(min(c.mem_gb for c in caps) * MB_PER_GB),
                                min(c.gpus for c in caps), now,
                                no_hold_share(smallest_fair(ctx.pools),
                                              any(j.held_by_synergy for j in ctx.managed)))
        except TableError as exc:
            self.metrics.errors.labels("hook-table").inc()
            log.error("could not build the hook table: %s", exc)
            return
        if not self.heartbeat.publish(table):
            self.metrics.errors.labels("hook-table").inc()
            self._fresh_since = None
        elif self._fresh_since is None:
            self._fresh_since = now

    def _watch_tags(self, ctx: RoundContext) -> None:
        """Say so (log, status, metric) when new GPU jobs arrive without the hook's tag
        while the table is fresh (:mod:`.tagwatch`), and when they carry it again."""
        was = self.tags.blind
        untagged = self.tags.round(ctx.managed, self._fresh_since)
        self.metrics.untagged.set(len(untagged))
        if self.tags.blind and not was:
            reads = installed_table_dir(Path(self.cfg.hook.dir))
            where = (f"the installed hook reads {reads}" if reads is not None else
                     f"no job_submit.lua in {self.cfg.hook.dir} joins synergy's rules")
            text = (f"{len(untagged)} new GPU jobs in managed partitions (last: "
                    f"{untagged[-1]}) arrived without the hook's tag while the table in "
                    f"{self.heartbeat.path.parent} was fresh: the hook sees no table "
                    f"({where}; is JobSubmitPlugins=lua set?), so jobs run as submitted")
            log.warning("%s", text)
            self.state.set_notice("hook-tags", text, ctx.now)
        elif was and not self.tags.blind:
            log.info("new GPU jobs carry the hook's tag again")
            self.state.set_notice("hook-tags", None)

    def _ignored_lowerings(self, ctx: RoundContext) -> None:
        """Jobs lowered and read back as done that started with their old cores
        (:mod:`.lowered`): recorded as ignored, in the state and the audit log."""
        for ig in self.lowered.check(ctx.snap.jobs):
            self.metrics.errors.labels(Result.IGNORED.label).inc()
            log.warning("%s", ig.why)
            d = {"job_id": ig.job.job_id, "action": "lower-ignored", "before": None,
                 "after": {"cpus_per_gpu": ig.asked.cpus_per_gpu,
                           "mem_per_gpu_mb": ig.asked.mem_per_gpu_mb},
                 "reason": ig.why}
            outcome = str(ActionOutcome(Result.IGNORED, f"runs with {ig.held_cpus} cores"))
            self.state.record_action(ctx.rid, d, ig.job.user, outcome)
            self.audit.write(ctx.rid, self.mode, d, ig.job.user, outcome)

    # -- act --------------------------------------------------------------------------------
    def _act(self, ctx: RoundContext) -> None:
        jobs = {j.job_id: j for j in ctx.snap.jobs}
        for a in ctx.actions:
            if not a.mutating:
                outcome = ActionOutcome(Result.NOT_SENT)
            elif self.mode != "enforce":
                outcome = ActionOutcome(Result.PLANNED)
            else:
                if a.kind in (RELEASE, SHAPE_RELEASE):
                    self._releasing.setdefault(a.job_id, ctx.now)
                outcome = self._apply(a, jobs[a.job_id])
                if not outcome.ok:
                    ctx.errors += 1
                    self.metrics.errors.labels(outcome.result.label).inc()
            ctx.results[a.job_id] = outcome
            if outcome.result is Result.DONE and a.kind in (SHAPE_RELEASE, LOWER):
                self.lowered.note(a.job_id, a.before, a.after)
            self.metrics.actions.labels(a.kind, outcome.result.label).inc()
            d = a.as_dict()
            self.state.record_action(ctx.rid, d, a.user, str(outcome))
            self.audit.write(ctx.rid, self.mode, d, a.user, str(outcome))

    def _apply(self, a: Action, job: SlurmJob) -> ActionOutcome:
        after = a.after
        if after is None and a.kind != RELEASE:
            return ActionOutcome(Result.ERROR, f"a {a.kind} action without a shape")
        try:
            if a.kind == RELEASE or after is None:
                self.writer.release_own(job)
            elif a.kind == SHAPE_RELEASE:
                try:
                    self.writer.reshape_pending(job, after)
                finally:
                    # Never leave a job held because shaping it failed: it then runs as
                    # submitted (GPU-proportional defaults).
                    self.writer.release_own(job)
            elif a.kind in (RAISE, LOWER):
                self.writer.reshape_pending(job, after)
            elif a.kind == REQUEUE:
                self.writer.requeue_reshape(job, after)
                self.state.note_requeue(job.job_id, self.clock())
            elif a.kind == SHRINK:
                try:
                    self.writer.lower_running_memory(job, after.mem_per_gpu_mb)
                except Unsupported:
                    # This job can never be lowered; a passing failure is tried again.
                    self._shrink_refused.add(job.job_id)
                    raise
            return ActionOutcome(Result.DONE)
        except ChangeIgnored as exc:
            return ActionOutcome(Result.IGNORED, str(exc))
        except (SlurmError, Unsupported, NotEnforcing, ValueError) as exc:
            return ActionOutcome(Result.ERROR, str(exc))

    # -- record -----------------------------------------------------------------------------
    def _record(self, ctx: RoundContext) -> RoundResult:
        plan = ctx.plan if ctx.plan is not None else Plan((), {}, self.allocator.name,
                                                           self.policy.name)
        planned = plan.by_job()
        acted = {a.job_id: a for a in ctx.actions}
        rows = []
        for j in ctx.managed:
            alloc = planned.get(j.job_id)
            a = acted.get(j.job_id)
            if a is not None and a.kind == CANNOT:
                note = a.reason
            elif a is not None:
                outcome = ctx.results.get(j.job_id)
                note = f"{a.kind}: {outcome if outcome is not None else ''}"
            elif alloc is None and j.pending:
                note = plan.skipped.get(j.job_id, "waiting")
            else:
                note = ""
            rows.append({
                "job_id": j.job_id, "user": j.user, "state": j.state,
                "profile_key": profile_key(j) or "", "gpus": j.gpus,
                "cpus_per_gpu": j.cpus_per_gpu, "mem_per_gpu_mb": j.mem_per_gpu_mb,
                "planned_cpus": alloc.share.cpus if alloc else None,
                "planned_mem_mb": round(alloc.share.mem_gb * MB_PER_GB) if alloc else None,
                "speedup": alloc.speedup if alloc else None,
                "how": alloc.how if alloc else None, "note": note, "updated": ctx.now})
        self.state.replace_jobs(rows)
        note_runs(self.state, self._runs, (j.job_id for j in ctx.managed if j.pending),
                  ctx.now)
        duration = time.monotonic() - ctx.started
        running = sum(j.running for j in ctx.managed)
        self.metrics.round_seconds.observe(duration)
        self.metrics.rounds.labels("ok").inc()
        self.metrics.managed_jobs.labels("pending").set(sum(j.pending for j in ctx.managed))
        self.metrics.managed_jobs.labels("running").set(running)
        self.metrics.planned.set(plan.total_speedup)
        self.metrics.proportional.set(len(plan.allocations))
        self.state.finish_round(ctx.rid, duration_s=duration, jobs=len(ctx.snap.jobs),
                                managed=len(ctx.managed),
                                actions=sum(a.mutating for a in ctx.actions),
                                errors=ctx.errors, planned_speedup=plan.total_speedup,
                                proportional_speedup=float(len(plan.allocations)))
        log.info("round %d: %d jobs, %d managed, %d actions, %d errors, %.2f s", ctx.rid,
                 len(ctx.snap.jobs), len(ctx.managed), len(ctx.actions), ctx.errors, duration)
        return RoundResult(ctx.rid, ctx.actions, ctx.results, ctx.errors, duration,
                           len(ctx.managed), ctx.skipped, ctx.events)

    def _clear_stale_tags(self, ctx: RoundContext) -> None:
        """A job tagged as held by synergy that is no longer held (its user released the
        hook's hold early, or an admin released theirs) loses the tag, so that a later
        hold by its user is never taken for synergy's (docs/controller.md, Holds)."""
        for job in ctx.snap.jobs:
            if job.tags.get("held") == "1" and not (job.pending and job.priority == 0):
                log.info("job %d: released by someone else; clearing synergy's held tag",
                         job.job_id)
                self.writer.clear_held_tag(job)

    def _write_views(self, ctx: RoundContext) -> None:
        """What each user may read of this round (``views.py``), by Slurm's rule read at
        most once per ``LIMITS_MAX_AGE_S`` (while it cannot be read: jobs private)."""
        if self.state.path == Path(":memory:"):
            return
        if self._access is None or ctx.now - self._access[0] >= LIMITS_MAX_AGE_S:
            try:
                self._access = (ctx.now, self.read_access())
            except SlurmError as exc:
                log.warning("cannot read PrivateData and admins (%s): views kept private",
                            exc)
                self._access = (ctx.now, Access())
        missed = write_views(self.state, view_dir(self.state.path), self._access[1])
        if missed and not self._views_warned:
            self._views_warned = True
            log.warning("no status view written for %s (only root can give a user their "
                        "own; see docs/controller.md)", ", ".join(missed[:5]))

    # -- the loop -------------------------------------------------------------------------
    def run(self, stop: threading.Event, once: bool = False,
            on_round: Callable[[RoundResult], None] | None = None) -> int:
        problem = self.table_place_problem()
        if problem and self.mode == "enforce" and self.cfg.controller.write_hook_table:
            # Enforcing with a table the hook never reads shapes nothing at submission and
            # holds nothing, without a word: refused at start, in one line.
            raise TableElsewhere(problem)
        if problem:
            log.warning("%s", problem)
        self._serving = not once
        if self._serving and self.mode == "enforce":
            self.clean_temporaries()
            self.heartbeat.start()
            self._beating = True
        try:
            return self._loop(stop, once, on_round)
        finally:
            if self._beating:
                # Expire the table first: from now on the hook holds nothing new.
                self.heartbeat.stop(expire=True)
                self._beating = False
                self.release_held()
            self._serving = False

    def _loop(self, stop: threading.Event, once: bool,
              on_round: Callable[[RoundResult], None] | None) -> int:
        wait = self.cfg.controller.interval_s
        while not stop.is_set():
            if self.reload_pending:
                self.reload_pending = False
                self.reload()
            interval = self.cfg.controller.interval_s
            try:
                res = self.run_round()
                self.failures = 0
                wait = interval
                self.metrics.failing.set(0)
                self.metrics.last_ok.set(self.clock())
                if on_round is not None:
                    on_round(res)
            except Exception as exc:  # one bad round must not end the daemon
                self.failures += 1
                wait = min(self.cfg.controller.max_backoff_s, interval * 2 ** self.failures)
                self.last_error = str(exc) or type(exc).__name__
                self.metrics.failing.set(self.failures)
                self._fresh_since = None        # the heartbeat stops: the table goes stale
                if not isinstance(exc, RoundFailed):
                    # A failed read counted itself (_observe); a crash is a failed round too.
                    self.metrics.rounds.labels("failed").inc()
                    self.metrics.errors.labels("internal").inc()
                if once:     # a failed round: exit 1 (2 is for bad input), no retry
                    # A failed read is the caller's to report (last_error), once: logged
                    # here too, the user read the same error twice.
                    if not isinstance(exc, RoundFailed):
                        log.exception("round crashed")
                    return 1
                if isinstance(exc, RoundFailed):
                    log.warning("round failed (%s); next try in %.0f s", exc, wait)
                else:
                    log.exception("round crashed; next try in %.0f s", wait)
            if once:
                break
            self._wait(stop, wait)
        return 0

    def _wait(self, stop: threading.Event, seconds: float) -> None:
        """Wait for the next round, cut short by a stop or a reload (SIGHUP only sets a
        flag: its handler runs in this thread, perhaps mid-round)."""
        deadline = time.monotonic() + seconds
        while not self.reload_pending:
            left = deadline - time.monotonic()
            if left <= 0 or stop.wait(min(left, RELOAD_CHECK_S)):
                return

    def table_place_problem(self) -> str | None:
        """One line when the hook installed in ``[hook] dir`` (its job_submit.lua's
        chain() line) reads its table somewhere other than where this controller writes
        it; None when they agree or no installed hook says where it reads."""
        hook = self.cfg.hook
        reads = installed_table_dir(Path(hook.dir))
        writes = self.heartbeat.path.parent
        if reads is None or os.path.realpath(reads) == os.path.realpath(writes):
            return None
        return (f"the hook ({Path(hook.dir) / 'job_submit.lua'}) reads its table in {reads} "
                f"but the controller writes it in {writes} ([hook] state_dir): make the "
                f"line {join_line(Path(hook.dir), writes)} or set [hook] state_dir = "
                f"\"{reads}\"")

    def clean_temporaries(self) -> list[Path]:
        """Remove the table's temporaries a controller killed mid-write left in the state
        directory (:func:`hook.table.stale_temporaries`; file times are wall-clock)."""
        removed = stale_temporaries(self.heartbeat.path.parent, time.time())
        if removed:
            log.info("removed %d stale temporaries of the hook table in %s: %s",
                     len(removed), self.heartbeat.path.parent,
                     ", ".join(p.name for p in removed))
        return removed

    def release_held(self) -> list[int]:
        """Release every job the hook held (on shutdown: nobody will shape them now)."""
        try:
            done = release_held(self.reader, self.writer)
        except SlurmError as exc:
            log.error("could not read Slurm to release held jobs: %s", exc)
            return []
        log.info("released %d held jobs on shutdown", len(done.released))
        return done.released
