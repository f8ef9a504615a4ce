"""Lowerings Slurm took and then ignored, caught when the job starts.

Read back while the job is pending, a lowering can look done when it is not: 22.05 shows
the new ``CpusPerTres`` and ``NumCPUs`` of a job its scheduler had already evaluated, and
then starts the job with the cores it cached (seen on the dev cluster: read back 2 cores,
started with 8). Only the job's allocation tells. So every lowering of cores the writer
called done is remembered until the job starts; one that starts holding more cores than it
was lowered to is reported as ignored (log, audit, state, metric), never left as done.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..slurm.model import SlurmJob
from ..slurm.writer import Shape


@dataclass(frozen=True)
class Ignored:
    """A lowering the job's allocation does not show."""

    job: SlurmJob
    asked: Shape
    held_cpus: int

    @property
    def why(self) -> str:
        return (f"Slurm started job {self.job.job_id} with {self.held_cpus} cores for "
                f"{self.job.gpus} GPUs where synergy lowered it to "
                f"{self.asked.cpus_per_gpu} cores/GPU: the lowering was ignored")


class LoweredWatch:
    """The lowerings sent and read back as done, until their jobs start or leave."""

    def __init__(self) -> None:
        self._sent: dict[int, Shape] = {}

    def note(self, job_id: int, before: Shape | None, after: Shape | None) -> None:
        """A change the writer called done; remembered when it lowered the cores."""
        if before is not None and after is not None and \
                after.cpus_per_gpu < before.cpus_per_gpu:
            self._sent[job_id] = after
        else:
            self._sent.pop(job_id, None)

    def check(self, jobs: Sequence[SlurmJob]) -> list[Ignored]:
        """The remembered jobs that now run with more cores than they were lowered to;
        a job that started (either way) or left is forgotten."""
        out = []
        seen = {j.job_id: j for j in jobs}
        for job_id, asked in list(self._sent.items()):
            job = seen.get(job_id)
            if job is not None and job.pending:
                continue
            del self._sent[job_id]
            if job is None or not job.running or not job.gpus:
                continue
            held = sum(a.cpus for a in job.alloc) or job.cpus
            if held > job.gpus * asked.cpus_per_gpu:
                out.append(Ignored(job, asked, held))
        return out

    def __len__(self) -> int:
        return len(self._sent)
