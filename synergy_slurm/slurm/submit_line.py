"""How a finished job asked for its GPUs, from what accounting kept of its submission.

``sacct --json`` keeps the command line a job was submitted with (``submit_line``, 23.02
and later), whether it was a heterogeneous job's component and its reservation. From those
the request is rebuilt as far as they tell (options given in the script's ``#SBATCH``
lines are not on the command line: a GPU job whose line names no GPU option is taken as
the common ``--gres``/``--gpus-per-node`` form), so whatif can say which GPU-hours ran in
shapes synergy does not reshape (vocabulary.not_reshaped, the hook's own rule).
The line is only split, never run.
"""

from __future__ import annotations

import shlex

from ..vocabulary import GpuRequest

_VALUE = {"-G": "--gpus", "-N": "--nodes", "-c": "--cpus-per-task"}
# sbatch's options that take no value; every other one takes the next word as its value.
_FLAGS = frozenset({"--exclusive", "--requeue", "--no-requeue", "--parsable", "--hold",
                    "-H", "--wait", "-W", "--quiet", "-Q", "--verbose", "-v", "--overcommit",
                    "-O", "--contiguous", "--spread-job", "--test-only", "--use-min-nodes",
                    "--reboot", "--ignore-pbs", "--no-kill", "-k", "--oversubscribe", "-s",
                    "--help", "-h", "--usage", "--version", "-V", "--get-user-env"})
_OWN = {"--cpus-per-task": "cpus-per-task", "--mem-per-cpu": "mem-per-cpu",
        "--ntasks-per-node": "ntasks-per-node"}


def _count(value: str) -> int | None:
    """``2``, ``a100:2`` or ``gpu:a100:2`` (the last field); None when not a number."""
    last = value.split(",")[0].rsplit(":", 1)[-1]
    return int(last) if last.isdigit() else None


def _options(submit_line: str) -> tuple[dict[str, str], list[str]]:
    """The line's sbatch options by long name, and the words from the script (or
    ``--wrap``) on; nothing where the line cannot be split."""
    try:
        words = shlex.split(submit_line)
    except ValueError:
        words = []
    opts: dict[str, str] = {}
    i = 1                               # words[0] is sbatch / srun / salloc
    while i < len(words):
        w = words[i]
        if not w.startswith("-") or w == "--wrap" or w.startswith("--wrap="):
            break                       # the script (or the wrapped command) and its words
        if w.startswith("--"):
            name, eq, value = w.partition("=")
        else:                           # -G8 or -G 8
            name, value, eq = w[:2], w[2:], "=" if w[2:] else ""
        name = _VALUE.get(name, name)
        if not eq and name not in _FLAGS and i + 1 < len(words):
            value, i = words[i + 1], i + 1
        opts[name] = value
        i += 1
    return opts, words[i:]


def command(submit_line: str) -> str:
    """What the job ran: its script and arguments, or the command it wrapped
    (``--wrap``), quoted as a shell would take them; "" where the line says nothing."""
    _, rest = _options(submit_line)
    if rest and rest[0].startswith("--wrap"):
        wrapped = rest[0].partition("=")[2] if "=" in rest[0] else " ".join(rest[1:2])
        return wrapped
    return shlex.join(rest)


def request(submit_line: str, gpus: int, nodes: int, het: bool, reservation: bool
            ) -> GpuRequest:
    """The GPU request of a job of ``gpus`` GPUs that ran on ``nodes`` nodes."""
    opts, _ = _options(submit_line)
    gres = opts.get("--gres", "")
    per_node = _count(opts["--gpus-per-node"]) if "--gpus-per-node" in opts else (
        _count(gres) if gres.startswith("gpu") else None)
    per_job = _count(opts["--gpus"]) if "--gpus" in opts else None
    per_task = _count(opts["--gpus-per-task"]) if "--gpus-per-task" in opts else None
    per_socket = _count(opts["--gpus-per-socket"]) if "--gpus-per-socket" in opts else None
    if not (per_job or per_node or per_task or per_socket):
        per_node = max(1, gpus // max(1, nodes))
    # The nodes it asked for at least (-N), as the hook reads the request: not the nodes
    # it ran on (a --gpus=8 job Slurm spread over two nodes asked for one).
    min_nodes = _count(opts.get("--nodes", "").split("-")[0]) or 1
    own = next((v for k, v in _OWN.items() if k in opts), "")
    if not own and "--exclusive" in opts:
        own = "exclusive"
    if not own and opts.get("--mem", "").strip() in ("0", "0M", "0G"):
        own = "mem0"
    return GpuRequest(per_job, per_node, per_task, per_socket, max(1, min_nodes), het,
                      reservation, own)
