"""The two baselines: GPU-proportional and Synergy-GREEDY."""

from __future__ import annotations

from ..demand import Demand, ideal_demand
from ..job import JobSpec
from ..ledger import Ledger
from ..plan import How
from .base import AdmittingAllocator


class ProportionalAllocator(AdmittingAllocator):
    """Every job gets cores and memory in proportion to its GPUs (Slurm's DefCpuPerGPU)."""

    name = "proportional"
    reshapes_running = False

    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        demand = Demand(ledger.fair, 1.0, How.PROPORTIONAL)
        placement = ledger.find_placement(job, demand.share)
        if placement is None:
            return "no room for its proportional share"
        ledger.place(job, demand, placement)
        return None


class GreedyAllocator(AdmittingAllocator):
    """Every job asks for its ideal share; placed if that fits, else skipped this round."""

    name = "greedy"

    def admit(self, job: JobSpec, ledger: Ledger) -> str | None:
        demand = ideal_demand(job, ledger.fair, ledger.cluster.servers)
        placement = ledger.find_placement(job, demand.share)
        if placement is None:
            return "its ideal share does not fit (greedy does not downgrade)"
        ledger.place(job, demand, placement)
        return None
