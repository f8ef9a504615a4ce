#!/usr/bin/env python3
"""Wall time of the paper's 128-GPU run (9 jobs/hour, single-GPU, split 20/70/10, window
4000-4999, 6,000 jobs) per scheduler. Target: under 2 minutes per scheduler on 2 cores.

    python benchmarks/sim_speed.py [--json] [--policy fifo,las] [--allocator tune,opt]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from synergy_slurm.core import ClusterState
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.config import SimConfig
from synergy_slurm.sim.metrics import summary_row
from synergy_slurm.sim.runner import Workload, plan_runs, run_all

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "model_profiles.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--policy", default="fifo,srtf,las,ftf")
    ap.add_argument("--allocator", default="proportional,tune-ref,tune")
    ap.add_argument("--load", type=float, default=9.0)
    ap.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    args = ap.parse_args()
    profiles = load_profiles(args.profiles)
    base = SimConfig(ClusterState.uniform(16), window=(4000, 4999))
    runs = plan_runs(args.policy.split(","), args.allocator.split(","), [args.load])
    rows = []
    for run, res in run_all(runs, Workload(count=6000), profiles, base):
        row = summary_row(res, run.load)
        rows.append({k: row[k] for k in ("policy", "allocator", "load", "rounds", "wall_s",
                                         "mean_jct_h")})
        if not args.json:
            print(f"{run.policy:>5}+{run.allocator:<13} {res.rounds:6d} rounds "
                  f"{res.wall_s:7.1f} s  ({res.wall_s / res.rounds * 1000:.2f} ms/round)",
                  flush=True)
    if args.json:
        print(json.dumps(rows))
    else:
        worst = max(r["wall_s"] for r in rows)
        print(f"slowest scheduler: {worst:.1f} s (target < 120 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
