"""The reconcile rule: what to do with a pending job the plan gives a share, in the one
form both drivers apply (the controller as ``scontrol`` writes, the controller model to
its simulated jobs).

* A job synergy holds (never scheduled, so Slurm can still lower it): **shape and
  release** it with the planned share (or **release** it as it is, where that is its
  shape already and its request names it); a job whose profile is unknown keeps the shape
  it has (``change.Change.RELEASE``).
* A job Slurm has already scheduled: **raise** its cores (or, at equal cores, set its
  memory); **lower** its cores only where the release honours lowering a scheduled job
  (26.05), else record that it **cannot** be lowered (Slurm would ignore it). A job
  synergy requeued into a larger share is never lowered before it runs again: the
  requeue paid its restart for that share, and lowering it while it waits for room (on
  26.05, as the plan sees the room it left taken) would restart it slower than it ran.

Shares are compared as Slurm holds them: whole cores, memory in whole MB.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from ..core import PerGpu
from ..vocabulary import MB_PER_GB


class Step(StrEnum):
    SHAPE_RELEASE = "shape-release"
    RELEASE = "release"
    RAISE = "raise"
    LOWER = "lower"
    CANNOT = "cannot"


@dataclass(frozen=True)
class PendingView:
    """What the rule needs of a pending job: whether synergy holds it, the share it has
    now (its request, else its partition's defaults), whether its request names its cores
    (a job that asked nothing gets them written on release), whether its profile is
    unknown (released as it is), and whether synergy requeued it into the share it has
    and it has not run since (never lowered)."""

    held_by_synergy: bool
    share: PerGpu
    names_cores: bool = True
    unknown: bool = False
    requeued: bool = False


@dataclass(frozen=True)
class Reconciled:
    step: Step
    after: PerGpu


def in_slurm_units(share: PerGpu) -> tuple[int, int]:
    """A share as Slurm holds it: cores, memory in MB (at least 1)."""
    return int(share.cpus), max(1, round(share.mem_gb * MB_PER_GB))


def reconcile(job: PendingView, planned: PerGpu, can_lower: bool) -> Reconciled | None:
    """The step that brings ``job`` to its ``planned`` share, or None where none is
    needed (module docstring)."""
    after = job.share if job.unknown else planned
    now_c, now_m = in_slurm_units(job.share)
    new_c, new_m = in_slurm_units(after)
    if job.held_by_synergy:
        same = (new_c, new_m) == (now_c, now_m) and job.names_cores
        return Reconciled(Step.RELEASE if same else Step.SHAPE_RELEASE, after)
    if new_c > now_c or (new_c == now_c and new_m != now_m):
        return Reconciled(Step.RAISE, after)
    if new_c < now_c and not job.requeued:
        return Reconciled(Step.LOWER if can_lower else Step.CANNOT, after)
    return None
