"""A cluster description: kinds of nodes and the partitions over them, in a small TOML file.

The dev cluster starts it (``synergy dev-cluster up --cluster FILE``) and the simulator
replays on it (``synergy simulate --cluster FILE``), so a site's shape is written once::

    [[nodes]]              # a1, a2
    name = "a"
    count = 2
    cpus = 64
    mem_gb = 512
    gpus = 4
    gpu_type = "a100"      # optional: typed GPUs (gpu:a100:N)

    [[partitions]]
    name = "a100"
    nodes = ["a"]          # node kinds, by name
    default = true
    def_cpu_per_gpu = 16   # DefCpuPerGPU
    def_mem_gb_per_gpu = 128   # DefMemPerGPU (GB)

Without a file, the default is the paper's: four 8-GPU servers with 24 cores and 500 GB, one
partition ``gpu`` with 3 cores and 62.5 GB per GPU. ``shipped`` holds a ``mixed`` example.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .core import ClusterState, PerGpu, Resources, Server
from .core.pools import Pool
from .errors import BadInputError

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,15}$")
_GPU_TYPE = re.compile(r"^[a-z0-9_]{1,16}$")
# Each node of a dev cluster is one slurmd on this machine (about 2 MB each): 1024 is what
# benchmarks/slurmctld_load.py runs at a big site's scale, well inside one machine.
MAX_NODES = 1024


class SiteError(BadInputError):
    """A cluster description that cannot be used; the message names the entry and why."""


@dataclass(frozen=True)
class NodeKind:
    name: str
    count: int
    cpus: int
    mem_gb: float
    gpus: int
    gpu_type: str = ""

    @property
    def node_names(self) -> list[str]:
        return [f"{self.name}{i}" for i in range(1, self.count + 1)]

    @property
    def mem_mb(self) -> int:
        return round(self.mem_gb * 1000)


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    kinds: tuple[str, ...]
    default: bool = False
    def_cpu_per_gpu: int = 3
    def_mem_gb_per_gpu: float = 62.5


@dataclass(frozen=True)
class Site:
    kinds: tuple[NodeKind, ...]
    partitions: tuple[PartitionSpec, ...]

    def __post_init__(self) -> None:
        names = [k.name for k in self.kinds]
        if not self.kinds or len(set(names)) != len(names):
            raise SiteError("node kinds: need at least one, with distinct names")
        if sum(k.count for k in self.kinds) > MAX_NODES:
            raise SiteError(f"at most {MAX_NODES} nodes in all")
        parts = [p.name for p in self.partitions]
        if not self.partitions or len(set(parts)) != len(parts):
            raise SiteError("partitions: need at least one, with distinct names")
        if sum(p.default for p in self.partitions) != 1:
            raise SiteError("exactly one partition must have default = true")
        for p in self.partitions:
            unknown = set(p.kinds) - set(names)
            if not p.kinds or unknown:
                raise SiteError(f"partition {p.name}: unknown node kinds "
                                f"{', '.join(sorted(unknown)) or '(none given)'}")

    @property
    def nodes(self) -> list[tuple[str, NodeKind]]:
        return [(n, k) for k in self.kinds for n in k.node_names]

    def partition_nodes(self, part: PartitionSpec) -> list[str]:
        return [n for k in self.kinds if k.name in part.kinds for n in k.node_names]

    @property
    def default_partition(self) -> PartitionSpec:
        return next(p for p in self.partitions if p.default)

    def cluster_state(self, partition: str | None = None) -> ClusterState:
        """The servers of ``partition`` (default: every node) with that partition's (or
        the default partition's) proportional share, as the simulator plans on them."""
        part = self.default_partition if partition is None else next(
            (p for p in self.partitions if p.name == partition), None)
        if part is None:
            raise SiteError(f"no partition {partition!r}")
        wanted = set(self.partition_nodes(part)) if partition is not None else None
        servers = tuple(Server(n, Resources(k.gpus, k.cpus, k.mem_gb))
                        for n, k in self.nodes if wanted is None or n in wanted)
        return ClusterState(servers, fair=PerGpu(part.def_cpu_per_gpu,
                                                       part.def_mem_gb_per_gpu))

    def pools(self) -> tuple[Pool, ...]:
        """Every partition as a pool (its nodes, its proportional share, each node's GPU
        type), in the description's order: what the controller model plans apart."""
        kinds = dict(self.nodes)
        out = []
        for p in self.partitions:
            names = self.partition_nodes(p)
            cluster = ClusterState(tuple(Server(n, Resources(kinds[n].gpus, kinds[n].cpus,
                                                             kinds[n].mem_gb))
                                         for n in names),
                                   fair=PerGpu(p.def_cpu_per_gpu, p.def_mem_gb_per_gpu))
            out.append(Pool(p.name, cluster, {n: kinds[n].gpu_type or None for n in names}))
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        """The description as the TOML file holds it (``site_from_dict`` reads it back)."""
        return {"nodes": [{"name": k.name, "count": k.count, "cpus": k.cpus,
                           "mem_gb": k.mem_gb, "gpus": k.gpus, "gpu_type": k.gpu_type}
                          for k in self.kinds],
                "partitions": [{"name": p.name, "nodes": list(p.kinds), "default": p.default,
                                "def_cpu_per_gpu": p.def_cpu_per_gpu,
                                "def_mem_gb_per_gpu": p.def_mem_gb_per_gpu}
                               for p in self.partitions]}


