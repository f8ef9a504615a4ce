"""pyslurm's job and node dictionaries as the JSON records the parser reads.

pyslurm 24.11's classes (``pyslurm.Jobs``, ``pyslurm.Nodes``) leave out what synergy needs:
a job's ``--gpus`` and ``--gpus-per-task`` requests and the GPUs in use on a node. Its
dictionary API (``pyslurm.job().get()``, ``pyslurm.node().get()``: the fields of Slurm's
job_info_t and node_info_t under their C names, one RPC each) has them. This module turns
those dictionaries into the records ``squeue --json`` and ``scontrol show nodes --json``
give for the same jobs and nodes, so one parser (:mod:`.parse`) reads both readers' input
and they cannot drift apart.

What the dictionaries lack, and what stands in:

- where a running job's cores, memory and GPUs lie node by node (squeue's
  ``job_resources`` and ``gres_detail``): for a job on one node, its allocated TRES, which
  is exact; for a job asking GPUs per node (how multi-node training asks), the same spread
  evenly over its nodes, which is exact too; for any other job on several nodes (``--gpus=5
  -N2`` may take 4 + 1) nothing, rather than a guess: the controller then counts what the
  job asked for (its totals are the same);
- a node's reservation name: a reserved node still shows the RESERVED state flag, which is
  what keeps it out of the plan.
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Mapping
from typing import Any

from .model import NodeAlloc, SlurmJob
from .parse import gpu_count
from .units import size_mb, tres_items

# job_info_t fields squeue --json shows under the same name.
SAME_NAME = ("job_id", "job_state", "tres_per_job", "tres_per_node", "tres_per_task",
             "tres_per_socket", "cpus_per_tres", "tres_req_str",
             "tres_alloc_str", "priority", "state_reason", "account", "qos", "partition",
             "nodes", "array_job_id", "array_task_id", "het_job_id", "eligible_time",
             "submit_time", "start_time", "resv_name", "requeue", "batch_flag",
             "restart_cnt", "comment", "admin_comment", "name")
# ... and under another.
RENAMED = {"num_nodes": "node_count", "num_tasks": "tasks", "num_cpus": "cpus",
           "mem_per_tres": "memory_per_tres", "array_task_str": "array_task_string",
           "array_max_tasks": "array_max_tasks"}


def user_name_of(uid: int) -> str:
    """The user's name as slurmctld reports it (its own lookup of the same uid)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def job_record(d: Mapping[str, Any], user_name: Callable[[int], str] = user_name_of
               ) -> dict[str, Any]:
    """One job of ``pyslurm.job().get()`` as squeue --json (24.11) shows it."""
    rec: dict[str, Any] = {k: d.get(k) for k in SAME_NAME if d.get(k) is not None}
    for ours, theirs in RENAMED.items():
        if d.get(ours) is not None:
            rec[theirs] = d[ours]
    uid = d.get("user_id")
    if isinstance(uid, int):
        rec["user_name"] = user_name(uid)
    # 'UNLIMITED' and 'Partition_Limit' are no limit of the job's own.
    limit = d.get("time_limit")
    rec["time_limit"] = {"set": isinstance(limit, int), "infinite": limit == "UNLIMITED",
                         "number": limit if isinstance(limit, int) else 0}
    # pn_min_memory is memory per node unless flagged per CPU: squeue shows it as one of
    # memory_per_node / memory_per_cpu, set, the other unset.
    per_cpu = bool(d.get("mem_per_cpu"))
    rec["memory_per_node"] = _number(None if per_cpu else d.get("min_memory_node"))
    rec["memory_per_cpu"] = _number(d.get("min_memory_cpu") if per_cpu else None)
    return rec


def allocation(d: Mapping[str, Any], job: SlurmJob) -> tuple[NodeAlloc, ...]:
    """Where a running job's cores, memory and GPUs lie (squeue's ``job_resources`` and
    ``gres_detail``), where its allocated TRES tell it: on one node, or spread evenly for
    GPUs per node (see the module's note); else, and for a job that holds nothing, ()."""
    alloc = tres_items(d.get("tres_alloc_str") or "")
    hosts = job.nodes
    if job.pending or not hosts or "cpu" not in alloc:
        return ()
    if len(hosts) > 1 and job.gpus_per_node is None:
        return ()
    n = len(hosts)
    cpus = int(alloc["cpu"])
    mem = int(size_mb(alloc["mem"])) if alloc.get("mem") else 0
    held = gpu_count(",".join(f"{k}={v}" for k, v in alloc.items() if k.startswith("gres/")))
    gpus = held[0] if held else job.gpus
    return tuple(NodeAlloc(h, _share(cpus, n, i), _share(mem, n, i), _share(gpus, n, i))
                 for i, h in enumerate(hosts))


def node_record(d: Mapping[str, Any]) -> dict[str, Any]:
    """One node of ``pyslurm.node().get()`` as scontrol show nodes --json shows it."""
    state = str(d.get("state") or "")
    return {"name": d.get("name"), "cpus": d.get("cpus"), "real_memory": d.get("real_memory"),
            "gres": ",".join(d.get("gres") or []),
            "gres_used": ",".join(d.get("gres_used") or []),
            "state": [s for s in state.split("+") if s],
            "alloc_cpus": d.get("alloc_cpus") or 0, "alloc_memory": d.get("alloc_mem") or 0,
            "partitions": list(d.get("partitions") or []),
            # Its load (hundredths, as the JSON has it) and host: the closed loop's view of
            # a contended node.
            "cpu_load": d.get("cpu_load"), "hostname": d.get("node_hostname") or ""}


def meta(release: str) -> dict[str, Any]:
    """The ``meta`` block that names the Slurm release (the parser reads quirks by it)."""
    return {"slurm": {"release": release}}


def _number(value: Any) -> dict[str, Any]:
    return {"set": value is not None, "infinite": False,
            "number": int(value) if value is not None else 0}


def _share(total: int, parts: int, i: int) -> int:
    """Part ``i`` of ``total`` split into ``parts`` near-equal integers (the first ones
    take the remainder)."""
    return total // parts + (1 if i < total % parts else 0)
