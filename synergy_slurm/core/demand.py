"""What a job asks for: its ideal share, capped to a server, and the downgrades TUNE uses.

Every function here keeps Synergy's guarantee: a returned share never gives the job less
than its proportional throughput; where a profile would (a malformed or odd profile), the
proportional share is returned instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from .job import JobSpec
from .plan import How
from .resources import PerGpu, Server

FLOOR_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Demand:
    """A per-GPU share, the speedup it gives, and why it was chosen."""

    share: PerGpu
    speedup: float
    how: How


def speedup_of(job: JobSpec, share: PerGpu, fair: PerGpu) -> float:
    if job.profile is None:
        return 1.0
    return job.profile.speedup(share, fair)


Kinds = frozenset[tuple[int, int, float]]


def server_kinds(servers: tuple[Server, ...]) -> Kinds:
    """The kinds of server a site has, as (GPUs, cores, GB): a site has few. Plain tuples
    (equal and hashed as the Resources are): hashing the dataclass per server per call
    was a tenth of a large replay's time (#17). A caller that asks for many jobs' shares
    against the same servers reads them once (``requeue.requeues``)."""
    return frozenset((c.gpus, c.cpus, c.mem_gb) for c in (s.capacity for s in servers))


def server_caps(gpus: int, servers: tuple[Server, ...], kinds: Kinds | None = None
                ) -> list[PerGpu]:
    """The largest per-GPU shares a ``gpus``-GPU job can have on one server, one per kind
    of server (none dominated by another); for a job larger than every server, a server's
    share per GPU (it spans whole servers). Empty without servers. ``kinds``: the
    servers' (``server_kinds``), where the caller has them."""
    if kinds is None:
        kinds = server_kinds(servers)
    boxes = {PerGpu(c // gpus, m / gpus) for g, c, m in kinds if g >= gpus}
    if not boxes:
        boxes = {PerGpu(c // g, m / g) for g, c, m in kinds if g > 0}
    return sorted((b for b in boxes if not any(o != b and b.within(o) for o in boxes)),
                  key=lambda b: (b.cpus, b.mem_gb))


def job_caps(job: JobSpec, servers: tuple[Server, ...], kinds: Kinds | None = None
             ) -> list[PerGpu]:
    """The largest per-GPU shares this job may have: a server's (``server_caps``), cut to
    the job's site limit where it has one."""
    caps = server_caps(job.gpus, servers, kinds)
    if job.limit is None:
        return caps
    cut = {c.capped(job.limit) for c in caps}
    return sorted((b for b in cut if not any(o != b and b.within(o) for o in cut)),
                  key=lambda b: (b.cpus, b.mem_gb))


def ideal_demand(job: JobSpec, fair: PerGpu, servers: tuple[Server, ...],
                 kinds: Kinds | None = None) -> Demand:
    """The job's ideal share, capped at the largest server and at the job's site limit (a
    job larger than every server: at a server's share per GPU, so that an insensitive one
    still takes no more than its ideal); proportional when unknown, or when the capped
    point would run slower than proportional."""
    proportional = Demand(fair, 1.0, How.PROPORTIONAL)
    profile = job.profile
    if profile is None or profile.ideal is None:
        return proportional
    caps = job_caps(job, servers, kinds)
    if not caps:
        return proportional
    point, how = profile.ideal, How.IDEAL
    if not any(point.within(cap) for cap in caps):
        # The best capped point any kind of server can hold (then the cheapest).
        point = max((point.capped(cap) for cap in caps),
                    key=lambda p: (profile.speedup(p, fair), -p.cpus, -p.mem_gb))
        how = How.CAPPED
    s = profile.speedup(point, fair)
    if s < 1.0 - FLOOR_TOLERANCE:
        return proportional
    return Demand(point, s, how)


def fair_capped(job: JobSpec, share: PerGpu, fair: PerGpu) -> Demand:
    """Lower every dimension above the proportional share to it (TUNE's self/peer downgrade).

    The result is within the fair share in every dimension. If lowering alone would cost the
    job throughput below proportional, the plain proportional share is returned.
    """
    lowered = share.capped(fair)
    s = speedup_of(job, lowered, fair)
    if s < 1.0 - FLOOR_TOLERANCE:
        return Demand(fair, 1.0, How.PROPORTIONAL)
    return Demand(lowered, s, How.SELF_DOWNGRADE)


def intermediate_points(job: JobSpec, upper: PerGpu, lower: Demand,
                        fair: PerGpu) -> list[Demand]:
    """Shares between ``lower`` and ``upper`` on the profile's grid that beat ``lower``,
    best first (then cheapest): what the interpolating TUNE tries before proportional."""
    prof = job.profile
    if prof is None:
        return []
    cpus = sorted({int(c) for c in prof.cpu_grid if c == int(c)} | {upper.cpus, fair.cpus})
    mems = sorted({*prof.mem_grid, upper.mem_gb, fair.mem_gb})
    out = []
    for c in cpus:
        if c < 1 or c > upper.cpus:
            continue
        for m in mems:
            if m > upper.mem_gb:
                continue
            p = PerGpu(c, m)
            if p == upper or p == lower.share:
                continue
            s = prof.speedup(p, fair)
            if s > lower.speedup + FLOOR_TOLERANCE and s >= 1.0 - FLOOR_TOLERANCE:
                out.append(Demand(p, s, How.INTERPOLATED))
    out.sort(key=lambda d: (-d.speedup, d.share.cpus, d.share.mem_gb))
    # Drop points dominated by a cheaper one with at least the same speedup.
    kept: list[Demand] = []
    for d in out:
        if not any(k.share.within(d.share) for k in kept):
            kept.append(d)
    return kept
