#!/usr/bin/env python3
"""Planning time of each allocator with a full queue, and TUNE's gap to the OPT bound.

    python benchmarks/core_round.py            # table: allocator x cluster size
    python benchmarks/core_round.py --json     # [{"allocator", "gpus", "jobs", "seconds"}]
    python benchmarks/core_round.py --opt-gap --json   # {"cases", "mean_gap", "max_gap"}
    python benchmarks/core_round.py --opt-gap --allocator tune-plus --split paper --per-case
    python benchmarks/core_round.py --at-scale --json  # 10,000 jobs on 1,000 nodes

``--at-scale``: one plan of 10,000 pending jobs on 1,000 nodes of 8 GPUs (a big site's
round) by TUNE, TUNE+ and OPT, each in a process of its own: its time and the process's peak
memory (``ru_maxrss``), beside a process that only builds the jobs.

A full queue is 1,000 jobs (the paper's ten models, 1-8 GPUs each) for 128 and 512 GPUs and
2,000 for 2,048 GPUs, so that every size has more demand than GPUs. Times are the median of
``--repeat`` plans on this machine; compare them with each other, not across machines.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import resource
import statistics
import sys
import time
from pathlib import Path

from synergy_slurm.core import ClusterState, get_allocator, get_policy, make_plan
from synergy_slurm.core.allocators.base import admitted_at_once
from synergy_slurm.core.allocators.opt import OptAllocator, candidates
from synergy_slurm.core.allocators.opt_solve import solve_stage1
from synergy_slurm.core.ledger import Ledger
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.jobsets import full_cluster_jobs

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "model_profiles.json"
SIZES = ((128, 1000), (512, 1000), (2048, 2000))
ALLOCATORS = ("proportional", "greedy", "tune-ref", "tune", "tune-plus", "opt-stage1", "opt")


def time_plan(name: str, jobs, cluster, repeat: int) -> float:
    fifo = get_policy("fifo")
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        if name == "opt-stage1":
            admitted = admitted_at_once(fifo.order(jobs, 0), cluster, Ledger(cluster).free_gpus,
                                        {})
            solve_stage1(admitted, [candidates(j, cluster) for j in admitted], Ledger(cluster),
                         max_nodes=OptAllocator().max_nodes, time_limit_s=30)
        else:
            alloc = OptAllocator(time_limit_s=30) if name == "opt" else get_allocator(name)
            make_plan(jobs, cluster, fifo, alloc, now=0)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def speed(profiles, repeat: int) -> list[dict]:
    rows = []
    for gpus, njobs in SIZES:
        rng = random.Random(gpus)
        cluster = ClusterState.uniform(gpus // 8)
        jobs = full_cluster_jobs(rng, profiles, gpus, sizes=range(1, 9), overfill=0)
        while len(jobs) < njobs:
            jobs += full_cluster_jobs(rng, profiles, gpus, sizes=range(1, 9))
        jobs = [j.__class__(**{**j.__dict__, "id": i, "submitted": float(i)})
                for i, j in enumerate(jobs[:njobs])]
        for name in ALLOCATORS:
            rows.append({"allocator": name, "gpus": gpus, "jobs": njobs,
                         "seconds": round(time_plan(name, jobs, cluster, repeat), 4)})
            print(f"  {name:>13} {gpus:5d} GPUs: {rows[-1]['seconds']:.4f} s", file=sys.stderr)
    return rows


AT_SCALE = (8000, 10_000)      # GPUs (1,000 nodes of 8), pending jobs


def _at_scale_child(name: str, profiles_path: Path, conn) -> None:
    profiles = load_profiles(profiles_path)
    gpus, njobs = AT_SCALE
    rng = random.Random(gpus)
    cluster = ClusterState.uniform(gpus // 8)
    jobs: list = []
    while len(jobs) < njobs:
        jobs += full_cluster_jobs(rng, profiles, gpus, sizes=range(1, 9))
    jobs = [j.__class__(**{**j.__dict__, "id": i, "submitted": float(i)})
            for i, j in enumerate(jobs[:njobs])]
    t0 = time.perf_counter()
    plan = None
    if name != "jobs only":
        alloc = OptAllocator(time_limit_s=120) if name == "opt" else get_allocator(name)
        plan = make_plan(jobs, cluster, get_policy("fifo"), alloc, now=0)
    seconds = time.perf_counter() - t0
    conn.send({"allocator": name, "gpus": gpus, "jobs": njobs,
               "seconds": round(seconds, 3),
               "admitted": len(plan.allocations) if plan else 0,
               "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                                    1)})
    conn.close()


def at_scale(profiles_path: Path) -> list[dict]:
    """A big site's round, each allocator in a fresh process (its peak memory its own)."""
    ctx = multiprocessing.get_context("fork")
    rows = []
    for name in ("jobs only", "tune", "tune-plus", "opt"):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_at_scale_child, args=(name, profiles_path, child))
        proc.start()
        rows.append(parent.recv())
        proc.join()
        print(f"  {name:>9}: {rows[-1]}", file=sys.stderr)
    return rows


