"""A site's QOS and association limits as per-job caps the core plans under.

Slurm starts a job only while every limit in its scope holds: the job's own (MaxTRES per
job, of its QOS and association), its user's in the QOS (MaxTRESPerUser), its QOS's and its
association's and account's groups (GrpTRES). A job raised past one of them waits with a
limit reason, maybe for ever: synergy must never do that. Each limit becomes a cap on the
cores and memory of the jobs it covers:

- a per-job limit caps the job directly;
- a shared limit (per user, per group) first pays for what running jobs in its scope hold,
  then for the proportional shares of the jobs being planned in it; what is left is split
  evenly among those jobs as room to grow. So if their proportional shares fit, their
  raised shares fit too, whichever of them start.

A cap never goes below the proportional share (synergy's floor; a job whose proportional
share is over a limit waits for Slurm's reasons, not ours). An account's GrpTRES covers
the jobs of its sub-accounts too: a job is under every account from its own to the root.
A per-job limit (MaxTRES) is the nearest one set: the user's association's, else its
account's, else the nearest parent account's (Slurm's inheritance).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..core import PerGpu
from ..slurm.limits import QosLimits, SiteLimits, Tres
from ..slurm.model import SlurmJob
from ..vocabulary import MB_PER_GB

DEFAULT_QOS = "normal"
UNLIMITED_CPUS = 1 << 30   # a cap on memory only


@dataclass(frozen=True)
class Usage:
    cpus: float
    mem_mb: float


def occupied(job: SlurmJob) -> Usage:
    """What a running job occupies: its allocation, else its request (not a Slurm hold)."""
    if job.alloc:
        return Usage(sum(a.cpus for a in job.alloc), sum(a.mem_mb for a in job.alloc))
    mem = (job.mem_per_gpu_mb or 0) * job.gpus or (job.mem_per_node_mb or 0) * job.num_nodes
    return Usage(job.cpus, mem)


def job_limits(subjects: dict[int, tuple[SlurmJob, Usage]], running: Iterable[SlurmJob],
               limits: SiteLimits, fair: PerGpu | Mapping[int, PerGpu]) -> dict[int, PerGpu]:
    """Per-GPU caps for the jobs being planned (``subjects``: job -> what it asks at its
    proportional share, or holds if running), given every other running job. ``fair``:
    the proportional share, one for all or each job's (its partition's). Only jobs some
    limit covers appear in the result."""
    others = [j for j in running if j.job_id not in subjects]
    scoped: dict[tuple[str, ...], Tres] = {}
    members: dict[tuple[str, ...], list[int]] = defaultdict(list)
    direct: dict[int, list[Tres]] = defaultdict(list)
    for jid, (job, _) in subjects.items():
        for key, tres in _scopes(job, limits):
            scoped[key] = tres
            members[key].append(jid)
        direct[jid].extend(_per_job(job, limits))
    used: dict[tuple[str, ...], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for job in others:
        u = occupied(job)
        for key, _ in _scopes(job, limits):
            if key in scoped:
                used[key][0] += u.cpus
                used[key][1] += u.mem_mb
    caps: dict[int, list[float]] = {}
    for key, tres in scoped.items():
        ids = members[key]
        asks = [subjects[i][1] for i in ids]
        for dim, limit in ((0, tres.cpus), (1, tres.mem_mb)):
            if limit is None:
                continue
            spare = limit - used[key][dim] - sum(a.cpus if dim == 0 else a.mem_mb
                                                 for a in asks)
            room = max(0.0, spare) / len(ids)
            for i, a in zip(ids, asks, strict=True):
                total = (a.cpus if dim == 0 else a.mem_mb) + room
                cap = caps.setdefault(i, [math.inf, math.inf])
                cap[dim] = min(cap[dim], total)
    for jid, tres_list in direct.items():
        for tres in tres_list:
            cap = caps.setdefault(jid, [math.inf, math.inf])
            if tres.cpus is not None:
                cap[0] = min(cap[0], tres.cpus)
            if tres.mem_mb is not None:
                cap[1] = min(cap[1], tres.mem_mb)
    out = {}
    for jid, (cpus, mem_mb) in caps.items():
        gpus = subjects[jid][0].gpus
        floor = fair if isinstance(fair, PerGpu) else fair[jid]
        per_cpu = (UNLIMITED_CPUS if cpus == math.inf
                   else max(floor.cpus, math.floor(cpus / gpus)))
        per_mem = (math.inf if mem_mb == math.inf
                   else max(floor.mem_gb, mem_mb / gpus / MB_PER_GB))
        out[jid] = PerGpu(per_cpu, per_mem)
    return out


def _qos(job: SlurmJob, limits: SiteLimits) -> QosLimits | None:
    return limits.qos_named(job.qos or DEFAULT_QOS)


def _scopes(job: SlurmJob, limits: SiteLimits) -> list[tuple[tuple[str, ...], Tres]]:
    """The shared limits that cover ``job``: (scope key, limit)."""
    out: list[tuple[tuple[str, ...], Tres]] = []
    q = _qos(job, limits)
    if q is not None:
        if not q.per_user.empty:
            out.append((("qos-user", q.name, job.user), q.per_user))
        if not q.group.empty:
            out.append((("qos", q.name), q.group))
    partition = job.home_partition
    chain = set(limits.accounts_above(job.account))
    for a in limits.assocs:
        if a.account not in chain or a.partition not in ("", partition) or a.group.empty:
            continue
        if a.user == job.user and a.account == job.account:
            out.append((("assoc", a.account, a.user, a.partition), a.group))
        elif a.user == "":
            out.append((("account", a.account, a.partition), a.group))
    return out


def _per_job(job: SlurmJob, limits: SiteLimits) -> list[Tres]:
    out = []
    q = _qos(job, limits)
    if q is not None and not q.per_job.empty:
        out.append(q.per_job)
    partition = job.home_partition
    here = [a for a in limits.assocs if a.partition in ("", partition) and not a.per_job.empty]
    own = [a.per_job for a in here if a.account == job.account and a.user == job.user]
    if own:
        out.extend(own)
        return out
    for account in limits.accounts_above(job.account):
        found = [a.per_job for a in here if a.account == account and a.user == ""]
        if found:
            out.extend(found)
            break
    return out
