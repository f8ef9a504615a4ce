"""Building the hook table from the config, the profiles and the cluster's node size."""

from __future__ import annotations

import pwd
import time
from collections.abc import Mapping
from pathlib import Path

from ..config import HookSection
from ..core import PerGpu, Profile
from .table import TABLE_NAME, HookTable, no_hold_keys, profile_shapes


def user_uids(names: tuple[str, ...]) -> tuple[int, ...]:
    """Resolve opt-out user names (unknown names are skipped: they cannot submit)."""
    uids = []
    for name in names:
        try:
            uids.append(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    return tuple(uids)


def build_table(hook: HookSection, profiles: Mapping[str, Profile], node_cpus: int,
                node_mem_mb: int, node_gpus: int, now: float | None = None,
                proportional: PerGpu | None = None) -> HookTable:
    """The table for ``profiles`` on nodes of this size; ``proportional``: the smallest
    proportional share of the managed partitions, where known (the controller knows it):
    keys within it are not held (table.no_hold_keys)."""
    shapes = profile_shapes(profiles, node_cpus, node_mem_mb)
    return HookTable(
        generated_at=int(time.time() if now is None else now), node_cpus=node_cpus,
        node_mem_mb=node_mem_mb, node_gpus=node_gpus, partitions=hook.partitions,
        default_partition=hook.default_partition, optout_uids=user_uids(hook.optout_users),
        profiles=shapes, max_age_s=hook.max_age_s,
        hold_unknown=hook.hold_unknown, hold_known=hook.hold_known,
        override_user_shape=hook.override_user_shape,
        no_hold=no_hold_keys({k: profiles[k] for k in shapes}, proportional))


def table_path(hook: HookSection) -> Path:
    return Path(hook.state_dir) / TABLE_NAME
