"""Reading the job-shaping options of an sbatch command line into a hook Submission.

Only the options the hook looks at are interpreted; every other option is accepted and
ignored (it passes to sbatch unchanged). Values are turned into the TRES strings slurmctld
puts in job_desc, e.g. ``--gpus=2`` -> ``tres_per_job=gres:gpu:2``.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Sequence

from ..errors import BadInputError
from ..slurm.units import size_mb
from ..vocabulary import NO_VAL
from .rules import Submission


class SbatchArgError(BadInputError):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("-G", "--gpus")
    p.add_argument("--gpus-per-node")
    p.add_argument("--gpus-per-task")
    p.add_argument("--gpus-per-socket")
    p.add_argument("--gres")
    p.add_argument("--cpus-per-gpu")
    p.add_argument("--mem-per-gpu")
    p.add_argument("--mem")
    p.add_argument("--mem-per-cpu")
    p.add_argument("-p", "--partition")
    p.add_argument("--comment")
    p.add_argument("-N", "--nodes")
    p.add_argument("--reservation")
    p.add_argument("-c", "--cpus-per-task")
    p.add_argument("--ntasks-per-node")
    p.add_argument("--exclusive", nargs="?", const="exclusive")
    return p


def own_shape(ns: argparse.Namespace) -> str:
    """How a job sets its own cores or memory (a key of vocabulary.OWN_SHAPE), or ""."""
    if ns.cpus_per_task is not None:
        return "cpus-per-task"
    if ns.mem_per_cpu is not None:
        return "mem-per-cpu"
    if ns.ntasks_per_node is not None:
        return "ntasks-per-node"
    if ns.exclusive is not None:
        return "exclusive"
    if ns.mem is not None and re.fullmatch(r"0+[KMGT]?", ns.mem.strip(), re.IGNORECASE):
        return "mem0"
    return ""


def _min_nodes(value: str | None) -> int:
    """``-N 2``, ``-N 2-4``, ``-N 1,3`` (sizes): the smallest node count."""
    if value is None:
        return 1
    m = re.match(r"\s*(\d+)", value)
    if not m:
        raise SbatchArgError(f"--nodes: expected a count, got {value!r}")
    return max(1, int(m.group(1)))


def _count(digits: str, what: str, value: str) -> None:
    """A count Slurm can hold (a 32-bit number below its NO_VAL): sbatch refuses a larger
    one, so the hook never sees it and explain must not say it "manages" the job."""
    if int(digits) >= NO_VAL:
        raise SbatchArgError(f"{what}: {value!r} is more than Slurm can count")


def _size(value: str | None, what: str) -> None:
    """A memory size as sbatch takes it (``4000``, ``16G``: K, M, G, T; bare is MB)."""
    if value is None:
        return
    try:
        mb = size_mb(value)
    except ValueError:
        raise SbatchArgError(f"{what}: expected a size like 16G or 4000M, got "
                             f"{value!r}") from None
    _count(str(int(mb)), what, value)


def _tres(value: str | None, what: str) -> str:
    """``2`` -> ``gres:gpu:2``; ``a100:2`` -> ``gres:gpu:a100:2``."""
    if value is None:
        return ""
    v = value.strip()
    m = re.fullmatch(r"(?:[A-Za-z0-9_.\-]+:)?(\d+)", v)
    if not m:
        raise SbatchArgError(f"{what}: expected [type:]count, got {value!r}")
    _count(m.group(1), what, value)
    return f"gres:gpu:{v}"


def _gres(value: str | None) -> str:
    """``--gres=gpu:2`` / ``gpu:a100:2`` / ``gpu`` -> per-node TRES (non-GPU gres dropped)."""
    if value is None:
        return ""
    out = []
    for item in value.split(","):
        item = item.strip()
        if item == "gpu":
            out.append("gres:gpu:1")
        elif item.startswith("gpu:"):
            out.append("gres:" + item)
    return ",".join(out)


def submission_from_args(args: Sequence[str], uid: int = 0) -> Submission:
    """The first component's submission (the options up to the script; a ``:`` or an
    ``#SBATCH hetjob`` line makes the job heterogeneous)."""
    args = list(args)
    het = ":" in args or "hetjob" in args
    if het:
        args = args[:min(i for i, a in enumerate(args) if a in (":", "hetjob"))]
    try:
        ns, _ = _parser().parse_known_args(args)
    except argparse.ArgumentError as exc:
        raise SbatchArgError(str(exc)) from None
    for opt in ("cpus_per_gpu",):
        v = getattr(ns, opt)
        if v is not None and not re.fullmatch(r"\d+", v.strip()):
            raise SbatchArgError(f"--cpus-per-gpu: expected a number, got {v!r}")
        if v is not None:
            _count(v.strip(), "--cpus-per-gpu", v)
    for size, what in ((ns.mem_per_gpu, "--mem-per-gpu"), (ns.mem, "--mem"),
                       (ns.mem_per_cpu, "--mem-per-cpu")):
        _size(size, what)
    per_node = ",".join(x for x in (_tres(ns.gpus_per_node, "--gpus-per-node"),
                                    _gres(ns.gres)) if x)
    return Submission(
        uid=uid, partition=(ns.partition or "").split(",")[0], comment=ns.comment or "",
        tres_per_job=_tres(ns.gpus, "--gpus"), tres_per_node=per_node,
        tres_per_task=_tres(ns.gpus_per_task, "--gpus-per-task"),
        tres_per_socket=_tres(ns.gpus_per_socket, "--gpus-per-socket"),
        cpus_per_tres=f"gres:gpu:{ns.cpus_per_gpu}" if ns.cpus_per_gpu else "",
        mem_per_tres=f"gres:gpu:{ns.mem_per_gpu}" if ns.mem_per_gpu else "",
        mem_per_node=ns.mem is not None, mem_per_cpu=ns.mem_per_cpu is not None,
        min_nodes=_min_nodes(ns.nodes), het=het, reservation=ns.reservation or "",
        own_shape=own_shape(ns))


# sbatch options that never take a separate value (those with an optional value take it
# only as --opt=value); every other option takes the next argument unless given --opt=v.
_LONG_FLAGS = frozenset({
    "--contiguous", "--exclusive", "--get-user-env", "--help", "--hold", "--ignore-pbs",
    "--nice", "--no-kill", "--no-requeue", "--overcommit", "--oversubscribe", "--parsable",
    "--propagate", "--quiet", "--reboot", "--requeue", "--spread-job", "--test-only",
    "--usage", "--use-min-nodes", "--verbose", "--version", "--wait"})
_SHORT_FLAGS = frozenset("HOQVWhksv")


def script_index(args: Sequence[str], more_flags: frozenset[str] = frozenset()
                 ) -> int | None:
    """Where the batch script is in an sbatch command line: the first argument that is
    neither an option nor an option's value (None when there is none, e.g. --wrap).
    ``more_flags``: other long options without a value that may be mixed in."""
    long_flags = _LONG_FLAGS | more_flags
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--":
            return i + 1 if i + 1 < len(args) else None
        if a.startswith("--"):
            i += 1 if "=" in a or a in long_flags else 2
        elif a.startswith("-") and len(a) > 1:
            i += 1 if a[1] in _SHORT_FLAGS or len(a) > 2 else 2
        else:
            return i
    return None


def script_directives(text: str) -> list[str]:
    """The ``#SBATCH`` options of a script, as sbatch reads them (up to the first command);
    command-line options given after them win, as with sbatch."""
    out: list[str] = []
    for line in text.splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            out += shlex.split(stripped[len("#SBATCH"):], comments=True)
        elif stripped and not stripped.startswith("#"):
            break
    return out
