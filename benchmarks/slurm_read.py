#!/usr/bin/env python3
"""What one read of the cluster costs, by reader: squeue's text, the commands' JSON, pyslurm.

Starts its own dev cluster (Slurm 24.11 from the cached root unless --slurm says
otherwise; state in /tmp/synergy-bench-cluster, port 17917), holds N pending GPU jobs for
each N of --jobs, and for each reader runs ``reader.snapshot()`` (jobs, nodes and
partitions, parsed) --repeat times, inside the release's root with the venv of ``synergy
dev-cluster venv`` (the same Python for every reader; pyslurm is built there if missing,
about 4 minutes once). Per read it reports the median wall time, the RPCs slurmctld
served and the time it spent on them (its own account, ``sdiag``), its CPU time (from
/proc, less what it spends idle in the same time: noisy) and the reader's own CPU time
(its process and the commands it starts). Needs root, like the dev cluster.

    python benchmarks/slurm_read.py [--reader text,json,pyslurm] [--jobs 1000,10000]
                                    [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve()
VENDOR = HERE.parents[2] / "shared" / "vendor" / "pyslurm-24.11.0.tar.gz"


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    me, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def rpc_totals() -> dict[str, tuple[int, int]]:
    """slurmctld's own account of the RPCs it served (``sdiag --json``): message type ->
    (count, total microseconds)."""
    out = subprocess.run(["sdiag", "--json"], capture_output=True, text=True, check=True)
    stats = json.loads(out.stdout)["statistics"]["rpcs_by_message_type"]
    return {r["message_type"]: (int(r["count"]), int(r["total_time"])) for r in stats}


def rpc_delta(before: dict, after: dict) -> tuple[int, int]:
    """RPCs and their microseconds between two :func:`rpc_totals`, sdiag's own left out."""
    n = us = 0
    for kind, (count, total) in after.items():
        if kind == "REQUEST_STATS_INFO":
            continue
        c0, t0 = before.get(kind, (0, 0))
        n, us = n + count - c0, us + total - t0
    return n, us


def inside(reader_name: str, repeat: int, ctld: int) -> dict:
    """The measurement, run inside the root: ``repeat`` reads with one reader."""
    from synergy_slurm.slurm.commands import SlurmCLI
    from synergy_slurm.slurm.reader import make_reader

    cli = SlurmCLI(os.environ["SLURM_CONF"], 300.0)
    reader = make_reader(cli, reader_name)
    reader.snapshot()                                   # warm: release read, imports
    c0, t0 = cpu_seconds(ctld), time.perf_counter()
    time.sleep(2.0)
    idle_rate = (cpu_seconds(ctld) - c0) / (time.perf_counter() - t0)
    walls, pending = [], 0
    r0 = rpc_totals()
    c0, o0, t0 = cpu_seconds(ctld), own_cpu(), time.perf_counter()
    for _ in range(repeat):
        t = time.perf_counter()
        snap = reader.snapshot()
        walls.append(time.perf_counter() - t)
        pending = sum(1 for j in snap.jobs if j.pending)
    elapsed = time.perf_counter() - t0
    ctld_s = max(0.0, cpu_seconds(ctld) - c0 - idle_rate * elapsed)
    client_s = (own_cpu() - o0) / repeat
    rpcs, rpc_us = rpc_delta(r0, rpc_totals())
    return {"reader": type(reader).__name__, "pending": pending,
            "wall_s": statistics.median(walls), "ctld_cpu_s": ctld_s / repeat,
            "rpcs": rpcs / repeat, "rpc_s": rpc_us / 1e6 / repeat, "client_cpu_s": client_s}


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reader", default="text,json,pyslurm",
                    help="text, json, pyslurm or several (comma-separated), side by side")
    ap.add_argument("--jobs", default="1000,10000", help="pending job counts, e.g. 1000,10000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--slurm", default="24.11", help="the release (pyslurm needs 24.11)")
    ap.add_argument("--pyslurm-source", type=Path, default=VENDOR)
    ap.add_argument("--json", action="store_true", help="one JSON document instead of a table")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--ctld-pid", type=int, default=0, help=argparse.SUPPRESS)
    return ap.parse_args()


