#!/usr/bin/env python3
"""End to end on a real Slurm: the static trace with plain Slurm (GPU-proportional) and with
the hook + controller (TUNE), emulated training jobs, time-scaled; and the simulator's
prediction of the same scaled run.

Each job runs `python -m synergy_slurm.emulate`: its iterations take the profile's time at
the cores and memory Slurm really gave it, times --scale (wall seconds per trace second).
Jobs opt in to requeue (they checkpoint), so the controller may restart running jobs into
idle resources when that pays; the simulation charges a requeue's wall time as its restart
cost: 12 s on 22.05 (measured when this benchmark was written) and 2 s on 26.05. The
release-facts test measured 1.9 s on both on 2026-12-03
(tests/slurm/test_release_facts_on_slurm.py -k requeue -s), so the 22.05 figure is likely high.

    python benchmarks/e2e_static.py [--jobs 100] [--scale 0.0167] [--slurm 26.05] [--json]

Prints {"proportional_makespan_s", "tune_makespan_s", "ratio", "simulated_ratio"} (wall
seconds of the scaled runs) with --json. Needs root; takes about 1.8 x the proportional
makespan (15.25 trace hours x scale).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from synergy_slurm import devcluster
from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.core import ClusterState
from synergy_slurm.devcluster import local_spec
from synergy_slurm.devcluster.releases import RELEASES
from synergy_slurm.profiles import load_profiles
from synergy_slurm.sim.config import SimConfig, SlurmConfig
from synergy_slurm.sim.runner import Workload
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import read_trace
from synergy_slurm.slurm.commands import SlurmCLI

SHARED = Path(__file__).resolve().parents[2] / "shared" / "reference"
REQUEUE_WALL_S = {"22.05": 12.0, "26.05": 2.0}   # by release; 12 s when not measured


def run_trace(cli: SlurmCLI, jobs, profiles_path: Path, scale: float, work: Path,
              tag: str) -> float:
    """Submit every job at once, wait until all are gone; wall seconds. A job that did not
    complete makes the run worthless: that is an error, not a short makespan."""
    state = work / tag
    state.mkdir()
    t0 = time.monotonic()
    ids = []
    for j in jobs:
        cmd = (f"exec {sys.executable} -m synergy_slurm.emulate --profiles {profiles_path} "
               f"--model {j.model} --iterations {j.iterations} --scale {scale} "
               f"--state {state}/job{j.job_id}.state")
        out = cli.run("sbatch", ["--parsable", f"--gpus={j.gpus}", "--requeue",
                                 "--open-mode=append",
                                 f"--comment=synergy:profile={j.model} synergy:requeue-ok",
                                 "--time=1440", f"--job-name=e2e{j.job_id}",
                                 "-o", str(state / f"job{j.job_id}.out"), "--wrap", cmd])
        ids.append((j.job_id, out.strip().split(";")[0]))
    while cli.run("squeue", ["-h", "-o", "%A"]).split():
        time.sleep(0.5)
    seconds = time.monotonic() - t0
    failed = [str(tid) for tid, _ in ids if "finished at" not in _read(
        state / f"job{tid}.out")]     # the emulated job's last line when it ran to the end
    if failed:
        raise SystemExit(f"{tag}: {len(failed)} jobs did not complete, e.g. trace jobs "
                         f"{', '.join(failed[:5])}; see {state}/job*.out")
    return seconds


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=100, help="first N jobs of the trace")
    ap.add_argument("--scale", type=float, default=1 / 60,
                    help="wall seconds per trace second (1/60: a trace hour is a minute)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--slurm", default="system", choices=RELEASES,
                    help="which Slurm (synergy dev-cluster up --slurm)")
    ap.add_argument("--allocator", default="tune",
                    help="the controller's allocator in the synergy run (e.g. tune-plus)")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    profiles_path = SHARED / "model_profiles.json"
    profiles = load_profiles(profiles_path)
    trace = read_trace(SHARED / "static_100job.csv", profiles)[:args.jobs]
    round_s = 300.0
    spec = local_spec(Path("/tmp/synergy-bench-e2e"), port=18317, hook=True, slurm=args.slurm,
                      binds=(str(SHARED),))
    work = Path(tempfile.mkdtemp(prefix="synergy-e2e-"))
    devcluster.down(spec)
    _, spec = devcluster.up(spec, timeout_s=90)
    version = devcluster.release_info(spec).get("version", "?")
    restart_trace_s = REQUEUE_WALL_S.get(version[:5], 12.0) / args.scale
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=60)
        prop_s = run_trace(cli, trace, profiles_path, args.scale, work, "proportional")
        tune_s, requeues = synergy_run(cli, spec, trace, profiles_path, args.scale, work,
                                       round_s, restart_trace_s, args.allocator)
    finally:
        devcluster.down(spec)
        shutil.rmtree(work, ignore_errors=True)
    sim = simulated(trace, profiles, round_s, restart_trace_s, args.allocator)
    out = {"slurm": version, "allocator": args.allocator, "jobs": len(trace),
           "scale": args.scale,
           "proportional_makespan_s": round(prop_s, 1), "tune_makespan_s": round(tune_s, 1),
           "ratio": round(prop_s / tune_s, 3),
           "simulated_ratio": round(sim["proportional"] / sim["tune"], 3),
           "simulated_proportional_s": round(sim["proportional"] * args.scale, 1),
           "simulated_tune_s": round(sim["tune"] * args.scale, 1),
           "requeues": requeues}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>26}: {v}")
    return 0


def synergy_run(cli, spec, trace, profiles_path: Path, scale: float, work: Path,
                round_s: float, restart_trace_s: float, allocator: str = "tune"
                ) -> tuple[float, int]:
    """The trace with the hook and the controller (``allocator``, TUNE by default, up to 4
    requeues a round): its makespan in wall seconds and the requeues the controller did."""
    cfg = config_from_dict({
        "slurm": {"conf": str(spec.conf_path), "bindir": str(cli.bindir or "")},
        "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc)},
        "profiles": {"file": str(profiles_path)},
        "controller": {"mode": "enforce", "policy": "fifo", "allocator": allocator,
                       "interval_s": max(0.5, round_s * scale),
                       "state_db": str(work / "state.db"),
                       "audit_log": str(work / "audit.jsonl"),
                       "restart_cost_s": restart_trace_s, "requeue_budget": 4,
                       "requeue_min_interval_s": 0.0}})
    ctl = Controller(cfg)
    ctl.run_round()   # writes the hook table: from now on the hook holds the jobs
    stop = threading.Event()
    thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
    thread.start()
    tune_s = run_trace(cli, trace, profiles_path, scale, work, "tune")
    stop.set()
    thread.join(timeout=60)
    audit = (work / "audit.jsonl").read_text().splitlines()
    requeues = sum('"action": "requeue"' in line and '"result": "done"' in line
                   for line in audit)
    return tune_s, requeues


def simulated(trace, profiles, round_s: float, restart_trace_s: float,
              allocator: str = "tune") -> dict[str, float]:
    """The simulator's makespan (trace seconds) for both runs, the controller model for
    the synergy run as it runs on Slurm (under the key "tune")."""
    cluster = ClusterState.uniform(4)
    sim = {}
    for alloc, config in (("proportional", SimConfig), (allocator, SlurmConfig)):
        extra = {"requeue_budget": 4, "restart_cost_s": restart_trace_s} \
            if config is SlurmConfig else {}
        res = simulate(Workload(jobs=tuple(trace), static=True).stream(profiles, None),
                       profiles, config(cluster, "fifo", alloc, round_s=round_s, **extra))
        sim["tune" if config is SlurmConfig else alloc] = res.makespan_s
    return sim

if __name__ == "__main__":
    sys.exit(main())
