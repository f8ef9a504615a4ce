"""Workloads: recorded traces (headerless CSV) and Philly-derived generated traces.

A trace row is ``job_id,model,arrival,iterations,gpus``; arrival is in seconds of
simulated time, iterations are counted at the model's proportional iteration time.
"""

from __future__ import annotations

import csv
import math
import random
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..core import PerGpu, Profile
from ..errors import BadInputError
from .jobsets import CLASSES

# Multi-GPU traces draw GPU counts from {1, 2, 4, 8, 16} with these weights: mostly small
# jobs with a tail of large ones, the shape of the Philly trace's GPU demand.
MULTI_GPU_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16)
MULTI_GPU_WEIGHTS: tuple[float, ...] = (0.70, 0.10, 0.10, 0.07, 0.03)


class TraceError(BadInputError):
    """A trace file that cannot be replayed."""


@dataclass(frozen=True)
class TraceJob:
    job_id: int
    model: str
    arrival: float
    iterations: int
    gpus: int
    # Slurm's priority where a history recorded it (higher starts first under the
    # ``slurm`` policy); 0 in generated and CSV traces.
    priority: int = 0
    # Who submitted it ("" where the trace does not say) and, for a mislabelled job (its
    # key is not its own), the model it really is: it is planned by ``model``'s profile
    # but runs, and uses cores and memory, as ``true_model``.
    user: str = ""
    true_model: str = ""
    # A history's job that opted in to requeues (synergy:requeue-ok): with
    # SimConfig.requeue_opt_in only such jobs are requeued.
    requeue_ok: bool = False
    # How Slurm saw it (the controller model; the paper's rounds ignore these): its
    # partition ("": the first pool) and GPU type ("": any), GPUs per node of a per-node
    # request (0: Slurm chooses the nodes), its time limit (0: none), the share it asked
    # for without synergy (None: its partition's default), and the time it asked to wait
    # for (--begin, a dependency, a user's hold; None: none).
    partition: str = ""
    gpu_type: str = ""
    gpus_per_node: int = 0
    time_limit_s: float = 0.0
    share: PerGpu | None = None
    eligible: float | None = None
    # Its run: seconds of work at the proportional share (0: from ``iterations`` and the
    # profile), start-up seconds that no share speeds up, and, for a job whose outcome is
    # fixed (it hit its time limit, failed or was cancelled), how long it ran whatever it
    # is given (0: not fixed).
    work_s: float = 0.0
    startup_s: float = 0.0
    fixed_s: float = 0.0
    # What synergy changes about it (``decide.Change``: reshape, release, leave), where a
    # history says (whatif); "": by its profile alone, reshaped when it has one, else
    # released (generated and CSV traces).
    change: str = ""
    # Cores per GPU on the poorest of its nodes where the history shows Slurm laid it out
    # unevenly over several (0: evenly, or not known): run with the share it had and
    # spread over nodes again, it runs at that node's pace (a data-parallel job waits for
    # its slowest part). A share synergy gives is taken as laid out per GPU: 22.05 laid an
    # explicit cores-per-GPU, the controller's too, out evenly where the nodes had the
    # cores (tests/slurm/test_release_facts_on_slurm.py).
    spread_cpus: float = 0.0


