"""Which jobs a pool plans: the grouping both drivers make before ``core.plan_pools``.

A job is planned in its own partition's pool, and within it with the jobs that ask for
the same GPU type (untyped first, then by type name: ``core.pools.type_order``). The
controller groups Slurm's jobs, the controller model its simulated ones, by this one
function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from ..core.pools import Pool, type_order

T = TypeVar("T")


def by_pool(pools: Sequence[Pool], jobs: Iterable[T],
            where: Callable[[T], tuple[str, str | None]]
            ) -> list[tuple[Pool, str | None, list[T]]]:
    """(pool, GPU type, its jobs) in planning order: pools as given, each pool's GPU
    types by ``type_order``; ``where(job)`` is the job's (partition, GPU type or None).
    A pool without jobs has no group; jobs of a partition no pool has are not planned."""
    by_key: dict[tuple[str, str | None], list[T]] = {}
    for job in jobs:
        by_key.setdefault(where(job), []).append(job)
    out: list[tuple[Pool, str | None, list[T]]] = []
    for pool in pools:
        types = [k[1] for k in by_key if k[0] == pool.partition]
        for gpu_type in type_order(types):
            out.append((pool, gpu_type, by_key[pool.partition, gpu_type]))
    return out
