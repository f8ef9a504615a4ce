"""What synergy changes about one job: the one rule the hook, the controller and whatif's
replay share.

Three outcomes, never more:

* ``reshape``: a GPU job synergy manages whose profile is known: the hook shapes it (or
  holds it), the controller plans its cores and memory by its profile.
* ``release``: a job synergy manages whose profile is unknown: the hook may hold it until
  the controller's round, and the controller releases it *with the shape it has* (its
  own ``--cpus-per-gpu``/``--mem-per-gpu``, else the partition's defaults): synergy never
  changes an unknown job's cores or memory.
* ``leave``: everything else, left exactly as submitted and never held: no GPUs, a
  partition synergy does not manage, a user or job that opted out, and the GPU requests
  synergy does not reshape (``vocabulary.not_reshaped``: heterogeneous jobs,
  ``--gpus-per-task``, reservations, jobs that set their own cores or memory another way,
  ...).

The rule reads only facts each driver can know: the hook from the submission, the
controller from Slurm's record and the hook's tags, whatif from what accounting kept
(the tags, the submit line, the comment).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..core.resources import MEM_EPS, PerGpu
from ..vocabulary import OPT_OUT_TOKEN, REQUEUE_OK_TOKEN, GpuRequest, has_token, not_reshaped


class Change(StrEnum):
    RESHAPE = "reshape"
    RELEASE = "release"
    LEAVE = "leave"


@dataclass(frozen=True)
class JobFacts:
    """What the rule needs of a job. ``request`` None: how it asked for its GPUs is not
    known (taken as the common ``--gres``/``--gpus-per-node`` form)."""

    gpus: int
    request: GpuRequest | None = None
    managed_partition: bool = True
    user_opted_out: bool = False
    comment: str = ""
    profile_known: bool = False


@dataclass(frozen=True)
class Decision:
    change: Change
    reason: str

    @property
    def managed(self) -> bool:
        """Whether synergy manages the job (may hold it, plans it)."""
        return self.change is not Change.LEAVE


def what_synergy_changes(job: JobFacts) -> Decision:
    """The one rule (module docstring); the reason is the words the hook, ``synergy
    status`` and whatif's report show."""
    if job.gpus <= 0:
        return Decision(Change.LEAVE, "not a GPU job")
    if not job.managed_partition:
        return Decision(Change.LEAVE, "partition not managed")
    if job.user_opted_out:
        return Decision(Change.LEAVE, "user opted out")
    if has_token(job.comment, OPT_OUT_TOKEN):
        return Decision(Change.LEAVE, "job opted out")
    refused = not_reshaped(job.request) if job.request is not None else None
    if refused:
        return Decision(Change.LEAVE, f"not reshaped: {refused}")
    if job.profile_known:
        return Decision(Change.RESHAPE, "managed; reshaped by its profile")
    return Decision(Change.RELEASE, "managed; profile unknown: released with the shape "
                    "it has")


def needs_no_hold(shape: PerGpu, proportional: PerGpu) -> bool:
    """Whether a known profile's shape (per GPU) is final at submission: within the
    proportional share in cores and in memory. The hook holds known profiles where Slurm
    ignores lowering a job it has scheduled (22.05) so that the controller can give each
    its share by what is free when it starts. A shape within the proportional share is
    already the least any plan gives the job and nothing raises it (its profile runs no
    faster with more), so a hold would only delay its start by a controller round and a
    scheduler pass: a job that gives cores and memory away may start at once with its
    shape, as plain Slurm would start it with more, while no held job waits for the GPU
    it would take (``no_hold_share``). ``proportional``: the
    smallest proportional share of the managed partitions (the hook does not know which
    partition's default a job gets)."""
    return shape.cpus <= proportional.cpus and \
        shape.mem_gb <= proportional.mem_gb + MEM_EPS


def no_hold_share(proportional: PerGpu | None, held_waiting: bool) -> PerGpu | None:
    """The share within which a known shape starts unheld now (``needs_no_hold``), or
    None while a job synergy holds waits: then every known profile is held. Slurm's main
    scheduler gives a freed GPU at once to a job in its queue, and a held job waits for
    the controller's next round: on a busy cluster a stream of unheld jobs took every GPU
    as it came free and the held ones (the CPU-hungry ones, submitted first) waited behind
    all of them (the paper's mix at 8 jobs an hour on 22.05's rules, 30-s rounds: synergy's
    gain in mean JCT 1.20-1.27x with every known profile held, 0.92-1.07x with the language
    models never held; benchmarks/hold_rule.py, #42).
    While jobs wait for synergy, the controller orders all of them."""
    return None if held_waiting else proportional


def opted_in_to_requeue(comment: str, requeue_allowed: bool = True, batch: bool = True
                        ) -> bool:
    """Whether a running job may be requeued into a larger shape: its user said it
    checkpoints (``synergy:requeue-ok``, what synergy-sbatch --requeue-ok writes), Slurm
    may requeue it (``--requeue``, or the site's default) and it is a batch job. The
    controller knows all three from Slurm; a history knows only the comment."""
    return requeue_allowed and batch and has_token(comment, REQUEUE_OK_TOKEN)
