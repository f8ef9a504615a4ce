"""The hook table: what job_submit.lua knows (profile shapes, partitions, opt-outs, holds).

A line format a few lines of Lua can parse without a JSON library; written atomically
(write a temporary file, then rename) so the hook never reads half a table. The controller
rewrites it every round: its ``generated_at`` is the controller's heartbeat, and the hook
ignores a table older than ``max_age_s`` (no shaping, no holds).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..config import NAME_RE
from ..core import PerGpu, Profile
from ..decide import needs_no_hold
from ..errors import BadInputError
from ..vocabulary import KEY_RE, MB_PER_GB

TABLE_NAME = "synergy-hook.table"
DISABLE_NAME = "synergy-hook.disable"
# The temporaries write_atomic makes beside the table before renaming them over it.
TEMP_PREFIX = ".synergy-hook."
# A temporary older than this was left by a writer that died (a write takes milliseconds).
STALE_TEMP_S = 60.0


class TableError(BadInputError):
    pass


@dataclass(frozen=True)
class HookTable:
    generated_at: int
    node_cpus: int
    node_mem_mb: int
    node_gpus: int
    partitions: tuple[str, ...] = ("gpu",)
    default_partition: str = "gpu"
    optout_uids: tuple[int, ...] = ()
    profiles: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # key -> (C, MB)
    max_age_s: int = 300
    hold_unknown: bool = False
    hold_known: bool = False
    override_user_shape: bool = False
    # Known keys the hook does not hold (decide.needs_no_hold: their shape is within the
    # proportional share, final at submission), listed only while no held job waits
    # (decide.no_hold_share); a "no_hold KEY" line each, which a hook that predates it
    # ignores (it holds them, as before).
    no_hold: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in ("node_cpus", "node_mem_mb", "node_gpus", "max_age_s"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1:
                raise TableError(f"{name} must be a positive integer, got {v!r}")
        for p in (*self.partitions, self.default_partition):
            if not NAME_RE.match(p):
                raise TableError(f"bad partition name {p!r}")
        for key, (c, m) in self.profiles.items():
            if not KEY_RE.match(key):
                raise TableError(f"bad profile key {key!r}")
            if not (isinstance(c, int) and 1 <= c <= self.node_cpus):
                raise TableError(f"profile {key}: cores/GPU {c!r} not in 1..{self.node_cpus}")
            if not (isinstance(m, int) and 1 <= m <= self.node_mem_mb):
                raise TableError(f"profile {key}: MB/GPU {m!r} not in 1..{self.node_mem_mb}")
        if not self.no_hold <= set(self.profiles):
            raise TableError("no_hold names keys without a profile: "
                             + ", ".join(sorted(self.no_hold - set(self.profiles))))

    def render(self) -> str:
        lines = ["# synergy-slurm hook table: written by the controller, read by "
                 "job_submit.lua", "version 1", f"generated_at {self.generated_at}",
                 f"max_age_s {self.max_age_s}", f"hold_unknown {int(self.hold_unknown)}",
                 f"hold_known {int(self.hold_known)}",
                 f"override_user_shape {int(self.override_user_shape)}",
                 f"node_cpus {self.node_cpus}", f"node_mem_mb {self.node_mem_mb}",
                 f"node_gpus {self.node_gpus}", f"default_partition {self.default_partition}"]
        lines += [f"partition {p}" for p in self.partitions]
        lines += [f"optout_uid {u}" for u in sorted(self.optout_uids)]
        lines += [f"profile {k} {c} {m}" for k, (c, m) in sorted(self.profiles.items())]
        lines += [f"no_hold {k}" for k in sorted(self.no_hold)]
        return "\n".join(lines) + "\n"

    def write(self, path: Path) -> None:
        write_atomic(path, self.render())


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` whole (its directory must exist: the hook's is made by the admin)."""
    fd, tmp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def stale_temporaries(directory: Path, now: float,
                      older_than_s: float = STALE_TEMP_S) -> list[Path]:
    """Remove the temporaries a writer killed between writing and renaming left in
    ``directory`` (only those older than ``older_than_s``: a live writer's is
    milliseconds old). Returns those removed; one that cannot be removed is left."""
    removed = []
    try:
        found = [p for p in directory.iterdir() if p.name.startswith(TEMP_PREFIX)]
    except OSError:
        return []
    for p in found:
        try:
            if p.is_file() and not p.is_symlink() and \
                    now - p.stat().st_mtime > older_than_s:
                p.unlink()
                removed.append(p)
        except OSError:
            continue
    return removed


def parse_table(text: str) -> HookTable:
    """The Python reading of the table (for ``explain``): same fields, same checks."""
    vals: dict[str, str] = {}
    parts: list[str] = []
    uids: list[int] = []
    profs: dict[str, tuple[int, int]] = {}
    no_hold: set[str] = set()
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        if name == "partition":
            parts.append(rest)
        elif name == "optout_uid":
            uids.append(int(rest))
        elif name == "no_hold":
            no_hold.add(rest)
        elif name == "profile":
            bits = rest.split()
            if len(bits) == 3:
                try:
                    profs[bits[0]] = (int(bits[1]), int(bits[2]))
                except ValueError:
                    continue
        else:
            vals[name] = rest
    if vals.get("version") != "1":
        raise TableError("not a version 1 hook table")
    try:
        table = HookTable(
            generated_at=int(vals["generated_at"]), node_cpus=int(vals["node_cpus"]),
            node_mem_mb=int(vals["node_mem_mb"]), node_gpus=int(vals["node_gpus"]),
            partitions=tuple(parts), default_partition=vals.get("default_partition", ""),
            optout_uids=tuple(uids), max_age_s=int(vals["max_age_s"]),
            hold_unknown=vals.get("hold_unknown") == "1",
            hold_known=vals.get("hold_known") == "1",
            override_user_shape=vals.get("override_user_shape") == "1")
    except (KeyError, ValueError) as exc:
        raise TableError(f"incomplete hook table: {exc}") from None
    # Out-of-range profiles are dropped one by one, as the Lua does.
    good = {k: v for k, v in profs.items() if KEY_RE.match(k)
            and 1 <= v[0] <= table.node_cpus and 1 <= v[1] <= table.node_mem_mb}
    return HookTable(**{**table.__dict__, "profiles": good,
                        "no_hold": frozenset(no_hold & set(good))})


def no_hold_keys(profiles: Mapping[str, Profile], proportional: PerGpu | None
                 ) -> frozenset[str]:
    """Of ``profiles`` (the table's own: profile_shapes' keys), those whose ideal share the
    hook gives at submission without a hold (decide.needs_no_hold against
    ``proportional``, the smallest proportional share of the managed partitions; None, not
    known: none, every known key is held as configured)."""
    if proportional is None:
        return frozenset()
    return frozenset(k for k, p in profiles.items()
                     if p.ideal is not None and needs_no_hold(p.ideal, proportional))


def profile_shapes(profiles: Mapping[str, Profile], node_cpus: int,
                   node_mem_mb: int) -> dict[str, tuple[int, int]]:
    """Per profile key, the ideal share per GPU in Slurm's units (cores, MB), capped at a
    node."""
    out = {}
    for key, prof in profiles.items():
        if prof.ideal is None or not KEY_RE.match(key):
            continue
        c = max(1, min(int(prof.ideal.cpus), node_cpus))
        m = max(1, min(round(prof.ideal.mem_gb * MB_PER_GB), node_mem_mb))
        out[key] = (c, m)
    return out
