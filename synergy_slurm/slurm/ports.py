"""The adapter's two faces as the controller sees them: what it reads from Slurm and what
it asks Slurm to change. The real ones are ``SlurmReader`` (or ``PyslurmReader``) and
``SlurmWriter``; ``slurm.fake`` ships a pair that needs no Slurm (tests, trials)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from .limits import SiteLimits
from .model import SlurmJob, Snapshot
from .release import Release
from .sstat import JobUse
from .writer import Shape


class Reader(Protocol):
    @property
    def release(self) -> Release:
        """The running release (raises SlurmError while Slurm cannot be read)."""
        ...

    def snapshot(self) -> Snapshot: ...

    def limits(self) -> SiteLimits | None: ...

    def usage(self, jobs: Sequence[SlurmJob]) -> dict[int, JobUse]: ...

    def contains_jobs(self) -> bool: ...


class Writer(Protocol):
    enforce: bool

    def reshape_pending(self, job: SlurmJob, shape: Shape) -> object: ...

    def release(self, job_id: int) -> None: ...

    def release_own(self, job: SlurmJob) -> None: ...

    def clear_held_tag(self, job: SlurmJob) -> None: ...

    def requeue_reshape(self, job: SlurmJob, shape: Shape) -> None: ...

    def lower_running_memory(self, job: SlurmJob, mem_per_gpu_mb: int) -> None: ...

    def batch_script(self, job_id: int) -> str: ...

    def submit_as(self, user: str, gid: int, args: list[str], script: str,
                  script_args: list[str]) -> int: ...
