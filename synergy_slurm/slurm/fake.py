"""A Slurm that needs no Slurm: a reader of given snapshots and a writer that records what
it is asked to do (and fails on request). Shipped beside the real adapter so that tests
and trials drive the controller through the same faces (``slurm.ports``)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from .commands import SlurmError
from .limits import SiteLimits
from .model import SlurmJob, Snapshot
from .release import Release
from .sstat import JobUse
from .writer import NotEnforcing, Shape


class FakeReader:
    """Gives ``snap`` (or raises it, when it is an exception) on every read."""

    def __init__(self, snap: Snapshot | Exception, limits: SiteLimits | None = None,
                 release: str = "22.05.8", contains: bool = True) -> None:
        self.snap = snap
        self.site = limits
        self.release = Release.parse(release)
        self.contains = contains
        self.used: dict[int, JobUse] = {}

    def snapshot(self) -> Snapshot:
        if isinstance(self.snap, Exception):
            raise self.snap
        return self.snap

    def limits(self) -> SiteLimits | None:
        return self.site

    def usage(self, jobs: Sequence[SlurmJob]) -> dict[int, JobUse]:
        ids = {j.job_id for j in jobs}
        return {j: u for j, u in self.used.items() if j in ids}

    def contains_jobs(self) -> bool:
        return self.contains


class FakeWriter:
    """Records each call as a tuple (``("reshape", job_id, shape)``, ...); a call whose
    name is in ``fail`` raises SlurmError after it is recorded."""

    def __init__(self, enforce: bool = True, fail: frozenset[str] = frozenset()) -> None:
        self.enforce = enforce
        self.fail = fail
        self.calls: list[tuple[Any, ...]] = []
        self.next_job_id = 9000

    def _do(self, *call: Any) -> None:
        if not self.enforce:
            raise NotEnforcing(f"not enforcing: refusing {call[0]}")
        self.calls.append(call)
        if call[0] in self.fail:
            raise SlurmError(f"simulated {call[0]} failure")

    def reshape_pending(self, job: SlurmJob, shape: Shape) -> None:
        self._do("reshape", job.job_id, shape)

    def release(self, job_id: int) -> None:
        self._do("release", job_id)

    def release_own(self, job: SlurmJob) -> None:
        """Release, then clear the held tag; a failed clear is only logged (as the real
        writer does): the job is released either way."""
        self._do("release", job.job_id)
        if "synergy.held=1" in job.admin_comment.split(","):
            with contextlib.suppress(SlurmError):
                self._do("untag", job.job_id)

    def clear_held_tag(self, job: SlurmJob) -> None:
        with contextlib.suppress(SlurmError):
            self._do("untag", job.job_id)

    def requeue_reshape(self, job: SlurmJob, shape: Shape) -> None:
        self._do("requeue", job.job_id, shape)

    def lower_running_memory(self, job: SlurmJob, mem_per_gpu_mb: int) -> None:
        self._do("shrink", job.job_id, mem_per_gpu_mb)

    def batch_script(self, job_id: int) -> str:
        return f"#!/bin/sh\n# job {job_id}\n"

    def submit_as(self, user: str, gid: int, args: list[str], script: str,
                  script_args: list[str]) -> int:
        self._do("submit", user, tuple(args), script, tuple(script_args))
        self.next_job_id += 1
        return self.next_job_id
