#!/usr/bin/env python3
"""What the controller costs slurmctld at a big site's queue: a round's wall time and the
RPCs slurmctld served for it, by type, from slurmctld's own account (``sdiag``).

Starts its own dev cluster (state in /tmp/synergy-bench-load, port 22617; root needed,
like every dev cluster) of ``--nodes`` node records, each a real slurmd (the paper's
server: 8 fake GPUs, 24 cores, 500 GB; many slurmd on one host, as Debian builds Slurm).
``--running`` one-GPU jobs fill the first nodes (they sleep); the nodes left over are
drained, so that they are read by every round but run nothing (Slurm's own node state,
no fakes). Then ``--pending`` GPU jobs with profile keys wait for resources.

Per release it measures, for the controller in observe mode (it reads, plans and records;
writes are a plan's few starts, not the reads this is about):

- ``round_s_all_changed``: a round of a controller that has seen none of the jobs (a
  restart; every job is new to it);
- ``round_s_few_changed``: a round after ``--changed`` of the jobs changed since the last
  (half of them cancelled, as many submitted), the median of ``--rounds``;
- ``rpc_share_of_interval``: slurmctld's time on the few-changed round's RPCs over one
  ``--interval-s`` (the controller's default 30 s): the share of slurmctld's time the
  controller takes; and the same for a plain ``squeue`` as a site's users run it.

Each reader of ``--reader`` (``[slurm] reader``; default ``text,json``: the default's and
the one it replaced, on the same queue) is measured in turn; the top-level figures are the
first reader's, ``readers`` has each one's.

    python benchmarks/slurmctld_load.py [--slurm 26.05] [--nodes 250] [--reader text] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILES = REPO.parent / "shared" / "reference" / "model_profiles.json"
sys.path.insert(0, str(REPO))
# sdiag's text (its JSON form is not in every release): "NAME ( 2009) count:12
# ave_time:345 total_time:4140"
RPC_LINE = re.compile(r"^\s*(\w+)\s+\(\s*\d+\)\s+count:(\d+)\s+ave_time:\d+\s+total_time:(\d+)")
SDIAG_OWN = "REQUEST_STATS_INFO"
# The running jobs' sleep, a length no other process on the machine has.
SLEEP_TAG = 987654
STOP_BATCH = 250                 # running jobs ended at a time at the end (see stop_all)


def rpc_totals(env: dict[str, str]) -> dict[str, tuple[int, int]]:
    """slurmctld's RPCs by message type since it started: type -> (count, microseconds)."""
    text = subprocess.run(["sdiag"], env=env, capture_output=True, text=True, check=True,
                          timeout=120).stdout
    by_type = text.split("Remote Procedure Call statistics by message type", 1)[-1]
    by_type = by_type.split("Remote Procedure Call statistics by user", 1)[0]
    out = {}
    for line in by_type.splitlines():
        m = RPC_LINE.match(line)
        if m:
            out[m.group(1)] = (int(m.group(2)), int(m.group(3)))
    return out


def rpc_delta(before: dict, after: dict) -> dict[str, tuple[int, float]]:
    """The RPCs served between two :func:`rpc_totals`: type -> (count, seconds); sdiag's
    own left out."""
    out = {}
    for kind, (count, total) in after.items():
        c0, t0 = before.get(kind, (0, 0))
        if kind != SDIAG_OWN and count > c0:
            out[kind] = (count - c0, (total - t0) / 1e6)
    return out


def measured(what, env: dict[str, str]) -> dict:
    """``what()``'s wall time and the RPCs slurmctld served meanwhile."""
    r0 = rpc_totals(env)
    t0 = time.perf_counter()
    what()
    wall = time.perf_counter() - t0
    rpcs = rpc_delta(r0, rpc_totals(env))
    return {"wall_s": round(wall, 3), "rpc_s": round(sum(s for _, s in rpcs.values()), 4),
            "rpcs": {k: {"count": c, "s": round(s, 4)} for k, (c, s) in sorted(rpcs.items())}}


def thread_room(running: int, nodes: int) -> str:
    """Why this machine cannot hold the cluster ("" when it can): every running job is a
    slurmstepd of up to 8 threads (26.05) and its sleep, every node a slurmd of a few, and
    each is a pid; Linux's default kernel.pid_max (32768) holds 2,000 running jobs on
    22.05 but not on 26.05."""
    need = running * 10 + nodes * 8 + 2000
    limits = {"kernel.pid_max": int(Path("/proc/sys/kernel/pid_max").read_text()),
              "kernel.threads-max": int(Path("/proc/sys/kernel/threads-max").read_text())}
    short = {k: v for k, v in limits.items() if v < need}
    return "".join(f"{k} is {v}, under the {need} threads this needs: raise it with "
                   f"sysctl -w {k}={4 * need} (or run fewer --running jobs). "
                   for k, v in short.items())


