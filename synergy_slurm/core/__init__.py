"""The pure scheduling core: no I/O, no Slurm, no clock. Time and state come in as
arguments, a plan comes out; the simulator and the controller both drive it."""

from .allocators import (
    ALLOCATOR_NAMES,
    Allocator,
    GreedyAllocator,
    OptAllocator,
    ProportionalAllocator,
    TuneAllocator,
    get_allocator,
)
from .job import JobSpec
from .plan import Allocation, Plan
from .policies import POLICIES, Policy, get_policy
from .profile import Profile, ProfileError, profiles_from_doc, profiles_to_doc
from .resources import ClusterState, PerGpu, Resources, Server


def make_plan(jobs: list[JobSpec], cluster: ClusterState, policy: Policy,
              allocator: Allocator, now: float) -> Plan:
    """One round: order the runnable jobs by the policy, then allocate."""
    plan = allocator.allocate(policy.order(jobs, now), cluster)
    return Plan(plan.allocations, plan.skipped, plan.allocator, policy.name, plan.bound,
                plan.fallback)


__all__ = [
    "ALLOCATOR_NAMES", "POLICIES", "Allocation", "Allocator", "ClusterState", "GreedyAllocator",
    "JobSpec", "OptAllocator", "PerGpu", "Plan", "Policy", "Profile", "ProfileError",
    "ProportionalAllocator", "Resources", "Server", "TuneAllocator", "get_allocator",
    "get_policy", "make_plan", "profiles_from_doc", "profiles_to_doc",
]
