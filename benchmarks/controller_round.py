#!/usr/bin/env python3
"""Controller round time against a real Slurm with 500 pending GPU jobs (target: < 5 s).

Starts its own dev cluster with the hook, writes a fresh hook table, submits jobs that the
hook holds (mixed profiles, 1-8 GPUs), then times observe-mode rounds (read, plan,
reconcile, record: everything but acting) and one enforce round (which shapes and
releases what fits). Needs root.

    python benchmarks/controller_round.py [--jobs 500] [--json]
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
from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.devcluster import local_spec
from synergy_slurm.hook.export import build_table
from synergy_slurm.hook.table import TABLE_NAME
from synergy_slurm.profiles import load_profiles

PROFILES = Path(__file__).resolve().parents[2] / "shared" / "reference" / "model_profiles.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    spec = local_spec(Path("/tmp/synergy-bench-ctl"), port=18217, hook=True)
    devcluster.down(spec)
    _, spec = devcluster.up(spec, timeout_s=90)
    work = Path(tempfile.mkdtemp(prefix="synergy-bench-ctl-"))
    try:
        cfg = config_from_dict({
            "slurm": {"conf": str(spec.conf_path), "timeout_s": 120.0},
            "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc)},
            "profiles": {"file": str(PROFILES)},
            "controller": {"state_db": str(work / "state.db"),
                           "audit_log": str(work / "audit.jsonl")}})
        profiles = load_profiles(PROFILES)
        build_table(cfg.hook, profiles, 24, 500000, 8).write(spec.etc / TABLE_NAME)
        cli = devcluster.slurm_cli(spec, timeout_s=120)
        script = work / "job.sh"
        script.write_text("#!/bin/sh\nsleep 600\n")
        keys = [*sorted(profiles), "unknown-model"]
        for i in range(args.jobs):
            cli.run("sbatch", [f"--gpus={1 + i % 8}", f"--comment=synergy:profile="
                               f"{keys[i % len(keys)]}", "-o", "/dev/null", str(script)])
        observe = Controller(cfg, mode="observe")
        times, managed = [], 0
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            res = observe.run_round()
            times.append(time.perf_counter() - t0)
            managed = res.managed
        t0 = time.perf_counter()
        enforced = Controller(cfg, mode="enforce").run_round()
        enforce_s = time.perf_counter() - t0
    finally:
        devcluster.down(spec)
    out = {"pending_jobs": args.jobs, "managed": managed,
           "observe_round_s": round(statistics.median(times), 3),
           "enforce_round_s": round(enforce_s, 3),
           "enforce_actions": sum(a.mutating for a in enforced.actions),
           "enforce_errors": enforced.errors}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>16}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
