#!/usr/bin/env python3
"""Submission latency with the job_submit hook against without it, in one run.

Starts two dev clusters side by side (one with the hook and a fresh table of the reference
profiles, one without), alternates `sbatch --hold --gpus=1 --comment=synergy:profile=...`
between them, and prints p50/p99 per cluster, their ratio and the milliseconds the hook
adds. Needs root. Target: under 2 ms added at p99.

    python benchmarks/hook_latency.py [--submissions 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from synergy_slurm import devcluster
from synergy_slurm.config import HookSection
from synergy_slurm.devcluster import local_spec
from synergy_slurm.hook.export import build_table
from synergy_slurm.hook.table import TABLE_NAME
from synergy_slurm.profiles import load_profiles
from synergy_slurm.slurm.commands import SlurmCLI

PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "model_profiles.json"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--submissions", type=int, default=300, help="per cluster")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    plain = local_spec(Path("/tmp/synergy-bench-plain"), port=18017)
    hooked = local_spec(Path("/tmp/synergy-bench-hook"), port=18117, hook=True)
    for s in (plain, hooked):
        devcluster.down(s)
        devcluster.up(s, timeout_s=90)
    try:
        profiles = load_profiles(PROFILES)
        build_table(HookSection(hold_unknown=False), profiles, 24, 500000, 8).write(
            hooked.etc / TABLE_NAME)
        clis = {"without": SlurmCLI(str(plain.conf_path)), "with": SlurmCLI(str(hooked.conf_path))}
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write("#!/bin/sh\ntrue\n")
        keys = sorted(profiles)
        times: dict[str, list[float]] = {"without": [], "with": []}
        for i in range(args.submissions * 2):
            which = "with" if i % 2 else "without"
            opts = ["--hold", "--gpus=1", f"--comment=synergy:profile={keys[i % len(keys)]}",
                    "-o", "/dev/null", f.name]
            t0 = time.perf_counter()
            clis[which].run("sbatch", opts)
            times[which].append((time.perf_counter() - t0) * 1000)
        jobs = json.loads(clis["with"].run("squeue", ["--json"]))["jobs"]
        shaped = sum("synergy.managed=1" in j["admin_comment"] for j in jobs)
    finally:
        for s in (plain, hooked):
            devcluster.down(s)
    res = {"submissions": args.submissions,
           "p50_ms_without": round(statistics.median(times["without"]), 2),
           "p50_ms_with": round(statistics.median(times["with"]), 2),
           "p99_ms_without": round(pct(times["without"], 0.99), 2),
           "p99_ms_with": round(pct(times["with"], 0.99), 2)}
    res["p50_ratio"] = round(res["p50_ms_with"] / res["p50_ms_without"], 3)
    res["p99_ratio"] = round(res["p99_ms_with"] / res["p99_ms_without"], 3)
    res["p50_added_ms"] = round(res["p50_ms_with"] - res["p50_ms_without"], 2)
    res["p99_added_ms"] = round(res["p99_ms_with"] - res["p99_ms_without"], 2)
    res["jobs_tagged_by_hook"] = shaped
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>20}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