PAPER_MIX = (20.0, 70.0, 10.0)   # the paper's image / language / speech split


def opt_gap(profiles, cases: int, split, allocator: str, seed: int = 11,
            per_case: bool = False) -> dict:
    """``allocator`` (and TUNE, beside it) against the OPT bound on ``cases`` full-cluster
    job sets; with ``per_case`` each case's breakdown (:func:`case_row`)."""
    rng = random.Random(seed)
    fifo = get_policy("fifo")
    gaps, gains, rows = [], [], []
    for case in range(cases):
        servers = rng.choice([2, 4, 8, 16])
        cluster = ClusterState.uniform(servers)
        jobs = full_cluster_jobs(rng, profiles, servers * 8, sizes=(1, 1, 2, 4, 8), split=split)
        opt = make_plan(jobs, cluster, fifo, OptAllocator(time_limit_s=30), now=0)
        plan = make_plan(jobs, cluster, fifo, get_allocator(allocator), now=0)
        ref = make_plan(jobs, cluster, fifo, get_allocator("tune-ref"), now=0)
        gaps.append(1 - plan.total_speedup / opt.bound)
        gains.append(plan.total_speedup / ref.total_speedup)
        if per_case:
            tune = (plan if allocator == "tune"
                    else make_plan(jobs, cluster, fifo, get_allocator("tune"), now=0))
            rows.append(case_row(case, jobs, cluster, opt, {"tune": tune, allocator: plan}))
    out = {"cases": cases, "allocator": allocator, "seed": seed,
           "split": list(split) if split else "uniform",
           "mean_gap": round(statistics.mean(gaps), 4), "max_gap": round(max(gaps), 4),
           "mean_gain_over_tune_ref": round(statistics.mean(gains), 4)}
    if per_case:
        out["per_case"] = rows
    return out


def case_row(case: int, jobs, cluster, opt, plans: dict) -> dict:
    """Where each plan loses to the OPT bound in one case. ``bound_choice``: the share the
    bound (stage 1, the cluster as one machine) gives each job. Per plan: its gap; ``over``
    and ``under``, the speedup it gives beyond / short of the bound's choice, summed over
    jobs (TUNE's order: early jobs over, later ones under); ``idle_cores`` and
    ``idle_gb`` it leaves unallocated (room the bound uses and the plan strands on
    servers whose GPUs are taken); ``spread`` its jobs placed on more than one server."""
    admitted = admitted_at_once(get_policy("fifo").order(jobs, 0), cluster,
                                Ledger(cluster).free_gpus, {})
    choice = solve_stage1(admitted, [candidates(j, cluster) for j in admitted],
                          Ledger(cluster), max_nodes=OptAllocator().max_nodes,
                          time_limit_s=30).choice
    total = cluster.total
    row: dict = {"case": case, "servers": len(cluster.servers), "jobs": len(jobs),
                 "admitted": len(admitted), "bound": round(opt.bound, 3),
                 "opt_plan": round(opt.total_speedup, 3)}
    for name, plan in plans.items():
        by = plan.by_job()
        diff = [by[j].speedup - choice[j].speedup for j in choice if j in by]
        used = [a.total for a in plan.allocations]
        row[name] = {
            "total": round(plan.total_speedup, 3),
            "gap": round(1 - plan.total_speedup / opt.bound, 4),
            "over": round(sum(d for d in diff if d > 0), 3),
            "under": round(-sum(d for d in diff if d < 0), 3),
            "idle_cores": total.cpus - sum(u.cpus for u in used),
            "idle_gb": round(total.mem_gb - sum(u.mem_gb for u in used), 1),
            "spread": sum(1 for a in plan.allocations if len(a.placement) > 1)}
    return row


