"""Job profiles: throughput over cores/GPU x memory/GPU, with interpolation and the ideal point.

A profile stores throughput on a grid (rows: cores per GPU, columns: GB per GPU), in any
unit; the allocators only use ratios against the throughput at the cluster's proportional
point, so the same profile serves servers with 24 or 48 cores. Between grid points the
throughput is interpolated bilinearly; outside the grid it is clamped to the edge.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadInputError
from .resources import MEM_EPS, PerGpu

# The paper's grid (SYNERGY.md): cores/GPU x memory/GPU.
PAPER_CPU_GRID: tuple[float, ...] = (1, 2, 3, 4, 5, 6, 9, 12, 24)
PAPER_MEM_GRID: tuple[float, ...] = (20.83, 62.5, 125, 187.5, 250)
IDEAL_TOLERANCE = 1e-9
# A GPU type as Slurm names it in Gres (gpu:a100:4).
GPU_TYPE_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,32}$")


class ProfileError(BadInputError):
    """A profile file or matrix that cannot be used."""


@dataclass(frozen=True)
class Profile:
    """Throughput of one kind of job over the cores/GPU x memory/GPU grid."""

    key: str
    cpu_grid: tuple[float, ...]
    mem_grid: tuple[float, ...]
    throughput: tuple[tuple[float, ...], ...]
    ideal: PerGpu | None = None
    iter_time_s: float | None = None
    batch_size: int | None = None
    task: str = ""
    # The GPU type it was measured on ("": not recorded, for any type): a profile measured
    # on one type says little about another (pick_profile).
    gpu_type: str = ""
    _cache: dict[tuple[float, float], float] = field(default_factory=dict, compare=False,
                                                     repr=False, hash=False)

    def __post_init__(self) -> None:
        cg, mg, tp = self.cpu_grid, self.mem_grid, self.throughput
        if not cg or not mg:
            raise ProfileError(f"{self.key}: empty grid")
        if list(cg) != sorted(set(cg)) or list(mg) != sorted(set(mg)):
            raise ProfileError(f"{self.key}: grid values must be strictly increasing")
        if cg[0] <= 0 or mg[0] <= 0:
            raise ProfileError(f"{self.key}: grid values must be positive")
        if len(tp) != len(cg) or any(len(row) != len(mg) for row in tp):
            raise ProfileError(f"{self.key}: throughput must be {len(cg)} x {len(mg)}")
        for row in tp:
            for v in row:
                if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                    raise ProfileError(f"{self.key}: throughput values must be positive numbers")
        if self.ideal is None:
            object.__setattr__(self, "ideal", self.cheapest_best_point())
        elif self.ideal.cpus < 1 or self.ideal.mem_gb <= 0:
            raise ProfileError(f"{self.key}: ideal point must be positive")
        elif self.ideal.cpus > cg[-1] or self.ideal.mem_gb > mg[-1] + MEM_EPS:
            raise ProfileError(f"{self.key}: ideal point {self.ideal.cpus} cores, "
                               f"{self.ideal.mem_gb:g} GB per GPU is off the grid (at most "
                               f"{cg[-1]:g} cores, {mg[-1]:g} GB)")

    # -- evaluation ---------------------------------------------------------------------
    def at(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float:
        """Throughput at a point, bilinear between grid points, clamped outside the grid."""
        key = (cpus_per_gpu, mem_gb_per_gpu)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        i0, i1, wi = _bracket(self.cpu_grid, cpus_per_gpu)
        j0, j1, wj = _bracket(self.mem_grid, mem_gb_per_gpu)
        t = self.throughput
        val = ((1 - wi) * ((1 - wj) * t[i0][j0] + wj * t[i0][j1])
               + wi * ((1 - wj) * t[i1][j0] + wj * t[i1][j1]))
        self._cache[key] = val
        return val

    def iterations_in(self, seconds: float, cpus_per_gpu: float, mem_gb_per_gpu: float) -> int:
        """How many iterations take ``seconds`` at this share (at least one): how the demo
        and the benchmarks size an emulated job to run that long at its proportional share."""
        per_iter = (self.iter_time_s or 1.0) / self.at(cpus_per_gpu, mem_gb_per_gpu)
        return max(1, round(seconds / per_iter))

    def speedup(self, point: PerGpu, fair: PerGpu) -> float:
        """Throughput at ``point`` relative to the proportional point ``fair``."""
        return self.speedup_at(point.cpus, point.mem_gb, fair)

    def speedup_at(self, cpus_per_gpu: float, mem_gb_per_gpu: float, fair: PerGpu) -> float:
        """:meth:`speedup` at a point that may hold a fraction of a core per GPU (a job's
        poorest node, whatif/history.py)."""
        return self.at(cpus_per_gpu, mem_gb_per_gpu) / self.at(fair.cpus, fair.mem_gb)

    @property
    def best(self) -> float:
        return max(max(row) for row in self.throughput)

    def cheapest_best_point(self) -> PerGpu:
        """The grid point reaching the best throughput with the fewest resources.

        "Fewest" ranks cores first, then memory: cores are the scarcer resource on GPU
        servers (3 per GPU against 62.5 GB in the paper's shape).
        """
        best = self.best
        cands = [(c, m) for i, c in enumerate(self.cpu_grid) for j, m in enumerate(self.mem_grid)
                 if self.throughput[i][j] >= best * (1 - IDEAL_TOLERANCE)]
        c, m = min(cands)
        return PerGpu(math.ceil(c), m)

    # -- construction -------------------------------------------------------------------
    @staticmethod
    def from_dict(key: str, data: Mapping[str, Any], cpu_grid: tuple[float, ...],
                  mem_grid: tuple[float, ...]) -> Profile:
        """One model entry of a ``model_profiles.json``-shaped file; an unknown field, an
        ideal point off the grid or a speedup that is not a positive number is an error
        that names it (a typo must not pass as a profile)."""
        unknown = sorted(set(data) - ENTRY_FIELDS)
        if unknown:
            raise ProfileError(f"{key}: unknown fields {', '.join(unknown)} (known: "
                               f"{', '.join(sorted(ENTRY_FIELDS))})")
        try:
            tp = tuple(tuple(float(v) for v in row) for row in data["throughput"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProfileError(f"{key}: bad or missing 'throughput': {exc}") from exc
        ideal = None
        if "ideal_cpu_per_gpu" in data and "ideal_mem_gb_per_gpu" in data:
            try:
                ideal = PerGpu(math.ceil(float(data["ideal_cpu_per_gpu"]) - MEM_EPS),
                               float(data["ideal_mem_gb_per_gpu"]))
            except (TypeError, ValueError, OverflowError) as exc:
                raise ProfileError(f"{key}: bad ideal point: {exc}") from exc
        if "speedup_at_ideal" in data:
            try:
                speedup = float(data["speedup_at_ideal"])
            except (TypeError, ValueError) as exc:
                raise ProfileError(f"{key}: bad speedup_at_ideal: {exc}") from exc
            if not (math.isfinite(speedup) and speedup > 0):
                raise ProfileError(f"{key}: speedup_at_ideal = {speedup:g}: must be a "
                                   "positive number")
        gpu_type = str(data.get("gpu_type", ""))
        if gpu_type and (not GPU_TYPE_RE.match(gpu_type) or
                         key != profile_slot(key.rsplit("@", 1)[0], gpu_type)):
            raise ProfileError(f"{key}: a profile measured on {gpu_type!r} GPUs must be "
                               f"named KEY@{gpu_type}")
        if "@" in key and not gpu_type:
            raise ProfileError(f"{key}: '@' is for KEY@GPU_TYPE, with a 'gpu_type' entry")
        return Profile(
            key=key.rsplit("@", 1)[0] if gpu_type else key, cpu_grid=cpu_grid,
            mem_grid=mem_grid, throughput=tp, ideal=ideal,
            iter_time_s=_opt_float(data.get("iter_time_s_at_proportional")),
            batch_size=_opt_int(data.get("batch_size")), task=str(data.get("task", "")),
            gpu_type=gpu_type,
        )

    def to_dict(self) -> dict[str, Any]:
        assert self.ideal is not None
        out: dict[str, Any] = {
            "task": self.task,
            "ideal_cpu_per_gpu": float(self.ideal.cpus),
            "ideal_mem_gb_per_gpu": self.ideal.mem_gb,
            "throughput": [list(row) for row in self.throughput],
        }
        if self.iter_time_s is not None:
            out["iter_time_s_at_proportional"] = self.iter_time_s
        if self.batch_size is not None:
            out["batch_size"] = self.batch_size
        if self.gpu_type:
            out["gpu_type"] = self.gpu_type
        return out

    @property
    def slot(self) -> str:
        """Its name among profiles: the key, ``KEY@TYPE`` if measured on a GPU type."""
        return profile_slot(self.key, self.gpu_type)


# The fields of one model's entry in a profiles document (speedup_at_ideal is informative:
# the throughput matrix is what counts).
ENTRY_FIELDS = frozenset({"task", "ideal_cpu_per_gpu", "ideal_mem_gb_per_gpu", "throughput",
                          "iter_time_s_at_proportional", "batch_size", "gpu_type",
                          "speedup_at_ideal"})


def profile_slot(key: str, gpu_type: str | None) -> str:
    return f"{key}@{gpu_type}" if gpu_type else key


def pick_profile(profiles: Mapping[str, Profile], key: str, gpu_types: frozenset[str]
                 ) -> Profile | None:
    """The profile for a job of ``key`` that runs on GPUs of ``gpu_types`` (the types of the
    nodes it may run on; {""} where Slurm names none), None if there is none.

    A profile measured on the job's one GPU type wins; a profile of no recorded type serves
    every type; one measured on another type (or on one of several the job may land on) is
    not used: the job stays proportional until its key is profiled on its type."""
    if len(gpu_types) == 1:
        [only] = gpu_types
        typed = profiles.get(profile_slot(key, only))
        if typed is not None:
            return typed
    prof = profiles.get(key)
    if prof is not None and prof.gpu_type and gpu_types != {prof.gpu_type}:
        return None
    return prof


def usable_profiles(profiles: Mapping[str, Profile], gpu_types: frozenset[str]
                    ) -> dict[str, Profile]:
    """By key, the profiles :func:`pick_profile` gives a job on ``gpu_types``."""
    out = {}
    for key in {p.key for p in profiles.values()}:
        prof = pick_profile(profiles, key, gpu_types)
        if prof is not None:
            out[key] = prof
    return out


def profiles_from_doc(doc: Mapping[str, Any]) -> dict[str, Profile]:
    try:
        cpu_grid = tuple(float(v) for v in doc["cpu_per_gpu_grid"])
        mem_grid = tuple(float(v) for v in doc["mem_gb_per_gpu_grid"])
        models = doc["models"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProfileError(f"not a profiles document: {exc}") from exc
    if not isinstance(models, Mapping):
        raise ProfileError("'models' must be an object")
    return {str(k): Profile.from_dict(str(k), v, cpu_grid, mem_grid) for k, v in models.items()}


def profiles_to_doc(profiles: Mapping[str, Profile]) -> dict[str, Any]:
    """The inverse of :func:`profiles_from_doc`; all profiles must share one grid."""
    grids = {(p.cpu_grid, p.mem_grid) for p in profiles.values()}
    if len(grids) > 1:
        raise ProfileError("profiles on different grids cannot share one document")
    cpu_grid, mem_grid = grids.pop() if grids else (PAPER_CPU_GRID, PAPER_MEM_GRID)
    return {"cpu_per_gpu_grid": list(cpu_grid), "mem_gb_per_gpu_grid": list(mem_grid),
            "models": {p.slot if p.gpu_type else k: p.to_dict()
                       for k, p in sorted(profiles.items())}}


def _bracket(grid: tuple[float, ...], x: float) -> tuple[int, int, float]:
    if x <= grid[0]:
        return 0, 0, 0.0
    if x >= grid[-1]:
        n = len(grid) - 1
        return n, n, 0.0
    hi = bisect.bisect_left(grid, x)
    if grid[hi] == x:
        return hi, hi, 0.0
    lo = hi - 1
    return lo, hi, (x - grid[lo]) / (grid[hi] - grid[lo])


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)
