"""TUNE+: TUNE's admission, with the queue's cores and memory shared by marginal speedup.

Why: TUNE gives each job in policy order its ideal share while one fits, so the first
jobs take cores that later, more sensitive jobs would turn into more throughput, and it
packs jobs on the fullest server, so the cores an insensitive job leaves idle sit beside
its own GPUs where no sensitive job can use them (docs/results/opt_gap.md: both together
are most of TUNE's 9.4% mean gap to the OPT bound). TUNE+ keeps TUNE's admission (the same
jobs, chosen in policy order by GPUs alone) and its floor, and changes how the admitted
jobs share cores and memory:

1. Targets: every admitted job starts at its cheapest share that keeps the floor, then the
   free cores and memory of the whole cluster go, step by step, to the job whose next
   step buys the most speedup per resource (a greedy multiple-choice knapsack over the
   same candidate shares as OPT's, :func:`queue_targets`).
2. Packing: jobs are placed most demanding first (or largest first), each on the server
   that keeps the most room per free GPU for the jobs still to come
   (:func:`balanced_placement`), so cores left idle by an insensitive job are where a
   sensitive job can use them; a job is spread over servers where whole it would leave
   too little room (one of the packings) or fits nowhere whole. A job that does not fit
   at its target goes through TUNE's steps (lowered, peers lowered).
3. Repair: cores and memory left idle on a server go to the jobs there by gain, and
   pairs of jobs on one server trade a step down for a bigger step up (:mod:`.repair`).
4. Tries: the four packings (:data:`PACKINGS`) and, on rounds of up to
   :data:`TUNE_TRY_MAX_JOBS` jobs, TUNE's own plan repaired; the most total speedup wins,
   then the fewest jobs spread, then the first.

If no try places every job the GPUs admit (a corner of uneven servers), the plan is
TUNE's own. Everything is ordered by values and job ids only: identical input gives an
identical plan.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ..demand import Demand, ideal_demand, job_caps
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import How, Plan
from ..resources import MEM_EPS, ClusterState, PerGpu, floor_div
from .base import Allocator, admitted_at_once
from .opt import candidates
from .repair import repair
from .tune import TuneAllocator, place_tuned


@dataclass(frozen=True)
class Weights:
    """What a core and a GB cost, each as a share of what the round has free: one unit of
    cost is the whole free pool of either."""

    per_cpu: float
    per_gb: float

    def cost(self, gpus: int, d: Demand) -> float:
        return gpus * (d.share.cpus * self.per_cpu + d.share.mem_gb * self.per_gb)


class TunePlusAllocator(Allocator):
    name = "tune-plus"

    def __init__(self) -> None:
        self.fallback = TuneAllocator()
        self.candidates = Candidates()

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        skipped: dict[int, str] = {}
        admitted = admitted_at_once(jobs, cluster, cluster_free_gpus(cluster), skipped)
        if not admitted:
            return Ledger(cluster, self.placement).to_plan(skipped, self.name)
        cands = self.candidates.of(admitted, cluster)
        target = queue_targets(admitted, cands, Ledger(cluster, self.placement))
        done = []
        ceiling = round(best_possible(admitted, cands), 9)
        for ledger in self.tries(admitted, target, cands, cluster):
            if ledger is not None:
                done.append(ledger)
                if score(ledger) == (ceiling, 0):
                    break     # every job at its best share, none spread: nothing beats it
        if not done:
            self.fallback.placement = self.placement
            plan = self.fallback.allocate(jobs, cluster)
            return Plan(plan.allocations, plan.skipped, self.name,
                        fallback=f"{self.fallback.name}: packing lost a job")
        best = max(done, key=score)     # the first of equals: deterministic
        rank = {j.id: k for k, j in enumerate(admitted)}
        plan = best.to_plan(skipped, self.name)
        allocs = tuple(sorted(plan.allocations, key=lambda a: rank[a.job_id]))
        return Plan(allocs, plan.skipped, self.name)

    def tries(self, admitted: list[JobSpec], target: dict[int, Demand],
              cands: dict[int, list[Demand]], cluster: ClusterState
              ) -> Iterator[Ledger | None]:
        for way in PACKINGS:
            yield self.packed(admitted, target, cands, cluster, way)
        if len(admitted) <= TUNE_TRY_MAX_JOBS:
            yield self.tuned(admitted, cands, cluster)

    def packed(self, admitted: list[JobSpec], target: dict[int, Demand],
               cands: dict[int, list[Demand]], cluster: ClusterState, way: Packing
               ) -> Ledger | None:
        """The targets packed one way and repaired; None if a job found no room."""
        ledger = Ledger(cluster, self.placement)
        if not pack(admitted, target, ledger, way):
            return None
        repair(ledger, cands)
        return ledger

    def tuned(self, admitted: list[JobSpec], cands: dict[int, list[Demand]],
              cluster: ClusterState) -> Ledger | None:
        """TUNE's own plan of the same jobs, repaired: kept where the packings do worse
        (a job order that happens to fill the servers exactly), so that on rounds of up
        to TUNE_TRY_MAX_JOBS jobs TUNE+ never does worse than TUNE."""
        ledger = Ledger(cluster, self.placement)
        tune = TuneAllocator()
        for job in admitted:
            if tune.admit(job, ledger) is not None:
                return None
        tune.finish(ledger)
        repair(ledger, cands)
        return ledger


# TUNE's own plan is one of the tries up to this many admitted jobs: beyond, its time
# (0.60 s alone for the 1,793 jobs a round of 10,000 admits on 1,000 nodes,
# docs/results/README.md section 11) would break a big site's 1-s budget.
TUNE_TRY_MAX_JOBS = 500


def best_possible(jobs: list[JobSpec], cands: dict[int, list[Demand]]) -> float:
    """The total if every job had its fastest share: a plan that reaches it is optimal."""
    return sum(max(d.speedup for d in cands[j.id]) for j in jobs)


def score(ledger: Ledger) -> tuple[float, int]:
    """The most total speedup (to 1e-9: sums in another order differ in the last bits),
    then the fewest jobs spread over several servers."""
    return (round(sum(h.speedup for h in ledger.held.values()), 9),
            -sum(1 for h in ledger.held.values() if len(h.placement) > 1))


def cluster_free_gpus(cluster: ClusterState) -> int:
    return sum(r.gpus for r in cluster.free())


class Candidates:
    """OPT's candidate shares of each job, each named as TUNE names it (its ideal or
    capped share, proportional, or a point between). Worked out once per kind of job
    (profile, GPUs, limit, the largest share a server allows, the proportional share)
    and remembered across rounds: a round holds a few dozen kinds of job, and a
    simulator or a controller plans thousands of rounds with the same kinds. What is
    remembered depends on nothing but that key, so the plans do not."""

    MAX_KINDS = 4096

    def __init__(self) -> None:
        self.known: dict[tuple[object, ...], list[Demand]] = {}

    def of(self, jobs: list[JobSpec], cluster: ClusterState) -> dict[int, list[Demand]]:
        kinds: dict[tuple[int, int, PerGpu | None], list[Demand]] = {}
        out = {}
        for j in jobs:
            kind = (id(j.profile), j.gpus, j.limit)
            if kind not in kinds:
                kinds[kind] = self.lookup(j, cluster)
            out[j.id] = kinds[kind]
        return out

    def lookup(self, job: JobSpec, cluster: ClusterState) -> list[Demand]:
        key = (job.profile, job.gpus, job.limit, tuple(job_caps(job, cluster.servers)),
               cluster.fair)
        hit = self.known.get(key)
        if hit is None:
            ideal = ideal_demand(job, cluster.fair, cluster.servers)
            hit = [Demand(d.share, d.speedup, named(d.share, ideal, cluster.fair))
                   for d in candidates(job, cluster)]
            if len(self.known) >= self.MAX_KINDS:
                self.known.clear()
            self.known[key] = hit
        return hit


def named(share: PerGpu, ideal: Demand, fair: PerGpu) -> How:
    if share == ideal.share:
        return ideal.how
    return How.PROPORTIONAL if share == fair else How.INTERPOLATED


def weights(ledger: Ledger) -> Weights:
    _, c, m = ledger.total_free()
    return Weights(1.0 / c if c > 0 else 1.0, 1.0 / m if m > MEM_EPS else 1.0)


def queue_targets(jobs: list[JobSpec], cands: dict[int, list[Demand]], ledger: Ledger
                  ) -> dict[int, Demand]:
    """Each job's share if the cluster were one machine: the cheapest floor-keeping share
    first, then upgrades by speedup gained per cost while the free totals last."""
    w = weights(ledger)
    _, free_c, free_m = ledger.total_free()
    now: dict[int, Demand] = {}
    for j in jobs:
        now[j.id] = cheapest(j, cands[j.id], w)
        free_c -= j.gpus * now[j.id].share.cpus
        free_m -= j.gpus * now[j.id].share.mem_gb
    by_id = {j.id: j for j in jobs}
    heap: list[tuple[float, int, int, Demand]] = []
    for k, j in enumerate(jobs):
        _push_step(heap, j, k, now[j.id], cands[j.id], w, free_c, free_m)
    while heap:
        _, k, jid, step = heapq.heappop(heap)
        j, cur = by_id[jid], now[jid]
        dc = j.gpus * (step.share.cpus - cur.share.cpus)
        dm = j.gpus * (step.share.mem_gb - cur.share.mem_gb)
        if dc > free_c or dm > free_m + MEM_EPS:
            _push_step(heap, j, k, cur, cands[jid], w, free_c, free_m)
            continue
        now[jid] = step
        free_c -= dc
        free_m -= dm
        _push_step(heap, j, k, step, cands[jid], w, free_c, free_m)
    return now


def cheapest(job: JobSpec, cands: list[Demand], w: Weights) -> Demand:
    """The job's cheapest candidate (the fastest of equally cheap ones)."""
    return min(cands, key=lambda d: (w.cost(job.gpus, d), -d.speedup))


