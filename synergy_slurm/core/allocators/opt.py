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

If stage 1 fails or finds no solution within the time limit, the plan is TUNE's, and the
plan says so in ``fallback``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import highspy
import numpy as np

from ..demand import FLOOR_TOLERANCE, Demand, server_caps
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import Plan
from ..resources import MEM_EPS, ClusterState, PerGpu
from .base import Allocator, admissible
from .tune import TuneAllocator, place_tuned, upgrade_lowered


@dataclass(frozen=True)
class Stage1:
    choice: dict[int, Demand]
    bound: float
    optimal: bool


class OptAllocator(Allocator):
    name = "opt"

    def __init__(self, time_limit_s: float = 1.5, pack: bool = True,
                 fallback: Allocator | None = None) -> None:
        self.time_limit_s = time_limit_s
        self.pack = pack
        self.fallback = fallback or TuneAllocator(interpolate=True)

    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:  # pragma: no cover
        raise NotImplementedError("OPT plans all jobs at once")

    def allocate(self, jobs: Sequence[JobSpec], cluster: ClusterState) -> Plan:
        start = time.perf_counter()
        ledger = Ledger(cluster, self.placement)
        skipped: dict[int, str] = {}
        admitted: list[JobSpec] = []
        # Only its free GPU count moves: stage 1 decides the rest.
        probe = Ledger(cluster, self.placement)
        for job in admissible(jobs, probe, skipped):
            admitted.append(job)
            probe.free_gpus -= job.gpus
        if not admitted:
            return ledger.to_plan(skipped, self.name, bound=0.0)
        cands = [candidates(j, cluster) for j in admitted]
        try:
            s1 = solve_stage1(admitted, cands, ledger, self.time_limit_s)
        except StageFailed as exc:
            plan = self.fallback.allocate(jobs, cluster)
            return Plan(plan.allocations, plan.skipped, self.name, bound=None,
                        fallback=f"{self.fallback.name}: {exc}")
        remaining = self.time_limit_s - (time.perf_counter() - start)
        whole: dict[int, int] = {}
        if self.pack and remaining > 0:
            with contextlib.suppress(StageFailed):
                whole = solve_stage2(admitted, s1.choice, ledger, remaining)
        round_plan(admitted, s1.choice, whole, ledger, skipped)
        return ledger.to_plan(skipped, self.name, bound=s1.bound)


class StageFailed(RuntimeError):
    pass


def candidates(job: JobSpec, cluster: ClusterState) -> list[Demand]:
    """Pareto-optimal shares for the job that keep the floor and fit some server (a job
    larger than every server: a server's share per GPU, as TUNE caps it)."""
    fair = cluster.fair
    prop = Demand(fair, 1.0, "proportional")
    prof = job.profile
    caps = server_caps(job.gpus, cluster.servers)
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
                pts.append(Demand(p, s, "opt"))
    pts.sort(key=lambda d: (-d.speedup, d.share.cpus, d.share.mem_gb))
    kept: list[Demand] = []
    for d in pts:
        if not any(k.share.within(d.share) and k.speedup >= d.speedup for k in kept):
            kept.append(d)
    return kept


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """HiGHS prints a banner on stdout when the first solver is made; keep stdout clean
    for callers that print JSON."""
    try:
        fd = os.dup(1)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(fd, 1)
        os.close(fd)


def _highs(time_limit_s: float) -> highspy.Highs:
    with _quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(0.01, float(time_limit_s)))
    h.setOptionValue("threads", 1)
    return h


def _lp(ncol: int, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray,
        row_lo: np.ndarray, row_hi: np.ndarray, start: np.ndarray, index: np.ndarray,
        value: np.ndarray, maximize: bool) -> highspy.HighsLp:
    lp = highspy.HighsLp()
    lp.num_col_ = ncol
    lp.num_row_ = len(row_lo)
    lp.col_cost_ = cost
    lp.col_lower_ = lower
    lp.col_upper_ = upper
    lp.row_lower_ = row_lo
    lp.row_upper_ = row_hi
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = start.astype(np.int32)
    lp.a_matrix_.index_ = index.astype(np.int32)
    lp.a_matrix_.value_ = value.astype(np.float64)
    lp.sense_ = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
    return lp