def print_cases(res: dict) -> None:
    name = res["allocator"]
    print(f"{'case':>4} {'srv':>3} {'adm':>3} {'bound':>7} {'opt':>7} | {'tune':>7} "
          f"{'gap':>6} {'over':>5} {'under':>6} {'idleC':>5} {'sprd':>4} | {name:>9} "
          f"{'gap':>6} {'over':>5} {'under':>6} {'idleC':>5} {'sprd':>4}")
    for r in sorted(res["per_case"], key=lambda r: -r["tune"]["gap"]):
        cells = []
        for k in ("tune", name):
            p = r[k]
            cells.append(f"{p['total']:7.2f} {p['gap']:6.3f} {p['over']:5.2f} "
                         f"{p['under']:6.2f} {p['idle_cores']:5d} {p['spread']:4d}")
        print(f"{r['case']:4d} {r['servers']:3d} {r['admitted']:3d} {r['bound']:7.2f} "
              f"{r['opt_plan']:7.2f} | {cells[0]} | {cells[1]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--opt-gap", action="store_true", help="TUNE against the OPT bound")
    ap.add_argument("--at-scale", action="store_true",
                    help="10,000 jobs on 1,000 nodes: TUNE, TUNE+ and OPT, time and peak memory")
    ap.add_argument("--cases", type=int, default=50)
    ap.add_argument("--allocator", default="tune", help="allocator compared with OPT")
    ap.add_argument("--split", default="uniform",
                    help="model mix: 'uniform' over the ten models, 'paper' (the paper's "
                         "20/70/10 image/language/speech mix) or I,L,S percentages")
    ap.add_argument("--seed", type=int, default=11, help="--opt-gap: the case set's seed")
    ap.add_argument("--per-case", action="store_true",
                    help="--opt-gap: each case's breakdown, TUNE beside --allocator")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    args = ap.parse_args()
    if args.at_scale:
        rows = at_scale(args.profiles)
        print(json.dumps(rows) if args.json else "\n".join(
            f"{r['allocator']:>9}: {r['seconds']:8.3f} s, peak {r['peak_rss_mb']:7.1f} MB, "
            f"{r['admitted']} admitted" for r in rows))
        return 0
    profiles = load_profiles(args.profiles)
    if args.opt_gap:
        split = (None if args.split == "uniform" else PAPER_MIX if args.split == "paper"
                 else [float(x) for x in args.split.split(",")])
        res = opt_gap(profiles, args.cases, split, args.allocator, args.seed, args.per_case)
        if args.json:
            print(json.dumps(res))
            return 0
        if args.per_case:
            print_cases(res)
        for k, v in res.items():
            if k != "per_case":
                print(f"{k:>24}: {v}")
        return 0
    rows = speed(profiles, args.repeat)
    if args.json:
        print(json.dumps(rows))
        return 0
    sizes = [g for g, _ in SIZES]
    print(f"{'allocator':>13} " + " ".join(f"{g:>7d} GPUs" for g in sizes) + "   (seconds/plan)")
    for name in ALLOCATORS:
        cells = [next(r["seconds"] for r in rows if r["allocator"] == name and r["gpus"] == g)
                 for g in sizes]
        print(f"{name:>13} " + " ".join(f"{c:12.4f}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