def _push_step(heap: list[tuple[float, int, int, Demand]], job: JobSpec, rank: int,
               cur: Demand, cands: list[Demand], w: Weights, free_c: float,
               free_m: float) -> None:
    """Queue the job's best next step: of the faster shares that fit what is left, the one
    with the most speedup per added cost (a step that frees resources first)."""
    best: tuple[float, Demand] | None = None
    base = w.cost(job.gpus, cur)
    for d in cands:
        if d.speedup <= cur.speedup + 1e-12:
            continue
        dc = job.gpus * (d.share.cpus - cur.share.cpus)
        dm = job.gpus * (d.share.mem_gb - cur.share.mem_gb)
        if dc > free_c or dm > free_m + MEM_EPS:
            continue
        extra = w.cost(job.gpus, d) - base
        ratio = (d.speedup - cur.speedup) / extra if extra > 1e-15 else float("inf")
        if best is None or ratio > best[0] + 1e-12:
            best = (ratio, d)
    if best is not None:
        heapq.heappush(heap, (-best[0], rank, job.id, best[1]))


@dataclass(frozen=True)
class Packing:
    """One way to pack: whether the largest jobs go first (whole servers for them before
    small demanding jobs split the servers up), and whether a job is spread over servers
    where whole it would leave too little room for the rest."""

    largest_first: bool
    spread_to_keep_room: bool


