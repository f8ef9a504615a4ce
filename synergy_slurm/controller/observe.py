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

from ..config import Config
from ..core import ClusterState, PerGpu, Resources, Server
from ..core.pools import Pool, merged
from ..slurm.model import SlurmPartition, Snapshot
from ..vocabulary import MB_PER_GB


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
    if part.def_cpu_per_gpu and part.def_mem_per_gpu_mb:
        fair = PerGpu(part.def_cpu_per_gpu, part.def_mem_per_gpu_mb / MB_PER_GB)
        return ClusterState(tuple(servers), tuple(reserved), fair)
    return ClusterState(tuple(servers), tuple(reserved))     # worked out from the nodes


def cluster_state(snap: Snapshot, cfg: Config) -> ClusterState:
    """The whole managed cluster (what-if replays): :func:`merged` of the pools."""
    return merged(pools(snap, cfg))
