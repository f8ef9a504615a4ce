"""synergy-slurm's configuration: one TOML file (``/etc/slurm/synergy.toml`` by default).

Every key has a default; an unknown key or a value of the wrong type is an error that names
the key, so a typo never silently changes behaviour. The sections below are the keys and
their defaults; docs/synergy.toml.example shows every one with its default and what it
means (tests/test_config.py checks it against these dataclasses, key by key, so it is the
one place to read them and cannot drift).
"""

from __future__ import annotations

import ipaddress
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .errors import BadInputError

DEFAULT_PATH = Path("/etc/slurm/synergy.toml")
NAME_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")     # Slurm partition and user names


class ConfigError(BadInputError):
    pass


def _range(problems: list[str], name: str, value: float, lo: float | None = None,
           hi: float | None = None, lo_open: bool = False) -> None:
    if lo is not None and (value <= lo if lo_open else value < lo):
        problems.append(f"{name} = {value!r}: must be {'>' if lo_open else '>='} {lo:g}")
    elif hi is not None and value > hi:
        problems.append(f"{name} = {value!r}: must be <= {hi:g}")


class _Checked:
    """A section whose values are checked when it is made; :meth:`problems` lists every
    problem (``synergy config check`` prints them all), the constructor raises the first."""

    def problems(self) -> list[str]:
        return []

    def __post_init__(self) -> None:
        found = self.problems()
        if found:
            raise ConfigError("; ".join(found))


@dataclass(frozen=True)
class SlurmSection(_Checked):
    conf: str = ""
    timeout_s: float = 30.0
    # Where Slurm's commands are (squeue, sbatch, ...), when not on PATH: e.g. a release
    # installed beside the system's, or a dev cluster's wrappers (synergy dev-cluster up).
    bindir: str = ""
    # How jobs and nodes are read: "text" (squeue -O's text for the jobs, every release),
    # "json" (squeue --json), "pyslurm" (pyslurm, which must be built for the running
    # release), "auto" (text: measured the fastest; admin guide §12).
    reader: str = "auto"

    def problems(self) -> list[str]:
        out: list[str] = []
        _range(out, "timeout_s", self.timeout_s, 1, 3600)
        if self.reader not in ("auto", "text", "json", "pyslurm"):
            out.append(f"reader = {self.reader!r}: choose auto, text, json or pyslurm")
        if self.bindir and not self.bindir.startswith("/"):
            out.append(f"bindir = {self.bindir!r}: must be an absolute directory")
        return out


@dataclass(frozen=True)
class HookSection(_Checked):
    dir: str = "/etc/slurm"
    # Runtime state: the hook table the controller rewrites every round and the kill
    # switch. Not beside slurm.conf, which configuration management and configless Slurm
    # own; job_submit.lua names it (`synergy hook install` writes the line).
    state_dir: str = "/var/lib/synergy"
    partitions: tuple[str, ...] = ("gpu",)
    default_partition: str = "gpu"
    optout_users: tuple[str, ...] = ()
    hold_unknown: bool = True
    hold_known: bool = True
    override_user_shape: bool = False
    max_age_s: int = 120

    def problems(self) -> list[str]:
        out: list[str] = []
        if not self.dir.startswith("/"):
            out.append(f"dir = {self.dir!r}: must be the absolute directory of slurm.conf "
                       "(slurmctld loads job_submit.lua from there)")
        if not self.state_dir.startswith("/"):
            out.append(f"state_dir = {self.state_dir!r}: must be an absolute directory (the "
                       "hook table and the kill switch live there)")
        if not self.partitions:
            out.append("partitions: give at least one partition")
        out += [f"partitions: bad partition name {p!r}" for p in self.partitions
                if not NAME_RE.match(p)]
        if not NAME_RE.match(self.default_partition):
            out.append(f"default_partition = {self.default_partition!r}: not a partition name")
        elif self.partitions and self.default_partition not in self.partitions:
            out.append(f"default_partition = {self.default_partition!r}: not one of "
                       f"partitions ({', '.join(self.partitions)}); the hook would leave jobs "
                       "without -p unmanaged")
        out += [f"optout_users: bad user name {u!r}" for u in self.optout_users
                if not NAME_RE.match(u)]
        _range(out, "max_age_s", self.max_age_s, 2, 86400)
        return out


