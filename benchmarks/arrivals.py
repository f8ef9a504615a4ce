"""The end-to-end benchmarks' skeleton: submitting a mix's jobs at their arrival times and
waiting for the queue to empty, once plain and once with the controller beside Slurm."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from synergy_slurm.config import config_from_dict
from synergy_slurm.controller.daemon import Controller
from synergy_slurm.slurm.commands import SlurmCLI


def submit_at_arrivals(cli: SlurmCLI, jobs: Sequence[Any],
                       sbatch_args: Callable[[Any], list[str]]) -> None:
    """``sbatch --parsable ARGS`` for each job at ``t0 + job.arrival``, then wait until
    squeue shows no job."""
    t0 = time.monotonic()
    for j in jobs:
        time.sleep(max(0.0, t0 + j.arrival - time.monotonic()))
        cli.run("sbatch", ["--parsable", *sbatch_args(j)])
    while cli.run("squeue", ["-h", "-o", "%A"]).split():
        time.sleep(0.5)


def plain_then_synergy(cfg_doc: dict[str, Any], run: Callable[[str], None],
                       after: Callable[[str, float], None]) -> dict[str, float]:
    """``run("plain")`` with no controller, then ``run("synergy")`` with the controller of
    ``cfg_doc`` running beside it (its first round writes the hook table first, so the hook
    holds or shapes every job); ``after(phase, since)`` once each run is over (``since``:
    the run's start, epoch seconds). The two runs' wall times."""
    walls = {}
    for phase in ("plain", "synergy"):
        stop, thread = threading.Event(), None
        if phase == "synergy":
            ctl = Controller(config_from_dict(cfg_doc))
            ctl.run_round()
            thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
            thread.start()
        since, t = time.time(), time.monotonic()
        try:
            run(phase)
            walls[phase] = time.monotonic() - t
        finally:
            if thread is not None:
                stop.set()
                thread.join(timeout=60)
        after(phase, since)
    return walls
