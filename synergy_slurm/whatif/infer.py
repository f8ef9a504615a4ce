"""A job's sensitivity class from what it used, for a site whose jobs carry no profile.

The rule, from the Synergy paper's workload model: an image model whose
data pipeline decodes and augments on the CPU keeps every core it is given busy and still
leaves its GPU waiting, so it gains from more cores; a language model leaves most of its
cores idle and runs as fast with fewer; speech models sit between. So, per job that ran long
enough (a minute) for start-up not to dominate:

- cores kept busy at least ``SATURATED`` of the time and GPUs, where recorded, busy less than
  ``GPU_BUSY``: **image** (input-bound);
- cores busy at most ``IDLE``: **language** (insensitive);
- anything between, or saturated cores with busy GPUs: **speech** (some gain).

A key's class is the one that covers most of its jobs' GPU-hours; its share says how sure.
Jobs are grouped into the keys a site would recognise (:func:`key_of`): one key per job
name, across the users who share it; generic names (``python``, ``train.sh``, a notebook)
by user and script.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..slurm.sacct import HistoryJob
from ..slurm.sacct_usage import JobUsage
from ..slurm.submit_line import command

SATURATED = 0.85
IDLE = 0.35
GPU_BUSY = 0.8
MIN_ELAPSED_S = 60.0
_KEY_CHARS = re.compile(r"[^\w.:\-]+")


def infer_class(use: JobUsage) -> tuple[str | None, str]:
    """The job's class and why; None (with the reason) where its use says nothing."""
    share = use.core_use
    if share is None:
        return None, "no CPU time recorded"
    if use.elapsed_s < MIN_ELAPSED_S:
        return None, f"ran {use.elapsed_s:.0f} s, under {MIN_ELAPSED_S:.0f} s"
    return class_of_use(share, use.gpu_util)


def class_of_use(share: float, gpu_util: float | None) -> tuple[str, str]:
    """The rule itself, on the share of its cores a job kept busy and its GPUs' mean
    utilisation (0-1; None: not recorded), for any measure of them free of start-up: a
    finished job's accounting, or a profiled point after its warm-up."""
    if share >= SATURATED:
        if gpu_util is not None and gpu_util >= GPU_BUSY:
            return "speech", f"cores {share:.0%} busy, GPUs {gpu_util:.0%} busy"
        return "image", f"cores {share:.0%} busy" + (
            f", GPUs {gpu_util:.0%} busy" if gpu_util is not None else "")
    if share <= IDLE:
        return "language", f"cores {share:.0%} busy"
    return "speech", f"cores {share:.0%} busy"


@dataclass(frozen=True)
class Candidate:
    """A key a site would recognise (:func:`key_of`), its jobs and GPU-hours, and the
    class its jobs' use suggests with the share of its GPU-hours that agree; who ran it and
    the command one of its jobs ran, where accounting kept the submit line."""

    key: str
    jobs: tuple[int, ...]
    gpu_hours: float
    cls: str | None
    agree: float
    gpus: int = 1           # the GPUs its jobs most often asked for
    users: tuple[str, ...] = ()
    command: str = ""


# Job names that say nothing of the model (a shell, an interpreter, a notebook, a script's
# usual name, Open OnDemand's apps): such jobs are grouped by user and script instead.
GENERIC_NAMES = frozenset({
    "python", "python3", "bash", "sh", "zsh", "srun", "sbatch", "wrap", "interactive",
    "jupyter", "jupyterlab", "notebook", "job", "run", "train", "test", "main",
    "train.sh", "run.sh", "job.sh", "submit.sh", "script.sh", "job.slurm", "train.py",
    "main.py", "run.py"})


def generic(name: str) -> bool:
    n = name.strip().lower()
    return not n or n in GENERIC_NAMES or n.startswith(("sys/", "jupyter", "ood-"))


def key_of(job: HistoryJob) -> str:
    """The key a site would recognise: the job name, shared by every user who ran it;
    for a generic name (:func:`generic`), ``user.script`` where the submit line names the
    script, else ``user.name``. In the characters a profile key allows."""
    name = job.name
    if generic(name):
        script = command(job.submit_line).split(" ")[0].rsplit("/", 1)[-1] \
            if job.submit_line else ""
        name = f"{job.user}.{script or name or 'job'}"
    key = _KEY_CHARS.sub("_", name).strip("_") or f"{job.user}.job"
    return key[:64]


def candidates(history: Iterable[HistoryJob], usage: Mapping[int, JobUsage]
               ) -> list[Candidate]:
    """The GPU jobs that ran, grouped by :func:`key_of`, most GPU-hours first."""
    groups: dict[str, dict[int, float]] = defaultdict(dict)     # key -> job -> GPU-hours
    sizes: dict[str, Counter[int]] = defaultdict(Counter)
    users: dict[str, set[str]] = defaultdict(set)
    commands: dict[str, str] = {}
    for j in history:
        if j.gpus > 0 and j.start is not None and j.end is not None and j.end > j.start:
            k = key_of(j)
            groups[k][j.job_id] = j.gpus * (j.end - j.start) / 3600
            sizes[k][j.gpus] += 1
            users[k].add(j.user)
            if j.submit_line and k not in commands:
                commands[k] = command(j.submit_line)
    out = []
    for key, hours in groups.items():
        votes: dict[str, float] = defaultdict(float)
        for job_id, h in hours.items():
            u = usage.get(job_id)
            cls = infer_class(u)[0] if u is not None else None
            if cls is not None:
                votes[cls] += h
        total = sum(hours.values())
        best = max(sorted(votes), key=lambda c: votes[c]) if votes else None
        out.append(Candidate(key, tuple(sorted(hours)), total, best,
                             votes[best] / total if best and total else 0.0,
                             sizes[key].most_common(1)[0][0], tuple(sorted(users[key])),
                             commands.get(key, "")))
    return sorted(out, key=lambda c: (-c.gpu_hours, c.key))
