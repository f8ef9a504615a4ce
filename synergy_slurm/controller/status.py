"""What ``synergy status`` (and the demo) show of the controller's state: the last round,
the managed jobs, and for one job why it has the cores and memory it has.

Only reads: the state store (opened read-only) where the reader may read it, else the
view of it the controller wrote for that user (``controller/views.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any, Protocol

from ..core import PerGpu
from .usage import cap_text


class StatusSource(Protocol):
    """What status shows is asked of: the state store, or a user's view of it."""

    def last_round(self) -> dict[str, Any] | None: ...

    def jobs(self) -> list[dict[str, Any]]: ...

    def actions_for(self, job_id: int, limit: int = 5) -> list[dict[str, Any]]: ...

    def profiling(self) -> dict[str, dict[str, Any]]: ...

    def suspects(self, key: str | None = None) -> list[dict[str, Any]]: ...

    def notices(self) -> list[dict[str, Any]]: ...

    def past(self) -> list[dict[str, Any]]: ...


# A controller whose last round is older than this many intervals (and a minute) is
# named as possibly down: a round is missed only when it hangs or the daemon stopped.
STALE_ROUNDS = 3
STALE_GRACE_S = 60.0


def round_line(last: dict[str, Any] | None, now: float) -> str:
    """One line on the controller's last round: when, in which mode, what it did or why
    it failed."""
    if last is None:
        return "no round recorded yet (is the controller running?)"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(last["started"] or 0))
    ago = max(0, now - (last["started"] or 0))
    head = f"last round {last['id']} at {when} ({ago:.0f} s ago, {last['mode']} mode)"
    if last.get("error"):
        return f"{head}: FAILED: {last['error']}"
    return (f"{head}: {last['managed'] or 0} managed, {last['actions'] or 0} actions, "
            f"{last['errors'] or 0} errors, {last['duration_s'] or 0:.2f} s")


def stale_lines(last: dict[str, Any] | None, now: float) -> list[str]:
    """A last round older than its interval allows: the controller may be down (what
    status shows is as of that round)."""
    if last is None:
        return []
    ago = max(0.0, now - (last.get("started") or 0))
    interval = last.get("interval_s")
    if interval and ago > STALE_ROUNDS * interval + STALE_GRACE_S:
        return [f"warning: no round for {ago:.0f} s on a {interval:g}-s interval: the "
                "controller may be down or stuck (systemctl status synergy-controller; "
                "its log says why); what follows is as of that round"]
    return []


def config_lines(last: dict[str, Any] | None, now: float) -> list[str]:
    """The configuration the last round ran under, and since when (``systemctl reload``
    re-reads it; a reload that did not take leaves it old)."""
    loaded = (last or {}).get("config_loaded")
    if not loaded or last is None:
        return []
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(loaded))
    return [f"configuration: {last.get('config_path') or 'defaults'}, read {when} "
            f"({max(0.0, now - loaded):.0f} s old), {last['mode']} mode"]


def select(jobs: Iterable[dict[str, Any]], user: str | None = None, job_id: int | None = None
           ) -> list[dict[str, Any]]:
    return [j for j in jobs if (user is None or j["user"] == user)
            and (job_id is None or j["job_id"] == job_id)]


def table_lines(jobs: list[dict[str, Any]], pending_first: bool = False) -> list[str]:
    """The managed jobs, one line each (``pending_first``: waiting jobs, whose plan is
    about to be applied, before running ones)."""
    if pending_first:
        jobs = sorted(jobs, key=lambda j: j["state"] != "PENDING")
    out = [f"{'job':>8} {'user':<10} {'state':<8} {'gpus':>4} {'now c/GPU':>9} "
           f"{'plan c/GPU':>10} {'plan MB/GPU':>11} {'speedup':>7} {'profile':<12} note"]

    def cell(v: object, w: int) -> str:
        return f"{'-' if v is None else v:>{w}}"

    for j in jobs:
        sp = "-" if j["speedup"] is None else f"{j['speedup']:.2f}x"
        out.append(f"{j['job_id']:>8} {j['user'] or '':<10} {j['state'] or '':<8} "
                   f"{cell(j['gpus'], 4)} {cell(j['cpus_per_gpu'], 9)} "
                   f"{cell(j['planned_cpus'], 10)} {cell(j['planned_mem_mb'], 11)} {sp:>7} "
                   f"{j['profile_key'] or '-':<12} {j['note'] or ''}")
    return out


def status_lines(store: StatusSource, pending_first: bool = False, user: str | None = None,
                 now: float | None = None) -> list[str]:
    """The whole status: the last round, the managed jobs, the profiling jobs, and the
    keys the closed loop marked suspect."""
    now = time.time() if now is None else now
    last = store.last_round()
    out = [round_line(last, now), *stale_lines(last, now)]
    out += [f"warning: {n['text']}" for n in store.notices()]
    out += config_lines(last, now)
    out += table_lines(select(store.jobs(), user=user), pending_first)
    profiling = {k: r for k, r in store.profiling().items() if user is None or r["user"] == user}
    if profiling:
        out.append("\nprofiling jobs (what they cost is theirs, not the jobs'):")
        for key, r in profiling.items():
            cost = "-" if r["cpu_s"] is None else f"{r['cpu_s']:.1f} CPU-s"
            out.append(f"  {key:<20} {r['status']:<9} Slurm job {r['slurm_job'] or '-'} for "
                       f"job {r['for_job']} ({r['user']}), {cost} {r['note'] or ''}")
    out += suspect_lines(store, user)
    return out


