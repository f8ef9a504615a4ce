"""What squeue says of jobs in every state: for watching a set of jobs to their end (the
demo, the benchmarks), each job's state and the cores it holds.

``squeue -t all`` lists finished jobs too, for ``MinJobAge`` seconds after their end, so a
job's final state is seen there; one that is gone was purged before it was seen.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

FORMAT = "%A|%T|%C"
# Where a job ends for good; a requeued job passes through PENDING again, and a state not
# named here (STOPPED, SIGNALING, ...) is not an end.
ENDED = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL",
                   "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
_ROW = re.compile(r"^(\d+)\|([A-Z_]+)\|(\d+)$")


class Runs(Protocol):
    def run(self, command: str, args: list[str]) -> str: ...


@dataclass(frozen=True)
class QueueRow:
    """One job: its id, its state (squeue's long form: RUNNING, COMPLETED...) and its
    cores (held while it runs, asked for while it waits)."""

    job_id: int
    state: str
    cpus: int

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def parse_rows(text: str) -> list[QueueRow]:
    """``squeue -h -o %A|%T|%C`` output; a line that is not three such fields is skipped
    with a logged reason (a het job's ``1+0`` id, a truncated line)."""
    out = []
    for line in text.splitlines():
        m = _ROW.match(line.strip().replace(" ", ""))
        if m is None:
            if line.strip():
                log.debug("squeue line skipped (not id|state|cpus): %r", line)
            continue
        out.append(QueueRow(int(m[1]), m[2], int(m[3])))
    return out


def all_rows(cli: Runs) -> list[QueueRow]:
    """Every job squeue still lists, finished ones included."""
    return parse_rows(cli.run("squeue", ["-h", "-t", "all", "-o", FORMAT]))
