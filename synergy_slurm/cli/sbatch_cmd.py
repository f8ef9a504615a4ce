"""``synergy-sbatch``: sbatch with a few options of synergy's own.

Every argument it does not know goes to sbatch unchanged, in order (options, the script,
the script's arguments). Its own options become tokens in the job's comment, which the
job_submit hook and the controller read:

    --profile-key KEY   -> synergy:profile=KEY   (which profile this job shares)
    --dataset-size SIZE -> synergy:dataset-gb=N  (for the memory model)
    --requeue-ok        -> synergy:requeue-ok, plus --requeue --open-mode=append
    --no-synergy        -> synergy:off           (never touched by synergy)
    --template NAME     -> the script is sbatch_templates/NAME.sbatch rendered with
                           --var NAME=VALUE, handed to sbatch on its standard input

Errors in these options exit non-zero before anything is submitted; sbatch's own output
and exit code are passed through unchanged. Needs no privilege: it only runs sbatch as you.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence

import click

from ..hook.explain import explain
from ..hook.export import table_path
from ..hook.rules import PROFILE_TOKEN
from ..hook.sbatch_args import (
    SbatchArgError,
    script_directives,
    script_index,
    submission_from_args,
)
from ..hook.table import TableError, parse_table
from ..profiles.store import KEY_RE
from ..templates import TemplateError, available, find, parse_template, parse_vars
from .errors import Boundary
from .options import config_or_exit

SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$", re.IGNORECASE)


def dataset_gb(text: str) -> float:
    """``120G``, ``500M``, ``1.5T`` or a plain number of GB."""
    m = SIZE_RE.match(text.strip())
    if not m:
        raise click.BadParameter(f"expected a size like 120G or 500M, got {text!r}",
                                 param_hint="--dataset-size")
    scale = {"": 1, "K": 1e-6, "M": 1e-3, "G": 1, "T": 1000}[m.group(2).upper()]
    value = float(m.group(1)) * scale
    if value <= 0:
        raise click.BadParameter("must be positive", param_hint="--dataset-size")
    return value


def split_comment(args: Sequence[str]) -> tuple[list[str], str | None]:
    """Remove the user's --comment (both forms) from args; return (args, comment)."""
    out, comment, skip = [], None, False
    for i, a in enumerate(args):
        if skip:
            skip = False
            continue
        if a.startswith("--comment="):
            comment = a.split("=", 1)[1]
        elif a == "--comment" and i + 1 < len(args):
            comment, skip = args[i + 1], True
        else:
            out.append(a)
    return out, comment


def build_argv(sbatch: str, args: Sequence[str], profile_key: str | None,
               size_gb: float | None, requeue_ok: bool, no_synergy: bool,
               script_comment: str | None = None) -> list[str]:
    """sbatch's command line: ours first, the user's options, the script and its arguments
    last. Our tokens join the user's comment (from the command line, else the script's
    #SBATCH --comment, which a command-line --comment would otherwise replace)."""
    end = script_index(args)
    end = len(args) if end is None else end
    options, comment = split_comment(list(args[:end]))
    rest = options + list(args[end:])
    if comment is None:
        comment = script_comment
    tokens: list[str] = []
    if no_synergy:
        tokens.append("synergy:off")
    if profile_key:
        tokens.append(f"synergy:profile={profile_key}")
    if size_gb:
        tokens.append(f"synergy:dataset-gb={size_gb:g}")
    extra: list[str] = []
    if requeue_ok:
        tokens.append("synergy:requeue-ok")
        extra = ["--requeue", "--open-mode=append"]
    if not tokens:
        return [sbatch, *args]
    return [sbatch, f"--comment={' '.join(([comment] if comment else []) + tokens)}",
            *extra, *rest]


# synergy-sbatch's own options that take no value (needed to find the script among them).
OWN_FLAGS = frozenset({"--requeue-ok", "--no-synergy", "--list-templates", "--explain",
                       "--dry-run", "--synergy-help"})


