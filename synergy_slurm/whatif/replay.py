"""Replay a history twice through the controller model, and measure against what happened.

The plain replay is Slurm without synergy: every job asks for the cores and memory it had
(a job synergy shaped, its partition's defaults), Slurm's backfill starts them. Measured
against the history's own waits, JCTs and makespan, it tells how far the model can be
trusted where synergy did not run; where it did, the synergy replay is measured against
what happened instead. The synergy replay is the forecast: the hook and the controller as
they act on the site's Slurm release. Both run on the same partitions and background, in
the order Slurm used: by the priority each job had (``sacct``'s Priority), where the
history has them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..core import ClusterState, PerGpu, Profile
from ..core.pools import Pool
from ..decide import ControllerSettings
from ..sim.config import slurm_config
from ..sim.results import JobResult, SimResult
from ..sim.simulate import simulate
from ..vocabulary import MB_PER_GB
from .history import HistoryError, ReplayInput

GROUPS = ("partition", "account")
# The controller's default settings (a replay that is given none).
DEFAULT_SETTINGS = ControllerSettings()
RUNS = ("actual", "plain", "synergy")
# Jobs by size (GPUs): the fairness cost of a plan shows as JCT by size.
SIZES = ((1, 1, "1 GPU"), (2, 2, "2 GPUs"), (3, 4, "3-4 GPUs"), (5, 8, "5-8 GPUs"),
         (9, 1 << 30, "9+ GPUs"))


@dataclass(frozen=True)
class Stats:
    """Queue wait and JCT (hours) over a set of jobs, and the span they cover."""

    jobs: int
    unfinished: int
    wait_mean_h: float
    jct_mean_h: float
    jct_p50_h: float
    jct_p99_h: float
    makespan_h: float

    def as_dict(self) -> dict[str, float]:
        return {k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Times:
    """One job's submission, start and end time on one timeline (seconds from t0)."""

    job_id: int
    arrival: float
    start: float | None
    end: float | None


def stats(times: Sequence[Times]) -> Stats:
    # (arrival, start, end) of the jobs that ran and ended
    done = [(t.arrival, t.start, t.end) for t in times
            if t.end is not None and t.start is not None]
    nan = float("nan")
    if not done:
        return Stats(0, len(times), nan, nan, nan, nan, nan)
    wait = np.array([start - arrival for arrival, start, _ in done]) / 3600
    jct = np.array([end - arrival for arrival, _, end in done]) / 3600
    p50, p99 = np.percentile(jct, [50, 99])
    span = (max(end for _, _, end in done) - min(t.arrival for t in times)) / 3600
    return Stats(len(done), len(times) - len(done), float(wait.mean()), float(jct.mean()),
                 float(p50), float(p99), float(span))


@dataclass
class Replays:
    """What each of the three (actual, plain, synergy) did with the jobs, and the
    forecasts' replays (by name, whatif/forecast.py)."""

    actual: dict[int, Times]
    plain: SimResult
    synergy: SimResult
    forecasts: dict[str, SimResult] = field(default_factory=dict)

    def times(self, which: str) -> dict[int, Times]:
        if which == "actual":
            return self.actual
        res = {"plain": self.plain, "synergy": self.synergy}.get(which) \
            or self.forecasts[which]
        return {j.job_id: _times(j) for j in res.jobs}


def _times(j: JobResult) -> Times:
    return Times(j.job_id, j.arrival, j.start, j.finish)


# From this many jobs the replays run in parallel processes (one per core): below it a
# replay takes seconds and a process costs more than it saves.
PARALLEL_FROM = 5000


def run(replay: ReplayInput, profiles: Mapping[str, Profile], cluster: ClusterState,
        pools: Sequence[Pool], allocator: str = "tune",
        ctl: ControllerSettings = DEFAULT_SETTINGS,
        on_round: Callable[[str, float], None] | None = None,
        forecasts: Mapping[str, ReplayInput] | None = None,
        caps: Mapping[tuple[str, str], PerGpu] | None = None) -> Replays:
    """The plain and the synergy replay of ``replay`` on ``cluster`` (its ``pools``), and
    the synergy replay of each of ``forecasts`` (the same history, other profiles). In the
    synergy replays, running jobs that opted in (``synergy:requeue-ok``) are requeued into
    idle resources as the controller would; ``caps``: the closed loop's marks, (profile,
    user) -> cap, as the controller would hold them (forecast.suspect_caps)."""
    if not replay.trace:
        raise HistoryError("nothing to replay: no GPU job in the history ran")
    actual = {jid: Times(jid, j.submit - replay.t0,
                         None if j.start is None else j.start - replay.t0,
                         (j.end if j.end is not None else replay.end) - replay.t0)
              for jid, j in replay.jobs.items()}
    order = replay_policy(replay)
    # The controller plans in its own policy; "slurm" (Slurm's priority) needs every
    # job's priority, else it is submission order too.
    policy = order if ctl.policy == "slurm" else ctl.policy
    runs = {"plain": (replay, "proportional"), "synergy": (replay, allocator),
            **{name: (rp, allocator) for name, rp in (forecasts or {}).items()}}
    tasks = {}
    for name, (rp, alloc) in runs.items():
        cfg = slurm_config(ctl, cluster, alloc, tuple(pools), policy=policy,
                           slurm_order=order, background=tuple(rp.background),
                           caps=dict(caps or {}))
        trace = sorted(rp.trace, key=lambda t: (t.arrival, t.job_id))
        tasks[name] = (trace, {**profiles, **rp.profiles}, cfg)
    workers = min(len(tasks), os.cpu_count() or 1)
    if len(replay.trace) >= PARALLEL_FROM and workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            futures = {name: pool.submit(simulate, *task) for name, task in tasks.items()}
            results = {}
            for name, fut in futures.items():
                results[name] = fut.result()
                if on_round:
                    on_round(name, float("inf"))
    else:
        results = {}
        for name, (trace, profs, cfg) in tasks.items():
            cb = (lambda now, _done, n=name: on_round(n, now)) if on_round else None
            results[name] = simulate(trace, profs, cfg, on_round=cb)
    extra = {n: r for n, r in results.items() if n not in ("plain", "synergy")}
    return Replays(actual, results["plain"], results["synergy"], extra)