def suspect_lines(store: StatusSource, user: str | None = None, key: str | None = None
                  ) -> list[str]:
    """The marks of the closed loop (controller/usage.py), with their evidence."""
    return mark_lines([s for s in store.suspects(key) if user is None or s["user"] == user])


def mark_lines(marks: list[dict[str, Any]]) -> list[str]:
    if not marks:
        return []
    out = ["\nsuspect profile keys (their jobs used far less than they were given; later "
           "jobs capped; synergy profile suspects --clear KEY lifts it):"]
    for s in marks:
        cap = cap_text(PerGpu(int(s["cap_cpus"]), float(s["cap_mem_gb"])))
        out.append(f"  {s['key']:<20} user {s['user']:<12} {s['status']:<9} since "
                   f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(s['since']))}: "
                   f"{s['note']}; capped at {cap}")
    return out


def explain_job(store: StatusSource, job_id: int, now: float | None = None) -> list[str]:
    """Why one job has the cores and memory it has: its profile, the share planned for it
    and the speedup expected there, what it waits for, and what the controller did."""
    now = time.time() if now is None else now
    rows = select(store.jobs(), job_id=job_id)
    last = store.last_round()
    out = [round_line(last, now), *stale_lines(last, now)]
    if not rows:
        return out + past_job_lines(store, job_id)
    j = rows[0]
    gpus = j["gpus"] or 0
    out.append(f"job {job_id} ({j['user']}, {j['state']}, {gpus} GPU{'s' * (gpus != 1)})")
    if j["profile_key"]:
        known = j["speedup"] is not None and (j["how"] or "") != "proportional"
        out.append(f"  profile: {j['profile_key']}"
                   + ("" if known or j["planned_cpus"] is None
                      else " (unknown or insensitive: GPU-proportional share)"))
    else:
        out.append("  profile: none given (synergy-sbatch --profile-key): GPU-proportional "
                   "share")
    now_c = "Slurm's default" if j["cpus_per_gpu"] is None else f"{j['cpus_per_gpu']}"
    now_m = ("Slurm's default" if j["mem_per_gpu_mb"] is None
             else f"{j['mem_per_gpu_mb']} MB")
    out.append(f"  shape in Slurm: {now_c} cores/GPU, {now_m} memory/GPU")
    if j["planned_cpus"] is not None:
        out.append(f"  planned: {j['planned_cpus']} cores/GPU, {j['planned_mem_mb']} MB/GPU "
                   f"({j['how']} share), {j['speedup']:.2f}x its GPU-proportional speed")
    elif j["state"] == "PENDING":
        out.append(f"  not planned this round: {j['note'] or 'waiting for resources'}")
    if j["note"]:
        out.append(f"  last round: {j['note']}")
    return out + _action_lines(store, job_id)


def past_job_lines(store: StatusSource, job_id: int) -> list[str]:
    """A job no longer in the queue: the last row a round had for it, and what was done
    to it (the state keeps them ``PAST_KEEP_S``; a user reads their own jobs' through
    their view, as for the jobs in the queue)."""
    rows = select(store.past(), job_id=job_id)
    actions = _action_lines(store, job_id)
    if not rows and not actions:
        return [f"job {job_id}: not managed by synergy in the last 7 days, or not yours to "
                "see (no GPUs, not in a managed partition, opted out, a kind synergy does "
                "not reshape)"]
    if not rows:
        return [f"job {job_id}: no longer in the queue; what synergy did to it:", *actions]
    j = rows[0]
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(j["gone"] or 0))
    shape = (f"{j['cpus_per_gpu'] or 'default'} cores/GPU, "
             f"{j['mem_per_gpu_mb'] or 'default'} MB/GPU")
    n = j.get("requeues") or 0
    requeued = "" if not n else ", requeued once" if n == 1 else f", requeued {n} times"
    out = [f"job {job_id} ({j['user']}): left the queue by {when} (finished, cancelled or "
           f"failed; sacct -j {job_id} says which); last seen {j['state']} with {shape}"
           f"{requeued}",
           f"  profile: {j['profile_key'] or 'none given'}"]
    if j["note"]:
        out.append(f"  last round: {j['note']}")
    return out + actions


def _action_lines(store: StatusSource, job_id: int) -> list[str]:
    out = []
    for a in store.actions_for(job_id, limit=5):
        when = time.strftime("%H:%M:%S", time.localtime(a["ts"]))
        out.append(f"  {when} round {a['round']}: {a['action']} {_shape(a['before'])} -> "
                   f"{_shape(a['after'])} ({a['reason']}) [{a['result']}]")
    return out


def _shape(recorded: str | None) -> str:
    """An action's recorded shape (JSON) as ``12c/125000MB``."""
    try:
        d = json.loads(recorded or "null")
    except ValueError:
        return "?"
    if not isinstance(d, dict):
        return "-"
    return f"{d.get('cpus_per_gpu')}c/{d.get('mem_per_gpu_mb')}MB"