def default_site(nodes: int = 4) -> Site:
    """The paper's servers, ``nodes`` of them, in one partition ``gpu``."""
    return Site((NodeKind("n", nodes, 24, 500.0, 8),),
                (PartitionSpec("gpu", ("n",), True, 3, 62.5),))


DEFAULT_SITE = default_site()


SHIPPED_DIR = Path(__file__).resolve().parent / "data" / "clusters"


def shipped_sites() -> list[str]:
    """The descriptions shipped with the package, by name (``mixed``, ``paper``)."""
    return sorted(p.stem for p in SHIPPED_DIR.glob("*.toml"))


def load_site(path: str | Path) -> Site:
    """A description file, or the name of a shipped one (``mixed``)."""
    if str(path) in shipped_sites():
        path = SHIPPED_DIR / f"{path}.toml"
    try:
        doc = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise SiteError(f"{path}: no such file, nor a shipped cluster of that name "
                        f"({', '.join(shipped_sites())})") from None
    except OSError as exc:
        raise SiteError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SiteError(f"{path}: not TOML: {exc}") from None
    try:
        return site_from_dict(doc)
    except SiteError as exc:
        raise SiteError(f"{path}: {exc}") from None


def site_from_dict(doc: dict[str, Any]) -> Site:
    extra = set(doc) - {"nodes", "partitions"}
    if extra:
        raise SiteError(f"unknown top-level keys {', '.join(sorted(extra))}")
    kinds = [_kind(i, d) for i, d in enumerate(_list(doc, "nodes"))]
    parts = [_partition(i, d) for i, d in enumerate(_list(doc, "partitions"))]
    return Site(tuple(kinds), tuple(parts))


def _list(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    v = doc.get(key)
    if not isinstance(v, list) or not all(isinstance(d, dict) for d in v):
        raise SiteError(f"[[{key}]]: expected a list of tables")
    return v


def _kind(i: int, d: dict[str, Any]) -> NodeKind:
    where = f"nodes #{i + 1}"
    _keys(where, d, {"name", "count", "cpus", "mem_gb", "gpus", "gpu_type"})
    name = _str(where, d, "name")
    if not _NAME.match(name):
        raise SiteError(f"{where}: name {name!r}: lower-case letters, digits, - or _")
    gpu_type = d.get("gpu_type", "")
    if gpu_type and (not isinstance(gpu_type, str) or not _GPU_TYPE.match(gpu_type)):
        raise SiteError(f"{where}: gpu_type {gpu_type!r}: lower-case letters and digits")
    kind = NodeKind(name, _int(where, d, "count", 1, MAX_NODES), _int(where, d, "cpus", 1, 4096),
                    _num(where, d, "mem_gb", 1, 100_000), _int(where, d, "gpus", 1, 16),
                    gpu_type)
    if kind.cpus < kind.gpus:
        raise SiteError(f"{where}: {kind.cpus} cores for {kind.gpus} GPUs: at least one "
                        "core per GPU")
    return kind


def _partition(i: int, d: dict[str, Any]) -> PartitionSpec:
    where = f"partitions #{i + 1}"
    _keys(where, d, {"name", "nodes", "default", "def_cpu_per_gpu", "def_mem_gb_per_gpu"})
    name = _str(where, d, "name")
    if not _NAME.match(name):
        raise SiteError(f"{where}: name {name!r}: lower-case letters, digits, - or _")
    kinds = d.get("nodes")
    if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
        raise SiteError(f"{where}: nodes must be a list of node kind names")
    default = d.get("default", False)
    if not isinstance(default, bool):
        raise SiteError(f"{where}: default must be true or false")
    return PartitionSpec(name, tuple(kinds), default,
                         _int(where, d, "def_cpu_per_gpu", 1, 4096, 3),
                         _num(where, d, "def_mem_gb_per_gpu", 0.001, 100_000, 62.5))


def _keys(where: str, d: dict[str, Any], allowed: set[str]) -> None:
    extra = set(d) - allowed
    if extra:
        raise SiteError(f"{where}: unknown keys {', '.join(sorted(extra))}")


def _str(where: str, d: dict[str, Any], key: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise SiteError(f"{where}: {key} must be a string")
    return v


def _int(where: str, d: dict[str, Any], key: str, lo: int, hi: int,
         default: int | None = None) -> int:
    v = d.get(key, default)
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise SiteError(f"{where}: {key} must be a whole number from {lo} to {hi}")
    return v


def _num(where: str, d: dict[str, Any], key: str, lo: float, hi: float,
         default: float | None = None) -> float:
    v = d.get(key, default)
    if not isinstance(v, int | float) or isinstance(v, bool) or not lo <= v <= hi:
        raise SiteError(f"{where}: {key} must be a number from {lo:g} to {hi:g}")
    return float(v)
