"""How long a running job has left: what a requeue into a larger share is worth.

A requeue pays only when the time it saves on the job's remaining work exceeds the
restart's cost, so that remaining work must be what the job really has left, not its time
limit (a 1-minute job with a 1-hour limit would be requeued for savings it does not have).
The sources, best first (:func:`classify.remaining` chooses): the job's own progress
reports (``[usage] progress_dir``, a ``total`` line: its samples left over its recent
throughput), its key's typical run (the state store keeps how long each key's recent
jobs ran, at the proportional speed), its time limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..core import JobSpec, PerGpu
from ..core.demand import speedup_of
from ..decide.view import Left
from ..slurm.model import SlurmJob
from ..userfiles import user_uid
from .actions import current_shape, share_of
from .classify import remaining, requeue_ok
from .state import StateStore
from .usage import progress_left_s


@dataclass(frozen=True)
class Run:
    """A running job with a profile: its key, start and the seconds it has run so far at
    the proportional speed (what its key's history keeps)."""

    job_id: int
    key: str
    started: float
    prop_s: float


def speed_now(job: SlurmJob, spec: JobSpec, fair: PerGpu) -> float:
    """The job's speedup over proportional at the share it holds (1 without a profile)."""
    return speedup_of(spec, share_of(current_shape(job, fair)), fair)


def with_left(job: SlurmJob, spec: JobSpec, fair: PerGpu, progress_dir: str,
              typical: Mapping[str, tuple[float, int]]) -> JobSpec:
    """A running job that may be requeued, with its time left from the best source there
    is (its progress file is read only for such a job: no other needs it)."""
    if not (job.running and spec.profile is not None and requeue_ok(job)):
        return spec
    speed = speed_now(job, spec, fair)
    uid = user_uid(job.user) if progress_dir else None
    prog = progress_left_s(progress_dir, job.job_id, uid) if uid is not None else None
    t = typical.get(spec.profile_key)
    rem, source = remaining(job, spec.attained_s,
                            Left(prog, t[0] if t else None, t[1] if t else 0, speed))
    return replace(spec, remaining_s=rem, remaining_from=source)


def runs(pairs: Iterable[tuple[SlurmJob, JobSpec, PerGpu]]) -> list[Run]:
    """The running jobs with a key and a profile, for their key's history."""
    return [Run(j.job_id, s.profile_key, float(j.start_time), s.attained_s * speed_now(j, s, f))
            for j, s, f in pairs
            if j.running and j.start_time and s.profile_key and s.profile is not None]


def note_runs(state: StateStore, running: Iterable[Run], pending: Iterable[int],
              now: float) -> None:
    """Keep this round's runs; a job pending again (requeued) loses its cut-short run."""
    state.note_runs(((r.job_id, r.key, r.started, r.prop_s) for r in running), now,
                    requeued=pending)
