"""Jobs from ``squeue -O`` text: the fields planning needs, read as text.

Why: at a big site ``squeue --json`` spends seconds serialising every field of every job
(10,000 pending + 2,000 running: 2.6 s on 22.05, 9.8 s on 26.05,
``benchmarks/slurmctld_load.py``), while the same RPC printed as text takes 0.2 s. This
reader asks for only the fields :class:`~.model.SlurmJob` holds and builds the same records
as the JSON parser (``tests/controller/test_text_reader_on_slurm.py`` compares them field by
field on every release).

Safety: every field is followed by a token drawn at random for each read, and the fields a
user writes (name, comment) come last. Nothing in a job's name or comment can therefore
shift a field or forge another record: a user cannot know the token before the read.

What text does not say, and how it is filled in:
- A job's allocation per node: a job on one node holds all its ``tres-alloc`` there. A
  running job over several nodes is left for the JSON reader (``needs_detail``), which the
  reader asks for those jobs only.
- The base state under a flag (text shows ``RESIZING`` for a running job that resizes,
  ``CONFIGURING`` for one whose nodes boot): mapped back by :data:`_FLAG_BASE`.
- Memory per CPU against memory per node (``MinMemory`` drops Slurm's flag): per CPU when
  the memory the job holds (or asks for) is that value times its cores on more than one
  core.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..vocabulary import LIVE_STATES
from .model import NodeAlloc, Skipped, SlurmJob
from .parse import (
    NO_VAL,
    _throttle,
    count_array_tasks,
    expand_hostlist,
    gpu_asks,
    gpu_request_fields,
    per_gpu_value,
    requested_gpus,
)
from .release import Release
from .units import duration_s, size_mb, tres_items

# (squeue -O field, our name), in output order: the fields a user writes come last.
FIELDS: tuple[tuple[str, str], ...] = (
    ("JobID", "job_id"), ("ArrayJobID", "array_job_id"), ("ArrayTaskID", "array_task"),
    ("HetJobID", "het_job_id"), ("State", "state"), ("Reason", "reason"),
    ("PriorityLong", "priority"), ("Partition", "partition"), ("UserName", "user"),
    ("Account", "account"), ("QOS", "qos"), ("tres-per-job", "per_job"),
    ("tres-per-node", "per_node"), ("tres-per-task", "per_task"),
    ("tres-per-socket", "per_socket"), ("tres-alloc", "tres"),
    ("cpus-per-tres", "cpus_per_tres"), ("mem-per-tres", "mem_per_tres"),
    ("MinMemory", "min_memory"), ("NumCPUs", "cpus"), ("NumNodes", "nodes_n"),
    ("NumTasks", "tasks"), ("NodeList", "nodes"), ("RestartCnt", "restarts"),
    ("Requeue", "requeue"), ("BatchFlag", "batch"), ("SubmitTime", "submit"),
    ("StartTime", "start"), ("EligibleTime", "eligible"), ("TimeLimit", "limit"),
    ("Reservation", "reservation"), ("admin_comment", "admin_comment"), ("Name", "name"),
    ("Comment", "comment"),
)
# Times as seconds since the epoch, whatever the locale.
TIME_ENV = {"SLURM_TIME_FORMAT": "%s"}
# The state text shows for a job with a flag set, and the base state under it.
_FLAG_BASE = {"RESIZING": "RUNNING", "CONFIGURING": "RUNNING", "SIGNALING": "RUNNING",
              "REQUEUED": "PENDING", "REQUEUE_HOLD": "PENDING", "REQUEUE_FED": "PENDING",
              "SPECIAL_EXIT": "PENDING", "RESV_DEL_HOLD": "PENDING"}
_NONE = ("", "(null)", "N/A", "None")


def new_token() -> str:
    """A separator no job's text can contain: drawn for each read."""
    return "~" + secrets.token_hex(8) + "~"


def format_arg(token: str) -> str:
    """``squeue -O``'s argument: each field at full width (size 0), followed by ``token``;
    the last one also by a newline marker, so a record ends with ``token + "E"``."""
    cols = [f"{name}:0{token}" for name, _ in FIELDS[:-1]]
    return ",".join([*cols, f"{FIELDS[-1][0]}:0{token}E"])


@dataclass(frozen=True)
class TextJobs:
    """One text read: the jobs, the records skipped with the reason, and the running jobs
    over several nodes whose allocation per node the text does not show (job id, and what
    it holds as one string: its start, restarts, nodes and TRES, to know it again)."""

    jobs: tuple[SlurmJob, ...]
    skipped: tuple[Skipped, ...]
    needs_detail: tuple[tuple[int, str], ...]


