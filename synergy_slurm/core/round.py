"""One scheduling round, the same for the simulator and the controller.

Where the driver can lower a running job's memory, running jobs that hold more than their
profile needs give it back first (:mod:`.shrink`). Pending jobs are ordered by the policy
and allocated into what the running jobs leave free; then running jobs that may be
restarted are offered what is still idle, in the policy's order, and requeued where it
pays (:mod:`.requeue`). The controller turns the
result into Slurm actions; the simulator applies it to its model of the cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .allocators import Allocator
from .job import JobSpec
from .plan import Allocation, Plan
from .policies import Policy
from .requeue import Requeue, requeues
from .resources import ClusterState
from .shrink import Shrink, after_shrinks, memory_shrinks

NEVER = float("-inf")


@dataclass(frozen=True)
class RequeueRule:
    """When a running job may be requeued into a larger share: the restart must save more
    than ``restart_cost_s``, at most ``budget`` jobs per round, each job at most once every
    ``min_interval_s``. A budget of 0 requeues nothing."""

    restart_cost_s: float = 0.0
    min_interval_s: float = 0.0
    budget: int = 0

    def __post_init__(self) -> None:
        if self.restart_cost_s < 0 or self.min_interval_s < 0 or self.budget < 0:
            raise ValueError("requeue cost, interval and budget must not be negative")


@dataclass(frozen=True)
class RoundPlan:
    plan: Plan
    requeues: tuple[Requeue, ...] = ()
    shrinks: tuple[Shrink, ...] = ()


def make_plan(jobs: Sequence[JobSpec], cluster: ClusterState, policy: Policy,
              allocator: Allocator, now: float) -> Plan:
    """Order the jobs by the policy, then allocate them into ``cluster``."""
    plan = allocator.allocate(policy.order(list(jobs), now), cluster)
    return Plan(plan.allocations, plan.skipped, plan.allocator, policy.name, plan.bound,
                plan.fallback)


def reshape_candidates(running: Sequence[tuple[JobSpec, Allocation]]
                       ) -> tuple[list[tuple[JobSpec, Allocation]],
                                  list[tuple[JobSpec, Allocation]]]:
    """Which running jobs may be requeued and which shrunk in place, one rule for every
    driver: requeued only where the driver says it may be (``may_requeue``), shrunk only
    where it says Slurm can resize it now (``may_shrink``) and it has the same GPUs on each
    of its nodes (Slurm sets a running job's memory per node); either only with a profile
    (nothing else says what it gains or needs). Order is kept."""
    movable = [(s, a) for s, a in running if s.may_requeue and s.profile is not None]
    shrinkable = [(s, a) for s, a in running
                  if s.may_shrink and s.profile is not None
                  and len({n for _, n in a.placement}) == 1]
    return movable, shrinkable


def plan_round(pending: Sequence[JobSpec], running: Sequence[tuple[JobSpec, Allocation]],
               cluster: ClusterState, policy: Policy, allocator: Allocator,
               rule: RequeueRule, last_requeues: Mapping[int, float],
               now: float, shrinkable: Sequence[tuple[JobSpec, Allocation]] = ()
               ) -> RoundPlan:
    """Lower the memory of ``shrinkable`` running jobs to what they need, plan ``pending``
    into ``cluster`` (whose ``reserved`` holds every running job, less what the shrinks
    free), then choose the requeues.

    ``running`` pairs each running job that may be requeued with what it holds now (jobs
    that may not be restarted, or whose gain cannot be known, are left out by the caller
    but stay in ``cluster.reserved``). ``last_requeues`` maps job ids to when each was last
    requeued. ``shrinkable`` pairs each running job whose memory may be lowered in place
    (empty where Slurm cannot) with what it holds now; a job shrunk this round is not also
    requeued in it. The GPU-proportional baseline neither shrinks nor requeues: it gives
    every job its proportional share.
    """
    shrinks: tuple[Shrink, ...] = ()
    if shrinkable and allocator.reshapes_running:
        shrinks = tuple(memory_shrinks(shrinkable, cluster.fair))
        cluster = after_shrinks(cluster, shrinks)
    if pending and cluster.servers:
        plan = make_plan(pending, cluster, policy, allocator, now)
    else:
        plan = Plan((), {}, allocator.name, policy.name)
    if not (rule.budget and running and allocator.reshapes_running):
        return RoundPlan(plan, (), shrinks)
    shrunk = {s.job_id for s in shrinks}
    due = {spec.id: (spec, alloc) for spec, alloc in running
           if now - last_requeues.get(spec.id, NEVER) >= rule.min_interval_s
           and spec.id not in shrunk}
    ordered = [due[s.id] for s in policy.order([s for s, _ in due.values()], now)]
    # What still waits after the plan: a requeue must not take the room it needs.
    waiting = sum(j.gpus for j in pending if j.id in plan.skipped) if allocator.keeps_room else 0
    return RoundPlan(plan, tuple(requeues(ordered, cluster, plan, rule.restart_cost_s,
                                          rule.budget, waiting)), shrinks)
