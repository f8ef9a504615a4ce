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
from .units import duration_s, size_mb, tres_items

SSTAT_FIELDS = ("JobID", "TRESUsageInTot")
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
            tres = tres_items(fields[1])
            c = duration_s(tres.get("cpu", "0"))
            r = size_mb(tres.get("mem", "0"), bare="B")
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

