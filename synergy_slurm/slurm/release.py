"""What the running Slurm release offers, detected once from ``scontrol --version``.

Each capability names the first release that has it (docs/slurm-notes.md has the table and
the tests behind each row). The reader and the writer ask here instead of comparing
version numbers themselves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .commands import SlurmCLI, SlurmError

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


@dataclass(frozen=True)
class Release:
    major: int
    minor: int
    micro: int = 0

    @classmethod
    def parse(cls, text: str) -> Release:
        """``slurm-wlm 26.05.5`` / ``slurm 22.05.8`` -> Release(26, 5, 5); ``26.05``
        (a release named by an admin) -> Release(26, 5, 0)."""
        m = _VERSION.search(text)
        if not m:
            raise ValueError(f"no Slurm version in {text.strip()[:80]!r}")
        return cls(int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor:02d}.{self.micro}"

    def at_least(self, major: int, minor: int) -> bool:
        return (self.major, self.minor) >= (major, minor)

    @property
    def json_filters(self) -> bool:
        """``squeue --json`` honours -t/-j/-u (22.05 ignores every filter)."""
        return self.at_least(23, 2)

    @property
    def scontrol_json(self) -> bool:
        """``scontrol show nodes --json`` (``sinfo --json`` became a summary by partition
        and state in 23.02 and lost the per-node records)."""
        return self.at_least(23, 2)


    @property
    def blurs_request_memory(self) -> bool:
        """24.x's job records show a node's whole memory as the request of every job
        without --mem, so a pending job's --mem cannot be told from the partition's memory
        per GPU (22.05 and 25.05+ show what was asked)."""
        return self.major == 24

    @property
    def prefers_idle_node(self) -> bool:
        """cons_tres puts a ``--gpus=N`` job on an idle node that holds it whole before
        the node it would fill (22.05 takes the tightest: core.backfill.eval_nodes; with no
        idle node, 24.11 and 26.05 do too):
        tests/slurm/test_release_facts_on_slurm.py::test_where_cons_tres_puts_gpu_jobs."""
        return self.at_least(24, 11)

    @property
    def lowers_pending(self) -> bool:
        """Lowering a pending job's cores takes effect after the scheduler has looked at
        the job (22.05 ignores it: hence the hook's hold). Verified on 26.05; the releases
        between are not assumed to."""
        return self.at_least(26, 5)

    @property
    def lowers_running_memory(self) -> bool:
        """``scontrol update JobId= MinMemoryNode=`` lowers a running job's memory in place
        (never raises it), for jobs with an extern step (``PrologFlags=Contain``)."""
        return self.at_least(26, 5)


def detect(cli: SlurmCLI) -> Release:
    """The release of the Slurm commands ``cli`` runs."""
    out = cli.run("scontrol", ["--version"])
    try:
        return Release.parse(out)
    except ValueError as exc:
        raise SlurmError(f"cannot tell the Slurm release: {exc}") from None
