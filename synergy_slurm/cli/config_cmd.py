"""``synergy config check``: the effective configuration, or every problem in it."""

from __future__ import annotations

import click

from ..config import DEFAULT_PATH, check_everything, render_toml
from .errors import EXIT_BAD_INPUT


@click.group("config")
def config() -> None:
    """synergy.toml: one file for the hook, the controller and the tools."""


@config.command("check")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help=f"The file to check (default {DEFAULT_PATH}; absent means defaults).")
def check_cmd(config_path) -> None:
    """Check every section, key, type, name and range, and that what it names exists on
    this machine (the profiles file, slurm.conf, Slurm's commands in bindir, the hook's
    directory). Prints the effective configuration (every key, defaults included) as
    TOML, or each problem on its own line on stderr (naming file, section and key) and
    exits 2. Reads Slurm nothing and creates nothing."""
    cfg, problems = check_everything(config_path)
    if problems:
        for p in problems:
            click.echo(f"Error: {p}", err=True)
        raise SystemExit(EXIT_BAD_INPUT)
    assert cfg is not None
    source = cfg.path or f"defaults ({DEFAULT_PATH} not found)"
    click.echo(f"# effective configuration from {source}")
    click.echo(render_toml(cfg), nl=False)
