#!/usr/bin/env python3
"""What 22.05's hold rule is worth on a busy site: synergy's gain in mean JCT (TUNE over
GPU-proportional, both through the controller's model of Slurm) on the paper's mix
(20/70/10, single-GPU and multi-GPU Philly jobs, 8 x 8 GPUs, jobs 100-499 of 600), under
three rules for a known profile whose shape is within the proportional share:

- ``shipped``: not held while no held job waits (``decide.no_hold_share``);
- ``always``: never held (the rule of a27bd47, before #42's fifth session);
- ``never``: held like every known profile.

The two counterfactual rules replace ``no_hold_share`` in the model's module for the run;
the hook and the controller have only the shipped one.

    python benchmarks/hold_rule.py [--load 8] [--interval 30] [--seeds 1,2,3] [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import synergy_slurm.sim.controller_model as model
from synergy_slurm.core import ClusterState
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.config import SlurmConfig
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import philly_jobs

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "model_profiles.json"
WINDOW = (100, 499)
RULES = {"shipped": model.no_hold_share,
         "always": lambda proportional, held_waiting: proportional,
         "never": lambda proportional, held_waiting: None}


def mean_jct_h(trace, profiles, allocator: str, interval_s: float) -> float:
    cfg = SlurmConfig(ClusterState.uniform(8, 8, 24, 500.0), allocator=allocator,
                      window=WINDOW, controller_interval_s=interval_s)
    done = [j for j in simulate(trace, profiles, cfg).jobs
            if WINDOW[0] <= j.job_id <= WINDOW[1] and j.finish]
    return sum(j.jct_s for j in done) / len(done) / 3600


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--load", type=float, default=8.0, help="jobs per hour")
    ap.add_argument("--interval", type=float, default=30.0,
                    help="the controller's round, seconds ([controller] interval_s)")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    try:
        seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        ap.error(f"--seeds: whole numbers separated by commas, not {args.seeds!r}")
    profiles = load_profiles(args.profiles)
    rows = []
    for seed in seeds:
        trace = list(itertools.islice(philly_jobs(profiles, args.load, split=(20, 70, 10),
                                                  seed=seed), 600))
        row: dict = {"seed": seed,
                     "proportional_h": round(mean_jct_h(trace, profiles, "proportional",
                                                        args.interval), 2)}
        for name, rule in RULES.items():
            model.no_hold_share = rule
            try:
                row[name] = round(row["proportional_h"]
                                  / mean_jct_h(trace, profiles, "tune", args.interval), 3)
            finally:
                model.no_hold_share = RULES["shipped"]
        rows.append(row)
    if args.json:
        print(json.dumps({"load": args.load, "interval_s": args.interval, "rows": rows}))
        return 0
    print(f"gain in mean JCT (TUNE over proportional), paper mix, {args.load:g} jobs/h, "
          f"rounds every {args.interval:g} s")
    print(f"{'seed':>5} {'proportional':>13} " + " ".join(f"{n:>8}" for n in RULES))
    for r in rows:
        print(f"{r['seed']:>5} {r['proportional_h']:>12.2f}h "
              + " ".join(f"{r[n]:>7.3f}x" for n in RULES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
