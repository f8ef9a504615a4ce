"""Option parsing helpers shared by the ``synergy`` subcommands."""

from __future__ import annotations

import os
from pathlib import Path

import click

from ..shipped import SHIPPED_PROFILES
from ..site import Site, SiteError, load_site
from .errors import BadInput


def csv_list(value: str, choices: tuple[str, ...] | None = None, what: str = "value") -> list[str]:
    items = [v.strip().lower() for v in value.split(",") if v.strip()]
    if not items:
        raise click.BadParameter(f"give at least one {what}")
    if choices is not None:
        bad = [v for v in items if v not in choices]
        if bad:
            raise click.BadParameter(
                f"unknown {what} {', '.join(bad)}; choose from {', '.join(choices)}")
    return items


def default_profiles_path() -> Path:
    """$SYNERGY_PROFILES, else the paper's per-model profiles shipped with the package
    (synergy_slurm/data/model_profiles.json, the same as shared/reference's)."""
    env = os.environ.get("SYNERGY_PROFILES")
    return Path(env) if env else SHIPPED_PROFILES


def profiles_option_value(path: Path | None) -> dict:
    """The profiles of --profiles FILE, else the default; a clear error if none or bad."""
    from ..core import ProfileError
    from ..profiles import load_profiles

    chosen = path or default_profiles_path()
    try:
        return load_profiles(chosen)
    except ProfileError as exc:
        raise BadInput(str(exc)) from None


def config_or_exit(path: str | None):
    """synergy.toml (default /etc/slurm/synergy.toml), or a clear error naming the key."""
    from ..config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        raise BadInput(str(exc)) from None


def check_server(gpus_per_server: int, cpus_per_server: int) -> None:
    """A server needs at least a core per GPU (else the proportional share is 0 cores)."""
    if cpus_per_server < gpus_per_server:
        raise click.BadParameter(f"{cpus_per_server} cores for {gpus_per_server} GPUs: give "
                                 "at least one core per GPU", param_hint="--cpus-per-server")


def cluster_option_value(cluster: str | None) -> Site | None:
    """The site ``--cluster`` describes (a file or a shipped name; None when not given),
    or a one-line error."""
    if cluster is None:
        return None
    try:
        return load_site(cluster)
    except SiteError as exc:
        raise BadInput(f"--cluster {exc}") from None