PACKINGS = tuple(Packing(a, b) for a in (False, True) for b in (False, True))


def pack(jobs: list[JobSpec], target: dict[int, Demand], ledger: Ledger,
         way: Packing) -> bool:
    """Place every job at its target, most demanding per GPU first, on the server that
    keeps the most room for the rest; jobs that do not fit go through TUNE's steps
    afterwards. False if one still has no room."""
    fair = ledger.fair
    w_c = 1.0 / fair.cpus if fair.cpus > 0 else 1.0
    w_m = 1.0 / fair.mem_gb if fair.mem_gb > MEM_EPS else 1.0
    rank = {j.id: k for k, j in enumerate(jobs)}

    def heaviness(j: JobSpec) -> tuple[int, float, int]:
        s = target[j.id].share
        return (-j.gpus if way.largest_first else 0, -(s.cpus * w_c + s.mem_gb * w_m),
                rank[j.id])

    left_c = sum(j.gpus * target[j.id].share.cpus for j in jobs)
    left_m = sum(j.gpus * target[j.id].share.mem_gb for j in jobs)
    states = ServerStates(ledger)
    late = []
    for j in sorted(jobs, key=heaviness):
        d = target[j.id]
        left_c -= j.gpus * d.share.cpus
        left_m -= j.gpus * d.share.mem_gb
        placement = balanced_placement(j, Room(ledger, d, left_c, left_m), states,
                                       way.spread_to_keep_room)
        if placement is None:
            late.append(j)
        else:
            ledger.place(j, d, placement)
            states.update(placement)
    for j in sorted(late, key=lambda j: rank[j.id]):
        if place_tuned(j, target[j.id], ledger) is not None:
            return False
    return True


State = tuple[int, int, float]   # a server's free GPUs, cores and memory


