"""Option parsing helpers shared by the ``synergy`` subcommands."""

from __future__ import annotations

import os
from pathlib import Path

import click

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


def default_profiles_path() -> Path | None:
    """$SYNERGY_PROFILES, else the reference profiles beside a development checkout."""
    env = os.environ.get("SYNERGY_PROFILES")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[3] / "shared" / "reference" / "model_profiles.json"
    return here if here.exists() else None


def profiles_option_value(path: Path | None) -> dict:
    """The profiles of --profiles FILE, else the default; a clear error if none or bad."""
    from ..core import ProfileError, load_profiles

    chosen = path or default_profiles_path()
    if chosen is None:
        raise click.UsageError("no profiles: pass --profiles FILE or set SYNERGY_PROFILES")
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
