"""synergy-slurm's configuration: one TOML file (``/etc/slurm/synergy.toml`` by default).

Every key has a default; an unknown key or a value of the wrong type is an error that names
the key, so a typo never silently changes behaviour.

    [slurm]
    conf = "/etc/slurm/slurm.conf"      # SLURM_CONF for the commands we run
    timeout_s = 30

    [hook]
    dir = "/etc/slurm"                  # where job_submit.lua and its table live
    partitions = ["gpu"]
    default_partition = "gpu"
    optout_users = []                   # user names whose jobs synergy never touches
    hold_unknown = true                 # hold jobs without a known profile until shaped
    hold_known = true                   # known profiles too (false: start at once, shaped)
    override_user_shape = false         # may synergy change an explicit --cpus-per-gpu?
    max_age_s = 120                     # an older table means "controller down"

    [profiles]
    file = ""                           # profiles JSON (model_profiles.json shape)
    store = "/var/lib/synergy/profiles.db"  # measured profiles (synergy profile ...)

    [controller]
    mode = "observe"                    # observe | advise | enforce
    policy = "fifo"                     # fifo | srtf | las | ftf
    allocator = "tune"                  # proportional | greedy | tune | tune-ref | opt
    interval_s = 30.0                   # seconds between rounds
    state_db = "/var/lib/synergy/state.db"
    audit_log = "/var/log/synergy/audit.jsonl"
    restart_cost_s = 120.0              # what a requeue costs a running job
    requeue_min_interval_s = 1800.0     # never requeue a job more often
    requeue_budget = 2                  # requeues per round at most
    metrics_port = 0                    # Prometheus metrics on this port (0: off)
    write_hook_table = true             # refresh the hook table every round (heartbeat)

    [profiling]                         # profiling jobs the controller submits (enforce)
    auto = false                        # profile managed jobs whose key is unknown
                                        # (runs the user's script: see docs)
    budget_s = 300                      # wall budget of one profile (time limit + 2 min)
    spool = "/var/lib/synergy/profiling"  # one directory per profiling job, owned by its user
    account = ""                        # Slurm account charged (empty: the user's default)
    partition = ""                      # empty: the job's own partition
    max_cpus_per_gpu = 0                # most cores/GPU to try (0: a node's cores / job GPUs)
    command = ""                        # synergy on the nodes (empty: this Python -m ...)
    retry_after_s = 86400               # a failed key is tried again after this long
    disk_gb_s = 0.5                     # the site's storage bandwidth (memory model)
    mem_gb_s = 10.0                     # reading from the page cache
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path("/etc/slurm/synergy.toml")


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class SlurmSection:
    conf: str = ""
    timeout_s: float = 30.0


@dataclass(frozen=True)
class HookSection:
    dir: str = "/etc/slurm"
    partitions: tuple[str, ...] = ("gpu",)
    default_partition: str = "gpu"
    optout_users: tuple[str, ...] = ()
    hold_unknown: bool = True
    hold_known: bool = True
    override_user_shape: bool = False
    max_age_s: int = 120


@dataclass(frozen=True)
class ProfilesSection:
    file: str = ""
    store: str = "/var/lib/synergy/profiles.db"


MODES = ("observe", "advise", "enforce")


@dataclass(frozen=True)
class ControllerSection:
    mode: str = "observe"
    policy: str = "fifo"
    allocator: str = "tune"
    interval_s: float = 30.0
    state_db: str = "/var/lib/synergy/state.db"
    audit_log: str = "/var/log/synergy/audit.jsonl"
    restart_cost_s: float = 120.0
    requeue_min_interval_s: float = 1800.0
    requeue_budget: int = 2
    metrics_port: int = 0
    write_hook_table: bool = True
    max_backoff_s: float = 300.0

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"[controller] mode must be one of {', '.join(MODES)}, "
                              f"got {self.mode!r}")
        if self.interval_s <= 0:
            raise ConfigError("[controller] interval_s must be positive")


@dataclass(frozen=True)
class ProfilingSection:
    auto: bool = False
    budget_s: float = 300.0
    spool: str = "/var/lib/synergy/profiling"
    account: str = ""
    partition: str = ""
    max_cpus_per_gpu: int = 0
    command: str = ""
    retry_after_s: float = 86400.0
    disk_gb_s: float = 0.5
    mem_gb_s: float = 10.0

    def __post_init__(self) -> None:
        if self.disk_gb_s <= 0 or self.mem_gb_s <= 0:
            raise ConfigError("[profiling] disk_gb_s and mem_gb_s must be positive")
        if self.budget_s < 10:
            raise ConfigError("[profiling] budget_s must be at least 10")
        if self.max_cpus_per_gpu < 0:
            raise ConfigError("[profiling] max_cpus_per_gpu must be >= 0")


@dataclass(frozen=True)
class Config:
    slurm: SlurmSection = field(default_factory=SlurmSection)
    hook: HookSection = field(default_factory=HookSection)
    profiles: ProfilesSection = field(default_factory=ProfilesSection)
    controller: ControllerSection = field(default_factory=ControllerSection)
    profiling: ProfilingSection = field(default_factory=ProfilingSection)
    path: str = ""


SECTIONS = {"slurm": SlurmSection, "hook": HookSection, "profiles": ProfilesSection,
            "controller": ControllerSection, "profiling": ProfilingSection}


def load_config(path: str | Path | None = None, missing_ok: bool = True) -> Config:
    p = Path(path) if path else DEFAULT_PATH
    if not p.exists():
        if missing_ok and path is None:
            return Config()
        raise ConfigError(f"config file {p} not found")
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{p}: {exc}") from None
    return config_from_dict(doc, str(p))


def config_from_dict(doc: dict[str, Any], path: str = "") -> Config:
    built: dict[str, Any] = {}
    for name, value in doc.items():
        cls = SECTIONS.get(name)
        if cls is None:
            raise ConfigError(f"{path}: unknown section [{name}] "
                              f"(known: {', '.join(SECTIONS)})")
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: [{name}] must be a table")
        built[name] = _section(cls, value, f"{path}: [{name}]")
    return Config(**built, path=path)


def _section(cls: type, values: dict[str, Any], where: str) -> Any:
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, val in values.items():
        if key not in known:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(known)})")
        default = known[key].default
        if isinstance(default, bool):
            ok = isinstance(val, bool)
        elif isinstance(default, int):
            ok = isinstance(val, int) and not isinstance(val, bool)
        elif isinstance(default, float):
            ok = isinstance(val, int | float) and not isinstance(val, bool)
            val = float(val) if ok else val
        elif isinstance(default, tuple):
            ok = isinstance(val, list) and all(isinstance(v, str) for v in val)
            val = tuple(val) if ok else val
        else:
            ok = isinstance(val, str)
        if not ok:
            raise ConfigError(f"{where}: {key} = {val!r} has the wrong type "
                              f"(expected {type(default).__name__})")
        kwargs[key] = val
    return cls(**kwargs)
