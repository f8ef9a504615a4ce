#!/usr/bin/env python3
"""Record a real job history for the sacct parser's unit tests.

Run against a dev cluster with accounting (``synergy dev-cluster up --accounting``, then
export SLURM_CONF and PATH as it prints): runs a small mix of jobs to their ends (a GPU job
naming its profile, one without GPUs, one that fails, one cancelled while pending, one
requeued and run again, one still running at the export) and writes ``sacct -D --json``
and ``sacct -D -P`` (synergy whatif's text fields; -D: every run of a requeued job) into
tests/slurm/fixtures/ with the Slurm version in the name. Cancels the running job at the
end. (A job cancelled while held never became eligible: sacct -S does not list it.)
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from synergy_slurm.slurm.sacct import PRIORITY_FIELDS

OUT = Path(__file__).resolve().parents[2] / "tests" / "slurm" / "fixtures"


def sh(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def sbatch(*args: str) -> str:
    return sh("sbatch", "--parsable", "-o", "/dev/null", *args).strip().split(";")[0]


def state(jid: str) -> str:
    return sh("squeue", "-h", "-j", jid, "-o", "%T").strip()


def wait_gone(*ids: str, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while any(state(j) for j in ids):
        if time.monotonic() > end:
            raise SystemExit(f"jobs {ids} still in the queue")
        time.sleep(0.5)


def main() -> None:
    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 5))
    ok = sbatch("--gpus=2", "--comment=synergy:profile=res18", "--job-name=res18-train",
                "--wrap", "sleep 2")
    cpu = sbatch("-c4", "--mem=2G", "--job-name=preprocess", "--wrap", "sleep 2")
    bad = sbatch("--gpus=1", "--job-name=crash", "--wrap", "exit 3")
    held = sbatch("--hold", "--gpus=1", "--job-name=never", "--wrap", "sleep 1")
    again = sbatch("--gpus=1", "--requeue", "--job-name=requeued", "--wrap", "sleep 4")
    while state(again) != "RUNNING":
        time.sleep(0.3)
    time.sleep(1)
    sh("scontrol", "requeue", again)
    sh("scancel", held)
    wait_gone(ok, cpu, bad, held, again, timeout=240)   # the requeue waits ~cred_expire
    running = sbatch("--gpus=1", "--job-name=still-running", "--wrap", "sleep 120")
    # slurmdbd hears of the start a moment after slurmctld does.
    while "RUNNING" not in sh("sacct", "-n", "-X", "-j", running, "-o", "State"):
        time.sleep(0.3)
    raw = sh("sacct", "-a", "-X", "-D", "--json", "-S", start)
    meta = json.loads(raw)["meta"]
    version = (meta.get("Slurm") or meta.get("slurm"))["release"]
    (OUT / f"sacct_{version}.json").write_text(raw)
    (OUT / f"sacct_{version}.txt").write_text(
        sh("sacct", "-a", "-X", "-D", "-P", "-o", ",".join(PRIORITY_FIELDS), "-S", start))
    sh("scancel", running)
    print(f"recorded Slurm {version}'s history in {OUT}")


if __name__ == "__main__":
    main()