def parse_text_jobs(raw: str, token: str, release: Release) -> TextJobs:
    jobs: list[SlurmJob] = []
    skipped: list[Skipped] = []
    detail: list[tuple[int, str]] = []
    end = token + "E"
    for record in raw.split(end):
        record = record.lstrip("\n")
        if not record.strip():
            continue
        values = record.split(token)
        if len(values) != len(FIELDS):
            skipped.append(Skipped(f"job {values[0][:20]!r}", f"{len(values)} fields in its "
                                   f"squeue line, {len(FIELDS)} asked for"))
            continue
        rec = dict(zip((ours for _, ours in FIELDS), (v.strip() for v in values),
                       strict=True))
        try:
            job = text_job(rec, release)
        except (KeyError, ValueError) as exc:
            skipped.append(Skipped(f"job {rec['job_id']}", f"{type(exc).__name__}: {exc}"))
            continue
        if job.state not in LIVE_STATES:
            continue
        jobs.append(job)
        if job.running and len(job.nodes) > 1:
            detail.append((job.job_id, "|".join(rec[k] for k in ("start", "restarts",
                                                                  "nodes", "tres"))))
    return TextJobs(_throttles_shared(jobs), tuple(skipped), tuple(detail))


def _throttles_shared(jobs: list[SlurmJob]) -> tuple[SlurmJob, ...]:
    """Started array tasks with their array's ``%N`` throttle, which text shows only on
    the record of the tasks not started (the JSON on every task)."""
    caps = {j.array_job_id: j.array_throttle for j in jobs
            if j.array_job_id is not None and j.array_task_id is None and j.array_throttle}
    return tuple(replace(j, array_throttle=caps[j.array_job_id])
                 if j.array_task_id is not None and j.array_job_id in caps else j
                 for j in jobs)


def _opt(value: str) -> str:
    return "" if value in _NONE else value


def _int(value: str, default: int = 0) -> int:
    return default if value in _NONE else int(value)


def _time(value: str) -> int:
    """Seconds since the epoch (``SLURM_TIME_FORMAT=%s``); 0 for N/A, Unknown, None."""
    return int(value) if value.isdigit() else 0


def _limit_s(value: str) -> int | None:
    if value.upper() in ("UNLIMITED", "INFINITE", "NOT_SET", *_NONE):
        return None
    return int(duration_s(value)) or None


def text_job(rec: dict[str, str], release: Release) -> SlurmJob:
    """One job from its text fields: the same record the JSON parser builds."""
    job_id = int(rec["job_id"])
    if job_id <= 0:
        raise ValueError("missing job_id")
    word = rec["state"].upper()
    state = _FLAG_BASE.get(word, word)
    if not state:
        raise ValueError("missing state")
    asked = gpu_asks(lambda per: _opt(rec[f"per_{per}"]))
    num_nodes = _int(rec["nodes_n"], 1) or 1
    num_tasks = _int(rec["tasks"], 0) or None
    names = tuple(expand_hostlist(_opt(rec["nodes"])))
    # Text shows no GPUs held per node: what the job asked for.
    gpus = requested_gpus(*asked, max(num_nodes, len(names) or 1), num_tasks)
    tres = tres_items(_opt(rec["tres"]))
    cpus = _int(rec["cpus"], 0) or int(tres.get("cpu", "0") or 0)
    held_mb = int(size_mb(tres["mem"])) if tres.get("mem") else 0
    mem_per_gpu = per_gpu_value(_opt(rec["mem_per_tres"]))
    asked_mb = 0 if state == "PENDING" and release.blurs_request_memory else held_mb
    mem_node, mem_cpu = _memory(_opt(rec["min_memory"]), asked_mb, mem_per_gpu, gpus,
                                num_nodes, cpus)
    priority = _int(rec["priority"], 0)
    reason = "" if rec["reason"] in ("(null)", "N/A") else rec["reason"]
    array_id, task_id, pending, throttle = _array(rec, job_id, state)
    return SlurmJob(
        job_id=job_id, user=rec["user"], state=state, partition=_opt(rec["partition"]),
        gpus=gpus, account=_opt(rec["account"]), qos=_opt(rec["qos"]),
        **gpu_request_fields(*asked), num_nodes=num_nodes, num_tasks=num_tasks, cpus=cpus,
        cpus_per_gpu=per_gpu_value(_opt(rec["cpus_per_tres"])), mem_per_gpu_mb=mem_per_gpu,
        mem_per_node_mb=mem_node, mem_per_cpu_mb=mem_cpu, nodes=names,
        alloc=(NodeAlloc(names[0], cpus, held_mb, gpus),)
        if state != "PENDING" and len(names) == 1 else (),
        restarts=_int(rec["restarts"], 0), requeue=rec["requeue"] == "1",
        batch=rec["batch"] != "0",
        held=priority == 0 and state == "PENDING" and "Held" in reason,
        priority=priority, reason=reason, comment=_opt(rec["comment"]),
        admin_comment=_opt(rec["admin_comment"]), name=_opt(rec["name"]),
        submit_time=_time(rec["submit"]), start_time=_time(rec["start"]),
        array_job_id=array_id, array_task_id=task_id, array_pending_tasks=pending,
        array_throttle=throttle, het_job_id=_int(rec["het_job_id"], 0) or None,
        time_limit_s=_limit_s(rec["limit"]), eligible_time=_time(rec["eligible"]),
        reservation=_opt(rec["reservation"]), resizing=word == "RESIZING",
    )


