"""Pools: a site's partitions (and GPU types in them) planned apart, one round for all.

A pool is one partition's GPU nodes with that partition's proportional share. A job is
planned in its own partition's pool, and a job that asks for a GPU type (``--gpus=h100:2``)
only on the pool's nodes of that type, after the pool's untyped jobs. Pools may share
nodes (a partition over every node beside partitions per GPU type): they are planned one
after another, and what one pool's plan (its starts and its requeues) takes on a node is
reserved before the next, so a shared node is never counted twice. The round's requeue
budget is shared by all pools.

The controller builds its pools from Slurm's partitions, the simulator and whatif from a
cluster description or a site's nodes; all three plan them here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .allocators import Allocator
from .job import JobSpec
from .plan import Allocation, Plan
from .policies import Policy
from .resources import ClusterState, PerGpu, Resources, Server
from .round import RequeueRule, RoundPlan, plan_round, reshape_candidates


@dataclass(frozen=True)
class Pool:
    """A partition's nodes as the core plans on them, and each node's GPU type (None or
    "": untyped GPUs)."""

    partition: str
    cluster: ClusterState
    gpu_types: Mapping[str, str | None] = field(default_factory=dict)

    def types(self, gpu_type: str | None) -> frozenset[str]:
        """The GPU types a job asking for ``gpu_type`` (None: any) may run on here, ""
        for nodes whose GPUs have no type: what its profile must have been measured on."""
        if gpu_type is not None:
            return frozenset({gpu_type})
        return frozenset(t or "" for t in self.gpu_types.values()) or frozenset({""})

    def of_type(self, gpu_type: str | None) -> ClusterState:
        """The pool's nodes with GPUs of ``gpu_type`` (all of them for None): where a typed
        request (``--gpus=h100:2``) can run."""
        if gpu_type is None:
            return self.cluster
        names = {n for n, t in self.gpu_types.items() if t == gpu_type}
        return ClusterState(tuple(s for s in self.cluster.servers if s.name in names),
                            tuple(r for r in self.cluster.reserved if r[0] in names),
                            self.cluster.fair)

    def server_names(self, gpu_type: str | None = None) -> frozenset[str]:
        return frozenset(s.name for s in self.of_type(gpu_type).servers)

    def with_reserved(self, reserved: Sequence[tuple[str, Resources]]) -> Pool:
        """The pool with ``reserved`` (held anywhere in the cluster) as its reservations on
        its own nodes, replacing the ones it had."""
        names = {s.name for s in self.cluster.servers}
        return replace(self, cluster=ClusterState(
            self.cluster.servers, tuple(r for r in reserved if r[0] in names),
            self.cluster.fair))


@dataclass(frozen=True)
class PoolJobs:
    """The jobs of one pool and GPU type for one round: ``pending`` to plan, and the
    ``running`` ones with what each holds (which of them may be requeued or shrunk is
    :func:`reshape_candidates`' rule, from the facts their driver set)."""

    pool: Pool
    gpu_type: str | None
    pending: Sequence[JobSpec] = ()
    running: Sequence[tuple[JobSpec, Allocation]] = ()


@dataclass(frozen=True)
class PoolPlan:
    """One group's round: what it was planned into, and the plan (None: the pool has no
    usable node of the type asked for, and its pending jobs wait)."""

    jobs: PoolJobs
    cluster: ClusterState
    round: RoundPlan | None

    @property
    def why_not(self) -> str:
        where = f"{self.jobs.gpu_type} nodes" if self.jobs.gpu_type else "GPU nodes"
        return f"partition {self.jobs.pool.partition} has no usable {where}"


def type_order(types: Iterable[str | None]) -> list[str | None]:
    """The GPU types asked for, in planning order: untyped (None) first, then by name."""
    return sorted(set(types), key=lambda t: t or "")


def plan_pools(groups: Sequence[PoolJobs], policy: Policy, allocator: Allocator,
               rule: RequeueRule,
               last_requeues: Mapping[int, float], now: float) -> list[PoolPlan]:
    """Plan each group in turn (:func:`plan_round`) into its pool's nodes of its GPU type
    less what the groups before it took there; the requeue budget is shared."""
    taken: dict[str, Resources] = {}
    budget = rule.budget
    out: list[PoolPlan] = []
    for g in groups:
        cluster = also_reserved(g.pool.of_type(g.gpu_type), taken)
        if not cluster.servers:
            out.append(PoolPlan(g, cluster, None))
            continue
        movable, shrinkable = reshape_candidates(g.running)
        rp = plan_round(g.pending, movable, cluster, policy, allocator,
                        replace(rule, budget=budget), last_requeues, now, shrinkable)
        budget -= len(rp.requeues)
        for a in rp.plan.allocations:
            for name, n in a.placement:
                taken[name] = taken.get(name, Resources()) + a.share.times(n)
        held = {spec.id: alloc for spec, alloc in movable}
        for rq in rp.requeues:
            alloc = held[rq.job_id]
            for name, n in alloc.placement:    # the growth a requeue takes on its nodes
                grown = rq.demand.share.times(n) - alloc.share.times(n)
                taken[name] = taken.get(name, Resources()) + Resources(0, grown.cpus,
                                                                       grown.mem_gb)
        out.append(PoolPlan(g, cluster, rp))
    return out


def merged_plan(plans: Sequence[PoolPlan], allocator: str, policy: str) -> Plan:
    """Every group's allocations and reasons in one plan."""
    allocations: list[Allocation] = []
    skipped: dict[int, str] = {}
    for p in plans:
        if p.round is None:
            skipped.update({j.id: p.why_not for j in p.jobs.pending})
            continue
        allocations += p.round.plan.allocations
        skipped.update(p.round.plan.skipped)
    return Plan(tuple(allocations), skipped, allocator, policy)


def also_reserved(cluster: ClusterState, taken: Mapping[str, Resources]) -> ClusterState:
    """``cluster`` with ``taken`` (what earlier pools' plans put on shared nodes) reserved."""
    names = {s.name for s in cluster.servers}
    extra = tuple((n, r) for n, r in taken.items() if n in names and r != Resources())
    if not extra:
        return cluster
    return ClusterState(cluster.servers, cluster.reserved + extra, cluster.fair)


def smallest_fair(found: Sequence[Pool]) -> PerGpu | None:
    """The least proportional share per GPU (cores, memory) of ``found``'s partitions
    (None for none): what a rule that cannot know a job's partition (the hook's table)
    must hold a shape to."""
    if not found:
        return None
    return PerGpu(min(p.cluster.fair.cpus for p in found),
                  min(p.cluster.fair.mem_gb for p in found))


def merged(found: Sequence[Pool]) -> ClusterState:
    """Every pool's node once, each capped by the tightest pool it is in, with the first
    pool's proportional share (the hook's table is built on it)."""
    servers: dict[str, Server] = {}
    reserved: dict[str, Resources] = {}
    for pool in found:
        for s in pool.cluster.servers:
            old = servers.get(s.name)
            servers[s.name] = s if old is None else Server(s.name, Resources(
                s.capacity.gpus, min(s.capacity.cpus, old.capacity.cpus),
                min(s.capacity.mem_gb, old.capacity.mem_gb)))
        for name, used in pool.cluster.reserved:
            reserved.setdefault(name, used)
    names = sorted(servers)
    placed = (tuple(servers[n] for n in names),
              tuple((n, reserved[n]) for n in names if n in reserved))
    return ClusterState(*placed, found[0].cluster.fair) if found else ClusterState(*placed)
