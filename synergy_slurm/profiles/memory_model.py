"""Memory sensitivity from a model, not from runs (SYNERGY.md, "Memory is modelled").

With a cache that never evicts, caching a fraction f of a dataset of D GB makes an epoch
take max(f*D/mem_bw + (1-f)*D/disk_bw, the measured full-cache epoch at that CPU count).
The cache is what the job's memory leaves after its own working set. Throughput at
(cores, memory) then follows from the epoch time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class StorageModel:
    dataset_gb: float
    disk_gb_s: float = 0.5          # the paper's servers: 500 MB/s local storage
    mem_gb_s: float = 10.0
    working_set_gb: float = 0.0     # the job's own memory (PSS), not available for caching

    def __post_init__(self) -> None:
        if self.dataset_gb <= 0 or self.disk_gb_s <= 0 or self.mem_gb_s <= 0:
            raise ValueError("dataset size and bandwidths must be positive")
        if self.working_set_gb < 0:
            raise ValueError("working set must not be negative")

    def cached_fraction(self, mem_gb: float) -> float:
        return min(1.0, max(0.0, (mem_gb - self.working_set_gb) / self.dataset_gb))

    def epoch_s(self, full_cache_epoch_s: float, mem_gb: float) -> float:
        f = self.cached_fraction(mem_gb)
        io = f * self.dataset_gb / self.mem_gb_s + (1 - f) * self.dataset_gb / self.disk_gb_s
        return max(io, full_cache_epoch_s)


def throughput_matrix(measured: Mapping[float, float], cpu_grid: Sequence[float],
                      mem_grid: Sequence[float], gpus: int, samples_per_epoch: float,
                      model: StorageModel) -> list[list[float]]:
    """Rows over ``cpu_grid`` (cores/GPU), columns over ``mem_grid`` (GB/GPU).

    ``measured`` maps cores/GPU to samples/s with the whole dataset cached (optimistic
    profiling); grid rows between measured points are interpolated linearly, outside them
    clamped. Memory per GPU x GPUs is the job's memory.
    """
    if not measured:
        raise ValueError("no measured points")
    pts = sorted(measured.items())
    rows = []
    for c in cpu_grid:
        tput = _interp(pts, c)
        full_epoch = samples_per_epoch / tput
        rows.append([samples_per_epoch / model.epoch_s(full_epoch, m * gpus)
                     for m in mem_grid])
    return rows


def _interp(pts: list[tuple[float, float]], x: float) -> float:
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        return pts[-1][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(pts):
        if x0 <= x <= x1:
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return pts[-1][1]  # pragma: no cover
