"""The config of synergy's controller beside a dev cluster: one for the demo and the
docker-compose cluster alike (enforce, FIFO + TUNE, a 2-s round, requeues priced for short
jobs), written with :func:`synergy_slurm.config.render_toml` so that every key shows."""

from __future__ import annotations

from pathlib import Path

from ..config import config_from_dict, render_toml
from .conf import DevClusterSpec

HEADER = ("# Written by synergy ({what}): the controller's config for the dev cluster "
          "(every key, defaults included).\n")


def controller_dict(spec: DevClusterSpec, profiles_path: Path, work: Path,
                    progress_dir: str = "") -> dict:
    """The settings, as a synergy.toml's tables: the hook shapes every partition of the
    cluster; state, audit log and measured profiles under ``work``; jobs report their
    progress to ``progress_dir`` where one is given (the demo's do: their requeues are
    priced on the work they really have left)."""
    slurm = {"conf": str(spec.conf_path)}
    if spec.bindir.is_dir():
        slurm["bindir"] = str(spec.bindir)
    return {"slurm": slurm,
            "hook": {"dir": str(spec.etc), "state_dir": str(spec.etc),
                     "partitions": [p.name for p in spec.layout.partitions],
                     "default_partition": spec.layout.default_partition.name},
            "profiles": {"file": str(profiles_path), "store": str(work / "profiles.db")},
            "controller": {"mode": "enforce", "policy": "fifo", "allocator": "tune",
                           "interval_s": 2.0, "state_db": str(work / "state.db"),
                           "audit_log": str(work / "audit.jsonl"), "restart_cost_s": 15.0,
                           "requeue_budget": 2, "requeue_min_interval_s": 60.0,
                           # Several dev clusters' controllers share one machine (test
                           # slots, demo phases): no default port for them to contend for.
                           "metrics_port": 0},
            "usage": {"progress_dir": progress_dir}}


def controller_toml(spec: DevClusterSpec, profiles_path: Path, work: Path, what: str,
                    progress_dir: str = "") -> str:
    """:func:`controller_dict` as the TOML file the controller runs from; ``what`` names
    the writer in its first line."""
    cfg = config_from_dict(controller_dict(spec, profiles_path, work, progress_dir))
    return HEADER.format(what=what) + render_toml(cfg)