@dataclass(frozen=True)
class ProfilesSection(_Checked):
    file: str = ""
    store: str = "/var/lib/synergy/profiles.db"
    # Which profiles shape a user's jobs: "all" (site-wide ones and those measured for any
    # user), "own" (site-wide ones and those measured for that user), "site" (site-wide
    # only: the profiles file and what an admin imported or measured). "own" by default:
    # under "all" a user's profiling job (whose numbers that user writes) shapes every
    # other user's jobs of the key.
    trust: str = "own"

    def problems(self) -> list[str]:
        out = [] if self.store else ["store: must name the profile database"]
        if self.trust not in TRUST:
            out.append(f"trust = {self.trust!r}: must be one of {', '.join(TRUST)}")
        return out


TRUST = ("all", "own", "site")
# observe: plan, record and audit, send nothing; enforce: act. (An "advise" mode that
# differed from observe only in a label was removed: its config gets a clear error.)
MODES = ("observe", "enforce")


@dataclass(frozen=True)
class ControllerSection(_Checked):
    mode: str = "observe"
    policy: str = "slurm"
    allocator: str = "tune"
    interval_s: float = 30.0
    state_db: str = "/var/lib/synergy/state.db"
    audit_log: str = "/var/log/synergy/audit.jsonl"
    restart_cost_s: float = 120.0
    requeue_min_interval_s: float = 1800.0
    requeue_budget: int = 2
    shrink_running_memory: bool = True
    # On by default: loopback only (metrics_address), counts and ages with no user names
    # in them, and without them nothing tells an admin that the table went stale.
    metrics_port: int = 9778
    metrics_address: str = "127.0.0.1"
    write_hook_table: bool = True
    max_backoff_s: float = 300.0

    def problems(self) -> list[str]:
        from .core import ALLOCATOR_NAMES, POLICIES  # names only; the core stays unloaded

        out: list[str] = []
        for key, value, names in (("mode", self.mode, MODES),
                                  ("policy", self.policy, tuple(POLICIES)),
                                  ("allocator", self.allocator, ALLOCATOR_NAMES)):
            if value not in names:
                hint = " ('advise' was observe under another name)" if value == "advise" else ""
                out.append(f"{key} = {value!r}: must be one of {', '.join(names)}{hint}")
        _range(out, "interval_s", self.interval_s, 0, 86400, lo_open=True)
        _range(out, "restart_cost_s", self.restart_cost_s, 0, 86400)
        _range(out, "requeue_min_interval_s", self.requeue_min_interval_s, 0)
        _range(out, "requeue_budget", self.requeue_budget, 0, 1000)
        if self.metrics_port != 0:
            _range(out, "metrics_port", self.metrics_port, 1, 65535)
        try:
            ipaddress.ip_address(self.metrics_address)
        except ValueError:
            out.append(f"metrics_address = {self.metrics_address!r}: an IP address, e.g. "
                       "127.0.0.1 or 0.0.0.0")
        _range(out, "max_backoff_s", self.max_backoff_s, 0, 86400, lo_open=True)
        if not self.state_db:
            out.append("state_db: must name the state database")
        if not self.audit_log:
            out.append("audit_log: must name the audit log")
        return out


@dataclass(frozen=True)
class ProfilingSection(_Checked):
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

    def problems(self) -> list[str]:
        out: list[str] = []
        _range(out, "budget_s", self.budget_s, 10, 86400)
        _range(out, "max_cpus_per_gpu", self.max_cpus_per_gpu, 0, 4096)
        _range(out, "retry_after_s", self.retry_after_s, 0)
        _range(out, "disk_gb_s", self.disk_gb_s, 0, lo_open=True)
        _range(out, "mem_gb_s", self.mem_gb_s, 0, lo_open=True)
        for key in ("account", "partition"):
            v = getattr(self, key)
            if v and not NAME_RE.match(v):
                out.append(f"{key} = {v!r}: not a Slurm {key} name")
        return out


_RULE = re.compile(r"^(name|account|user|partition|comment|qos):.+=[\w.:\-]{1,64}$")


@dataclass(frozen=True)
class WhatifSection(_Checked):
    # FIELD:REGEX=KEY: history jobs whose FIELD matches REGEX have profile KEY (when their
    # comment names none), e.g. "name:^resnet=res50".
    rules: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        out = []
        for r in self.rules:
            if not _RULE.match(r):
                out.append(f"rules: {r!r} is not FIELD:REGEX=KEY with FIELD one of name, "
                           "account, user, partition, comment, qos")
            else:
                try:
                    re.compile(r.split(":", 1)[1].rsplit("=", 1)[0])
                except re.error as exc:
                    out.append(f"rules: {r!r}: bad regex: {exc}")
        return out