class _ScriptArgsAreNotOurs(Boundary, click.Command):
    """Options are ours only before the script: what follows it is the script's own
    command line (``train.sh --dry-run`` must reach train.sh, not synergy-sbatch)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        i = script_index(args, OWN_FLAGS)
        if i is not None and (i == 0 or args[i - 1] != "--"):
            args = [*args[:i], "--", *args[i:]]
        return super().parse_args(ctx, args)


@click.command(cls=_ScriptArgsAreNotOurs,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                 "help_option_names": ["--synergy-help"]})
@click.option("--profile-key", help="The profile this job shares (1-64 of A-Za-z0-9_.:-).")
@click.option("--dataset-size", help="Dataset size (e.g. 120G), for the memory model.")
@click.option("--requeue-ok", is_flag=True,
              help="The job checkpoints: synergy may requeue it into a larger shape.")
@click.option("--no-synergy", is_flag=True, help="Opt out: synergy never touches this job.")
@click.option("--template", "template_name", metavar="NAME",
              help="Submit the job template NAME (see --list-templates) instead of a script.")
@click.option("--var", "variables", multiple=True, metavar="NAME=VALUE",
              help="A template variable (repeatable).")
@click.option("--template-dir", type=click.Path(file_okay=False, exists=True),
              envvar="SYNERGY_TEMPLATES",
              help="Look for templates here first [env SYNERGY_TEMPLATES].")
@click.option("--list-templates", is_flag=True,
              help="List the templates and their variables, submit nothing.")
@click.option("--explain", is_flag=True,
              help="Print what the hook and the controller would do, submit nothing.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="With --explain.")
@click.option("--dry-run", is_flag=True, help="Print the sbatch command line, submit nothing.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml (default /etc/slurm/synergy.toml).")
@click.pass_context
def main(ctx: click.Context, profile_key, dataset_size, requeue_ok, no_synergy, template_name,
         variables, template_dir, list_templates, explain, fmt, dry_run, config_path) -> None:
    """synergy-sbatch [SYNERGY OPTIONS] [SBATCH OPTIONS] SCRIPT [ARGS...]

    Submits like sbatch (every sbatch option works unchanged, sbatch's errors and exit
    code come back unchanged), adding synergy's options. Errors in synergy's options
    stop before anything is submitted. Use --synergy-help for this text; --help goes to
    sbatch.

    \b
    Examples:
      synergy-sbatch --profile-key res50-b256 --requeue-ok --gpus=2 train.sh
      synergy-sbatch --template pytorch-single --var DATA=/data/imgs --var GPUS=2
      synergy-sbatch --explain --format json --profile-key res50-b256 --gpus=2 train.sh
      synergy-sbatch --list-templates
    """
    args = list(ctx.args)
    if list_templates:
        click.echo(_list_templates(template_dir))
        return
    if variables and not template_name:
        raise click.UsageError("--var needs --template")
    script_text = None
    if template_name:
        if script_index(args) is not None:
            raise click.UsageError("give either --template or a script, not both")
        try:
            script_text = find(template_name, template_dir).render(parse_vars(variables))
        except TemplateError as exc:
            raise click.UsageError(str(exc)) from None
    if profile_key is not None and not KEY_RE.match(profile_key):
        raise click.BadParameter("use 1-64 of A-Z a-z 0-9 _ . : -", param_hint="--profile-key")
    if no_synergy and (profile_key or requeue_ok):
        raise click.UsageError("--no-synergy cannot be combined with --profile-key or "
                               "--requeue-ok")
    if requeue_ok and "--no-requeue" in args:
        raise click.UsageError("--requeue-ok conflicts with --no-requeue")
    size = dataset_gb(dataset_size) if dataset_size is not None else None
    sbatch = shutil.which("sbatch") or "sbatch"
    directives = script_directives(script_text or _script_text(args))
    argv = build_argv(sbatch, args, profile_key, size, requeue_ok, no_synergy,
                      split_comment(directives)[1])
    if explain:
        click.echo(_explain(directives, argv[1:], config_path, fmt))
        return
    if dry_run:
        click.echo(shlex.join(argv) + (f" < (template {template_name})" if script_text else ""))
        if script_text:
            click.echo(script_text, nl=False)
        return
    try:
        proc = subprocess.run(argv, input=script_text, text=script_text is not None,
                              check=False)
    except FileNotFoundError:
        raise click.ClickException("sbatch not found") from None
    sys.exit(proc.returncode)


def _script_text(args: Sequence[str]) -> str:
    """The batch script named on the command line, for its #SBATCH lines ('' when there is
    none or it cannot be read: sbatch will say so when it is submitted)."""
    i = script_index(args)
    if i is None or not os.path.isfile(args[i]):     # a FIFO would block the reader
        return ""
    try:
        with open(args[i], encoding="utf-8", errors="replace") as fh:
            return fh.read(1 << 20)
    except OSError:
        return ""


def _list_templates(template_dir) -> str:
    found = available(template_dir)
    if not found:
        return "no templates found (give --template-dir or set SYNERGY_TEMPLATES)"
    lines = []
    for name, path in found.items():
        try:
            t = parse_template(path)
        except TemplateError as exc:
            lines.append(f"{name}: unusable: {exc}")
            continue
        lines.append(f"{name}: {t.title}  [{path}]")
        for v in t.variables:
            default = "required" if v.default is None else f"default {v.default}"
            lines.append(f"    {v.name:<16} {v.help} ({default})")
    return "\n".join(lines)


def _explain(directives: list[str], sbatch_args: list[str], config_path, fmt: str) -> str:
    """What the hook and the controller would make of the job: the script's #SBATCH
    options, then the command line's up to the script (its own arguments are not sbatch's)."""
    cfg = config_or_exit(config_path)
    end = script_index(sbatch_args)
    try:
        sub = submission_from_args(directives + sbatch_args[:end], uid=os.getuid())
    except SbatchArgError as exc:
        raise click.BadParameter(str(exc)) from None
    hook = explain(table_path(cfg.hook), sub, time.time())
    m = PROFILE_TOKEN.search(sub.comment)
    info = {"hook": hook.as_dict(), "controller": _controller_view(cfg, m.group(1) if m else None),
            "sbatch": sbatch_args}
    if fmt == "json":
        return json.dumps(info)
    lines = [f"hook: {'manages' if hook.managed else 'passes'} this job ({hook.reason})"]
    if hook.cpus_per_gpu:
        lines.append(f"  cores/GPU {hook.cpus_per_gpu}, memory/GPU {hook.mem_per_gpu_mb} MB")
    if hook.hold:
        lines.append("  held until the controller's next round shapes and releases it")
    ctl = info["controller"]
    if ctl["profile_known"]:
        lines.append(f"controller: profile {ctl['profile_key']}: ideal "
                     f"{ctl['ideal_cpus_per_gpu']} cores/GPU, {ctl['ideal_mem_gb_per_gpu']:g} "
                     f"GB/GPU, {ctl['speedup_at_ideal']:.2f}x over proportional when it fits")
    else:
        lines.append("controller: no known profile: GPU-proportional share")
    lines.append("sbatch " + shlex.join(sbatch_args))
    return "\n".join(lines)


def _controller_view(cfg, key: str | None) -> dict:
    """What the controller knows of the job's profile (file and store), without Slurm."""
    from pathlib import Path

    from ..core import PerGpu, ProfileError, load_profiles
    from ..profiles.store import ProfileStore

    profiles = {}
    try:
        if cfg.profiles.file:
            profiles.update(load_profiles(cfg.profiles.file))
        if Path(cfg.profiles.store).exists():
            profiles.update(ProfileStore(cfg.profiles.store).all())
    except (OSError, ProfileError, ValueError):
        pass
    prof = profiles.get(key) if key else None
    if prof is None or prof.ideal is None:
        return {"profile_key": key, "profile_known": False, "ideal_cpus_per_gpu": None,
                "ideal_mem_gb_per_gpu": None, "speedup_at_ideal": None}
    # The proportional share: per GPU of the managed nodes as the hook table records them,
    # else the paper's servers (3 cores, 62.5 GB per GPU).
    fair = PerGpu(3, 62.5)
    try:
        t = parse_table(table_path(cfg.hook).read_text())
        fair = PerGpu(t.node_cpus // t.node_gpus, t.node_mem_mb / t.node_gpus / 1000)
    except (OSError, TableError):
        pass
    return {"profile_key": key, "profile_known": True, "ideal_cpus_per_gpu": prof.ideal.cpus,
            "ideal_mem_gb_per_gpu": prof.ideal.mem_gb,
            "speedup_at_ideal": round(prof.speedup(prof.ideal, fair), 3)}
