"""The HiGHS models of Synergy-OPT (opt.py): stage 1's MILP and stage 2's packing LP.

Imported by OptAllocator on its first plan only: loading HiGHS and numpy costs start-up
time that nothing else in synergy needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np

from ..demand import Demand
from ..job import JobSpec
from ..ledger import Ledger
from ..resources import PerGpu


@dataclass(frozen=True)
class Stage1:
    """Stage 1's answer: each job's chosen demand, the bound proven on the objective,
    whether it is optimal, and why the solver stopped short (the wall-time safety net).
    Declared here, beside the solver that makes it, so opt.py's lazy import of this
    module is the only import between the two (no circle)."""
    choice: dict[int, Demand]
    bound: float
    optimal: bool
    cut_short: str | None = None


class StageFailed(RuntimeError):
    pass


def _highs(time_limit_s: float) -> Any:
    """A silent, single-threaded solver. The core binding is used because highspy's
    Python wrapper prints its banner when it is made, before any option can be set;
    ``output_flag`` set first keeps HiGHS silent (stdout stays clean for JSON)."""
    h = getattr(highspy, "_Highs", highspy.Highs)()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", max(0.01, float(time_limit_s)))
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
                 max_nodes: int, time_limit_s: float) -> Stage1:
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
    _, free_cpus, free_mem = ledger.total_free()
    row_hi = np.concatenate([np.ones(nj), [float(free_cpus), float(free_mem)]])
    lp = _lp(ncol, speed, np.zeros(ncol), np.ones(ncol), row_lo, row_hi, start, index,
             value, maximize=True)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * ncol
    h = _highs(time_limit_s)
    h.setOptionValue("mip_rel_gap", 1e-4)
    h.setOptionValue("mip_max_nodes", int(max_nodes))
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
    cut = ("stage 1 stopped by the wall-time safety limit"
           if status == highspy.HighsModelStatus.kTimeLimit else None)
    return Stage1(choice, max(bound, float(info.objective_function_value)), optimal, cut)


def solve_stage2(jobs: list[JobSpec], choice: dict[int, Demand], ledger: Ledger,
                 max_iterations: int, time_limit_s: float) -> dict[int, int]:
    """The fractional packing LP; returns {job id: server index} for jobs it put wholly on
    one server. Servers are preferred fullest first (cost = rank), which packs.

    Jobs with the same GPU count and share are interchangeable, so the LP packs job
    *types*: X[t, s] in [0, n_t] is how many jobs of type t go to server s, and
    floor(X[t, s]) of them are placed there whole. That keeps the LP small (tens of types
    instead of hundreds of jobs) without weakening it.
    """
    servers = [i for i in range(ledger.n_servers) if ledger.free_on(i)[0] > 0]
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
    caps = np.array([ledger.free_on(i) for i in servers], dtype=float).ravel()
    row_lo = np.concatenate([count, np.full(3 * ns, -highspy.kHighsInf)])
    row_hi = np.concatenate([count, caps])
    cost = np.array([rank[servers[s]] for s in range(ns)], dtype=float)[ss] * g[tt]
    lp = _lp(ncol, cost, np.zeros(ncol), count[tt], row_lo, row_hi, start, index, value,
             maximize=False)
    h = _highs(time_limit_s)
    h.setOptionValue("simplex_iteration_limit", int(max_iterations))
    h.passModel(lp)
    h.run()
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kTimeLimit:
        raise StageFailed("stage 2 stopped by the wall-time safety limit")
    if status != highspy.HighsModelStatus.kOptimal:
        # Infeasible packing (stage 1 sees one machine) or the iteration limit: rounding
        # places every job through TUNE's steps instead, deterministically.
        return {}
    x = np.asarray(h.getSolution().col_value).reshape(nt, ns)
    whole: dict[int, int] = {}
    for t, key in enumerate(keys):
        waiting = iter(types[key])
        for s in np.argsort(-x[t], kind="stable"):
            for _ in range(int(np.floor(x[t, s] + 1e-6))):
                nxt = next(waiting, None)
                if nxt is not None:
                    whole[nxt.id] = servers[int(s)]
    return whole