@dataclass(frozen=True)
class UsageSection(_Checked):
    enabled: bool = True
    every_rounds: int = 4
    max_jobs: int = 200
    threshold: float = 0.3
    min_jobs: int = 1
    min_observed_s: float = 300.0
    headroom: float = 1.25
    progress_dir: str = ""
    throughput_off: float = 2.0

    def problems(self) -> list[str]:
        out: list[str] = []
        _range(out, "every_rounds", self.every_rounds, 1, 10000)
        _range(out, "max_jobs", self.max_jobs, 1, 100000)
        _range(out, "threshold", self.threshold, 0, 1, lo_open=True)
        if self.threshold >= 1:
            out.append(f"threshold = {self.threshold!r}: must be below 1")
        _range(out, "min_jobs", self.min_jobs, 1, 1000)
        _range(out, "min_observed_s", self.min_observed_s, 0, 30 * 86400)
        _range(out, "headroom", self.headroom, 1, 100)
        _range(out, "throughput_off", self.throughput_off, 1, 100, lo_open=True)
        if self.progress_dir and not self.progress_dir.startswith("/"):
            out.append(f"progress_dir = {self.progress_dir!r}: must be an absolute path")
        return out


@dataclass(frozen=True)
class Config:
    slurm: SlurmSection = field(default_factory=SlurmSection)
    hook: HookSection = field(default_factory=HookSection)
    profiles: ProfilesSection = field(default_factory=ProfilesSection)
    controller: ControllerSection = field(default_factory=ControllerSection)
    profiling: ProfilingSection = field(default_factory=ProfilingSection)
    whatif: WhatifSection = field(default_factory=WhatifSection)
    usage: UsageSection = field(default_factory=UsageSection)
    path: str = ""


SECTIONS = {"slurm": SlurmSection, "hook": HookSection, "profiles": ProfilesSection,
            "controller": ControllerSection, "profiling": ProfilingSection,
            "whatif": WhatifSection, "usage": UsageSection}


def load_config(path: str | Path | None = None, missing_ok: bool = True) -> Config:
    """The config of ``path`` (default /etc/slurm/synergy.toml, whose absence means
    defaults); a ConfigError names the file, the section and the key of the first
    problem."""
    cfg, problems = check_config(path, missing_ok)
    if problems:
        raise ConfigError(problems[0])
    assert cfg is not None
    return cfg


def check_config(path: str | Path | None = None, missing_ok: bool = True
                 ) -> tuple[Config | None, list[str]]:
    """(the config, []) or (None, every problem found), each naming file, section, key."""
    p = Path(path) if path else DEFAULT_PATH
    if not p.exists():
        if missing_ok and path is None:
            return Config(), []
        return None, [f"config file {p} not found"]
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, [f"{p}: {exc}"]
    return _build(doc, str(p))


def config_from_dict(doc: dict[str, Any], path: str = "") -> Config:
    cfg, problems = _build(doc, path)
    if problems:
        raise ConfigError(problems[0])
    assert cfg is not None
    return cfg


def _build(doc: dict[str, Any], path: str) -> tuple[Config | None, list[str]]:
    built: dict[str, Any] = {}
    problems: list[str] = []
    prefix = f"{path}: " if path else ""
    for name, value in doc.items():
        cls = SECTIONS.get(name)
        if cls is None:
            problems.append(f"{prefix}unknown section [{name}] (known: {', '.join(SECTIONS)})")
            continue
        if not isinstance(value, dict):
            problems.append(f"{prefix}[{name}] must be a table")
            continue
        section, found = _section(cls, value)
        problems += [f"{prefix}[{name}] {msg}" for msg in found]
        if section is not None:
            built[name] = section
    if problems:
        return None, list(dict.fromkeys(problems))      # each problem once
    return Config(**built, path=path), []


def _section(cls: type, values: dict[str, Any]) -> tuple[Any, list[str]]:
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    problems = []
    for key, val in values.items():
        if key not in known:
            problems.append(f"unknown key {key!r} (known: {', '.join(known)})")
            continue
        default = known[key].default
        ok, val = _typed(default, val)
        if not ok:
            problems.append(f"{key} = {val!r} has the wrong type (expected "
                            f"{_TYPE_WORDS.get(type(default), type(default).__name__)})")
            continue
        kwargs[key] = val
    section, more = _make(cls, kwargs)
    problems += more
    return (None if problems else section), problems


