"""``synergy profile``: the profile store (import, export, show, list)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..config import ConfigError, load_config
from ..core import ProfileError
from ..profiles.store import ProfileStore


def _store(config_path, store_path) -> ProfileStore:
    if store_path:
        return ProfileStore(store_path)
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    return ProfileStore(cfg.profiles.store)


STORE_OPTIONS = [
    click.option("--config", "config_path", type=click.Path(dir_okay=False)),
    click.option("--store", "store_path", type=click.Path(dir_okay=False),
                 help="Profile database (default: [profiles] store)."),
]


def store_options(f):
    for opt in reversed(STORE_OPTIONS):
        f = opt(f)
    return f


@click.group("profile")
def profile() -> None:
    """Job profiles: throughput over cores/GPU x memory/GPU, keyed by profile key."""


@profile.command("import")
@store_options
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def import_cmd(config_path, store_path, file: Path) -> None:
    """Import every profile of a model_profiles.json-shaped FILE."""
    try:
        keys = _store(config_path, store_path).import_doc(json.loads(file.read_text()))
    except (ProfileError, ValueError) as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    click.echo(f"imported {len(keys)} profiles: {', '.join(keys)}")


@profile.command("export")
@store_options
@click.option("--key", "keys", multiple=True, help="Only these keys (repeatable).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Write here instead of stdout.")
def export_cmd(config_path, store_path, keys, out) -> None:
    """Export profiles in the model_profiles.json shape."""
    try:
        doc = _store(config_path, store_path).export_doc(list(keys) or None)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    text = json.dumps(doc, indent=1)
    if out:
        out.write_text(text + "\n")
    else:
        click.echo(text)


@profile.command("show")
@store_options
@click.argument("key")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def show_cmd(config_path, store_path, key, fmt) -> None:
    """One profile: its points, how many were measured, and what profiling cost."""
    got = _store(config_path, store_path).get(key)
    if got is None:
        raise click.ClickException(f"no profile {key!r}")
    info = got.show()
    if fmt == "json":
        click.echo(json.dumps(info))
        return
    p = got.profile
    click.echo(f"{key}: ideal {p.ideal.cpus} cores/GPU, {p.ideal.mem_gb:g} GB/GPU; "
               f"{got.measured_points} points measured, {got.profiling_cpu_s:.1f} CPU-s")
    click.echo("cores/GPU \\ GB/GPU " + " ".join(f"{m:>8g}" for m in p.mem_grid))
    for c, row in zip(p.cpu_grid, p.throughput, strict=True):
        click.echo(f"{c:>18g} " + " ".join(f"{v:8.3g}" for v in row))


@profile.command("list")
@store_options
def list_cmd(config_path, store_path) -> None:
    """The keys in the store."""
    for key in _store(config_path, store_path).list_keys():
        click.echo(key)
