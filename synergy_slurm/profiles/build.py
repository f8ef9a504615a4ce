"""From a measured CPU curve (optimistic profiling) to a Profile over cores x memory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core import PerGpu, Profile
from ..core.profile import PAPER_MEM_GRID
from .memory_model import StorageModel, throughput_matrix

# Measured points within this fraction of the best count as "reaching the best": the
# ideal share is the cheapest of them (measurement noise must not buy extra cores).
IDEAL_WITHIN = 0.03


def build_profile(key: str, curve: Mapping[int, float], gpus: int = 1,
                  mem_grid: Sequence[float] = PAPER_MEM_GRID,
                  storage: StorageModel | None = None,
                  samples_per_epoch: float | None = None) -> Profile:
    """``curve`` maps cores per GPU to samples/s with all memory. Without a storage model
    the job is taken as memory-insensitive (every memory column equal)."""
    if not curve:
        raise ValueError("no measured points")
    cpu_grid = tuple(float(c) for c in sorted(curve))
    if storage is None:
        rows = [[curve[int(c)]] * len(mem_grid) for c in cpu_grid]
    else:
        if not samples_per_epoch or samples_per_epoch <= 0:
            raise ValueError("the memory model needs the samples per epoch")
        rows = throughput_matrix({float(c): v for c, v in curve.items()}, cpu_grid, mem_grid,
                                 gpus, samples_per_epoch, storage)
    best = max(max(r) for r in rows)
    ideal = min((c, m) for c, row in zip(cpu_grid, rows, strict=True)
                for m, v in zip(mem_grid, row, strict=True) if v >= best * (1 - IDEAL_WITHIN))
    return Profile(key, cpu_grid, tuple(float(m) for m in mem_grid),
                   tuple(tuple(r) for r in rows), ideal=PerGpu(int(ideal[0]), float(ideal[1])),
                   task="measured")
