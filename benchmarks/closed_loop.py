#!/usr/bin/env python3
"""What the closed loop (core.usage) is worth: mean JCT with 0%, 10% and 30% of users
labelling every job with the hungriest key (alexnet: 12 cores and 125 GB per GPU) whatever
it is, with and without the loop, in the controller's model (running jobs keep their
shape), TUNE, FIFO, 64 GPUs, jobs 100-499 of 600, averaged over seeds.

    python benchmarks/closed_loop.py [--json] [--split 60,30,10] [--load 6] [--seeds 1,2,3]

The default mix is image-heavy (60% image, 30% language, 10% speech jobs): with the
paper's 20/70/10 the language jobs leave so many cores idle that a lie costs others little.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

from synergy_slurm.core import ClusterState
from synergy_slurm.core.usage import UsageRule
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.config import SlurmConfig
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import mislabel, philly_jobs

DEFAULT_PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / \
    "model_profiles.json"
WINDOW = (100, 499)


def mean_jct_h(profiles, share: float, loop: bool, split, load: float, seed: int) -> float:
    trace = list(mislabel(itertools.islice(philly_jobs(profiles, load, split=split,
                                                       seed=seed), 600),
                          share, "alexnet", seed=seed))
    cfg = SlurmConfig(ClusterState.uniform(8, 8, 24, 500.0), allocator="tune",
                      window=WINDOW, usage=UsageRule() if loop else None)
    res = simulate(trace, profiles, cfg)
    done = [j for j in res.jobs if WINDOW[0] <= j.job_id <= WINDOW[1] and j.finish]
    return sum(j.jct_s for j in done) / len(done) / 3600


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--split", default="60,30,10")
    ap.add_argument("--load", type=float, default=6.0, help="jobs per hour")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--profiles", type=Path, default=DEFAULT_PROFILES)
    args = ap.parse_args()
    profiles = load_profiles(args.profiles)
    split = tuple(float(x) for x in args.split.split(","))
    seeds = [int(x) for x in args.seeds.split(",")]
    rows = []
    for share in (0.0, 0.1, 0.3):
        row = {"mislabelled_users": share}
        for loop in (False, True):
            jcts = [mean_jct_h(profiles, share, loop, split, args.load, s) for s in seeds]
            row["with_loop" if loop else "without_loop"] = round(sum(jcts) / len(jcts), 2)
        row["gain"] = round(row["without_loop"] / row["with_loop"], 3)
        rows.append(row)
    if args.json:
        print(json.dumps({"split": split, "load": args.load, "seeds": seeds, "rows": rows}))
        return 0
    print(f"mean JCT (h), jobs {WINDOW[0]}-{WINDOW[1]}, split {args.split}, "
          f"{args.load:g} jobs/h, seeds {args.seeds}")
    print(f"{'mislabelled':>12} {'without loop':>13} {'with loop':>10} {'gain':>6}")
    for r in rows:
        print(f"{r['mislabelled_users']:>12.0%} {r['without_loop']:>13.2f} "
              f"{r['with_loop']:>10.2f} {r['gain']:>5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
