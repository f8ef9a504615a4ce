"""What squeue says of jobs in every state: for watching a set of jobs to their end (the
demo, the benchmarks), each job's state and the cores and memory it holds.

``squeue -t all`` lists finished jobs too, for ``MinJobAge`` seconds after their end, so a
job's final state is seen there; one that is gone was purged before it was seen.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger(__name__)

# Id, state (long form), cores, TRES (``cpu=3,mem=62500M,...``: the memory held), each
# field at full width and ended by ``|``.
FIELDS = "JobID:0|,State:0|,NumCPUs:0|,tres-alloc:0|"
_UNITS_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0 ** 2}
# Where a job ends for good; a requeued job passes through PENDING again, and a state not
# named here (STOPPED, SIGNALING, ...) is not an end.
ENDED = frozenset({"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL",
                   "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL", "DEADLINE"})
_ROW = re.compile(r"^(\d+)\|([A-Z_]+)\|(\d+)(?:\|([^|]*))?\|?$")
_MEM = re.compile(r"(?:^|,)mem=([0-9.]+)([KMGT]?)")


class Runs(Protocol):
    def run(self, command: str, args: list[str]) -> str: ...


@dataclass(frozen=True)
class QueueRow:
    """One job: its id, its state (squeue's long form: RUNNING, COMPLETED...), its
    cores and its memory in MB (held while it runs, asked for while it waits; 0 where
    squeue did not say)."""

    job_id: int
    state: str
    cpus: int
    mem_mb: float = 0.0

    @property
    def ended(self) -> bool:
        return self.state in ENDED

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"


def parse_rows(text: str) -> list[QueueRow]:
    """``squeue -h -O`` :data:`FIELDS` output (``id|state|cpus|tres|``; without the TRES,
    the memory reads 0); a line that is not such fields is skipped with a logged reason
    (an array task's or a het job's id, a truncated line)."""
    out = []
    for line in text.splitlines():
        m = _ROW.match(line.strip().replace(" ", ""))
        if m is None:
            if line.strip():
                log.debug("squeue line skipped (not id|state|cpus|tres): %r", line)
            continue
        mem = _MEM.search(m[4] or "")
        out.append(QueueRow(int(m[1]), m[2], int(m[3]),
                            float(mem[1]) * _UNITS_MB[mem[2] or "M"] if mem else 0.0))
    return out


def all_rows(cli: Runs) -> list[QueueRow]:
    """Every job squeue still lists, finished ones included."""
    return parse_rows(cli.run("squeue", ["-h", "-t", "all", "-O", FIELDS]))
