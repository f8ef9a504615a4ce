"""From a Slurm snapshot to the cluster the core plans on.

Servers are the usable GPU nodes of the managed partitions. Everything already allocated
on a node (running jobs of every kind) is reserved: the core plans pending jobs into what
is left. The proportional share is the partition's DefCpuPerGPU/DefMemPerGPU when set.

A partition's MaxCPUsPerNode / MaxMemPerNode caps what a job may get on a node: a server
offers at most that much (the tightest managed partition the node is in), so no plan raises
a job past it, where Slurm would leave the job pending for ever. What is already in use
counts against the cap as well as against the node (an approximation where other
partitions share the node).
"""

from __future__ import annotations

from ..config import Config
from ..core import ClusterState, PerGpu, Resources, Server
from ..slurm.model import Snapshot
from ..vocabulary import MB_PER_GB


def cluster_state(snap: Snapshot, cfg: Config) -> ClusterState:
    managed = set(cfg.hook.partitions)
    parts = [p for p in snap.partitions if p.name in managed]
    part_nodes = {n for p in parts for n in p.nodes}
    servers, reserved = [], []
    for node in sorted(snap.nodes, key=lambda n: n.name):
        in_part = node.name in part_nodes or bool(set(node.partitions) & managed)
        if not (in_part and node.gpus > 0 and node.usable):
            continue
        mine = [p for p in parts if node.name in p.nodes or p.name in node.partitions]
        cpus = min([node.cpus, *(p.max_cpus_per_node for p in mine if p.max_cpus_per_node)])
        mem_mb = min([node.mem_mb,
                      *(p.max_mem_per_node_mb for p in mine if p.max_mem_per_node_mb)])
        servers.append(Server(node.name, Resources(node.gpus, cpus, mem_mb / MB_PER_GB)))
        used = Resources(node.alloc_gpus, min(node.alloc_cpus, cpus),
                         min(node.alloc_mem_mb, mem_mb) / MB_PER_GB)
        if used != Resources():
            reserved.append((node.name, used))
    fair = None
    for p in snap.partitions:
        if p.name in managed and p.def_cpu_per_gpu and p.def_mem_per_gpu_mb:
            fair = PerGpu(p.def_cpu_per_gpu, p.def_mem_per_gpu_mb / MB_PER_GB)
            break
    return ClusterState(tuple(servers), tuple(reserved), fair)