def solve_stage1(jobs: list[JobSpec], cands: list[list[Demand]], ledger: Ledger,
                 time_limit_s: float) -> Stage1:
    """Rows: one choice per job (=1), total cores, total memory. Columns: (job, candidate)."""
    nj = len(jobs)
    sizes = np.array([len(c) for c in cands])
    ncol = int(sizes.sum())
    owner = np.repeat(np.arange(nj), sizes)
    gpus = np.repeat(np.array([j.gpus for j in jobs], dtype=float), sizes)
    flat = [d for c in cands for d in c]
    speed = np.array([d.speedup for d in flat])
    cpu = np.array([d.share.cpus for d in flat], dtype=float) * gpus
    mem = np.array([d.share.mem_gb for d in flat]) * gpus
    # Column j has three entries: its job's choice row, the cores row, the memory row.
    index = np.empty(3 * ncol, dtype=np.int64)
    value = np.empty(3 * ncol)
    index[0::3], value[0::3] = owner, 1.0
    index[1::3], value[1::3] = nj, cpu
    index[2::3], value[2::3] = nj + 1, mem
    start = np.arange(0, 3 * ncol + 1, 3)
    row_lo = np.concatenate([np.ones(nj), [-highspy.kHighsInf] * 2])
    row_hi = np.concatenate([np.ones(nj), [float(sum(ledger.fc)), float(sum(ledger.fm))]])
    lp = _lp(ncol, speed, np.zeros(ncol), np.ones(ncol), row_lo, row_hi, start, index,
             value, maximize=True)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * ncol
    h = _highs(time_limit_s)
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    info = h.getInfo()
    if info.primal_solution_status != 2:  # 2 = feasible
        raise StageFailed(f"stage 1 found no solution ({h.modelStatusToString(status)})")
    x = np.asarray(h.getSolution().col_value)
    choice: dict[int, Demand] = {}
    pos = 0
    for job, n in zip(jobs, sizes, strict=True):
        k = int(np.argmax(x[pos:pos + n]))
        choice[job.id] = flat[pos + k]
        pos += n
    optimal = status == highspy.HighsModelStatus.kOptimal
    bound = float(info.mip_dual_bound)
    if not np.isfinite(bound):
        bound = float(info.objective_function_value)
    return Stage1(choice, max(bound, float(info.objective_function_value)), optimal)


def solve_stage2(jobs: list[JobSpec], choice: dict[int, Demand], ledger: Ledger,
                 time_limit_s: float) -> dict[int, int]:
    """The fractional packing LP; returns {job id: server index} for jobs it put wholly on
    one server. Servers are preferred fullest first (cost = rank), which packs.

    Jobs with the same GPU count and share are interchangeable, so the LP packs job
    *types*: X[t, s] in [0, n_t] is how many jobs of type t go to server s, and
    floor(X[t, s]) of them are placed there whole. That keeps the LP small (tens of types
    instead of hundreds of jobs) without weakening it.
    """
    servers = [i for i in range(len(ledger.fg)) if ledger.fg[i] > 0]
    if not servers:
        raise StageFailed("no free GPUs")
    types: dict[tuple[int, PerGpu], list[JobSpec]] = {}
    for job in jobs:
        types.setdefault((job.gpus, choice[job.id].share), []).append(job)
    keys = list(types)
    ns, nt = len(servers), len(keys)
    rank = {i: r for r, i in enumerate(ledger.servers_by_free_gpus(at_least=1))}
    count = np.array([len(types[k]) for k in keys], dtype=float)
    g = np.array([k[0] for k in keys], dtype=float)
    c = np.array([k[1].cpus for k in keys], dtype=float) * g
    m = np.array([k[1].mem_gb for k in keys]) * g
    # Column (t, s) at t * ns + s; rows: nt assignment rows, then per server gpu/cpu/mem.
    ncol = nt * ns
    tt = np.repeat(np.arange(nt), ns)
    ss = np.tile(np.arange(ns), nt)
    index = np.empty(4 * ncol, dtype=np.int64)
    value = np.empty(4 * ncol)
    index[0::4], value[0::4] = tt, 1.0
    index[1::4], value[1::4] = nt + 3 * ss, g[tt]
    index[2::4], value[2::4] = nt + 3 * ss + 1, c[tt]
    index[3::4], value[3::4] = nt + 3 * ss + 2, m[tt]
    start = np.arange(0, 4 * ncol + 1, 4)
    caps = np.array([[ledger.fg[i], ledger.fc[i], ledger.fm[i]] for i in servers]).ravel()
    row_lo = np.concatenate([count, np.full(3 * ns, -highspy.kHighsInf)])
    row_hi = np.concatenate([count, caps])
    cost = np.array([rank[servers[s]] for s in range(ns)], dtype=float)[ss] * g[tt]
    lp = _lp(ncol, cost, np.zeros(ncol), count[tt], row_lo, row_hi, start, index, value,
             maximize=False)
    h = _highs(time_limit_s)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise StageFailed(f"stage 2: {h.modelStatusToString(h.getModelStatus())}")
    x = np.asarray(h.getSolution().col_value).reshape(nt, ns)
    whole: dict[int, int] = {}
    for t, key in enumerate(keys):
        waiting = iter(types[key])
        for s in np.argsort(-x[t], kind="stable"):
            for _ in range(int(np.floor(x[t, s] + 1e-6))):
                job = next(waiting, None)
                if job is not None:
                    whole[job.id] = servers[int(s)]
    return whole


def round_plan(jobs: list[JobSpec], choice: dict[int, Demand], whole: dict[int, int],
               ledger: Ledger, skipped: dict[int, str]) -> None:
    """Place the LP's whole jobs where it put them, then the rest through TUNE's steps,
    largest first."""
    rest = []
    for job in sorted(jobs, key=lambda j: -j.gpus):
        i = whole.get(job.id)
        d = choice[job.id]
        if i is not None and ledger.fg[i] >= job.gpus \
                and ledger.fc[i] >= d.share.cpus * job.gpus \
                and ledger.fm[i] + MEM_EPS >= d.share.mem_gb * job.gpus:
            ledger.place(job, d, {i: job.gpus})
        else:
            rest.append(job)
    for job in rest:
        reason = place_tuned(job, choice[job.id], ledger, interpolate=True)
        if reason is not None:
            skipped[job.id] = reason
    upgrade_lowered(ledger)