def read_trace(path: str | Path, profiles: Mapping[str, Profile] | None = None) -> list[TraceJob]:
    """Read a headerless trace CSV; every line is checked and errors name the line."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read trace {path}: {exc}") from exc
    jobs: list[TraceJob] = []
    seen: set[int] = set()
    for lineno, row in enumerate(csv.reader(text.splitlines()), start=1):
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) != 5:
            raise TraceError(f"{path}:{lineno}: expected job_id,model,arrival,iterations,"
                             f"gpus, got {len(row)} fields")
        try:
            job = TraceJob(int(row[0]), row[1].strip(), float(row[2]),
                           int(float(row[3])), int(row[4]))
        except ValueError as exc:
            raise TraceError(f"{path}:{lineno}: {exc}") from None
        if job.job_id in seen:
            raise TraceError(f"{path}:{lineno}: duplicate job id {job.job_id}")
        if job.gpus < 1 or job.iterations < 1 or job.arrival < 0 or \
                not math.isfinite(job.arrival):
            raise TraceError(f"{path}:{lineno}: gpus and iterations must be >= 1 and "
                             "arrival >= 0")
        if profiles is not None and job.model not in profiles:
            raise TraceError(f"{path}:{lineno}: no profile for model {job.model!r}")
        seen.add(job.job_id)
        jobs.append(job)
    if not jobs:
        raise TraceError(f"{path}: no jobs")
    return jobs


def write_trace(path: str | Path, jobs: Sequence[TraceJob]) -> None:
    """The trace as :func:`read_trace` reads it back exactly: arrivals as exact seconds
    (whole seconds without a fraction, else Python's round-trip form), LF line ends."""
    with Path(path).open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        for j in jobs:
            a = j.arrival
            arrival = str(int(a)) if a == int(a) else repr(a)
            w.writerow([j.job_id, j.model, arrival, j.iterations, j.gpus])


def philly_jobs(profiles: Mapping[str, Profile], jobs_per_hour: float,
                split: Sequence[float] = (20, 70, 10), multi_gpu: bool = False,
                seed: int = 0) -> Iterator[TraceJob]:
    """An endless Philly-derived arrival stream (SYNERGY.md, "Workloads").

    Duration at proportional speed: 60 * 10**U(1.5, 3) s with probability 0.8, else
    60 * 10**U(3, 4) s. Poisson arrivals: gap = ceil(-ln(1-U) / rate * 3600) s. The class
    follows ``split`` (image, language, speech) and models go round-robin inside a class.
    Every draw comes from one seeded generator, so a seed is one trace.
    """
    if jobs_per_hour <= 0:
        raise ValueError("jobs_per_hour must be positive")
    rng = random.Random(seed)
    classes = [(name, [m for m in models if m in profiles])
               for name, models in CLASSES.items()]
    weights = [w if models else 0.0 for w, (_, models) in zip(split, classes, strict=True)]
    if sum(weights) <= 0:
        raise ValueError("the split selects no class with profiles")
    next_model = dict.fromkeys(CLASSES, 0)
    arrival = 0.0
    job_id = 0
    while True:
        cls, models = rng.choices(classes, weights=weights)[0]
        model = models[next_model[cls] % len(models)]
        next_model[cls] += 1
        if rng.random() < 0.8:
            duration = 60 * 10 ** rng.uniform(1.5, 3)
        else:
            duration = 60 * 10 ** rng.uniform(3, 4)
        gpus = rng.choices(MULTI_GPU_SIZES, weights=MULTI_GPU_WEIGHTS)[0] if multi_gpu else 1
        iter_time = profiles[model].iter_time_s or 1.0
        iterations = max(1, round(duration / iter_time))
        yield TraceJob(job_id, model, arrival, iterations, gpus)
        job_id += 1
        arrival += math.ceil(-math.log(1 - rng.random()) / jobs_per_hour * 3600)


def mislabel(trace: Iterable[TraceJob], share: float, as_key: str, users: int = 20,
             seed: int = 0) -> Iterator[TraceJob]:
    """``trace`` with its jobs spread over ``users`` users (``u0``..), and every job of the
    first ``share`` of them labelled ``as_key`` whatever it really is: users who name a
    CPU-hungry profile for jobs that are not (by mistake, or to get more cores). A job
    that really is ``as_key`` stays honest."""
    if not 0 <= share <= 1:
        raise ValueError("the mislabelled share must be between 0 and 1")
    rng = random.Random(seed)
    liars = round(share * users)
    for job in trace:
        u = rng.randrange(users)
        if u < liars and job.model != as_key:
            yield replace(job, model=as_key, true_model=job.model, user=f"u{u}")
        else:
            yield replace(job, user=f"u{u}")
