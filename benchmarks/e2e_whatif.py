#!/usr/bin/env python3
"""synergy whatif checked against real runs on the dev cluster with accounting.

1. A seeded job mix (emulated training jobs naming their profile, as synergy-sbatch
   submits them; Poisson arrivals; 1-8 GPUs) runs on plain Slurm (GPU-proportional).
2. ``synergy whatif`` reads that window from the accounting database (sacct) and the live
   nodes: its proportional replay should match what really happened (makespan, mean JCT),
   and its synergy replay is a prediction.
3. The same mix runs again with the hook and the controller (enforce, TUNE, no requeues,
   as whatif models it); whatif over that window gives its real makespan and mean JCT,
   which the prediction of step 2 should match.

    python benchmarks/e2e_whatif.py [--jobs 30] [--seed 7] [--slurm 26.05] [--json]
    python benchmarks/e2e_whatif.py --replay-only [--round-seconds 5]   # from the saved exports

Needs root. About 2 x 5 minutes. The two windows' sacct exports are kept in --out
(default /tmp/synergy-e2e-whatif), so the comparison can be run again without the runs.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from click.testing import CliRunner

from synergy_slurm import devcluster
from synergy_slurm.cli.main import main as synergy
from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.devcluster import local_spec
from synergy_slurm.devcluster.releases import RELEASES
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.jobsets import CLASSES
from synergy_slurm.sim.trace import TraceJob
from synergy_slurm.slurm.commands import SlurmCLI

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"
# Whatif's rounds: the cadence of the site's scheduler, here the dev cluster's
# sched_interval = bf_interval = 5 s (Slurm's defaults are 60 s and 30 s, whatif's default
# round 60 s). Measured on 2026-12-03 (22.05.8, seed 7): rounds of 5 s replay the plain run
# within -1.2% (makespan) and -8.5% (mean JCT); rounds of 1 s 0.0% and -11.0%, the replay
# then starting small jobs sooner than Slurm's backfill, which keeps room for a waiting
# 8-GPU job.
ROUND_S = 5.0
SHAPE = ["--servers", "4", "--gpus-per-server", "8", "--cpus-per-server", "24",
         "--mem-per-server", "500"]     # the dev cluster's nodes


def mix(profiles, n: int, seed: int) -> list[TraceJob]:
    """n jobs: half image models (CPU-hungry), 30% language, 20% speech; 1-8 GPUs; 60-180 s
    at the proportional share; arrivals 8 s apart on average."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        cls = rng.choices(list(CLASSES), weights=(50, 30, 20))[0]
        model = rng.choice([m for m in CLASSES[cls] if m in profiles])
        prof = profiles[model]
        gpus = rng.choices((1, 2, 4, 8), weights=(50, 20, 20, 10))[0]
        prop_iter = (prof.iter_time_s or 1.0) / prof.at(3, 62.5)
        jobs.append(TraceJob(i + 1, model, t, max(1, round(rng.uniform(60, 180) / prop_iter)),
                             gpus))
        t += rng.expovariate(1 / 8)
    return jobs


def run_mix(cli: SlurmCLI, jobs: list[TraceJob], profiles_path: Path, work: Path,
            tag: str) -> tuple[str, str]:
    """Submit each job at its arrival, wait until all are gone; the sacct window."""
    state = work / tag
    state.mkdir()
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 1))
    t0 = time.monotonic()
    for j in jobs:
        time.sleep(max(0.0, t0 + j.arrival - time.monotonic()))
        cmd = (f"exec {sys.executable} -m synergy_slurm.emulate --profiles {profiles_path} "
               f"--model {j.model} --iterations {j.iterations} --scale 1 "
               f"--state {state}/job{j.job_id}.state")
        cli.run("sbatch", ["--parsable", f"--gpus={j.gpus}", "--time=60",
                           f"--comment=synergy:profile={j.model}", f"--job-name=w{j.job_id}",
                           "-o", str(state / f"job{j.job_id}.out"), "--wrap", cmd])
    while cli.run("squeue", ["-h", "-o", "%A"]).split():
        time.sleep(0.5)
    time.sleep(3)     # slurmdbd hears of the last end a moment later
    end = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() + 1))
    return start, end


def export(cli: SlurmCLI, start: str, end: str, path: Path) -> Path:
    """The window's history, as an admin would save it for synergy whatif --from."""
    path.write_text(cli.run("sacct", ["-a", "-X", "-D", "--json", "-S", start, "-E", end]))
    return path


