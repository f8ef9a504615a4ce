"""Replay a history twice through the simulator, in the controller's model, and measure.

The proportional run is what happened (every job at its GPU-proportional share, started
in order as resources free up); comparing it with the history's own waits, JCTs and
makespan tells how far the replay can be trusted, and that error is reported first. The
synergy run is the prediction. Both run non-preemptively (a running job keeps its shape,
as the controller keeps it), on the same cluster and background, in the same order:
Slurm's, by the priority each job had (``sacct``'s Priority), where the history has them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..core import ClusterState, Profile
from ..sim.engine import JobResult, SimConfig, SimResult, simulate
from ..vocabulary import MB_PER_GB
from .history import Replay, replay_profiles

GROUPS = ("partition", "account")


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

    def as_dict(self) -> dict:
        return {k: (round(v, 4) if isinstance(v, float) else v)
                for k, v in self.__dict__.items()}


@dataclass(frozen=True)
class Times:
    """One job's eligible, start and end time on one timeline (seconds from t0)."""

    job_id: int
    arrival: float
    start: float | None
    end: float | None


def stats(times: Sequence[Times]) -> Stats:
    done = [t for t in times if t.end is not None and t.start is not None]
    nan = float("nan")
    if not done:
        return Stats(0, len(times), nan, nan, nan, nan, nan)
    wait = np.array([t.start - t.arrival for t in done]) / 3600
    jct = np.array([t.end - t.arrival for t in done]) / 3600
    p50, p99 = np.percentile(jct, [50, 99])
    span = (max(t.end for t in done) - min(t.arrival for t in times)) / 3600
    return Stats(len(done), len(times) - len(done), float(wait.mean()), float(jct.mean()),
                 float(p50), float(p99), float(span))


@dataclass
class Outcome:
    """What each of the three (actual, proportional, synergy) did with the jobs."""

    actual: dict[int, Times]
    proportional: SimResult
    synergy: SimResult

    def times(self, which: str) -> dict[int, Times]:
        if which == "actual":
            return self.actual
        res = self.proportional if which == "proportional" else self.synergy
        return {j.job_id: _times(j) for j in res.jobs}


def _times(j: JobResult) -> Times:
    return Times(j.job_id, j.arrival, j.start, j.finish)


def run(replay: Replay, profiles: Mapping[str, Profile], cluster: ClusterState,
        allocator: str = "tune", round_s: float = 60.0, restart_cost_s: float = 0.0,
        on_round: Callable[[str, float], None] | None = None, requeue_budget: int = 0,
        requeue_interval_s: float = 0.0) -> Outcome:
    """The proportional and the synergy replay of ``replay`` on ``cluster``. In the
    synergy replay, running jobs that opted in (``synergy:requeue-ok``) are requeued into
    idle resources as the controller would: at most ``requeue_budget`` a round, each at
    most every ``requeue_interval_s``, when the time saved beats ``restart_cost_s``."""
    if not replay.trace:
        raise ValueError("nothing to replay: no GPU job in the history ran")
    actual = {jid: Times(jid, j.eligible - replay.t0,
                         None if j.start is None else j.start - replay.t0,
                         (j.end if j.end is not None else replay.end) - replay.t0)
              for jid, j in replay.jobs.items()}
    trace = sorted(replay.trace, key=lambda t: (t.arrival, t.job_id))
    profiles = replay_profiles(profiles, cluster.fair)
    policy = replay_policy(replay)
    results = {}
    for name, alloc in (("proportional", "proportional"), ("synergy", allocator)):
        opted = any(t.requeue_ok for t in trace) and alloc != "proportional"
        cfg = SimConfig(cluster, policy=policy, allocator=alloc, round_s=round_s,
                        restart_cost_s=restart_cost_s, preemptive=False,
                        background=tuple(replay.background),
                        requeue_budget=requeue_budget if opted else 0,
                        requeue_interval_s=requeue_interval_s, requeue_opt_in=True)
        cb = (lambda now, _done, n=name: on_round(n, now)) if on_round else None
        results[name] = simulate(trace, profiles, cfg, on_round=cb)
    return Outcome(actual, results["proportional"], results["synergy"])


def replay_policy(replay: Replay) -> str:
    """``slurm`` (the priorities the history recorded, ties by arrival) where every job
    has one, else ``fifo`` (arrival order): a history with only some priorities, or none,
    cannot be ordered by them."""
    return "slurm" if replay.trace and all(t.priority > 0 for t in replay.trace) else "fifo"


def utilisation(result: SimResult) -> dict[str, float]:
    """Mean GPU, CPU and memory allocation over the run's rounds."""
    rows = result.utilisation
    if not rows:
        return {"gpu": 0.0, "cpu": 0.0, "mem": 0.0}
    arr = np.array([r[1:] for r in rows])
    g, c, m = arr.mean(axis=0)
    return {"gpu": round(float(g), 4), "cpu": round(float(c), 4), "mem": round(float(m), 4)}


def actual_utilisation(replay: Replay, cluster: ClusterState) -> dict[str, float]:
    """What the history's GPU jobs held, over the same span, as a share of the cluster."""
    total = cluster.total
    first = min(j.eligible for j in replay.jobs.values())
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


def fidelity(outcome: Outcome) -> dict[str, float]:
    """Relative error of the proportional replay against what really happened."""
    a = stats(list(outcome.actual.values()))
    p = stats(list(outcome.times("proportional").values()))

    def err(x: float, y: float) -> float:
        return round((y - x) / x, 4) if x else float("nan")

    return {"makespan": err(a.makespan_h, p.makespan_h), "jct_mean": err(a.jct_mean_h,
                                                                         p.jct_mean_h),
            "wait_mean_h": round(p.wait_mean_h - a.wait_mean_h, 4)}


def grouped(outcome: Outcome, replay: Replay, group: str) -> dict[str, dict[str, Stats]]:
    """Per value of ``group`` (partition or account): the three runs' statistics."""
    ids: dict[str, list[int]] = {}
    for jid, j in replay.jobs.items():          # one pass: a site has many accounts
        ids.setdefault(getattr(j, group) or "-", []).append(jid)
    runs = {w: outcome.times(w) for w in ("actual", "proportional", "synergy")}
    return {k: {w: stats([t[i] for i in ids[k] if i in t]) for w, t in runs.items()}
            for k in sorted(ids)}
