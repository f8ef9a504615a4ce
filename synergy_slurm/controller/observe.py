"""From a Slurm snapshot to the cluster the core plans on.

Servers are the usable GPU nodes of the managed partitions. Everything already allocated
on a node (running jobs of every kind) is reserved: the core plans pending jobs into what
is left. The proportional share is the partition's DefCpuPerGPU/DefMemPerGPU when set.
"""

from __future__ import annotations

from ..config import Config
from ..core import ClusterState, PerGpu, Resources, Server
from ..slurm.model import Snapshot
from ..vocabulary import MB_PER_GB


def cluster_state(snap: Snapshot, cfg: Config) -> ClusterState:
    managed = set(cfg.hook.partitions)
    part_nodes = {n for p in snap.partitions if p.name in managed for n in p.nodes}
    servers, reserved = [], []
    for node in sorted(snap.nodes, key=lambda n: n.name):
        in_part = node.name in part_nodes or bool(set(node.partitions) & managed)
        if not (in_part and node.gpus > 0 and node.usable):
            continue
        servers.append(Server(node.name, Resources(node.gpus, node.cpus,
                                                   node.mem_mb / MB_PER_GB)))
        used = Resources(node.alloc_gpus, node.alloc_cpus, node.alloc_mem_mb / MB_PER_GB)
        if used != Resources():
            reserved.append((node.name, used))
    fair = None
    for p in snap.partitions:
        if p.name in managed and p.def_cpu_per_gpu and p.def_mem_per_gpu_mb:
            fair = PerGpu(p.def_cpu_per_gpu, p.def_mem_per_gpu_mb / MB_PER_GB)
            break
    return ClusterState(tuple(servers), tuple(reserved), fair)
