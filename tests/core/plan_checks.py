"""Checks the core's tests run on a plan."""

from __future__ import annotations

from synergy_slurm.core import ClusterState, Resources
from synergy_slurm.core.plan import Plan


def used_on(plan: Plan, server: str) -> Resources:
    """What the plan's allocations take on one server."""
    tot = Resources()
    for a in plan.allocations:
        tot = tot + a.on(server)
    return tot


def check_capacity(plan: Plan, cluster: ClusterState, mem_tol_gb: float = 2e-6) -> None:
    """No server is given more than it has free."""
    free = dict(zip((s.name for s in cluster.servers), cluster.free(), strict=True))
    for name, cap in free.items():
        used = used_on(plan, name)
        assert used.gpus <= cap.gpus, (name, used, cap)
        assert used.cpus <= cap.cpus, (name, used, cap)
        assert used.mem_gb <= cap.mem_gb + mem_tol_gb, (name, used, cap)
