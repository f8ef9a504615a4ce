"""Mutable bookkeeping of one planning round: free resources per server and who holds what.

Allocators place jobs into a Ledger, reshape earlier jobs (TUNE's peer downgrade) and, when
an attempt fails half way, roll back to a checkpoint. The Ledger never lets a server go
below zero in any dimension; the finished round becomes an immutable :class:`Plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .demand import Demand, fair_capped
from .job import JobSpec
from .plan import Allocation, How, Plan
from .resources import MEM_EPS, ClusterState, PerGpu, floor_div

# How a job's GPUs are chosen. "fullest": whole on the server with the fewest free GPUs
# where it fits, else spread over the fullest servers (packs, keeps servers whole for big
# jobs): what Slurm's cons_tres does with a --gpus=N job (on 22.05; 24.11 and 26.05 prefer
# an idle node where one holds it, see docs/slurm-notes.md). "first-free": the reference
# simulator's, the first free GPUs in index order. Either way a job that asks per node
# (JobSpec.gpus_per_node) gets whole nodes of that many GPUs, as Slurm places it.
PLACEMENTS = ("fullest", "first-free")


def spread(order: Iterable[int], room: Callable[[int], int], gpus: int
           ) -> dict[int, int] | None:
    """``gpus`` GPUs taken server by server in ``order``, as many on each as ``room`` says
    fit there; None if they run out first (the spreading both Slurm and the ledger do)."""
    out: dict[int, int] = {}
    left = gpus
    for i in order:
        k = min(room(i), left)
        if k > 0:
            out[i] = k
            left -= k
            if left == 0:
                return out
    return None


@dataclass
class Held:
    """A job placed in this round (mutable while the round is planned)."""

    job: JobSpec
    share: PerGpu
    placement: dict[int, int]  # server index -> GPUs
    speedup: float
    how: How


class Ledger:
    """Free GPUs/cores/memory per server, and the jobs placed so far in admission order."""

    def __init__(self, cluster: ClusterState, placement: str = "fullest",
                 keep_room: tuple[float, float] | None = None) -> None:
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown placement {placement!r}; choose from "
                             f"{', '.join(PLACEMENTS)}")
        self.placement = placement
        # Cores and GB per free GPU that a share above the proportional one must leave on
        # its servers (None: nothing kept; see room_for).
        self.keep_room = keep_room
        # How many GPUs other jobs still wait for (None: as many as are free): no server
        # keeps room for more free GPUs than that.
        self.waiting_gpus: int | None = None
        self.cluster = cluster
        self.fair = cluster.fair
        self.names = [s.name for s in cluster.servers]
        # Free GPUs, cores and memory per server index: private, allocators ask the
        # methods below (what fits where), never the lists.
        self._fg, self._fc, self._fm = cluster.free_columns()
        self.max_gpus = cluster.max_server_gpus
        self.free_gpus = sum(self._fg)
        self.on_server: list[dict[int, int]] = [{} for _ in self.names]
        self.held: dict[int, Held] = {}
        self._undo: list[tuple[Any, ...]] = []

    # -- queries ------------------------------------------------------------------------
    @property
    def n_servers(self) -> int:
        return len(self.names)

    def free_on(self, i: int) -> tuple[int, int, float]:
        """Server ``i``'s free GPUs, cores and memory (GB)."""
        return self._fg[i], self._fc[i], self._fm[i]

    def free_gpus_by_server(self) -> tuple[int, ...]:
        return tuple(self._fg)

    def total_free(self) -> tuple[int, int, float]:
        """Free GPUs, cores and memory (GB) over all servers."""
        return self.free_gpus, sum(self._fc), sum(self._fm)

    def fits_whole(self, i: int, gpus: int, share: PerGpu) -> bool:
        """Whether ``gpus`` GPUs at ``share`` fit on server ``i`` alone."""
        return self.room_for(i, share, gpus) >= gpus

    def room_for(self, i: int, share: PerGpu, most: int) -> int:
        """How many GPUs at ``share`` (at most ``most``) server ``i`` can take.

        With ``keep_room`` (cores, GB per GPU), what a share takes above the proportional
        one in a dimension comes only from what the server's free GPUs do not need at that
        room: Slurm cannot lower a job once it runs, so cores given to one job beyond its
        share while GPUs beside it are free would leave those GPUs stranded, waiting for
        cores, until it ends (the paper's rounds would lower it back at the next arrival).
        A share within the proportional one is never held back."""
        fg, fc, fm = self._fg[i], self._fc[i], self._fm[i]
        k = min(most, fg)
        c, m = share.cpus, share.mem_gb
        if c > 0:
            k = min(k, fc // c)
        if m > 0:
            k = min(k, floor_div(fm, m))
        if self.keep_room is not None:
            kc, km = self.keep_room
            above_c, above_m = c > self.fair.cpus, m > self.fair.mem_gb + MEM_EPS
            # The k GPUs taken leave fg - k free, room kept for as many as wait.
            while k > 0 and (above_c or above_m):
                kept = self._kept_for(fg - k)
                if ((not above_c or fc - k * c >= kc * kept - 1e-9)
                        and (not above_m or fm - k * m + MEM_EPS >= km * kept)):
                    break
                k -= 1
        return max(0, k)

    def find_placement(self, job: JobSpec, share: PerGpu) -> dict[int, int] | None:
        """Where ``job``'s GPUs at ``share`` go, by the ledger's placement rule; None if
        they do not fit."""
        if job.gpus_per_node:
            order = (range(len(self._fg)) if self.placement == "first-free"
                     else self.servers_by_free_gpus(job.gpus_per_node))
            return self.per_node_placement(order, job.gpus, job.gpus_per_node, share)
        if self.placement == "first-free":
            return self.first_free_placement(job.gpus, share)
        return self.fullest_placement(job.gpus, share)

    def per_node_placement(self, order: Iterable[int], gpus: int, per_node: int,
                           share: PerGpu) -> dict[int, int] | None:
        """``gpus / per_node`` servers, taken in ``order``, each with ``per_node`` GPUs and
        their share free; None if there are not that many."""
        out: dict[int, int] = {}
        for i in order:
            if self.fits_whole(i, per_node, share):
                out[i] = per_node
                if len(out) * per_node == gpus:
                    return out
        return None

    def fullest_placement(self, gpus: int, share: PerGpu) -> dict[int, int] | None:
        """Whole on the server with the fewest free GPUs where it all fits, else spread GPU
        by GPU over the servers with the fewest free GPUs; None if it does not fit."""
        if gpus > self.free_gpus:
            return None
        fg = self._fg
        if gpus <= self.max_gpus:
            best = -1
            for i in range(len(fg)):
                g = fg[i]
                if g >= gpus and (best < 0 or g < fg[best]) and self.fits_whole(i, gpus, share):
                    best = i
            if best >= 0:
                return {best: gpus}
            if gpus == 1:
                return None
        return self._spread(self.servers_by_free_gpus(), gpus, share)

    def first_free_placement(self, gpus: int, share: PerGpu) -> dict[int, int] | None:
        """The reference's placement: the first free GPUs in server index order, each taken
        while its server still has the share's cores and memory; never consolidated."""
        if gpus > self.free_gpus:
            return None
        return self._spread(range(len(self._fg)), gpus, share)

    def _spread(self, order: Iterable[int], gpus: int, share: PerGpu) -> dict[int, int] | None:
        """Take GPUs server by server in ``order``, as many on each as its cores and memory
        allow at ``share``; None if they run out first."""
        return spread(order, lambda i: self.room_for(i, share, gpus), gpus)

    def servers_by_free_gpus(self, at_least: int = 1) -> list[int]:
        return [i for _, i in sorted((g, i) for i, g in enumerate(self._fg) if g >= at_least)]

    # -- changes ------------------------------------------------------------------------
    def place(self, job: JobSpec, demand: Demand, placement: dict[int, int]) -> None:
        share = demand.share
        for i, n in placement.items():
            self._take(i, n, n * share.cpus, n * share.mem_gb)
            self.on_server[i][job.id] = n
        self.held[job.id] = Held(job, share, dict(placement), demand.speedup, demand.how)
        self._undo.append(("place", job.id))

    def can_reshape(self, job_id: int, share: PerGpu) -> bool:
        h = self.held[job_id]
        dc = share.cpus - h.share.cpus
        dm = share.mem_gb - h.share.mem_gb
        return all(self._fc[i] >= n * dc and self._fm[i] + MEM_EPS >= n * dm
                   and self._keeps_room(i, share, n * dc, n * dm)
                   for i, n in h.placement.items())

    def _kept_for(self, free_gpus: int) -> int:
        """For how many of a server's ``free_gpus`` room is kept (no more than wait)."""
        return free_gpus if self.waiting_gpus is None else min(free_gpus, self.waiting_gpus)

    def _keeps_room(self, i: int, share: PerGpu, dc: int, dm: float) -> bool:
        """Whether taking ``dc`` more cores and ``dm`` more memory on server ``i`` for a
        job at ``share`` leaves its free GPUs their room (``keep_room``: only a dimension
        where the share grows above the proportional one is held to it)."""
        if self.keep_room is None:
            return True
        (kc, km), fair, free_g = self.keep_room, self.fair, self._kept_for(self._fg[i])
        if dc > 0 and share.cpus > fair.cpus and self._fc[i] - dc < kc * free_g - 1e-9:
            return False
        return not (dm > MEM_EPS and share.mem_gb > fair.mem_gb + MEM_EPS
                    and self._fm[i] - dm + MEM_EPS < km * free_g)

    def can_reshape_together(self, changes: list[tuple[int, Demand]]) -> bool:
        """Whether :meth:`reshape_together` would leave every server within its capacity."""
        dc: dict[int, int] = {}
        dm: dict[int, float] = {}
        for job_id, demand in changes:
            h = self.held[job_id]
            for i, n in h.placement.items():
                dc[i] = dc.get(i, 0) + n * (demand.share.cpus - h.share.cpus)
                dm[i] = dm.get(i, 0.0) + n * (demand.share.mem_gb - h.share.mem_gb)
        return all(self._fc[i] >= dc[i] and self._fm[i] + MEM_EPS >= dm[i] for i in dc)

    def reshape(self, job_id: int, demand: Demand) -> None:
        self.reshape_together([(job_id, demand)])

    def reshape_together(self, changes: list[tuple[int, Demand]]) -> None:
        """Give several placed jobs new shares at once. Only the end state must fit: one
        change may need what another frees (one job gives back cores and takes memory,
        its peer the other way round), and no order of single changes may fit."""
        touched: set[int] = set()
        for job_id, demand in changes:
            h = self.held[job_id]
            dc = demand.share.cpus - h.share.cpus
            dm = demand.share.mem_gb - h.share.mem_gb
            for i, n in h.placement.items():
                self._fc[i] -= n * dc
                self._fm[i] -= n * dm
                touched.add(i)
            self._undo.append(("reshape", job_id, h.share, h.speedup, h.how))
            h.share, h.speedup, h.how = demand.share, demand.speedup, demand.how
        for i in touched:
            assert self._fc[i] >= 0 and self._fm[i] >= -2 * MEM_EPS, "reshape overcommits a server"

    def checkpoint(self) -> int:
        return len(self._undo)

    def rollback(self, mark: int) -> None:
        while len(self._undo) > mark:
            entry = self._undo.pop()
            if entry[0] == "place":
                h = self.held.pop(entry[1])
                for i, n in h.placement.items():
                    self._take(i, -n, -n * h.share.cpus, -n * h.share.mem_gb)
                    del self.on_server[i][entry[1]]
            else:
                _, job_id, share, speedup, how = entry
                h = self.held[job_id]
                for i, n in h.placement.items():
                    self._fc[i] += n * (h.share.cpus - share.cpus)
                    self._fm[i] += n * (h.share.mem_gb - share.mem_gb)
                h.share, h.speedup, h.how = share, speedup, how

    def hold_room(self, i: int, gpus: int, share: PerGpu) -> None:
        """Count ``gpus`` GPUs at ``share`` on server ``i`` as taken while a placement is
        being built (no job holds them yet); ``release_room`` gives them back."""
        self._take(i, gpus, gpus * share.cpus, gpus * share.mem_gb)

    def release_room(self, i: int, gpus: int, share: PerGpu) -> None:
        self._take(i, -gpus, -gpus * share.cpus, -gpus * share.mem_gb)

    def _take(self, i: int, g: int, c: int, m: float) -> None:
        self._fg[i] -= g
        self._fc[i] -= c
        self._fm[i] -= m
        self.free_gpus -= g
        assert self._fg[i] >= 0 and self._fc[i] >= 0 and self._fm[i] >= -2 * MEM_EPS, \
            "placement overcommits a server"

    # -- TUNE's peer downgrade -----------------------------------------------------------
    def free_up(self, i: int, gpus: int, share: PerGpu) -> bool:
        """Make room for ``gpus`` GPUs at ``share`` on server ``i`` by lowering jobs placed
        there that hold more than the proportional share to it (fewest servers first, then
        most cores/GPU, then most memory/GPU). Applies the downgrades only if they suffice."""
        need_c = gpus * share.cpus - self._fc[i]
        need_m = gpus * share.mem_gb - self._fm[i] - MEM_EPS
        if self._fg[i] < gpus:
            return False
        if need_c <= 0 and need_m <= 0:
            return True
        peers = sorted(
            (self.held[j] for j in self.on_server[i]),
            key=lambda h: (len(h.placement), -h.share.cpus, -h.share.mem_gb, h.job.id))
        chosen: list[tuple[int, Demand]] = []
        extra: dict[int, tuple[int, float]] = {}  # other servers' free changes so far
        for h in peers:
            if h.share.within(self.fair):
                continue
            target = fair_capped(h.job, h.share, self.fair)
            target = Demand(target.share, target.speedup, How.PEER_DOWNGRADED)
            dc = h.share.cpus - target.share.cpus
            dm = h.share.mem_gb - target.share.mem_gb
            ok = True
            for s, n in h.placement.items():
                if s == i:
                    continue
                oc, om = extra.get(s, (0, 0.0))
                if self._fc[s] + oc + n * dc < 0 or self._fm[s] + om + n * dm < -MEM_EPS:
                    ok = False
            if not ok:
                continue
            for s, n in h.placement.items():
                if s != i:
                    oc, om = extra.get(s, (0, 0.0))
                    extra[s] = (oc + n * dc, om + n * dm)
            n_here = h.placement[i]
            need_c -= n_here * dc
            need_m -= n_here * dm
            chosen.append((h.job.id, target))
            if need_c <= 0 and need_m <= 0:
                # All at once: a downgrade may raise memory (a profile too slow at the
                # lowered point) that another downgrade frees, and vice versa for cores.
                self.reshape_together(chosen)
                return True
        return False

    # -- result -------------------------------------------------------------------------
    def to_plan(self, skipped: dict[int, str], allocator: str, policy: str = "",
                bound: float | None = None, fallback: str | None = None) -> Plan:
        allocs = []
        for h in self.held.values():
            placement = tuple((self.names[i], n) for i, n in sorted(h.placement.items()))
            allocs.append(Allocation(h.job.id, h.job.gpus, h.share, placement, h.speedup, h.how))
        return Plan(tuple(allocs), dict(skipped), allocator, policy, bound, fallback)
