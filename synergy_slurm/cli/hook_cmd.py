"""``synergy hook``: explain, export the table, install the script, fail-safe release."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import click

from ..controller.failsafe import release_held
from ..core import ProfileError
from ..hook import install
from ..hook.explain import explain
from ..hook.export import build_table, table_path
from ..hook.sbatch_args import SbatchArgError
from ..hook.table import DISABLE_NAME, TableError, parse_table
from ..profiles import load_profiles
from ..profiles.resolve import configured, trusted
from ..shipped import HOOK_LUA, HOOK_MODULE, shipped_file
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.reader import make_reader
from ..slurm.writer import SlurmWriter
from ..vocabulary import table_fresh
from .errors import BadInput, Failed, writable_dir, writable_file
from .options import config_or_exit

CONFIG_OPTION = click.option("--config", "config_path", type=click.Path(dir_okay=False),
                             default=None, help="synergy.toml (default /etc/slurm/synergy.toml).")



@click.group("hook")
def hook() -> None:
    """The job_submit hook (job_submit_hook/job_submit.lua) and its table."""


@hook.command("explain", context_settings={"ignore_unknown_options": True,
                                           "allow_interspersed_args": False})
@CONFIG_OPTION
@click.option("--table", "table_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Hook table to use (default: the one in [hook] state_dir).")
@click.option("--uid", type=int, default=None, help="Submitting uid (default: yours).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.argument("sbatch_args", nargs=-1, type=click.UNPROCESSED)
def explain_cmd(config_path, table_file, uid, fmt, sbatch_args) -> None:
    """Print what the hook (and the controller) would do with a job submitted with these
    sbatch options and script: the script's #SBATCH lines count, as for sbatch, and
    synergy-sbatch --explain gives the same answer. Submits nothing.

    \b
      synergy hook explain -- --gpus=2 --comment synergy:profile=res18 train.sh
      synergy hook explain --format json -- --array=0-9 --gpus=1 train.sh
    """
    cfg = config_or_exit(config_path)
    try:
        info = explain(cfg, list(sbatch_args), os.getuid() if uid is None else uid,
                       time.time(), table_file)
    except SbatchArgError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(json.dumps(info.as_dict()) if fmt == "json" else "\n".join(info.lines()))


@hook.command("export")
@CONFIG_OPTION
@click.option("--profiles", "profiles_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--node-cpus", type=click.IntRange(1), help="Default: smallest managed node.")
@click.option("--node-mem-mb", type=click.IntRange(1))
@click.option("--node-gpus", type=click.IntRange(1))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path),
              help="Default: <[hook] state_dir>/synergy-hook.table.")
def export_cmd(config_path, profiles_path, node_cpus, node_mem_mb, node_gpus, out) -> None:
    """Write the hook table (atomically). The controller does this every round; run it by
    hand to try the hook without the controller (the table expires after max_age_s)."""
    cfg = config_or_exit(config_path)
    if out is None:
        dest = table_path(cfg.hook)
        writable_dir(dest.parent, "[hook] state_dir")                 # made when missing
    else:
        dest = writable_file(out, "--out")
    if profiles_path is not None:
        try:
            profiles = load_profiles(profiles_path)
        except ProfileError as exc:
            raise BadInput(str(exc)) from None
        source = f"{len(profiles)} profiles (--profiles {profiles_path})"
    else:
        # What the controller plans with: the profiles file, then the store.
        known = configured(cfg.profiles.file, cfg.profiles.store)
        for problem in known.problems:
            click.echo(f"warning: {problem}", err=True)
        if not known.profiles:
            raise BadInput(f"no profiles to export ({known.describe()}): import some "
                           "(synergy profile import), set [profiles] file, or give --profiles")
        profiles, source = trusted(known.profiles, known.owners, None,
                                   cfg.profiles.trust), known.describe()
    if None in (node_cpus, node_mem_mb, node_gpus):
        try:
            snap = make_reader(SlurmCLI.for_config(cfg.slurm), cfg.slurm.reader).snapshot()
        except SlurmError as exc:
            raise Failed(f"cannot read node sizes from Slurm ({exc}); "
                         "give --node-cpus/--node-mem-mb/--node-gpus") from None
        nodes = [n for n in snap.nodes if n.gpus and set(n.partitions) & set(cfg.hook.partitions)]
        if not nodes:
            raise Failed("no GPU nodes in the managed partitions")
        node_cpus = node_cpus or min(n.cpus for n in nodes)
        node_mem_mb = node_mem_mb or min(n.mem_mb for n in nodes)
        node_gpus = node_gpus or min(n.gpus for n in nodes)
    try:
        table = build_table(cfg.hook, profiles, node_cpus, node_mem_mb, node_gpus)
    except TableError as exc:
        raise BadInput(str(exc)) from None
    # The state directory as `hook install` makes it (readable by slurmctld's user). The
    # controller never makes it: a mistyped directory would hide its table from the hook.
    dest.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    table.write(dest)
    click.echo(f"wrote {dest}: {len(table.profiles)} profiles, partitions "
               f"{','.join(table.partitions)}, valid for {table.max_age_s} s; from {source}")


@hook.command("install")
@CONFIG_OPTION
@click.option("--conf-dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="The directory of slurm.conf (job_submit/lua loads "
              "job_submit.lua there). Default: [hook] dir (/etc/slurm).")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Where the hook reads its table and kill switch, the "
              "controller's runtime state. Default: [hook] state_dir (/var/lib/synergy); "
              "made with --write.")
@click.option("--write", is_flag=True, help="Write the files (else only say what it would "
              "do).")
@click.option("--force", is_flag=True, help="Replace a job_submit.lua or synergy.lua that "
              "synergy did not write (each backed up as FILE.bak-TIME first).")
def install_cmd(config_path, conf_dir: Path | None, state_dir: Path | None, write: bool,
                force: bool) -> None:
    """Install the hook beside slurm.conf: synergy.lua (synergy's rules) and, where the
    site has no job_submit.lua of its own, a two-line job_submit.lua that runs them.

    A site's own job_submit.lua is never overwritten: the command prints the one line that
    joins synergy's rules to it (at its end; the site's rules run first, and a job they
    refuse stays refused). --force replaces it instead, after a backup and a diff. Files
    synergy wrote before are updated. Without --write it only says what it would do.
    Then `scontrol reconfigure` (or the next submission, for an updated module) loads it.

    The hook table and the kill switch live in the state directory, not beside slurm.conf
    (configuration management and configless Slurm own that one): the joining line names
    it, and the controller writes the table there.
    """
    cfg = config_or_exit(config_path)
    # Both must be absolute (install.check_dir): they are written into job_submit.lua,
    # which slurmctld runs from its own working directory.
    conf_dir = conf_dir or Path(cfg.hook.dir)
    state_dir = state_dir or Path(cfg.hook.state_dir)
    try:
        steps = install.plan(conf_dir, state_dir, shipped_file(HOOK_LUA),
                             shipped_file(HOOK_MODULE), force)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
    for st in steps:
        verb = {"write": "write", "keep": "keep", "replace": "replace",
                "refuse": "refuse to overwrite"}[st.action]
        click.echo(f"{verb} {st.path}: {st.why}")
        if st.diff and st.action in ("replace", "refuse"):
            click.echo(st.diff.rstrip("\n"))
    refused = [st for st in steps if st.action == "refuse"]
    if refused:
        raise Failed(f"{refused[0].path} is not synergy's; nothing written (give --force to "
                     "replace it, with a backup)")
    if write:
        if not conf_dir.is_dir():
            raise BadInput(f"--conf-dir {conf_dir}: no such directory")
        for st in steps:
            if st.changes:
                writable_file(st.path, "--conf-dir")
        if not state_dir.is_dir():
            try:
                state_dir.mkdir(mode=0o755, parents=True)
            except OSError as exc:
                raise Failed(f"--state-dir {state_dir}: cannot make it ({exc.strerror})") \
                    from None
            click.echo(f"made {state_dir} (the controller writes the hook table there; "
                       "slurmctld's user must be able to read it)")
        for backup in install.apply(steps, time.strftime("%Y%m%d-%H%M%S")):
            click.echo(f"backed up {backup}")
        click.echo("installed" if any(st.changes for st in steps) else "nothing to change")
    else:
        click.echo("(nothing written: give --write)")
    click.echo("# slurm.conf needs (append lua to an existing JobSubmitPlugins list):")
    click.echo("JobSubmitPlugins=lua")
    click.echo("# then: scontrol reconfigure")
    click.echo(f"# kill switch: touch {state_dir / DISABLE_NAME}")


@hook.command("failsafe")
@CONFIG_OPTION
@click.option("--dry-run", is_flag=True, help="Only list the jobs it would release.")
def failsafe_cmd(config_path, dry_run: bool) -> None:
    """Release jobs the hook held if the table is stale or missing (controller down).

    Run it from a timer (docs/systemd/synergy-failsafe.timer) so that no job stays held because
    the controller stopped. Does nothing while the table is fresh.
    """
    cfg = config_or_exit(config_path)
    path = table_path(cfg.hook)
    try:
        table = parse_table(path.read_text())
        fresh = table_fresh(table.generated_at, table.max_age_s, time.time())
    except (OSError, TableError):
        fresh = False
    if fresh:
        click.echo("table is fresh: the controller is running; nothing to do")
        return
    cli = SlurmCLI.for_config(cfg.slurm)
    try:
        done = release_held(make_reader(cli, cfg.slurm.reader),
                            SlurmWriter(cli, enforce=not dry_run), dry_run)
    except SlurmError as exc:
        raise Failed(str(exc)) from None
    for job_id in done.held:
        if dry_run:
            click.echo(f"would release {job_id}")
        elif job_id in done.released:
            click.echo(f"released {job_id}")
        else:
            click.echo(f"could not release {job_id}: {done.failed.get(job_id)}", err=True)
    if not done.held:
        click.echo("no held synergy jobs")