def replay_policy(replay: ReplayInput) -> str:
    """``slurm`` (the priorities the history recorded, ties by arrival) where every job
    has one, else ``fifo`` (arrival order): a history with only some priorities, or none,
    cannot be ordered by them."""
    return "slurm" if replay.trace and all(t.priority > 0 for t in replay.trace) else "fifo"


def utilisation(result: SimResult) -> dict[str, float]:
    """GPU, CPU and memory allocation, time-weighted from the first submission to the
    last end (each row holds until the next)."""
    rows = result.utilisation
    first = min((j.arrival for j in result.jobs), default=0.0)
    last = max((j.finish for j in result.jobs if j.finish is not None), default=first)
    if not rows or last <= first:
        return {"gpu": 0.0, "cpu": 0.0, "mem": 0.0}
    acc = np.zeros(3)
    for row, nxt in zip(rows, [*rows[1:], (last, 0, 0, 0)], strict=True):
        lo, hi = max(row[0], first), min(nxt[0], last)
        if hi > lo:
            acc += np.array(row[1:]) * (hi - lo)
    g, c, m = acc / (last - first)
    return {"gpu": round(float(g), 4), "cpu": round(float(c), 4), "mem": round(float(m), 4)}


def actual_utilisation(replay: ReplayInput, cluster: ClusterState) -> dict[str, float]:
    """What the history's GPU jobs held, from the first submission to the last end, as a
    share of the cluster."""
    total = cluster.total
    first = min(j.submit for j in replay.jobs.values())
    last = max((j.end or replay.end) for j in replay.jobs.values())
    span = max(1.0, last - first)
    g = c = m = 0.0
    for j in replay.jobs.values():
        assert j.start is not None
        dt = (j.end or replay.end) - j.start
        g += j.gpus * dt
        c += j.cpus * dt
        m += j.mem_mb / MB_PER_GB * dt
    return {"gpu": round(g / span / total.gpus, 4), "cpu": round(c / span / total.cpus, 4),
            "mem": round(m / span / total.mem_gb, 4)}


def fidelity(outcome: Replays, of: str) -> dict[str, float | str]:
    """Relative error of the replay of what ran (``of``: plain or synergy) against what
    really happened."""
    a = stats(list(outcome.actual.values()))
    p = stats(list(outcome.times(of).values()))
    return {"of": of, "makespan": _err(a.makespan_h, p.makespan_h),
            "jct_mean": _err(a.jct_mean_h, p.jct_mean_h),
            "jct_p99": _err(a.jct_p99_h, p.jct_p99_h),
            "wait_mean_h": round(p.wait_mean_h - a.wait_mean_h, 4)}


def _err(truth: float, got: float) -> float:
    return round((got - truth) / truth, 4) if truth else float("nan")


def grouped(outcome: Replays, replay: ReplayInput, group: str) -> dict[str, dict[str, Stats]]:
    """Per value of ``group`` (partition, account, or ``size``: GPUs in bands): the three
    runs' statistics."""
    ids: dict[str, list[int]] = {}
    for jid, j in replay.jobs.items():          # one pass: a site has many accounts
        key = _size(j.gpus) if group == "size" else (getattr(j, group) or "-")
        ids.setdefault(key, []).append(jid)
    runs = {w: outcome.times(w) for w in RUNS}
    order = [label for _, _, label in SIZES] if group == "size" else sorted(ids)
    return {k: {w: stats([t[i] for i in ids[k] if i in t]) for w, t in runs.items()}
            for k in order if k in ids}


def _size(gpus: int) -> str:
    return next(label for lo, hi, label in SIZES if lo <= gpus <= hi)
