"""How a training job tells the profiler its progress: one line per step in a file.

The harness sets ``SYNERGY_PROGRESS_FILE``; outside profiling every call here is a no-op,
so a job can keep the calls in production. Two ways to use it:

    from profiler.progress import track
    for batch in track(loader, batch_size=256):     # wraps any iterable
        train_step(batch)

    from profiler.progress import Progress
    with Progress(batch_size=256) as p:              # explicit steps
        for batch in loader:
            train_step(batch)
            p.step()

A job that cannot import this writes the lines itself: ``<monotonic seconds> <samples>``
appended to $SYNERGY_PROGRESS_FILE after every iteration (see sbatch_templates/README.md).
The core count to use for data-loader workers and intra-op threads is in
``SYNERGY_PROFILE_CPUS`` (see :func:`granted_cpus`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from typing import IO, TypeVar

T = TypeVar("T")
ENV_FILE = "SYNERGY_PROGRESS_FILE"
ENV_CPUS = "SYNERGY_PROFILE_CPUS"
# In production (not profiling): a directory the controller reads ([usage] progress_dir,
# exported by synergy-sbatch); the job writes <dir>/<SLURM_JOB_ID>.progress there.
ENV_DIR = "SYNERGY_PROGRESS_DIR"
# Steps between two ``total`` lines: the controller reads a progress file's last 16 KB.
TOTAL_EVERY = 100


def progress_path() -> str | None:
    """Where progress goes: the profiler's file, else the job's file in the controller's
    progress directory, else nowhere."""
    path = os.environ.get(ENV_FILE)
    if path:
        return path
    where, job = os.environ.get(ENV_DIR, ""), os.environ.get("SLURM_JOB_ID", "")
    if where and job.isdigit() and os.path.isdir(where):
        return os.path.join(where, f"{job}.progress")
    return None


def granted_cpus(default: int | None = None) -> int:
    """The cores this run may use: the profiler's allotment, else the affinity mask."""
    env = os.environ.get(ENV_CPUS, "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return default or os.cpu_count() or 1


class Progress:
    """Appends ``<time> <samples>`` per step to :func:`progress_path` (if any).

    With ``total`` (the samples the whole run processes) a line ``total <total> <done>``,
    first and every ``TOTAL_EVERY`` steps (the controller reads a file's end only), says
    how far the job has to go (``done``: the samples processed so far, those of an earlier
    run resumed from a checkpoint included): the controller then knows the time the job has
    left from its own steps, where otherwise it would guess from its key's history or its
    time limit (what a requeue saves depends on it). The profiler skips the line."""

    def __init__(self, batch_size: int = 1, path: str | None = None, total: int = 0,
                 done: int = 0) -> None:
        self.batch_size = batch_size
        self.path = path if path is not None else progress_path()
        self.total, self.done = total, done
        self._steps = 0
        self._fh: IO[str] | None = None

    def __enter__(self) -> Progress:
        if self.path:
            try:
                self._fh = open(self.path, "a", buffering=1)
            except OSError:
                self._fh = None   # progress is a courtesy: never the end of a training job
        self._steps = 0
        self._total_line(" run")
        return self

    def _total_line(self, mark: str = "") -> None:
        """``total <samples> <done>``; the first of a run (a restart from a checkpoint
        too) ends in ``run``: the steps before it, and the gap, are not this run's speed."""
        if self._fh is not None and self.total > 0:
            self._fh.write(f"total {int(self.total)} {max(0, int(self.done))}{mark}\n")

    def step(self, samples: int | None = None) -> None:
        if self._fh is not None:
            n = samples or self.batch_size
            self._fh.write(f"{time.monotonic():.6f} {n}\n")
            self.done += n
            self._steps += 1
            if self._steps % TOTAL_EVERY == 0:
                self._total_line()

    def __exit__(self, *exc: object) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


def track(iterable: Iterable[T], batch_size: int = 1) -> Iterator[T]:
    """Yield from ``iterable``, reporting one step per item."""
    with Progress(batch_size) as p:
        for item in iterable:
            yield item
            p.step()
