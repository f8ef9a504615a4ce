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
from .profile import (
    Profile,
    ProfileError,
    pick_profile,
    profile_slot,
    profiles_from_doc,
    profiles_to_doc,
    usable_profiles,
)
from .resources import ClusterState, PerGpu, Resources, Server
from .round import RequeueRule, RoundPlan, make_plan, plan_round, reshape_candidates

__all__ = [
    "ALLOCATOR_NAMES", "POLICIES", "Allocation", "Allocator", "ClusterState", "GreedyAllocator",
    "JobSpec", "OptAllocator", "PerGpu", "Plan", "Policy", "Profile", "ProfileError",
    "ProportionalAllocator", "RequeueRule", "Resources", "RoundPlan", "Server",
    "TuneAllocator", "get_allocator", "get_policy", "make_plan", "pick_profile", "plan_round",
    "profile_slot", "profiles_from_doc", "profiles_to_doc", "reshape_candidates",
    "usable_profiles",
]