def whatif(history: Path, profiles_path: Path, round_s: float) -> dict:
    res = CliRunner().invoke(synergy, [
        "whatif", "--from", str(history), *SHAPE, "--profiles", str(profiles_path),
        "--round-seconds", str(round_s), "--format", "json", "--no-progress"])
    if res.exit_code != 0:
        raise SystemExit(f"whatif failed: {res.output}")
    return json.loads(res.output.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--slurm", default="system", choices=RELEASES)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("/tmp/synergy-e2e-whatif"))
    ap.add_argument("--round-seconds", type=float, default=ROUND_S)
    ap.add_argument("--replay-only", action="store_true",
                    help="compare again from the exports a previous run saved in --out")
    args = ap.parse_args()
    profiles_path = SHARED / "model_profiles.json"
    args.out.mkdir(parents=True, exist_ok=True)
    plain, synergy_run = args.out / "plain.json", args.out / "synergy.json"
    meta = args.out / "runs.json"
    if not args.replay_only:
        meta.write_text(json.dumps(runs(args, profiles_path, plain, synergy_run)))
    return report(json.loads(meta.read_text()), plain, synergy_run, profiles_path,
                  args.round_seconds, args.json)


def runs(args, profiles_path: Path, plain: Path, synergy_run: Path) -> dict:
    """The two real runs; their sacct exports written to ``plain`` and ``synergy_run``."""
    jobs = mix(load_profiles(profiles_path), args.jobs, args.seed)
    spec = local_spec(Path("/tmp/synergy-bench-whatif"), port=18417, hook=True,
                      slurm=args.slurm, binds=(str(SHARED),), accounting=True)
    work = Path(tempfile.mkdtemp(prefix="synergy-whatif-"))
    work.chmod(0o755)
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    _, spec = devcluster.up(spec, timeout_s=90)
    version = devcluster.release_info(spec).get("version", "?")
    cfg_doc = {
        "slurm": {"conf": str(spec.conf_path), "bindir": str(spec.bindir)
                  if spec.bindir.is_dir() else ""},
        "hook": {"dir": str(spec.etc)},
        "profiles": {"file": str(profiles_path), "store": str(work / "profiles.db")},
        "controller": {"mode": "enforce", "policy": "fifo", "allocator": "tune",
                       "interval_s": 1.0, "state_db": str(work / "state.db"),
                       "audit_log": str(work / "audit.jsonl"), "requeue_budget": 0}}
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=60)
        t = time.monotonic()
        window = run_mix(cli, jobs, profiles_path, work, "proportional")
        plain_wall = time.monotonic() - t
        export(cli, *window, plain)
        ctl = Controller(config_from_dict(cfg_doc))
        ctl.run_round()   # the hook table: from now on the hook holds the jobs
        stop = threading.Event()
        thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
        thread.start()
        t = time.monotonic()
        window = run_mix(cli, jobs, profiles_path, work, "synergy")
        synergy_wall = time.monotonic() - t
        stop.set()
        thread.join(timeout=60)
        export(cli, *window, synergy_run)
    finally:
        devcluster.down(spec)
        shutil.rmtree(work, ignore_errors=True)
    return {"slurm": version, "jobs": len(jobs), "seed": args.seed,
            "plain_run_wall_s": round(plain_wall, 1),
            "synergy_run_wall_s": round(synergy_wall, 1)}


def report(meta: dict, plain: Path, synergy_run: Path, profiles_path: Path, round_s: float,
           as_json: bool) -> int:
    before = whatif(plain, profiles_path, round_s)
    after = whatif(synergy_run, profiles_path, round_s)
    real_plain, real_syn = before["overall"]["actual"], after["overall"]["actual"]
    pred_prop, pred_syn = before["overall"]["proportional"], before["overall"]["synergy"]

    def err(pred: float, real: float) -> float:
        return round((pred - real) / real, 4)

    out = {
        **meta, "round_s": round_s,
        "replayed": before["replayed"], "profiles": before["profiles"],
        "real_plain_makespan_h": real_plain["makespan_h"],
        "real_plain_jct_mean_h": real_plain["jct_mean_h"],
        "replay_plain_makespan_h": pred_prop["makespan_h"],
        "replay_plain_jct_mean_h": pred_prop["jct_mean_h"],
        "fidelity_makespan": err(pred_prop["makespan_h"], real_plain["makespan_h"]),
        "fidelity_jct_mean": err(pred_prop["jct_mean_h"], real_plain["jct_mean_h"]),
        "predicted_synergy_makespan_h": pred_syn["makespan_h"],
        "predicted_synergy_jct_mean_h": pred_syn["jct_mean_h"],
        "real_synergy_makespan_h": real_syn["makespan_h"],
        "real_synergy_jct_mean_h": real_syn["jct_mean_h"],
        "prediction_error_makespan": err(pred_syn["makespan_h"], real_syn["makespan_h"]),
        "prediction_error_jct_mean": err(pred_syn["jct_mean_h"], real_syn["jct_mean_h"]),
        "real_gain_jct_mean": round(real_plain["jct_mean_h"] / real_syn["jct_mean_h"], 3),
        "predicted_gain_jct_mean": before["gain"]["jct_mean"],
    }
    if as_json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>30}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