def _memory(min_memory: str, asked_mb: int, mem_per_gpu: int | None, gpus: int,
            num_nodes: int, cpus: int) -> tuple[int | None, int | None]:
    """(memory per node, memory per CPU) the job asked for; None where it did not.

    ``MinMemory`` is 22.05's --mem or --mem-per-cpu (0 for neither); from 23.02 it
    mirrors memory per GPU for a job that has one, and only the memory held (or asked
    for) tells a --mem beside it, as in the JSON parser."""
    value = int(size_mb(min_memory)) if min_memory else 0
    if not value:
        return None, None
    if mem_per_gpu is not None:
        if not asked_mb or asked_mb == mem_per_gpu * gpus:
            return None, None
        return asked_mb // max(num_nodes, 1), None
    if cpus > 1 and asked_mb == value * cpus:
        return None, value
    return value, None


def _array(rec: dict[str, str], job_id: int, state: str
           ) -> tuple[int | None, int | None, int, int]:
    """As the JSON parser's: the array's id, this task's id (None for the record of the
    tasks not started), how many tasks that record stands for, the array's throttle."""
    task = _opt(rec["array_task"])
    if not task:
        return None, None, 0, 0
    array_id = _int(rec["array_job_id"], 0) or job_id
    if task.isdigit() and int(task) < NO_VAL:
        return array_id, int(task), 0, 0
    pending = count_array_tasks(task) if state == "PENDING" else 0
    return array_id, None, pending, _throttle(task)


def squeue_args(token: str, states: Sequence[str]) -> list[str]:
    """squeue's arguments for one text read of the jobs in ``states``."""
    return ["-h", "-t", ",".join(states), "-O", format_arg(token)]


# -- one job's fields, as the writer reads them back --------------------------------------
# (squeue -O field, the key ``scontrol show job`` prints it under). The writer reads these
# after each change; read as ``scontrol show job -o`` text, a job name or comment holding
# ``JobState=PENDING AllocTRES=...`` would override the real values (the name comes before
# JobState, the comment before CpusPerTres, so neither the first nor the last occurrence of
# a key is safe there). Between random tokens, no user text can shift or forge a field.
WRITER_FIELDS: tuple[tuple[str, str], ...] = (
    ("JobID", "JobId"), ("State", "JobState"), ("Reason", "Reason"),
    ("tres-alloc", "AllocTRES"), ("cpus-per-tres", "CpusPerTres"),
    ("mem-per-tres", "MemPerTres"), ("NumCPUs", "NumCPUs"),
)


def job_fields_args(job_id: int, token: str) -> list[str]:
    """``squeue`` arguments for one job's (or one array's) records, every state."""
    cols = [f"{name}:0{token}" for name, _ in WRITER_FIELDS[:-1]]
    fmt = ",".join([*cols, f"{WRITER_FIELDS[-1][0]}:0{token}E"])
    return ["-h", "-t", "all", "-j", str(int(job_id)), "-O", fmt]


def parse_job_fields(raw: str, token: str) -> list[dict[str, str]]:
    """Each record as ``{scontrol key: value}``; a record that does not hold every field
    is dropped. Unset values are empty; a state under a flag is its base state, as the
    text reader reads it (``REQUEUE_HOLD``: PENDING; ``COMPLETING`` stays: a requeued
    job is not pending until it has completed); a reason's spaces become ``_``, as
    scontrol shows them (``Memory_resize_to_..._failed``)."""
    out = []
    for record in raw.split(token + "E"):
        values = record.lstrip("\n").split(token)
        if len(values) != len(WRITER_FIELDS):
            continue
        rec = {key: _opt(v.strip()) for (_, key), v in zip(WRITER_FIELDS, values, strict=True)}
        rec["JobState"] = _FLAG_BASE.get(rec["JobState"], rec["JobState"])
        rec["Reason"] = rec["Reason"].replace(" ", "_")
        out.append(rec)
    return out
