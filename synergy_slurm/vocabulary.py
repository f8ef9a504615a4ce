"""Facts synergy's parts must agree on, each written once.

The hook (job_submit.lua and its Python twin in ``hook/rules.py``), the controller and
``synergy-sbatch`` import these; the Lua keeps a copy of each rule, and the parity tests
run both sides on the same inputs.

Which GPU jobs synergy reshapes is decided here, from the request alone, so that the hook
holds exactly the jobs the controller will shape and release (a job the hook held and the
controller refused to manage would wait forever).
"""

from __future__ import annotations

from dataclasses import dataclass

# Slurm's "not set" for 32-bit fields of a job description (job_desc.min_nodes, ...).
NO_VAL = 0xFFFFFFFE


@dataclass(frozen=True)
class GpuRequest:
    """How a job asks for GPUs: per job (``--gpus``), per node (``--gpus-per-node``,
    ``--gres``), per task or per socket; how many nodes at least (``-N``); whether it is
    one component of a heterogeneous job."""

    per_job: int | None = None
    per_node: int | None = None
    per_task: int | None = None
    per_socket: int | None = None
    min_nodes: int = 1
    het: bool = False

    @property
    def wants_gpus(self) -> bool:
        return bool(self.per_job or self.per_node or self.per_task or self.per_socket)


def not_reshaped(req: GpuRequest) -> str | None:
    """Why synergy leaves this GPU request as submitted, or None when it reshapes it.

    Reshaped: ``--gpus`` on one node and ``--gpus-per-node``/``--gres`` (any node count),
    array jobs included (their tasks share one shape). Left alone, and never held:
    heterogeneous jobs (one shape per component is not modelled), ``--gpus-per-task`` and
    ``--gpus-per-socket`` (GPUs follow tasks Slurm places), ``--gpus`` over several nodes
    (Slurm splits the GPUs between nodes as it likes).
    """
    if req.het:
        return "heterogeneous job"
    if req.per_task:
        return "--gpus-per-task jobs are not reshaped"
    if req.per_socket:
        return "--gpus-per-socket jobs are not reshaped"
    if req.per_job and req.min_nodes > 1:
        return "--gpus over several nodes is not reshaped"
    if not (req.per_job or req.per_node):
        return "GPU request synergy cannot reshape"
    return None
