"""The hook's rules in Python: what job_submit.lua does to a submission, for
``synergy hook explain`` and ``synergy-sbatch --explain``. Kept line by line in step with
job_submit.lua; the parity test runs both on the same submissions."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..decide import Change, JobFacts, what_synergy_changes
from ..slurm.parse import gpu_count
from ..vocabulary import GpuRequest, comment_profile_key, table_fresh
from .table import HookTable


@dataclass(frozen=True)
class Submission:
    """What the hook sees of a job at submission (job_desc fields)."""

    uid: int = 0
    partition: str = ""
    comment: str = ""
    tres_per_job: str = ""
    tres_per_node: str = ""
    tres_per_task: str = ""
    tres_per_socket: str = ""
    cpus_per_tres: str = ""
    mem_per_tres: str = ""
    mem_per_node: bool = False   # --mem given
    mem_per_cpu: bool = False    # --mem-per-cpu given
    min_nodes: int = 1           # -N/--nodes (the smallest count)
    het: bool = False            # a component of a heterogeneous job (sbatch ... : ...)
    reservation: str = ""        # --reservation
    own_shape: str = ""          # vocabulary.GpuRequest.own_shape


@dataclass(frozen=True)
class HookDecision:
    managed: bool
    reason: str
    cpus_per_gpu: int | None = None
    mem_per_gpu_mb: int | None = None
    hold: bool = False
    profile_key: str | None = None

    def as_dict(self) -> dict:
        return {"managed": self.managed, "reason": self.reason,
                "cpus_per_gpu": self.cpus_per_gpu, "mem_per_gpu_mb": self.mem_per_gpu_mb,
                "hold": self.hold, "profile_key": self.profile_key}


def _gpus(tres: str) -> int | None:
    got = gpu_count(tres) if tres else None
    if got is None and tres and re.search(r"(?:^|,)(?:gres[:/])?gpu(?:,|$)", tres):
        return 1
    return None if got is None else got[0]


def decide(table: HookTable | None, sub: Submission, now: float, disabled: bool = False,
           table_error: str | None = None) -> HookDecision:
    per_job, per_node = _gpus(sub.tres_per_job), _gpus(sub.tres_per_node)
    per_task, per_socket = _gpus(sub.tres_per_task), _gpus(sub.tres_per_socket)
    if not (per_job or per_node or per_task or per_socket):
        return HookDecision(False, "not a GPU job")
    if disabled:
        return HookDecision(False, "disabled by the disable file")
    if table is None:
        return HookDecision(False, table_error or "no table")
    if not table_fresh(table.generated_at, table.max_age_s, now):
        return HookDecision(False, "table stale")
    partition = sub.partition or table.default_partition
    key = comment_profile_key(sub.comment)
    prof = table.profiles.get(key) if key else None
    d = what_synergy_changes(JobFacts(
        per_job or per_node or per_task or per_socket or 0,
        GpuRequest(per_job, per_node, per_task, per_socket, sub.min_nodes, sub.het,
                   bool(sub.reservation), sub.own_shape),
        managed_partition=partition in table.partitions,
        user_opted_out=sub.uid in table.optout_uids, comment=sub.comment,
        profile_known=prof is not None))
    if d.change is Change.LEAVE:
        return HookDecision(False, d.reason)
    if prof is None:
        return HookDecision(True, "managed; profile unknown" if key else "managed; no profile key",
                            hold=table.hold_unknown, profile_key=key)
    assert key is not None
    on_node = min(per_node or per_job or per_task or per_socket or 1, table.node_gpus)
    cpus = min(prof[0], table.node_cpus // on_node)
    mem = min(prof[1], table.node_mem_mb // on_node)
    user_cpus = bool(sub.cpus_per_tres)
    user_mem = bool(sub.mem_per_tres) or sub.mem_per_node or sub.mem_per_cpu
    set_cpus = cpus if (not user_cpus or table.override_user_shape) and cpus >= 1 else None
    set_mem = mem if ((not user_mem or table.override_user_shape) and mem >= 1
                      and not sub.mem_per_node and not sub.mem_per_cpu) else None
    return HookDecision(True, "managed; shaped from profile " + key, set_cpus, set_mem,
                        hold=table.hold_known and key not in table.no_hold, profile_key=key)
