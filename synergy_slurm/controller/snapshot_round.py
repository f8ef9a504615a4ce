"""One round planned on a saved snapshot instead of the live Slurm (``synergy controller
replay``): what the controller would do there and the Slurm changes it would send.

The round runs as in enforce mode against a recording writer (``slurm.fake``), so every
change it would make is listed, and nothing is sent anywhere: its state, audit log and
hook table go to a temporary directory that is removed, automatic profiling is off (no job
is submitted), and the clock is the snapshot's. The profiles are read as configured.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import Config
from ..slurm.commands import SlurmCLI
from ..slurm.fake import FakeWriter
from ..slurm.ports import Reader
from .audit import AuditLog
from .daemon import Controller, RoundResult
from .state import StateStore


@dataclass(frozen=True)
class SnapshotRound:
    result: RoundResult
    # What the writer was asked, in order: ("reshape", job id, Shape), ("release", job id)...
    calls: list[tuple[Any, ...]]


def plan_on_snapshot(cfg: Config, reader: Reader, taken_at: float | None = None) -> SnapshotRound:
    """Plan one round on what ``reader`` gives, at ``taken_at`` (default: now)."""
    clock: Callable[[], float] = (lambda: taken_at) if taken_at is not None else time.time
    with tempfile.TemporaryDirectory(prefix="synergy-replay-") as tmp:
        where = Path(tmp)
        quiet = replace(
            cfg, hook=replace(cfg.hook, state_dir=str(where)),
            controller=replace(cfg.controller, mode="enforce", metrics_port=0,
                               state_db=str(where / "state.db"),
                               audit_log=str(where / "audit.jsonl")),
            profiling=replace(cfg.profiling, auto=False))
        writer = FakeWriter(enforce=True)
        ctl = Controller(quiet, SlurmCLI.for_config(cfg.slurm), "enforce", clock,
                         reader=reader, writer=writer, state=StateStore(":memory:"),
                         audit=AuditLog(where / "audit.jsonl"))
        result = ctl.run_round()
    return SnapshotRound(result, list(writer.calls))
