"""From a Slurm snapshot to the clusters the core plans on: one pool per managed partition.

A pool's servers are the usable GPU nodes of its partition, and its proportional share is
that partition's DefCpuPerGPU/DefMemPerGPU (else the smallest per-GPU share of its nodes),
so a job is planned with its own partition's defaults on the nodes it can run on.
Everything already allocated on a node (running jobs of every kind) is reserved: the core
plans pending jobs into what is left. A node in an active Slurm reservation is left out:
only jobs that ask for the reservation run there, and those synergy does not reshape.
A node in several managed partitions is in each of their pools; the controller plans the
pools one after another (in the order of ``[hook] partitions``) and reserves what one
pool's plan takes before the next, so a shared node is never counted twice.

A job that asks for a GPU type (``--gpus=h100:2``) is planned on the pool's nodes of that
type only, after the pool's untyped jobs.

A partition's MaxCPUsPerNode / MaxMemPerNode caps what a job may get on a node: a server
offers at most that much, so no plan raises a job past it, where Slurm would leave the job
pending for ever. What is already in use counts against the cap as well as against the node
(an approximation where other partitions share the node).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..config import Config
from ..core import ClusterState, PerGpu, Resources, Server
from ..slurm.model import SlurmPartition, Snapshot
from ..vocabulary import MB_PER_GB


@dataclass(frozen=True)
class Pool:
    """A managed partition's nodes as the core plans on them, and each node's GPU type."""

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
                            self.cluster.fair_share)


def pools(snap: Snapshot, cfg: Config) -> list[Pool]:
    """One pool per managed partition present in Slurm, in ``[hook] partitions`` order;
    a partition without usable GPU nodes has a pool without servers."""
    by_name = {p.name: p for p in snap.partitions}
    out = []
    for name in cfg.hook.partitions:
        part = by_name.get(name)
        if part is not None:
            cluster = _pool_cluster(snap, part)
            types = {n.name: n.gpu_type for n in snap.nodes}
            out.append(Pool(name, cluster, {s.name: types.get(s.name) for s in cluster.servers}))
    return out


def _pool_cluster(snap: Snapshot, part: SlurmPartition) -> ClusterState:
    servers, reserved = [], []
    for node in sorted(snap.nodes, key=lambda n: n.name):
        mine = node.name in part.nodes or part.name in node.partitions
        if not (mine and node.gpus > 0 and node.usable and not node.reserved):
            continue
        cpus = min(node.cpus, part.max_cpus_per_node or node.cpus)
        mem_mb = min(node.mem_mb, part.max_mem_per_node_mb or node.mem_mb)
        servers.append(Server(node.name, Resources(node.gpus, cpus, mem_mb / MB_PER_GB)))
        used = Resources(node.alloc_gpus, min(node.alloc_cpus, cpus),
                         min(node.alloc_mem_mb, mem_mb) / MB_PER_GB)
        if used != Resources():
            reserved.append((node.name, used))
    fair = None
    if part.def_cpu_per_gpu and part.def_mem_per_gpu_mb:
        fair = PerGpu(part.def_cpu_per_gpu, part.def_mem_per_gpu_mb / MB_PER_GB)
    return ClusterState(tuple(servers), tuple(reserved), fair)


def also_reserved(cluster: ClusterState, taken: Mapping[str, Resources]) -> ClusterState:
    """``cluster`` with ``taken`` (what earlier pools' plans put on shared nodes) reserved."""
    names = {s.name for s in cluster.servers}
    extra = tuple((n, r) for n, r in taken.items() if n in names and r != Resources())
    if not extra:
        return cluster
    return ClusterState(cluster.servers, cluster.reserved + extra, cluster.fair_share)


def cluster_state(snap: Snapshot, cfg: Config) -> ClusterState:
    """The whole managed cluster (what-if replays): :func:`merged` of the pools."""
    return merged(pools(snap, cfg))


def merged(found: list[Pool]) -> ClusterState:
    """Every managed GPU node once, each capped by the tightest managed partition it is in,
    with the first managed partition's proportional share: the hook's table is built on
    it."""
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
    fair = next((p.cluster.fair_share for p in found if p.cluster.fair_share), None)
    names = sorted(servers)
    return ClusterState(tuple(servers[n] for n in names),
                        tuple((n, reserved[n]) for n in names if n in reserved), fair)