def _typed(default: Any, val: Any) -> tuple[bool, Any]:
    """Whether ``val`` has the type of the key whose default is ``default`` (TOML's
    integers taken as floats, lists as tuples), and the value as the key holds it."""
    if isinstance(default, bool):
        return isinstance(val, bool), val
    if isinstance(default, int):
        return isinstance(val, int) and not isinstance(val, bool), val
    if isinstance(default, float):
        ok = isinstance(val, int | float) and not isinstance(val, bool)
        return ok, float(val) if ok else val
    if isinstance(default, tuple):
        ok = isinstance(val, list) and all(isinstance(v, str) for v in val)
        return ok, tuple(val) if ok else val
    return isinstance(val, str), val


_TYPE_WORDS = {bool: "true or false", int: "a whole number", float: "a number",
               tuple: "a list of strings, e.g. [\"a\", \"b\"]", str: "a string"}


def _make(cls: type, kwargs: dict[str, Any]) -> tuple[Any, list[str]]:
    try:
        return cls(**kwargs), []
    except ConfigError:
        # Every problem, not only the first: build it unchecked and ask it.
        unchecked = object.__new__(cls)
        for f in fields(cls):
            object.__setattr__(unchecked, f.name, kwargs.get(f.name, f.default))
        return None, unchecked.problems()


def check_everything(path: str | Path | None = None) -> tuple[Config | None, list[str]]:
    """Every problem ``synergy config check`` reports, in one run: the file's and, even
    when the file has some, what its well-formed keys name that this machine lacks (a
    missing profiles file was reported only once the file's other errors were fixed)."""
    cfg, problems = check_config(path)
    if cfg is not None:
        return cfg, machine_problems(cfg)
    lenient = _lenient(Path(path) if path else DEFAULT_PATH)
    if lenient is None:
        return None, problems
    # A key the file check already found wrong is not looked for on the machine too.
    flagged = {m.group(0) for p in problems if (m := _KEY_OF.search(p))}
    return None, problems + [p for p in machine_problems(lenient)
                             if (m := _KEY_OF.search(p)) is None or m.group(0) not in flagged]


# "[section] key" in a problem's text (file and machine problems name them alike).
_KEY_OF = re.compile(r"\[\w+\] \w+")


def _lenient(p: Path) -> Config | None:
    """The file's keys that have the right type, defaults for the rest, left unchecked:
    enough to look at the paths it names. None when the file cannot be read as TOML."""
    try:
        doc = tomllib.loads(p.read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    built: dict[str, Any] = {}
    for name, cls in SECTIONS.items():
        values = doc.get(name)
        values = values if isinstance(values, dict) else {}
        section = object.__new__(cls)
        for f in fields(cls):
            ok, val = _typed(f.default, values.get(f.name, f.default))
            object.__setattr__(section, f.name, val if ok else f.default)
        built[name] = section
    return Config(**built, path=str(p))


def machine_problems(cfg: Config) -> list[str]:
    """What the configuration names that this machine lacks: the profiles file, Slurm's
    commands in ``bindir``, the hook's directory. Checked by ``synergy config check``, not
    at load (a file may be deployed after the config)."""
    out = []
    prefix = f"{cfg.path}: " if cfg.path else ""
    if cfg.profiles.file and not Path(cfg.profiles.file).is_file():
        out.append(f"{prefix}[profiles] file = {cfg.profiles.file!r}: no such file")
    if cfg.slurm.bindir:
        bindir = Path(cfg.slurm.bindir)
        if not bindir.is_dir():
            out.append(f"{prefix}[slurm] bindir = {cfg.slurm.bindir!r}: no such directory")
        elif not (bindir / "scontrol").exists():
            out.append(f"{prefix}[slurm] bindir = {cfg.slurm.bindir!r}: has no scontrol")
    if cfg.slurm.conf and not Path(cfg.slurm.conf).is_file():
        out.append(f"{prefix}[slurm] conf = {cfg.slurm.conf!r}: no such file")
    if not Path(cfg.hook.dir).is_dir():
        out.append(f"{prefix}[hook] dir = {cfg.hook.dir!r}: no such directory")
    return out


def render_toml(cfg: Config) -> str:
    """The effective config as TOML (every key, defaults included)."""
    lines = []
    for name in SECTIONS:
        section = getattr(cfg, name)
        lines.append(f"[{name}]")
        for f in fields(section):
            v = getattr(section, f.name)
            if isinstance(v, bool):
                text = "true" if v else "false"
            elif isinstance(v, tuple):
                text = "[" + ", ".join(_toml_str(x) for x in v) + "]"
            elif isinstance(v, str):
                text = _toml_str(v)
            else:
                text = repr(v)
            lines.append(f"{f.name} = {text}")
        lines.append("")
    return "\n".join(lines)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
