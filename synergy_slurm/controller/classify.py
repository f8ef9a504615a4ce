"""Which Slurm jobs synergy manages, and what the core sees of them.

A job is managed when it asks for GPUs in a managed partition, its user and the job itself
did not opt out, and it has a shape synergy can change (:func:`vocabulary.not_reshaped`,
the rule the hook applies at submission too). Everything else is skipped with a reason and
never touched (a job the hook held but the controller does not manage is released);
running jobs of any kind still count as used resources. A pending array's record stands
for its tasks that have not started: they are planned as the tasks they are, side by side
(:func:`array_tasks`), and the record gets the shape planned for its first task (one
update shapes them all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..config import Config
from ..core import JobSpec, Profile, pick_profile
from ..decide import JobFacts, opted_in_to_requeue, what_synergy_changes
from ..decide.view import Facts, Left, time_left
from ..decide.view import job_spec as decide_job_spec
from ..slurm.model import SlurmJob
from ..vocabulary import KEY_RE, comment_profile_key
from ..vocabulary import dataset_gb as comment_dataset_gb

# A job with no time limit: assume a week left (only SRTF/FTF ordering uses it).
UNKNOWN_REMAINING_S = 7 * 24 * 3600.0


@dataclass(frozen=True)
class Verdict:
    managed: bool
    reason: str


def profile_key(job: SlurmJob) -> str | None:
    key = job.tags.get("profile")
    if key and KEY_RE.match(key):
        return key
    return comment_profile_key(job.comment)


def dataset_gb(job: SlurmJob) -> float | None:
    """The dataset size synergy-sbatch --dataset-size recorded (GB), if any and sane."""
    return comment_dataset_gb(job.comment)


def requeue_ok(job: SlurmJob) -> bool:
    """The user said the job checkpoints (synergy-sbatch --requeue-ok) and Slurm allows it
    (``decide.opted_in_to_requeue``, the rule whatif's replay applies too)."""
    return opted_in_to_requeue(job.comment, job.requeue, job.batch)


def classify(job: SlurmJob, cfg: Config, optout_users: frozenset[str]) -> Verdict:
    """Whether synergy manages the job: the one rule the hook and whatif share
    (``decide.what_synergy_changes``); its profile does not matter here (an unknown one is
    managed too: released with the shape it has)."""
    d = what_synergy_changes(JobFacts(
        job.gpus if job.has_gpus else 0, job.gpu_request,
        managed_partition=job.home_partition in cfg.hook.partitions,
        user_opted_out=job.user in optout_users, comment=job.comment))
    if d.reason == "partition not managed":
        return Verdict(False, f"partition {job.home_partition or '?'} not managed")
    if not d.managed:
        return Verdict(False, d.reason.removeprefix("not reshaped: "))
    return Verdict(True, "managed")


def runnable(job: SlurmJob, can_lower: bool = False) -> bool:
    """Pending and waiting only for resources (or held by synergy itself); where Slurm
    honours lowering a pending job, also one synergy shaped that now waits on a QOS or
    association limit (planned again under the limit, it is lowered to fit)."""
    if not job.pending:
        return False
    if job.held_by_synergy or (job.priority > 0 and job.waits_for_resources):
        return True
    return can_lower and limit_blocked(job)


def limit_blocked(job: SlurmJob) -> bool:
    """A pending job synergy shaped (hook or controller) that waits on a cores or memory
    limit of its QOS or association."""
    return job.priority > 0 and "profile" in job.tags and job.waits_on_core_or_memory_limit


def remaining(job: SlurmJob, elapsed: float, left: Left | None) -> tuple[float, str]:
    """The seconds a job has left at the proportional speed, and what says so
    (``decide.time_left``: progress reports, its key's typical run, its time limit, else a
    week). A requeue is worth what it saves on this time, so the requeue says which."""
    limit = float(job.time_limit_s) if job.time_limit_s else None
    return time_left(limit, elapsed, left, UNKNOWN_REMAINING_S)


def job_spec(job: SlurmJob, now: float, profiles: Mapping[str, Profile],
             gpu_types: frozenset[str] = frozenset({""}), left: Left | None = None
             ) -> JobSpec:
    """The core's view of a job (``decide.job_spec``, the model builds it alike); its
    profile is the one for its key on the GPU types of the nodes it may run on
    (``core.pick_profile``: none measured on another type)."""
    key = profile_key(job) or ""
    started = job.start_time if job.running and job.start_time else None
    return decide_job_spec(Facts(
        job.job_id, job.gpus, float(job.submit_time),
        float(job.time_limit_s) if job.time_limit_s else None,
        max(0.0, now - started) if started else 0.0, UNKNOWN_REMAINING_S,
        profile=pick_profile(profiles, key, gpu_types), key=key, user=job.user,
        priority=job.priority, gpus_per_node=per_node_request(job), left=left))


def per_node_request(job: SlurmJob) -> int:
    """The GPUs per node a ``--gres``/``--gpus-per-node`` job asked for (Slurm gives it
    exactly that on each of its nodes); 0 for ``--gpus=N``, whose nodes Slurm chooses."""
    k = job.gpus_per_node or 0
    return k if k and not job.gpus_per_job and job.gpus % k == 0 else 0


# Ids of an array's further pending tasks in a plan: above any Slurm job id (MaxJobId is at
# most 0x03ff0000), so with equal priority and submission they are ordered after the record.
TASK_ID_BASE = 1 << 40
TASKS_PER_ARRAY = 1 << 20


def array_tasks(job: SlurmJob, spec: JobSpec, started: Mapping[int, int], pool_gpus: int
                ) -> list[JobSpec]:
    """The core's view of a pending array record: its first task (``spec`` itself) and the
    tasks that could start beside it: every pending task, within the array's throttle less
    its tasks already started (``started``: by array id), and no more than the pool's GPUs
    hold. Each further task has its own id (``TASK_ID_BASE`` + ...); nothing is ever
    written for those ids."""
    if not job.pending_array or job.array_pending_tasks <= 1:
        return [spec]
    n = job.array_pending_tasks
    if job.array_throttle and job.array_job_id is not None:
        n = min(n, job.array_throttle - started.get(job.array_job_id, 0))
    n = max(1, min(n, pool_gpus // max(job.gpus, 1), TASKS_PER_ARRAY - 1))
    base = TASK_ID_BASE + job.job_id * TASKS_PER_ARRAY
    return [spec, *(replace(spec, id=base + i) for i in range(1, n))]
