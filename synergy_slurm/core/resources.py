"""Resources, servers and the cluster a plan is made for.

Cores are whole numbers (Slurm hands out cores, and the reference grid is in whole cores per
GPU); memory is in GB as a float (Slurm's MB are converted at the adapter). Comparisons of
memory use a small tolerance so that sums of per-GPU shares such as 8 x 62.5 never fail
by a rounding error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

MEM_EPS = 1e-6


@dataclass(frozen=True, order=True)
class Resources:
    """An amount of GPUs, CPU cores and memory (GB)."""

    gpus: int = 0
    cpus: int = 0
    mem_gb: float = 0.0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.gpus + other.gpus, self.cpus + other.cpus,
                         self.mem_gb + other.mem_gb)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.gpus - other.gpus, self.cpus - other.cpus,
                         self.mem_gb - other.mem_gb)

    def scaled(self, n: int) -> Resources:
        return Resources(self.gpus * n, self.cpus * n, self.mem_gb * n)

@dataclass(frozen=True)
class Server:
    """One machine: a name and what it has."""

    name: str
    capacity: Resources


@dataclass(frozen=True)
class PerGpu:
    """A per-GPU share: cores per GPU and GB per GPU (what Slurm's cpus/mem-per-gpu set)."""

    cpus: int
    mem_gb: float

    def times(self, gpus: int) -> Resources:
        return Resources(gpus, self.cpus * gpus, self.mem_gb * gpus)

    def within(self, other: PerGpu) -> bool:
        return self.cpus <= other.cpus and self.mem_gb <= other.mem_gb + MEM_EPS

    def capped(self, other: PerGpu) -> PerGpu:
        return PerGpu(min(self.cpus, other.cpus), min(self.mem_gb, other.mem_gb))


# ClusterState's fair share when none is given: worked out from its servers.
_FROM_SERVERS = PerGpu(-1, -1.0)


@dataclass(frozen=True)
class ClusterState:
    """The servers a plan may use and what is already taken on each.

    ``reserved`` holds, per server name, resources the plan must not touch (jobs synergy
    does not manage, running jobs that may not be moved). ``fair`` is the GPU-proportional
    share per GPU (what the partition's DefCpuPerGPU/DefMemPerGPU give); by default the
    smallest per-GPU share of any server, so that a proportional GPU fits on every server.
    """

    servers: tuple[Server, ...]
    reserved: tuple[tuple[str, Resources], ...] = ()
    fair: PerGpu = field(default_factory=lambda: _FROM_SERVERS)

    def __post_init__(self) -> None:
        names = [s.name for s in self.servers]
        if len(set(names)) != len(names):
            raise ValueError("server names must be unique")
        if self.fair is _FROM_SERVERS:
            object.__setattr__(self, "fair", default_fair_share(self.servers))

    def free(self) -> list[Resources]:
        """Per server (in order), capacity minus reservations, never negative."""
        return [Resources(g, c, m) for g, c, m in zip(*self.free_columns(), strict=True)]

    def free_columns(self) -> tuple[list[int], list[int], list[float]]:
        """``free()`` as three new lists, free GPUs, cores and memory per server (in
        order): what the planners keep (the ledger, Slurm's timeline), without a
        Resources per server, which was a sixth of a large replay's time (#17)."""
        held: dict[str, tuple[int, int, float]] = {}
        for name, res in self.reserved:      # summed in order, as floats must be
            hg, hc, hm = held.get(name, (0, 0, 0.0))
            held[name] = (hg + res.gpus, hc + res.cpus, hm + res.mem_gb)
        gpus: list[int] = []
        cpus: list[int] = []
        mem: list[float] = []
        for s in self.servers:
            cap, h = s.capacity, held.get(s.name)
            g, c, m = (cap.gpus, cap.cpus, cap.mem_gb) if h is None else \
                (cap.gpus - h[0], cap.cpus - h[1], cap.mem_gb - h[2])
            # max(0, x) without the call: the same value and type (0 for NaN too).
            gpus.append(g if g > 0 else 0)
            cpus.append(c if c > 0 else 0)
            mem.append(m if m > 0.0 else 0.0)
        return gpus, cpus, mem

    @property
    def total(self) -> Resources:
        tot = Resources()
        for s in self.servers:
            tot = tot + s.capacity
        return tot

    @property
    def max_server_gpus(self) -> int:
        return max((s.capacity.gpus for s in self.servers), default=0)

    @staticmethod
    def uniform(n: int, gpus: int = 8, cpus: int = 24, mem_gb: float = 500.0,
                prefix: str = "s") -> ClusterState:
        """n identical servers named s0..s{n-1}: the paper's default shape."""
        width = len(str(max(n - 1, 0)))
        return ClusterState(tuple(Server(f"{prefix}{i:0{width}d}", Resources(gpus, cpus, mem_gb))
                                  for i in range(n)))


def default_fair_share(servers: tuple[Server, ...]) -> PerGpu:
    """The GPU-proportional share: per-GPU cores (floored) and memory of the tightest server."""
    shares = [(s.capacity.cpus // s.capacity.gpus, s.capacity.mem_gb / s.capacity.gpus)
              for s in servers if s.capacity.gpus > 0]
    if not shares:
        return PerGpu(0, 0.0)
    return PerGpu(min(c for c, _ in shares), min(m for _, m in shares))


def floor_div(a: float, b: float) -> int:
    """How many times b fits in a (b > 0), tolerant to memory rounding."""
    return math.floor((a + MEM_EPS) / b)
