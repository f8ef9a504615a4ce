"""The local test cluster: a real Slurm on this machine (slurmctld, N slurmd with fake
GPUs, a private munged), for the tests, the benchmarks, the demo and trials.

Kept apart from :mod:`synergy_slurm.slurm`, the production adapter: this package installs
packages and starts daemons, the adapter only reads and writes a site's Slurm.
"""

from .cluster import (
    DEFAULT_DIR,
    DevClusterError,
    add_user,
    down,
    env_for,
    existing_spec,
    release_info,
    slurm_cli,
    start_slurmctld,
    status,
    up,
    wait_idle,
    write_all_config,
)
from .conf import SCHED_INTERVAL_S, DevClusterSpec, local_spec, memory_cgroups

__all__ = [
    "DEFAULT_DIR", "SCHED_INTERVAL_S", "DevClusterError", "DevClusterSpec", "add_user",
    "down", "env_for",
    "existing_spec", "local_spec", "memory_cgroups", "release_info", "slurm_cli",
    "start_slurmctld", "status", "up", "wait_idle", "write_all_config",
]
