#!/usr/bin/env python3
"""Record a real job history with what the jobs used, for the usage parser's unit tests.

Run against a dev cluster with accounting (``synergy dev-cluster up --accounting``, then
export SLURM_CONF and PATH as it prints), on an otherwise idle machine: runs GPU jobs whose
use is known (one core kept busy of the four given; 600 MB held of 2000 MB; nothing used;
two job steps, one busy) for ``SECONDS`` each, and writes ``sacct -a -D --json`` and
``sacct -a -D -P`` with the usage fields, steps included (no -X: a job's peak memory is its
steps'), as tests/slurm/fixtures/sacct_usage_VERSION.{json,txt}. The truth is in the job
names: ``cpu-1of4``, ``mem-600of2000``, ``idle``, ``steps-1of4``.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "slurm" / "fixtures"
SECONDS = 20
USAGE_FIELDS = ("JobIDRaw", "JobName", "State", "Start", "End", "Elapsed", "AllocCPUS",
                "AllocTRES", "TotalCPU", "MaxRSS", "TRESUsageInMax", "TRESUsageInTot")
BUSY = f"python3 -c 'import time\nt = time.time() + {SECONDS}\nwhile time.time() < t: pass'"
HOLD = ("python3 -c 'import time\nb = b\"x\" * (600 << 20)\n"
        f"time.sleep({SECONDS})\nprint(len(b))'")


def sh(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def sbatch(name: str, script: str, *args: str) -> str:
    return sh("sbatch", "--parsable", "-o", "/dev/null", f"--job-name={name}", "--gpus=1",
              *args, "--wrap", script).strip().split(";")[0]


def main() -> None:
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    ids = [sbatch("cpu-1of4", BUSY, "--cpus-per-gpu=4", "--mem=2000M"),
           sbatch("mem-600of2000", HOLD, "--cpus-per-gpu=1", "--mem=2000M"),
           sbatch("idle", f"sleep {SECONDS}", "--cpus-per-gpu=2", "--mem=1000M"),
           sbatch("steps-1of4", f"srun -n1 sleep 3; srun -n1 {BUSY}", "--cpus-per-gpu=4",
                  "--mem=2000M")]
    deadline = time.monotonic() + 5 * SECONDS + 60
    while sh("squeue", "-h", "-j", ",".join(ids), "-o", "%i").strip():
        if time.monotonic() > deadline:
            raise SystemExit(f"jobs {ids} still in the queue")
        time.sleep(1)
    time.sleep(3)                  # slurmdbd records the ends a moment later
    raw = sh("sacct", "-a", "-D", "--json", "-S", start)
    meta = json.loads(raw)["meta"]
    version = (meta.get("Slurm") or meta.get("slurm"))["release"]
    (OUT / f"sacct_usage_{version}.json").write_text(raw)
    (OUT / f"sacct_usage_{version}.txt").write_text(
        sh("sacct", "-a", "-D", "-P", "-o", ",".join(USAGE_FIELDS), "-S", start))
    print(f"recorded Slurm {version}'s usage in {OUT}")


if __name__ == "__main__":
    main()
