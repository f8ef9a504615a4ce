#!/usr/bin/env python3
"""Time to read and parse 1,000 pending GPU jobs from a real Slurm.

Starts its own dev cluster (state in /tmp/synergy-bench-cluster, port 17917), submits held
jobs, times SlurmReader.snapshot() (squeue --json + sinfo --json + scontrol show partition)
and the parsing alone, then stops the cluster. Needs root (like the dev cluster).

    python benchmarks/slurm_read.py [--jobs 1000] [--repeat 5] [--json]
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
from synergy_slurm.devcluster import local_spec
from synergy_slurm.slurm.reader import SlurmReader, build_snapshot


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = local_spec(Path("/tmp/synergy-bench-cluster"), port=17917)
    devcluster.down(spec)
    _, spec = devcluster.up(spec, timeout_s=90)
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=120)
        with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
            f.write("#!/bin/sh\ntrue\n")
        t0 = time.perf_counter()
        for i in range(args.jobs):
            cli.run("sbatch", ["--hold", f"--gpus={1 + i % 8}", "-o", "/dev/null", f.name])
        submit_s = time.perf_counter() - t0
        reader = SlurmReader(cli)
        totals, parses = [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            snap = reader.snapshot()
            totals.append(time.perf_counter() - t0)
        raw = (cli.run("squeue", ["--json"]), cli.run("sinfo", ["--json"]),
               cli.run("scontrol", ["show", "partition", "-o"]))
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            build_snapshot(*raw)
            parses.append(time.perf_counter() - t0)
        pending = sum(1 for j in snap.jobs if j.pending)
        res = {"jobs": pending, "read_and_parse_s": round(statistics.median(totals), 3),
               "parse_only_s": round(statistics.median(parses), 3),
               "squeue_json_bytes": len(raw[0]), "submit_s": round(submit_s, 1)}
    finally:
        devcluster.down(spec)
    if args.json:
        print(json.dumps(res))
    else:
        for k, v in res.items():
            print(f"{k:>20}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
