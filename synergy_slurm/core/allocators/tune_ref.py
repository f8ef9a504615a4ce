"""The reference's Synergy-TUNE, rule for rule: what the paper's simulator does, so that our
simulator reproduces its numbers job for job (shared/reference/multigpu).

What it does, in the reference's own order, for each job in policy order:
1. Its demand is its ideal share. Where that exceeds a server, it is cut to a server's
   worth, and its speedup re-estimated on a straight line between the proportional share
   (1.0) and the ideal, on cores alone (memory ignored); a job larger than a server gets
   the proportional share at 1.0. (:func:`reference_demand`)
2. Placed as asked if it fits; else, if its demand exceeds the proportional share in any
   dimension, every dimension is set to the proportional share (speedup 1) and it is tried
   again.
3. Else peers are lowered: on the servers with GPUs to spare (a multi-GPU job: the first
   server, in index order, with enough free GPUs; else the fewest free first), jobs are
   taken in the order of a list kept per server (sorted in place, stably, by fewest
   servers, most cores/GPU, most memory/GPU) until their shares above proportional cover
   what is missing; each one whose demand exceeds the proportional share is set to it.
   Then the job is placed at its (lowered) share, or not at all.

Placement (``first-free``, the reference's, its runs had placement off): the first free GPUs
in index order, across servers, never consolidated. ``fullest``: ours (whole on the fullest
server where the job fits, else spread), for comparison.

Where the reference would go wrong (a peer raised past a server, or no room after the peer
step: it exits; seen only on servers of different sizes, which it does not model) our
TUNE's peer downgrade places the job instead, and a capped share a profile says runs slower
than proportional falls back to proportional, so the floor guarantee holds.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from ..demand import FLOOR_TOLERANCE, Demand
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import How, Plan
from ..resources import MEM_EPS, ClusterState, PerGpu, Server
from .base import AdmittingAllocator
from .tune import place_after_lowering_all, place_with_peer_downgrade


def reference_demand(job: JobSpec, fair: PerGpu, servers: tuple[Server, ...]) -> Demand:
    """The job's demand as the reference computes it (step 1 above). The speedup recorded
    is the profile's at that share (what the job really gets); the reference's own
    estimate for a cut share is :func:`reference_speedup`."""
    share, _, how = _reference(job, fair, servers)
    if how == "proportional":
        return Demand(fair, 1.0, how)
    assert job.profile is not None
    real = job.profile.speedup(share, fair)
    if real < 1.0 - FLOOR_TOLERANCE:
        return Demand(fair, 1.0, How.PROPORTIONAL)
    return Demand(share, real, how)


def reference_speedup(job: JobSpec, fair: PerGpu, servers: tuple[Server, ...]) -> float:
    """The speedup the reference runs a job at when it gets its demand: the ideal's, or
    for a demand cut to a server the straight line between proportional (1.0) and ideal,
    on cores alone (so a job cut only in memory keeps its ideal speedup)."""
    return _reference(job, fair, servers)[1]


def _reference(job: JobSpec, fair: PerGpu, servers: tuple[Server, ...]
               ) -> tuple[PerGpu, float, How]:
    prof = job.profile
    if prof is None or prof.ideal is None or not servers:
        return fair, 1.0, How.PROPORTIONAL
    size = max(s.capacity for s in servers)
    g = job.gpus
    ideal = prof.ideal
    cpus, mem = ideal.cpus * g, ideal.mem_gb * g
    speedup = prof.speedup(ideal, fair)
    cut = bigger = False
    if cpus > size.cpus:
        cpus, cut = size.cpus, True
        if g > size.gpus:
            cpus, bigger = fair.cpus * g, True
    if mem > size.mem_gb + MEM_EPS:
        mem, cut = size.mem_gb, True
        if g > size.gpus:
            mem, bigger = fair.mem_gb * g, True
    share = PerGpu(int(cpus // g), mem / g)
    if bigger:
        return (fair, 1.0, How.PROPORTIONAL) if share == fair else (share, 1.0, How.CAPPED)
    if not cut:
        return ideal, speedup, How.IDEAL
    span = (ideal.cpus - fair.cpus) * g
    if span != 0:
        speedup = 1.0 + (speedup - 1.0) / span * (cpus - fair.cpus * g)
    return share, speedup, How.CAPPED


def made_fair(demand: Demand, fair: PerGpu, how: How) -> Demand | None:
    """The reference's self/peer downgrade: every dimension to the proportional share
    (speedup 1) when any exceeds it; None when none does."""
    s = demand.share
    if s.cpus > fair.cpus or s.mem_gb > fair.mem_gb + MEM_EPS:
        return Demand(fair, 1.0, how)
    return None


class RefTuneAllocator(AdmittingAllocator):
    name = "tune-ref"
    placement = "first-free"

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        self._order: list[list[int]] = [[] for _ in cluster.servers]
        self._demand: dict[int, Demand] = {}
        return super().allocate(jobs, cluster)

    # -- one job --------------------------------------------------------------------------
    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        fair = ledger.fair
        demand = reference_demand(job, fair, ledger.cluster.servers)
        self._demand[job.id] = demand
        if self._try_place(job, demand, ledger):
            return None
        demand = made_fair(demand, fair, How.SELF_DOWNGRADE) or demand
        if self._try_place(job, demand, ledger):
            return None
        mark = ledger.checkpoint()
        lowered = all(self._lower_peers(server, gpus, demand.share, ledger)
                      for server, gpus in self._servers_with_room(job.gpus, ledger).items())
        if lowered and self._try_place(job, demand, ledger):
            return None
        # Where the reference would fail (it exits; seen only on uneven servers, which its
        # simulator does not model): our TUNE's peer downgrade, then its last resort (every
        # peer lowered at once), so no admitted job is lost.
        ledger.rollback(mark)
        if place_with_peer_downgrade(job, demand, ledger) or \
                place_after_lowering_all(job, demand, ledger):
            for i in sorted(ledger.held[job.id].placement):
                self._order[i].append(job.id)
            return None
        return "no room even after lowering peers to their proportional share"

    def _try_place(self, job: JobSpec, demand: Demand, ledger: Ledger) -> bool:
        placement = ledger.find_placement(job, demand.share)
        if placement is None:
            return False
        ledger.place(job, demand, placement)
        for i in sorted(placement):
            self._order[i].append(job.id)
        return True

    # -- the peer step --------------------------------------------------------------------
    @staticmethod
    def _servers_with_room(gpus: int, ledger: Ledger) -> dict[int, int]:
        """Where the job's GPUs are to be found: a multi-GPU job takes the first server
        with enough free GPUs; otherwise (or if none) the servers with the fewest free GPUs
        first, until the job's GPUs are covered."""
        fg = ledger.free_gpus_by_server()
        if gpus > 1:
            for i, free in enumerate(fg):
                if free >= gpus:
                    return {i: gpus}
        heap = [(free, i) for i, free in enumerate(fg) if free > 0]
        heapq.heapify(heap)
        out: dict[int, int] = {}
        left = gpus
        while left > 0 and heap:
            free, i = heapq.heappop(heap)
            out[i] = min(free, left)
            left -= out[i]
        return out

    def _lower_peers(self, server: int, gpus: int, share: PerGpu, ledger: Ledger) -> bool:
        """Lower, to the proportional share, the jobs on ``server`` the reference picks to
        make room for ``gpus`` GPUs at ``share``; False if that would overcommit a server."""
        fair = ledger.fair
        _, free_c, free_m = ledger.free_on(server)
        need_c = max(0.0, gpus * share.cpus - free_c)
        need_m = max(0.0, gpus * share.mem_gb - free_m)
        if need_c <= 0 and need_m <= MEM_EPS:
            return True
        order = self._order[server]
        held = ledger.held
        order.sort(key=lambda j: (len(held[j].placement), -held[j].share.cpus,
                                  -held[j].share.mem_gb))
        chosen: list[int] = []
        for j in order:
            h = held[j]
            here = h.placement[server]
            excess_c = max(0, (h.share.cpus - fair.cpus) * here)
            excess_m = max(0.0, (h.share.mem_gb - fair.mem_gb) * here)
            chosen.append(j)
            need_c = max(0.0, need_c - excess_c)
            need_m = max(0.0, need_m - excess_m)
            if need_c <= 0 and need_m <= MEM_EPS:
                break
        changes = []
        for j in chosen:
            lowered = made_fair(self._demand[j], fair, How.PEER_DOWNGRADED)
            if lowered is not None and held[j].share != lowered.share:
                changes.append((j, lowered))
        if not ledger.can_reshape_together(changes):
            return False
        if changes:
            ledger.reshape_together(changes)
        return True
