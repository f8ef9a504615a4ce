"""What running jobs use, from Slurm's job accounting: ``sstat`` (needs a
``JobAcctGatherType`` other than none; the dev cluster with accounting uses
jobacct_gather/linux).

``sstat -a -n -P -o JobID,TRESUsageInTot -j J1,J2`` prints one line per running step
(``J.batch``, ``J.extern``, ``J.0``...) with its TRES usage so far: ``cpu=`` the CPU time of
all its tasks (``[D-]HH:MM:SS``, or ``MM:SS.mmm``) and ``mem=`` the sum of its tasks' peak
resident memory (bytes with a K/M/G/T suffix). A job's use is the sum over its steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Skipped

SSTAT_FIELDS = ("JobID", "TRESUsageInTot")
_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$")
_MB = {"": 1 / 1024 / 1024, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2,
       "P": 1024.0 ** 3}
# A step: JOB.STEP, ARRAYJOB_TASK.STEP (an array task is named by its array), JOB+N.STEP.
_STEP = re.compile(r"^(\d+(?:_\d+)?)(?:\+\d+)?\.(\w+)$")


@dataclass(frozen=True)
class JobUse:
    """A running job's use so far: CPU seconds over all its steps and the sum of their
    peak resident memory (MB). ``job`` is the job as sstat names it: ``12``, or
    ``7_3`` for task 3 of array 7."""

    job: str
    cpu_s: float
    peak_mem_mb: float


def parse_sstat(raw: str) -> tuple[dict[str, JobUse], list[Skipped]]:
    """``sstat -a -n -P -o JobID,TRESUsageInTot`` output, per job (steps summed)."""
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    skipped: list[Skipped] = []
    for lineno, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < 2:
            skipped.append(Skipped(f"sstat line {lineno}", "expected JobID|TRESUsageInTot"))
            continue
        m = _STEP.match(fields[0].strip())
        if not m:
            skipped.append(Skipped(f"sstat line {lineno}", f"step {fields[0][:40]!r}"))
            continue
        job_id = m.group(1)
        try:
            tres = dict(kv.split("=", 1) for kv in fields[1].split(",") if "=" in kv)
            c = cpu_seconds(tres.get("cpu", "0"))
            r = mem_mb(tres.get("mem", "0"))
        except ValueError as exc:
            skipped.append(Skipped(f"sstat line {lineno} (job {job_id})", str(exc)))
            continue
        cpu[job_id] = cpu.get(job_id, 0.0) + c
        mem[job_id] = mem.get(job_id, 0.0) + r
    return {j: JobUse(j, cpu[j], mem[j]) for j in cpu}, skipped


def sstat_name(job_id: int, array_job_id: int | None, array_task_id: int | None) -> str:
    """How sstat names a job: an array task by its array's id and its index."""
    if array_job_id and array_task_id is not None:
        return f"{array_job_id}_{array_task_id}"
    return str(job_id)


def cpu_seconds(value: str) -> float:
    """``1-02:03:04`` / ``02:03:04`` / ``03:04.500`` / ``0`` as seconds."""
    v = value.strip()
    days = 0
    if "-" in v:
        d, v = v.split("-", 1)
        if not d.isdigit():
            raise ValueError(f"CPU time {value!r}")
        days = int(d)
    parts = v.split(":")
    if not 1 <= len(parts) <= 3:
        raise ValueError(f"CPU time {value!r}")
    try:
        nums = [float(p) for p in parts]
    except ValueError:
        raise ValueError(f"CPU time {value!r}") from None
    secs = 0.0
    for n in nums:
        secs = secs * 60 + n
    return days * 86400 + secs


def mem_mb(value: str) -> float:
    """``1232K`` / ``12.5M`` / ``2G`` / ``0`` (bytes) as MB."""
    m = _MEM.match(value.strip())
    if not m:
        raise ValueError(f"memory {value!r}")
    return float(m.group(1)) * _MB[m.group(2).upper()]
