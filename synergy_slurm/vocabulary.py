"""Facts synergy's parts must agree on, each written once.

The hook (job_submit.lua and its Python twin in ``hook/rules.py``), the controller and
``synergy-sbatch`` import these; the Lua keeps a copy of each rule, and the parity tests
run both sides on the same inputs.

Which GPU jobs synergy reshapes is decided here, from the request alone, so that the hook
holds exactly the jobs the controller will shape and release (a job the hook held and the
controller refused to manage would wait forever).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Slurm's "not set" for 32-bit fields of a job description (job_desc.min_nodes, ...).
NO_VAL = 0xFFFFFFFE

# Slurm counts memory in MB; synergy's GB are 1000 MB (a 500 GB node is RealMemory=500000).
MB_PER_GB = 1000

# A profile key: what --profile-key names, the store's key, the hook table's (and the Lua's
# KEY_PATTERN, with its 64-character limit).
KEY_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,64}$")
# The comment token synergy-sbatch writes; the key is the longest run of key characters
# after it, and no key at all when that run is longer than 64 (as the hook reads it).
PROFILE_TOKEN = re.compile(r"synergy:profile=([A-Za-z0-9_.:\-]+)")
# The words a user (or synergy-sbatch, or synergy's own profiling jobs) puts in a job's
# comment: never touch this job; it checkpoints, so it may be requeued into a larger shape.
# Read as whole words (``has_token``, and the hook's comment_token in Lua).
OPT_OUT_TOKEN = "synergy:off"
REQUEUE_OK_TOKEN = "synergy:requeue-ok"
# The dataset's size synergy-sbatch --dataset-size records, in GB, for the memory model:
# written by dataset_token, read by dataset_gb (a whole word, a plain decimal number).
DATASET_TOKEN = "synergy:dataset-gb="
_DATASET = re.compile(r"(?:^|\s)synergy:dataset-gb=(\d+(?:\.\d+)?)(?:\s|$)")
# The largest dataset size taken from a comment (GB): above it, a typo or a forgery.
MAX_DATASET_GB = 1e7

# Job states in which a job still holds or waits for resources (squeue shows them; the
# others are finished).
LIVE_STATES = frozenset({"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING",
                         "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "STAGE_OUT"})


def synergy_tags(admin_comment: str) -> dict[str, str]:
    """synergy's own ``synergy.key=value`` tags in a job's admin comment (written by the
    hook and the controller; users cannot set the admin comment)."""
    out = {}
    for tok in (admin_comment or "").replace(" ", ",").split(","):
        if tok.startswith("synergy.") and "=" in tok:
            k, v = tok[len("synergy."):].split("=", 1)
            out[k] = v
    return out


def has_token(comment: str, token: str) -> bool:
    """Whether ``token`` is one of the comment's whitespace-separated words (so
    ``synergy:offline`` is not ``synergy:off``): how the hook, the controller, whatif and
    the failsafe all read the comment tokens."""
    return token in _ASCII_SPACE.split(comment or "")


# What Lua's %s matches (the C locale's isspace): str.split() would also split on
# \x1c-\x1f and Unicode spaces, which the hook does not.
_ASCII_SPACE = re.compile(r"[ \t\n\v\f\r]+")


def dataset_token(size_gb: float) -> str:
    """The comment token for a dataset of ``size_gb`` GB (what dataset_gb reads back)."""
    return f"{DATASET_TOKEN}{size_gb:g}"


def dataset_gb(comment: str) -> float | None:
    """The dataset size a comment records (GB), if any and sane."""
    m = _DATASET.search(comment or "")
    if not m:
        return None
    value = float(m.group(1))
    return value if 0 < value < MAX_DATASET_GB else None


def comment_profile_key(comment: str) -> str | None:
    """The profile key a job's comment names (``synergy:profile=KEY``), as the hook reads
    it; None when there is none or it is too long."""
    m = PROFILE_TOKEN.search(comment or "")
    return m.group(1) if m and len(m.group(1)) <= 64 else None


def table_fresh(generated_at: float, max_age_s: float, now: float) -> bool:
    """Whether the hook table is the heartbeat of a live controller (the hook, explain and
    the fail-safe all ask this)."""
    return now - generated_at <= max_age_s


# The options by which a job sets its own cores or memory (the hook's synergy.own tag ->
# the option as users write it). The twin of the table in job_submit_hook/synergy.lua.
OWN_SHAPE = {"cpus-per-task": "-c/--cpus-per-task", "mem-per-cpu": "--mem-per-cpu",
             "ntasks-per-node": "--ntasks-per-node", "exclusive": "--exclusive",
             "mem0": "--mem=0"}


@dataclass(frozen=True)
class GpuRequest:
    """How a job asks for GPUs: per job (``--gpus``), per node (``--gpus-per-node``,
    ``--gres``), per task or per socket; how many nodes at least (``-N``); whether it is
    one component of a heterogeneous job, and whether it runs in a reservation."""

    per_job: int | None = None
    per_node: int | None = None
    per_task: int | None = None
    per_socket: int | None = None
    min_nodes: int = 1
    het: bool = False
    reservation: bool = False
    # How the job sets its own cores or memory, which a per-GPU shape would fight: a key
    # of OWN_SHAPE ("cpus-per-task", ...; the hook tags such a job with it, as
    # synergy.own=KEY, so the controller knows on every release); "" when none.
    own_shape: str = ""


def not_reshaped(req: GpuRequest) -> str | None:
    """Why synergy leaves this GPU request as submitted, or None when it reshapes it.

    Reshaped: ``--gpus`` on one node and ``--gpus-per-node``/``--gres`` (any node count),
    array jobs included (their tasks share one shape). Left alone, and never held:
    heterogeneous jobs (one shape per component is not modelled), ``--gpus-per-task`` and
    ``--gpus-per-socket`` (GPUs follow tasks Slurm places), ``--gpus`` over several nodes
    (Slurm splits the GPUs between nodes as it likes), jobs in a reservation (its nodes
    are the reservation's, outside the plan: synergy plans unreserved nodes only), and jobs
    that set their own cores or memory another way (``-c``, ``--mem-per-cpu``,
    ``--ntasks-per-node``, ``--exclusive``, ``--mem=0``: Slurm would give them the larger
    of that and a per-GPU shape, so the shape synergy plans is not what runs).
    """
    if req.reservation:
        return "jobs in a reservation are not reshaped"
    if req.het:
        return "heterogeneous job"
    if req.per_task:
        return "--gpus-per-task jobs are not reshaped"
    if req.per_socket:
        return "--gpus-per-socket jobs are not reshaped"
    if req.per_job and req.min_nodes > 1:
        return "--gpus over several nodes is not reshaped"
    if req.own_shape:
        return (f"{OWN_SHAPE.get(req.own_shape, req.own_shape)} sets the job's cores or "
                "memory itself: left as submitted")
    if not (req.per_job or req.per_node):
        return "GPU request synergy cannot reshape"
    return None
