"""Running Slurm's commands: argument lists only, a timeout on every call, typed errors."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..config import SlurmSection
from ..errors import SynergyError

log = logging.getLogger(__name__)

# What may appear in an argument we pass to a Slurm command: keys, numbers, TRES strings,
# node names and lists, and our own admin-comment text. No spaces, quotes, newlines or
# shell metacharacters (they would reach nothing here, but Slurm parses some values).
_SAFE_ARG = re.compile(r"^[A-Za-z0-9_.:,=@%/+\-\[\]]*$")


class SlurmError(SynergyError, RuntimeError):
    """A Slurm command failed; ``command`` is its argument list."""

    def __init__(self, message: str, command: Sequence[str] = (), returncode: int | None = None,
                 stderr: str = "") -> None:
        super().__init__(message)
        self.command = list(command)
        self.returncode = returncode
        self.stderr = stderr


class SlurmTimeout(SlurmError):
    """slurmctld did not answer in time (busy, restarting or rate-limiting)."""


class SlurmUnavailable(SlurmError):
    """The command is missing or slurmctld cannot be reached."""


def safe_arg(value: str) -> str:
    if not _SAFE_ARG.match(value):
        raise ValueError(f"refusing unsafe Slurm argument {value!r}")
    return value


# The Slurm commands synergy runs; anything else is refused.
COMMANDS = frozenset({"squeue", "sinfo", "scontrol", "sbatch", "scancel", "sacct", "sstat",
                      "sacctmgr"})


@dataclass
class SlurmCLI:
    """Runs squeue/sinfo/scontrol/sbatch/scancel with ``SLURM_CONF`` and a timeout."""

    slurm_conf: str | None = None
    timeout_s: float = 30.0
    bindir: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    calls: int = 0

    @classmethod
    def for_config(cls, section: SlurmSection, timeout_s: float | None = None) -> SlurmCLI:
        """The commands ``[slurm]`` names: its config file, bin directory and timeout."""
        return cls(section.conf or None, section.timeout_s if timeout_s is None else timeout_s,
                   section.bindir or None)

    def env(self) -> dict[str, str]:
        """The environment of our Slurm commands, and of programs that call Slurm's in
        turn (synergy-sbatch from the demo): this config, and this bin directory first."""
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        if self.bindir:
            env["PATH"] = f"{self.bindir}:{env.get('PATH', '')}"
        env.update(self.extra_env)
        return env

    def binary(self, name: str) -> str:
        if name not in COMMANDS:
            raise ValueError(f"refusing to run {name!r}: not a Slurm command synergy uses")
        if self.bindir:
            return os.path.join(self.bindir, name)
        found = shutil.which(name)
        if found is None:
            raise SlurmUnavailable(f"{name} not found on PATH", [name])
        return found

    def run(self, command: str, args: Sequence[str], timeout_s: float | None = None,
            input_text: str | None = None, env: Mapping[str, str] | None = None) -> str:
        """The command's standard output; ``env`` adds to its environment (a format
        variable such as ``SLURM_TIME_FORMAT``)."""
        argv = [self.binary(command), *args]
        limit = timeout_s if timeout_s is not None else self.timeout_s
        self.calls += 1
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, env={**self.env(), **(env or {})},
                                  capture_output=True, text=True,
                                  timeout=limit, input=input_text, check=False)
        except FileNotFoundError:
            raise SlurmUnavailable(f"{command} not found", argv) from None
        except subprocess.TimeoutExpired:
            raise SlurmTimeout(f"{command} timed out after {limit:.0f} s", argv) from None
        log.debug("%s took %.3f s (rc %s)", " ".join(argv[:3]), time.monotonic() - t0,
                  proc.returncode)
        if proc.returncode != 0:
            err = (proc.stderr or proc.stdout).strip()
            cls = SlurmUnavailable if _unreachable(err) else SlurmError
            shown = " ".join(a if len(a) <= 60 else a[:57] + "..." for a in args[:3])
            raise cls(f"{command} {shown} failed ({proc.returncode}): {err[:300]}",
                      argv, proc.returncode, err)
        return proc.stdout


def _unreachable(err: str) -> bool:
    low = err.lower()
    return any(s in low for s in ("unable to contact slurm controller", "connection refused",
                                  "socket timed out", "zero bytes were transmitted",
                                  "slurm_persist_conn_open", "unable to establish"))