def main() -> int:
    args = parse_args()
    if args.inside:
        print(json.dumps(inside(args.reader, args.repeat, args.ctld_pid)))
        return 0

    from synergy_slurm import devcluster
    from synergy_slurm.devcluster import inroot, local_spec
    from synergy_slurm.devcluster.cluster import pid_files
    from synergy_slurm.devcluster.releases import resolve

    readers = args.reader.split(",")
    counts = sorted(int(n) for n in args.jobs.split(","))
    if "pyslurm" in readers:
        inroot.ensure_venv(resolve(args.slurm), args.pyslurm_source)
    spec = local_spec(Path("/tmp/synergy-bench-cluster"), port=17917, slurm=args.slurm)
    devcluster.down(devcluster.existing_spec(spec.state_dir))
    _, spec = devcluster.up(spec, timeout_s=90)
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False, dir="/tmp") as f:
        f.write("#!/bin/sh\ntrue\n")            # the held jobs' script
    rows = []
    try:
        cli = devcluster.slurm_cli(spec, timeout_s=120)
        ctld = int(pid_files(spec)["slurmctld"].read_text().split()[0])
        held = 0
        for n in counts:
            t0 = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(lambda i: cli.run("sbatch", [
                    "--hold", "-Q", f"--gpus={1 + i % 8}", "-o", "/dev/null", f.name]),
                    range(held, n)))
            submit_s, held = time.perf_counter() - t0, n
            for name in readers:
                row = {"jobs": n, "asked": name, **read_inside(spec, name, args.repeat, ctld),
                       "submit_s": round(submit_s, 1)}
                rows.append(row)
                print(f"  {n} jobs, {name}: {row['wall_s']:.3f} s", file=sys.stderr)
    finally:
        devcluster.down(spec)
        os.unlink(f.name)
    if args.json:
        print(json.dumps({"slurm": devcluster.release_info(spec).get("version", args.slurm),
                          "rows": rows}, indent=1))
        return 0
    print_table(args, rows)
    return 0


def read_inside(spec, name: str, repeat: int, ctld: int) -> dict:
    """:func:`inside` run in the cluster's root, with the venv that has pyslurm."""
    from synergy_slurm.devcluster import inroot

    argv = ["python", str(HERE), "--inside", "--reader", name, "--repeat", str(repeat),
            "--ctld-pid", str(ctld)]
    out = subprocess.run(inroot.cluster_command(spec, argv), capture_output=True, text=True,
                         timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"{name} failed: {out.stderr[-800:]}")
    return json.loads(out.stdout.splitlines()[-1])


def print_table(args: argparse.Namespace, rows: list[dict]) -> None:
    print(f"Slurm {args.slurm}, {args.repeat} reads each; per read: median wall time; "
          "slurmctld's RPCs and the time it spent serving them (sdiag); its CPU time less "
          "its idle rate (/proc, noisy: 10 ms ticks, scheduler cycles); the reader's CPU "
          "time (its process and the commands it starts):")
    print(f"{'pending':>8} {'reader':>8} {'wall s':>8} {'rpcs':>5} {'rpc s':>7} "
          f"{'ctld cpu s':>11} {'client cpu s':>13} {'wall vs json':>13}")
    base = {r["jobs"]: r for r in rows if r["asked"] == "json"}
    for r in rows:
        ratio = (f"{r['wall_s'] / base[r['jobs']]['wall_s']:.2f}x"
                 if r["jobs"] in base else "")
        print(f"{r['pending']:>8} {r['asked']:>8} {r['wall_s']:>8.3f} {r['rpcs']:>5.0f} "
              f"{r['rpc_s']:>7.3f} {r['ctld_cpu_s']:>11.3f} {r['client_cpu_s']:>13.3f} "
              f"{ratio:>13}")


if __name__ == "__main__":
    sys.exit(main())
