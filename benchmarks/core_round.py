#!/usr/bin/env python3
"""Planning time of each allocator with a full queue, and TUNE's gap to the OPT bound.

    python benchmarks/core_round.py            # table: allocator x cluster size
    python benchmarks/core_round.py --json     # [{"allocator", "gpus", "jobs", "seconds"}]
    python benchmarks/core_round.py --opt-gap --json   # {"cases", "mean_gap", "max_gap"}
    python benchmarks/core_round.py --at-scale --json  # 10,000 jobs on 1,000 nodes

``--at-scale``: one plan of 10,000 pending jobs on 1,000 nodes of 8 GPUs (a big site's
round) by TUNE and by OPT, each in a process of its own: its time and the process's peak
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
ALLOCATORS = ("proportional", "greedy", "tune-ref", "tune", "opt-stage1", "opt")


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
    for name in ("jobs only", "tune", "opt"):
        parent, child = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_at_scale_child, args=(name, profiles_path, child))
        proc.start()
        rows.append(parent.recv())
        proc.join()
        print(f"  {name:>9}: {rows[-1]}", file=sys.stderr)
    return rows


def opt_gap(profiles, cases: int, split, allocator: str) -> dict:
    rng = random.Random(11)
    fifo = get_policy("fifo")
    gaps, gains = [], []
    for _ in range(cases):
        servers = rng.choice([2, 4, 8, 16])
        cluster = ClusterState.uniform(servers)
        jobs = full_cluster_jobs(rng, profiles, servers * 8, sizes=(1, 1, 2, 4, 8), split=split)
        opt = make_plan(jobs, cluster, fifo, OptAllocator(time_limit_s=30), now=0)
        tune = make_plan(jobs, cluster, fifo, get_allocator(allocator), now=0)
        ref = make_plan(jobs, cluster, fifo, get_allocator("tune-ref"), now=0)
        gaps.append(1 - tune.total_speedup / opt.bound)
        gains.append(tune.total_speedup / ref.total_speedup)
    return {"cases": cases, "allocator": allocator,
            "split": list(split) if split else "uniform",
            "mean_gap": round(statistics.mean(gaps), 4), "max_gap": round(max(gaps), 4),
            "mean_gain_over_tune_ref": round(statistics.mean(gains), 4)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--opt-gap", action="store_true", help="TUNE against the OPT bound")
    ap.add_argument("--at-scale", action="store_true",
                    help="10,000 jobs on 1,000 nodes: TUNE and OPT, time and peak memory")
    ap.add_argument("--cases", type=int, default=50)
    ap.add_argument("--allocator", default="tune", help="allocator compared with OPT")
    ap.add_argument("--split", default="uniform",
                    help="model mix: 'uniform' over the ten models or I,L,S percentages")
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
        split = None if args.split == "uniform" else [float(x) for x in args.split.split(",")]
        res = opt_gap(profiles, args.cases, split, args.allocator)
        if args.json:
            print(json.dumps(res))
        else:
            for k, v in res.items():
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
