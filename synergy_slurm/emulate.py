"""An emulated training job: runs N iterations whose time follows a profile and the cores
and memory the job really got from Slurm, time-scaled so that hours become seconds.

Used by the end-to-end benchmark and the demo in place of real training. It reads its
share the way a real job would: cores from ``SLURM_CPUS_ON_NODE`` and the GPU count,
memory from ``scontrol show job -d`` (slurmd's ``Mem=``, since no environment variable
carries an updated memory-per-GPU). Progress is checkpointed to ``--state`` after every
chunk, so a requeued job resumes where it stopped.

    python -m synergy_slurm.emulate --profiles model_profiles.json --model res18 \\
        --iterations 30000 --scale 0.005 --state /shared/job.state
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from profiler.progress import Progress

from .profiles import load_profiles
from .slurm.parse import detail_mem_mb
from .vocabulary import MB_PER_GB


def granted_share() -> tuple[int, float, int]:
    """(cores per GPU, GB per GPU, GPUs on this node) as Slurm granted them; under the
    profiler, its core allotment (SYNERGY_PROFILE_CPUS) with all memory."""
    gpus = int(os.environ.get("SLURM_GPUS_ON_NODE") or os.environ.get("SLURM_GPUS") or 1)
    profiling = os.environ.get("SYNERGY_PROFILE_CPUS", "")
    if profiling.isdigit():
        return max(1, int(profiling) // max(1, gpus)), float("inf"), gpus
    cpus = int(os.environ.get("SLURM_CPUS_ON_NODE", "1"))
    mem_mb = 0
    job_id = os.environ.get("SLURM_JOB_ID")
    scontrol = shutil.which("scontrol")
    if job_id and scontrol and job_id.isdigit():
        try:
            out = subprocess.run([scontrol, "show", "job", "-d", job_id], capture_output=True,
                                 text=True, timeout=30, check=False).stdout
            mem_mb = detail_mem_mb(out)
        except (OSError, subprocess.TimeoutExpired):
            mem_mb = 0
    if not mem_mb and os.environ.get("SLURM_MEM_PER_GPU", "").isdigit():
        mem_mb = int(os.environ["SLURM_MEM_PER_GPU"]) * gpus
    return max(1, cpus // max(1, gpus)), mem_mb / MB_PER_GB / max(1, gpus), gpus


def _burner(share: float, period_s: float = 0.02, catch_up_s: float = 30.0,
            nice: int = 19) -> int:
    """A child process that keeps ``share`` of one core busy, at the lowest priority
    (``nice``): under contention it yields to Slurm's daemons. It counts its own CPU time
    against the wall clock since it began and spins only while it owes some: a burner that
    was kept off its core (the host's 2 cores busy with other jobs' Python, slurmstepd, the
    benchmark's polling) makes up for it once the core is free, so accounting's TotalCPU
    records the share asked for wherever the host has room for it over the run, not whatever
    share a busy moment left it. What it owes is capped at ``catch_up_s`` of its share, so
    that a long stall does not make it spin at a full core for as long (a per-round sample
    of its use would read above its share). Returns its pid."""
    pid = os.fork()
    if pid:
        return pid
    os.nice(nice)
    share = min(1.0, max(0.0, share))
    wall0, cpu0 = time.perf_counter(), time.process_time()
    while True:
        owed = share * (time.perf_counter() - wall0) - (time.process_time() - cpu0)
        if owed > share * catch_up_s:
            wall0 += (owed - share * catch_up_s) / share
            owed = share * catch_up_s
        if owed > 0:
            end = time.process_time() + min(owed, period_s)
            while time.process_time() < end:
                pass
        else:
            time.sleep(min(period_s, -owed / share) if share else period_s)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", required=True, type=Path)
    ap.add_argument("--model", required=True)
    ap.add_argument("--iterations", required=True, type=int)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="wall seconds per emulated second (0.005: 1 h -> 18 s)")
    ap.add_argument("--state", type=Path, help="checkpoint file (resume after requeue)")
    ap.add_argument("--chunk-s", type=float, default=0.5, help="wall seconds per checkpoint")
    ap.add_argument("--use-cores", type=float, default=0.0, metavar="SHARE",
                    help="keep this share (0-1) of every granted core busy, as the job's "
                    "data pipeline would: what accounting then records (TotalCPU)")
    ap.add_argument("--use-mem-mb", type=int, default=0,
                    help="hold this much resident memory (MB) for the whole run (MaxRSS)")
    args = ap.parse_args(argv)
    profile = load_profiles(args.profiles)[args.model]
    cpus, mem_gb, gpus = granted_share()
    tput = profile.at(cpus, mem_gb if 0 < mem_gb < float("inf") else profile.mem_grid[-1])
    iter_s = (profile.iter_time_s or 1.0) / tput * args.scale
    done = 0
    if args.state and args.state.exists():
        done = int(json.loads(args.state.read_text()).get("done", 0))
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGUSR1, lambda *_: stop.update(now=True))
    print(f"emulating {args.model}: {cpus} cores/GPU, {mem_gb:.1f} GB/GPU, {gpus} GPUs, "
          f"throughput {tput:.2f}, {done}/{args.iterations} done, "
          f"restart {os.environ.get('SLURM_RESTART_COUNT', '0')}", flush=True)
    per_chunk = max(1, int(args.chunk_s / iter_s)) if iter_s > 0 else args.iterations
    if os.environ.get("SYNERGY_PROGRESS_FILE"):
        per_chunk = 1   # the profiler is watching: one progress line per iteration
    # The burners first: a child forked after the ballast would count it again (RSS).
    burners = [_burner(args.use_cores) for _ in range(cpus * gpus if args.use_cores else 0)]
    ballast = bytearray(args.use_mem_mb * 2**20)      # zero-filled: every page touched
    with Progress(total=args.iterations, done=done) as progress:
        while done < args.iterations and not stop["now"]:
            n = min(per_chunk, args.iterations - done)
            time.sleep(n * iter_s)
            done += n
            progress.step(n)
            if args.state and not os.environ.get("SYNERGY_PROGRESS_FILE"):
                tmp = args.state.with_suffix(".tmp")
                tmp.write_text(json.dumps({"done": done}))
                tmp.replace(args.state)
    for pid in burners:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    del ballast
    print(f"{'finished' if done >= args.iterations else 'stopped'} at {done} iterations",
          flush=True)
    return 0 if done >= args.iterations else 143


if __name__ == "__main__":
    sys.exit(main())