def submit_many(cli, argvs: list[list[str]]) -> list[int]:
    """sbatch each argument list (4 at a time); the job ids."""
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda a: cli.run("sbatch", ["--parsable", *a]), argvs))
    return [int(o.strip().split(";")[0]) for o in outs]


def job_args(i: int, keys: list[str], script: Path) -> list[str]:
    """A pending GPU job as users submit them with synergy-sbatch: 1-8 GPUs, a profile."""
    return [f"--gpus={1 + i % 8}", f"--comment=synergy:profile={keys[i % len(keys)]}",
            "-o", "/dev/null", str(script)]


def count_states(cli) -> dict[str, int]:
    out = cli.run("squeue", ["-h", "-o", "%T"], timeout_s=300)
    states: dict[str, int] = {}
    for s in out.split():
        states[s] = states.get(s, 0) + 1
    return states


def fill(cli, spec, args, script: Path, keys: list[str]) -> dict:
    """The running jobs on the first nodes, the rest drained, then the pending jobs."""
    busy = -(-args.running // 8)
    if busy < args.nodes:
        cli.run("scontrol", ["update", f"nodename=n[{busy + 1}-{args.nodes}]",
                             "state=drain", "reason=slurmctld_load: read, not run"])
    t0 = time.perf_counter()
    submit_many(cli, [["--gpus=1", "-o", "/dev/null", str(script)]
                      for _ in range(args.running)])
    deadline = time.monotonic() + 1800
    while count_states(cli).get("RUNNING", 0) < args.running:
        if time.monotonic() > deadline:
            raise SystemExit(f"the {args.running} jobs did not all start: {count_states(cli)}")
        time.sleep(5)
    started_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    submit_many(cli, [job_args(i, keys, script) for i in range(args.pending)])
    return {"running_started_s": round(started_s, 1),
            "pending_submitted_s": round(time.perf_counter() - t0, 1),
            "states": count_states(cli)}


def change(cli, n: int, keys: list[str], script: Path, rng_seed: int) -> None:
    """``n`` jobs changed: n/2 pending ones cancelled, n/2 new ones submitted."""
    pending = cli.run("squeue", ["-h", "-t", "PD", "-o", "%A"], timeout_s=300).split()
    gone = pending[rng_seed % 7::max(1, len(pending) // max(1, n // 2))][: n // 2]
    if gone:
        cli.run("scancel", gone)
    submit_many(cli, [job_args(rng_seed + i, keys, script) for i in range(n - len(gone))])


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--slurm", default="system", help="system (Debian's) or a cached root's "
                    "release: 24.11, 26.05")
    ap.add_argument("--nodes", type=int, default=250)
    ap.add_argument("--running", type=int, default=2000)
    ap.add_argument("--pending", type=int, default=10000)
    ap.add_argument("--changed", type=float, default=0.01,
                    help="the share of the jobs that changed before a few-changed round")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--interval-s", type=float, default=30.0)
    ap.add_argument("--accounting", action="store_true",
                    help="a site's accounting too (slurmdbd, MariaDB, job accounting): its "
                    "reads go to slurmdbd, not slurmctld, and on one host every running "
                    "job's jobacct_gather scans all of /proc (load 300 at 2,000 jobs here)")
    ap.add_argument("--reader", default="text,json",
                    help="the readers to measure, in turn ([slurm] reader: text, json)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    from synergy_slurm import devcluster
    from synergy_slurm.devcluster import local_spec
    from synergy_slurm.profiles import load_profiles

    room = thread_room(args.running, args.nodes)
    if room:
        raise SystemExit(room)
    spec = local_spec(Path("/tmp/synergy-bench-load"), nodes=args.nodes, port=22617,
                      slurm=args.slurm, hook=True, accounting=args.accounting)
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    up_s, spec = devcluster.up(spec, timeout_s=600)
    env = devcluster.env_for(spec)
    version = devcluster.release_info(spec).get("version", args.slurm)
    work = Path(tempfile.mkdtemp(prefix="synergy-bench-load-", dir="/tmp"))
    cli = devcluster.slurm_cli(spec, timeout_s=300)
    try:
        script = work / "job.sh"
        # The jobs sleep (no load of their own: a polling loop in 2,000 jobs made a round
        # 3x slower) until the benchmark ends them (cancelling 2,000 running jobs took
        # slurmctld's agent over 10 minutes on this host).
        script.write_text(f"#!/bin/sh\nexec sleep {SLEEP_TAG}\n")
        script.chmod(0o755)
        keys = sorted(load_profiles(PROFILES))
        setup = fill(cli, spec, args, script, keys)
        print(f"  {args.nodes} nodes up in {up_s:.0f} s; {setup}", file=sys.stderr)
        rounds = {reader: measure_reader(cli, spec, args, reader, n, work, script, keys)
                  for n, reader in enumerate(args.reader.split(","))}
        squeue = measured(lambda: cli.run("squeue", [], timeout_s=300), env)
        squeue_json = measured(lambda: cli.run("squeue", ["--json"], timeout_s=300), env)
        states = count_states(cli)
        report(args, version, states, rounds, squeue, squeue_json, setup, up_s)
    finally:
        stop_all(cli)
        devcluster.down(spec)
    return 0


def measure_reader(cli, spec, args, reader: str, n: int, work: Path, script: Path,
                   keys: list[str]) -> tuple[dict, list[dict]]:
    """One reader's rounds: the first of a controller that has seen none of the jobs, then
    ``--rounds`` after ``--changed`` of the jobs changed."""
    from synergy_slurm import devcluster
    from synergy_slurm.config import config_from_dict
    from synergy_slurm.controller.daemon import Controller

    env = devcluster.env_for(spec)
    cfg = config_from_dict({
        "slurm": {"conf": str(spec.conf_path), "timeout_s": 300.0, "reader": reader,
                  **({"bindir": str(spec.bindir)} if spec.bindir.is_dir() else {})},
        "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc)},
        "profiles": {"file": str(PROFILES)},
        "controller": {"interval_s": args.interval_s,
                       "state_db": str(work / f"state-{reader}.db"),
                       "audit_log": str(work / "audit.jsonl")}})
    # A controller that has seen none of the jobs: every job is new to it.
    first = measured(Controller(cfg, mode="observe").run_round, env)
    ctl = Controller(cfg, mode="observe")
    ctl.run_round()
    few = []
    for r in range(args.rounds):
        change(cli, round(args.changed * (args.pending + args.running)), keys,
               script, 1000 + r * 101 + n * 37)
        few.append(measured(ctl.run_round, env))
    return first, few


def stop_all(cli) -> None:
    """Every job ended, with a wait for them (a job left running would outlive its
    slurmd): the pending ones cancelled first, so that none starts on the nodes the
    running ones free; then the running ones ended ``STOP_BATCH`` at a time by killing
    their sleep. Each job's end is a burst of slurmstepd, munge and slurmctld messages:
    all at once, with pending jobs starting behind them, they overloaded this 2-core host
    (load 1,700-3,000, 4,355 slurmstepd, munge refusing)."""
    try:
        pending = cli.run("squeue", ["-h", "-t", "PD", "-o", "%A"], timeout_s=300).split()
        for i in range(0, len(pending), 1000):
            cli.run("scancel", pending[i:i + 1000], timeout_s=300)
        sleeps = subprocess.run(["pgrep", "-x", "-f", f"sleep {SLEEP_TAG}"],
                                capture_output=True, text=True).stdout.split()
        for i in range(0, len(sleeps), STOP_BATCH):
            for pid in sleeps[i:i + STOP_BATCH]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGTERM)
            left = len(sleeps) - i - STOP_BATCH
            deadline = time.monotonic() + 120
            while count_states(cli).get("RUNNING", 0) > max(0, left) and \
                    time.monotonic() < deadline:
                time.sleep(2)
        deadline = time.monotonic() + 600
        while count_states(cli) and time.monotonic() < deadline:
            time.sleep(5)
    except Exception as exc:        # the cluster goes down next in any case
        print(f"  could not end every job: {exc}", file=sys.stderr)


def figures(first: dict, few: list, interval_s: float) -> dict:
    """One reader's figures: its all-changed round and the median few-changed round."""
    median = sorted(few, key=lambda m: m["wall_s"])[len(few) // 2]
    return {
        "round_s_all_changed": first["wall_s"],
        "round_s_few_changed": round(statistics.median(m["wall_s"] for m in few), 3),
        "rpc_s_all_changed": first["rpc_s"],
        "rpc_s_few_changed": round(statistics.median(m["rpc_s"] for m in few), 4),
        "rpc_share_of_interval": round(
            statistics.median(m["rpc_s"] for m in few) / interval_s, 5),
        "rpcs_all_changed": first["rpcs"], "rpcs_few_changed": median["rpcs"],
    }


def report(args, version: str, states: dict, rounds: dict, squeue: dict,
           squeue_json: dict, setup: dict, up_s: float) -> None:
    each = {r: figures(first, few, args.interval_s) for r, (first, few) in rounds.items()}
    out = {
        "slurm": version, "reader": next(iter(each)),
        "nodes": args.nodes, "pending": states.get("PENDING", 0),
        "running": states.get("RUNNING", 0), "interval_s": args.interval_s,
        **next(iter(each.values())),
        "squeue_s": squeue["wall_s"], "squeue_rpc_s": squeue["rpc_s"],
        "squeue_json_s": squeue_json["wall_s"], "squeue_json_rpc_s": squeue_json["rpc_s"],
        "readers": each, "setup": setup, "up_s": round(up_s, 1),
    }
    if args.json:
        print(json.dumps(out), flush=True)
        return
    for k, v in out.items():
        print(f"{k:>22}: {v}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