class ServerStates:
    """The servers grouped by what they have free: servers that have the same free GPUs,
    cores and memory are alike to the packing but for their index, so it compares a
    few dozen states instead of every server of a big site."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.groups: dict[State, list[int]] = {}
        for i in range(ledger.n_servers):
            st = ledger.free_on(i)
            if st[0] > 0:
                self.groups.setdefault(st, []).append(i)
        self.at = {i: ledger.free_on(i) for g in self.groups.values() for i in g}

    def update(self, placement: dict[int, int]) -> None:
        for i in placement:
            old, new = self.at.pop(i), self.ledger.free_on(i)
            group = self.groups[old]
            group.remove(i)
            if not group:
                del self.groups[old]
            if new[0] > 0:
                self.at[i] = new
                bisect.insort(self.groups.setdefault(new, []), i)

    def by_room(self, room: Room, n: int) -> list[tuple[tuple[float, int, int], State]]:
        """The states with at least ``n`` free GPUs, most room after ``n`` of the job
        first (then the fullest, then the lowest index)."""
        return sorted(((*room.key(st, n), grp[0]), st)
                      for st, grp in self.groups.items() if st[0] >= n)

    def spread(self, room: Room, gpus: int, per_server: Callable[[State], int]
               ) -> dict[int, int] | None:
        """``gpus`` GPUs over the servers, most room first, ``per_server`` of each state's
        servers at most (the ledger's ``spread``, asked once per state, not per server)."""
        out: dict[int, int] = {}
        left = gpus
        for _, st in self.by_room(room, 1):
            k = per_server(st)
            if k <= 0:
                continue
            for i in self.groups[st]:
                out[i] = min(k, left)
                left -= out[i]
                if left == 0:
                    return out
        return None


def balanced_placement(job: JobSpec, room: Room, states: ServerStates,
                       spread_to_keep_room: bool) -> dict[int, int] | None:
    """Where ``job`` leaves the most room for the jobs after it: whole on the server whose
    cores and memory per free GPU stay furthest above what the rest need on average (then
    the fullest); spread where no server keeps that room whole but several servers
    together do (a sensitive job beside insensitive ones on each), else spread over the
    roomiest servers."""
    g = job.gpus
    if job.gpus_per_node:
        k = job.gpus_per_node
        out: dict[int, int] = {}
        for _, st in states.by_room(room, k):
            if room.fitting(st) >= k:
                for i in states.groups[st][:g // k - len(out)]:
                    out[i] = k
        return out if len(out) * k == g else None
    whole = [(key, st) for key, st in states.by_room(room, g) if room.fitting(st) >= g]
    if whole and (g == 1 or not spread_to_keep_room
                  or room.after(whole[0][1], g) >= -ROOM_EPS):
        return {states.groups[whole[0][1]][0]: g}
    if g == 1:
        return None
    kept = states.spread(room, g, room.keeping) if spread_to_keep_room else None
    if kept is not None:
        return kept
    if whole:
        return {states.groups[whole[0][1]][0]: g}
    return states.spread(room, g, room.fitting)


ROOM_EPS = 1e-9


class Room:
    """How much room per free GPU a server keeps for the jobs still to place (in
    proportional GPUs: 0 means exactly what they need on average) after taking ``n`` GPUs
    of a job at ``d``. What they need is counted over the GPUs free before the job: it
    measured better (benchmarks/core_round.py --opt-gap) than over those after it."""

    def __init__(self, ledger: Ledger, d: Demand, left_c: float, left_m: float) -> None:
        self.share = d.share
        fair = ledger.fair
        free = ledger.free_gpus
        self.need_c = left_c / free if free > 0 else 0.0
        self.need_m = left_m / free if free > 0 else 0.0
        self.sc = float(fair.cpus or 1)
        self.sm = fair.mem_gb or 1.0

    def after(self, st: State, n: int) -> float:
        fg, fc, fm = st
        fg -= n
        return min((fc - n * self.share.cpus - fg * self.need_c) / self.sc,
                   (fm - n * self.share.mem_gb - fg * self.need_m) / self.sm)

    def key(self, st: State, n: int) -> tuple[float, int]:
        """Most room first, then the fullest server."""
        return (-self.after(st, n), st[0] - n)

    def fitting(self, st: State) -> int:
        """How many GPUs of the job fit on a server in state ``st``."""
        fg, fc, fm = st
        s = self.share
        return min(fg, fc // s.cpus if s.cpus > 0 else fg,
                   floor_div(fm, s.mem_gb) if s.mem_gb > 0 else fg)

    def keeping(self, st: State) -> int:
        """How many GPUs of the job fit on a server in state ``st`` and keep its room."""
        n = self.fitting(st)
        while n > 0 and self.after(st, n) < -ROOM_EPS:
            n -= 1
        return n
