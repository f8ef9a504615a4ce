"""The decisions synergy's drivers share: pure rules that the hook, the controller, the
controller model and whatif's replay all call, so that none of them keeps its own copy.

The first of them is :func:`change.what_synergy_changes`: for one GPU job, whether synergy
reshapes it (a known profile), releases it as it is (managed, profile unknown), or leaves
it as submitted (not ours to shape)."""

from .change import (
    Change,
    Decision,
    JobFacts,
    needs_no_hold,
    no_hold_share,
    opted_in_to_requeue,
    what_synergy_changes,
)
from .grouping import by_pool
from .reconcile import PendingView, Reconciled, Step, in_slurm_units, reconcile
from .settings import ControllerSettings

__all__ = ["Change", "ControllerSettings", "Decision", "JobFacts", "PendingView", "Reconciled",
           "Step", "by_pool", "in_slurm_units", "needs_no_hold", "no_hold_share",
           "opted_in_to_requeue", "reconcile", "what_synergy_changes"]
