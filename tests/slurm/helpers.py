"""Helpers for tests on the real cluster: submit, wait, cancel."""

from __future__ import annotations

import time
from pathlib import Path

from synergy_slurm.slurm.commands import SlurmCLI
from synergy_slurm.slurm.parse import parse_kv_line, per_gpu_value


def job_fields(cli: SlurmCLI, job_id: int) -> dict[str, str]:
    """``scontrol show job -o J`` as a dict (what a test checks a job by)."""
    out = cli.run("scontrol", ["show", "job", "-o", str(int(job_id))])
    line = out.strip().splitlines()[0] if out.strip() else ""
    return parse_kv_line(line)


def submit(cli: SlurmCLI, script: str, *opts: str, tmp: Path) -> int:
    path = tmp / f"job{time.monotonic_ns()}.sh"
    path.write_text("#!/bin/sh\n" + script + "\n")
    out = cli.run("sbatch", ["--parsable", *opts, str(path)])
    return int(out.strip().split(";")[0])


def wait_for(cli: SlurmCLI, job_id: int, states: set[str], timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    fields: dict = {}
    while time.monotonic() < deadline:
        fields = job_fields(cli, job_id)
        if fields.get("JobState") in states:
            return fields
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} not in {states} after {timeout_s} s: "
                         f"{fields.get('JobState')} {fields.get('Reason')}")


def wait_file(path: Path, needle: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and needle in path.read_text():
            return path.read_text()
        time.sleep(0.3)
    raise AssertionError(f"{needle!r} not in {path} after {timeout_s} s: "
                         f"{path.read_text() if path.exists() else '(missing)'}")


def per_gpu(fields: dict[str, str], key: str) -> int | None:
    """``CpusPerTres``/``MemPerTres`` as a number: 22.05 shows ``gres:gpu:9``, 26.05
    ``gres/gpu:9`` (and ``gpu:3`` for a partition default)."""
    return per_gpu_value(fields.get(key, ""))


def cancel_all(cli: SlurmCLI) -> None:
    # By user: a heterogeneous job's components cannot be cancelled one by one.
    for user in sorted(set(cli.run("squeue", ["-h", "-o", "%u"]).split())):
        cli.run("scancel", ["-u", user])
    deadline = time.monotonic() + 30
    while cli.run("squeue", ["-h", "-o", "%A"]).split() and time.monotonic() < deadline:
        time.sleep(0.3)


def squeue_fields_answer(args: list[str], **fields: str) -> str:
    """What ``squeue`` prints for the writer's read-back (``squeue_text.job_fields_args``)
    of a job with these scontrol-named fields (JobId, JobState, ...; absent ones unset):
    for fake CLIs in tests that need no Slurm."""
    from synergy_slurm.slurm.squeue_text import WRITER_FIELDS

    token = args[args.index("-O") + 1].split(",")[0].split(":0", 1)[1]
    return "".join(fields.get(key, "N/A") + token for _, key in WRITER_FIELDS) + "E\n"
