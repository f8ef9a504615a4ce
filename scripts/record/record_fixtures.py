#!/usr/bin/env python3
"""Record Slurm's real output for the parser's unit tests.

Run against a dev cluster (``synergy dev-cluster up``, then export SLURM_CONF): submits a
mix of jobs (GPU kinds, non-GPU, held, array, het, --mem), waits a moment, and writes
``squeue --json``, ``sinfo --json``, ``scontrol show partition -o`` and
``scontrol show job -o`` into tests/slurm/fixtures/ with the Slurm version in the name.
Cancels its jobs at the end. With ``--own-shape``: only held GPU jobs that set their own
cores or memory (``-c``, ``--mem-per-cpu``, ``--ntasks-per-node``, ``--exclusive``,
``--mem=0``) and one that does not, as ``squeue_own_shape_<version>.json``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).resolve().parents[2] / "tests" / "slurm" / "fixtures"

SUBMISSIONS = [
    ["--gpus=2", "--cpus-per-gpu=3", "--mem-per-gpu=2G", "--job-name=gpus2"],
    ["-N2", "--gpus-per-node=8", "--job-name=multinode"],
    ["-c2", "--mem=1G", "--job-name=nogpu"],
    ["--hold", "--gpus=1", "--job-name=held"],
    ["-n2", "--gpus-per-task=1", "--job-name=pertask"],
    ["--gres=gpu:1", "--job-name=gres1", "--comment=synergy:key=res18"],
    ["--array=0-2", "--gpus=1", "--job-name=array"],
    ["--gpus=1", "--mem=10G", "--no-requeue", "--job-name=memnode"],
    ["--gpus=8", "--cpus-per-gpu=3", "--job-name=waits"],
]


# Held, so squeue shows them as the controller sees a pending job; the names say which.
OWN_SHAPE = [
    ["--hold", "--gpus=2", "--job-name=plain"],
    ["--hold", "--gpus=2", "-c8", "--job-name=cpus-per-task"],
    ["--hold", "--gpus=1", "--mem-per-cpu=4G", "--job-name=mem-per-cpu"],
    ["--hold", "--gpus-per-node=2", "--ntasks-per-node=2", "--job-name=ntasks-per-node"],
    ["--hold", "--gpus=1", "--exclusive", "--job-name=exclusive"],
    ["--hold", "--gpus=1", "--mem=0", "--job-name=mem0"],
    ["--hold", "--gpus=1", "--mem=10G", "--job-name=mem10g"],
]


def sh(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def main() -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write("#!/bin/sh\nsleep 120\n")
        script = f.name
    if "--own-shape" in sys.argv:
        own_shape(script)
        return
    ids = []
    for extra in SUBMISSIONS:
        out = sh("sbatch", "--parsable", "-o", "/dev/null", *extra, script)
        ids.append(out.strip().split(";")[0])
    het = sh("sbatch", "--parsable", "-o", "/dev/null", "--job-name=het", "--gpus=1", ":",
             "-c1", script)
    ids.append(het.strip().split(";")[0])
    time.sleep(3)
    squeue = sh("squeue", "--json")
    meta = json.loads(squeue)["meta"]
    version = (meta.get("Slurm") or meta.get("slurm"))["release"]   # 22.05: "Slurm"
    (OUT / f"squeue_{version}.json").write_text(squeue)
    if int(version.split(".")[0]) >= 23:
        # sinfo --json has no per-node records from 23.02; the reader uses scontrol.
        (OUT / f"nodes_{version}.json").write_text(sh("scontrol", "show", "nodes", "--json"))
    else:
        (OUT / f"sinfo_{version}.json").write_text(sh("sinfo", "--json"))
    (OUT / f"partitions_{version}.txt").write_text(sh("scontrol", "show", "partition", "-o"))
    (OUT / f"scontrol_jobs_{version}.txt").write_text(sh("scontrol", "show", "job", "-o"))
    sh("scancel", *ids)
    print(f"recorded Slurm {version} output for {len(ids)} submissions in {OUT}")


def own_shape(script: str) -> None:
    ids = [sh("sbatch", "--parsable", "-o", "/dev/null", *extra, script).strip()
           for extra in OWN_SHAPE]
    time.sleep(3)
    squeue = sh("squeue", "--json")
    meta = json.loads(squeue)["meta"]
    version = (meta.get("Slurm") or meta.get("slurm"))["release"]
    (OUT / f"squeue_own_shape_{version}.json").write_text(squeue)
    sh("scancel", *ids)
    print(f"recorded Slurm {version}: {len(ids)} held jobs")


if __name__ == "__main__":
    main()
