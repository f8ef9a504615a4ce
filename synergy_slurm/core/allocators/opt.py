"""Synergy-OPT with HiGHS, complete enough to run online every round.

Stage 1 (MILP) treats the cluster as one machine: each admitted job picks exactly one
candidate share (binary), total cores and memory bounded, every candidate at least as fast
as proportional (the fair-share floor). Its optimum, or HiGHS's dual bound when the time
limit stops it, is an upper bound on the total normalised throughput of any plan that
admits the same jobs with the same candidate shares (TUNE's included).

Stage 2 (LP) packs the chosen shares onto servers fractionally (each job's parts sum to
one; per-server GPUs, cores and memory). Rounding then places every job the LP put wholly
on one server there, and the rest through TUNE's steps starting from their chosen share,
which always yields a feasible placement that keeps the floor; cores and memory left idle
go to jobs that rounding lowered.

Both stages stop at deterministic work limits (branch-and-bound nodes, simplex
iterations), so identical input gives an identical plan however loaded the machine is; the
wall-time limit is only a safety net, and a plan it cut short says so in ``fallback``. If
stage 1 fails or finds no solution, the plan is TUNE's, and ``fallback`` says so too.
HiGHS (opt_solve.py) is imported on the first OPT plan only, so the rest of synergy, the
user's synergy-sbatch included, never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..demand import FLOOR_TOLERANCE, Demand, job_caps
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import How, Plan
from ..resources import ClusterState, PerGpu
from .base import Allocator, admitted_at_once
from .tune import TuneAllocator, place_tuned, upgrade_lowered


class OptAllocator(Allocator):
    name = "opt"

    def __init__(self, time_limit_s: float = 1.5, pack: bool = True,
                 fallback: Allocator | None = None, max_nodes: int = 2000,
                 max_iterations: int = 200_000) -> None:
        self.time_limit_s = time_limit_s       # safety net only (see the module's text)
        self.max_nodes = max_nodes             # stage 1: branch-and-bound nodes
        self.max_iterations = max_iterations   # stage 2: simplex iterations
        self.pack = pack
        self.fallback = fallback or TuneAllocator()

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        from .opt_solve import StageFailed, solve_stage1, solve_stage2

        ledger = Ledger(cluster, self.placement)
        skipped: dict[int, str] = {}
        # Each admitted job counts against the free GPUs: stage 1 decides the rest.
        admitted = admitted_at_once(jobs, cluster, ledger.free_gpus, skipped)
        if not admitted:
            return ledger.to_plan(skipped, self.name, bound=0.0)
        cands = [candidates(j, cluster) for j in admitted]
        try:
            s1 = solve_stage1(admitted, cands, ledger, self.max_nodes, self.time_limit_s)
        except StageFailed as exc:
            plan = self.fallback.allocate(jobs, cluster)
            return Plan(plan.allocations, plan.skipped, self.name, bound=None,
                        fallback=f"{self.fallback.name}: {exc}")
        whole: dict[int, int] = {}
        note = s1.cut_short
        if self.pack:
            try:
                whole = solve_stage2(admitted, s1.choice, ledger, self.max_iterations,
                                     self.time_limit_s)
            except StageFailed as exc:
                note = note or str(exc)
        base = dict(skipped)
        round_plan(admitted, s1.choice, whole, ledger, skipped)
        if len(skipped) == len(base):
            return ledger.to_plan(skipped, self.name, bound=s1.bound, fallback=note)
        # The rounding left an admitted job no room (a corner of uneven servers): place
        # every job through TUNE's steps instead of where the packing put it, and if one is
        # still lost, take TUNE's own plan, so that OPT never drops a job TUNE would place.
        if whole:
            ledger, skipped = Ledger(cluster, self.placement), dict(base)
            round_plan(admitted, s1.choice, {}, ledger, skipped)
            if len(skipped) == len(base):
                return ledger.to_plan(skipped, self.name, bound=s1.bound,
                                      fallback=note or "packing lost a job: placed without it")
        plan = self.fallback.allocate(jobs, cluster)
        return Plan(plan.allocations, plan.skipped, self.name, bound=s1.bound,
                    fallback=f"{self.fallback.name}: rounding the LP lost a job")


def candidates(job: JobSpec, cluster: ClusterState) -> list[Demand]:
    """Pareto-optimal shares for the job that keep the floor and fit some server (a job
    larger than every server: a server's share per GPU, as TUNE caps it)."""
    fair = cluster.fair
    prop = Demand(fair, 1.0, How.PROPORTIONAL)
    prof = job.profile
    caps = job_caps(job, cluster.servers)
    if prof is None or prof.ideal is None or not caps:
        return [prop]
    ideal = prof.ideal
    capped = [ideal.capped(cap) for cap in caps]
    cpus = {int(c) for c in prof.cpu_grid if c == int(c)} | {
        fair.cpus, ideal.cpus, *(p.cpus for p in capped)}
    mems = {*prof.mem_grid, fair.mem_gb, ideal.mem_gb, *(p.mem_gb for p in capped)}
    pts: list[Demand] = [prop]
    for c in cpus:
        for m in mems:
            p = PerGpu(c, m)
            if c < 1 or not any(p.within(cap) for cap in caps):
                continue
            s = prof.speedup(p, fair)
            if s >= 1.0 - FLOOR_TOLERANCE:
                pts.append(Demand(p, s, How.OPT))
    pts.sort(key=lambda d: (-d.speedup, d.share.cpus, d.share.mem_gb))
    kept: list[Demand] = []
    for d in pts:
        if not any(k.share.within(d.share) and k.speedup >= d.speedup for k in kept):
            kept.append(d)
    return kept


def round_plan(jobs: list[JobSpec], choice: dict[int, Demand], whole: dict[int, int],
               ledger: Ledger, skipped: dict[int, str]) -> None:
    """Place the LP's whole jobs where it put them, then the rest through TUNE's steps,
    largest first."""
    rest = []
    for job in sorted(jobs, key=lambda j: -j.gpus):
        i = whole.get(job.id)
        d = choice[job.id]
        if i is not None and ledger.fits_whole(i, job.gpus, d.share):
            ledger.place(job, d, {i: job.gpus})
        else:
            rest.append(job)
    for job in rest:
        reason = place_tuned(job, choice[job.id], ledger)
        if reason is not None:
            skipped[job.id] = reason
    upgrade_lowered(ledger)
