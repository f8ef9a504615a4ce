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

from ..config import ConfigError, load_config
from ..hook.explain import explain, read_script
from ..hook.sbatch_args import (
    SbatchArgError,
    script_directives,
    script_index,
)
from ..slurm.units import size_mb
from ..templates import TemplateError, available, find, parse_template, parse_vars
from ..vocabulary import (
    KEY_RE,
    MB_PER_GB,
    OPT_OUT_TOKEN,
    REQUEUE_OK_TOKEN,
    comment_profile_key,
    dataset_token,
)
from .errors import BadInput, Boundary, Failed
from .options import config_or_exit

# How long sbatch may take to answer before synergy-sbatch gives up (slurmctld busy or
# unreachable); a submission that timed out may still have been accepted.
SBATCH_TIMEOUT_S = 300.0

# A dataset of 10 PB or more is a typo (the controller ignores such a size).
MAX_DATASET_GB = 1e7
SIZE_RE = re.compile(r"^(\d+(?:\.\d+)?)\s*([KMGT]?)B?$", re.IGNORECASE)


def dataset_gb(text: str) -> float:
    """``120G``, ``500M``, ``1.5T`` in Slurm's binary units (as ``--mem`` takes them:
    1G = 1024M), or a plain number of synergy's GB (1000 of Slurm's MB, the unit of
    profiles and of ``DefMemPerGPU=62500`` as 62.5 GB)."""
    m = SIZE_RE.match(text.strip())
    if not m:
        raise click.BadParameter(f"expected a size like 120G or 500M, got {text!r}",
                                 param_hint="--dataset-size")
    unit = m.group(2).upper()
    # A suffix is Slurm's binary unit, read by the adapter's one table.
    value = size_mb(m.group(1) + unit) / MB_PER_GB if unit else float(m.group(1))
    if value <= 0:
        raise click.BadParameter("must be positive", param_hint="--dataset-size")
    if value >= MAX_DATASET_GB:
        # The controller ignores a size this large (classify.dataset_gb): refuse it here,
        # where the user can still correct a typo, rather than record it for nothing.
        raise click.BadParameter(f"{text!r} is {value:.3g} GB: give the size the job reads, "
                                 f"under {MAX_DATASET_GB:.0e} GB", param_hint="--dataset-size")
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
        tokens.append(OPT_OUT_TOKEN)
    if profile_key:
        tokens.append(f"synergy:profile={profile_key}")
    if size_gb:
        tokens.append(dataset_token(size_gb))
    extra: list[str] = []
    if requeue_ok:
        tokens.append(REQUEUE_OK_TOKEN)
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
    if script_text is None:
        i = script_index(args)
        if i is not None and not os.path.isfile(args[i]):
            raise BadInput(f"{args[i]}: no such batch script")
    if explain and script_text is None and script_index(args) is None \
            and not any(a == "--wrap" or a.startswith("--wrap=") for a in args):
        # Explaining a job that is not there said "sbatch " and exit 0, as if all were well.
        raise click.UsageError("--explain needs the job: give its batch script, "
                               "--template NAME or --wrap")
    directives = script_directives(script_text or read_script_of(args))
    _one_profile_key(profile_key, args, directives)
    argv = build_argv(sbatch, args, profile_key, size, requeue_ok, no_synergy,
                      split_comment(directives)[1])
    if explain:
        click.echo(_explain(argv[1:], script_text, config_path, fmt))
        return
    if dry_run:
        click.echo(shlex.join(argv) + (f" < (template {template_name})" if script_text else ""))
        if script_text:
            click.echo(script_text, nl=False)
        return
    try:
        proc = subprocess.run(argv, input=script_text, text=script_text is not None,
                              check=False, timeout=SBATCH_TIMEOUT_S,
                              env=progress_env(config_path))
    except FileNotFoundError:
        raise Failed("sbatch not found") from None
    except subprocess.TimeoutExpired:
        raise Failed(f"sbatch did not answer within {SBATCH_TIMEOUT_S:.0f} s (slurmctld busy "
                     "or unreachable); the job may still have been submitted: check "
                     "squeue --me") from None
    sys.exit(proc.returncode)


def _one_profile_key(profile_key: str | None, args: Sequence[str],
                     directives: Sequence[str]) -> None:
    """--profile-key and a ``synergy:profile=`` token in the job's own comment (the
    command line's --comment, else the script's) that name different keys are refused:
    the hook reads the first token, the comment's, so --profile-key was silently
    ignored (docs/user-guide.md, The options synergy adds)."""
    if not profile_key:
        return
    end = script_index(args)
    comment = split_comment(list(args[:end] if end is not None else args))[1]
    if comment is None:
        comment = split_comment(directives)[1]
    theirs = comment_profile_key(comment or "")
    if theirs is not None and theirs != profile_key:
        raise click.UsageError(f"--profile-key {profile_key} conflicts with "
                               f"synergy:profile={theirs} in the job's --comment (the hook "
                               "would use the comment's): give the key once")


def progress_env(config_path) -> dict[str, str]:
    """sbatch's environment: the user's, and where the job may report its progress
    (``[usage] progress_dir``; sbatch exports the environment to the job by default)."""
    env = dict(os.environ)
    try:
        where = load_config(config_path).usage.progress_dir
    except ConfigError:
        where = ""     # a broken config is the admin's to fix; the job is submitted as is
    if where:
        env["SYNERGY_PROGRESS_DIR"] = where
    return env


def read_script_of(args: Sequence[str]) -> str:
    """The text of the batch script named on the command line ('' when there is none)."""
    i = script_index(args)
    return read_script(args[i]) if i is not None else ""


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


def _explain(sbatch_args: list[str], script_text: str | None, config_path, fmt: str) -> str:
    """What the hook and the controller would make of the job (hook/explain.py, the path
    `synergy hook explain` takes too), and the sbatch command line."""
    cfg = config_or_exit(config_path)
    try:
        info = explain(cfg, sbatch_args, os.getuid(), time.time(), script_text=script_text)
    except SbatchArgError as exc:
        raise click.BadParameter(str(exc)) from None
    if fmt == "json":
        return json.dumps(info.as_dict())
    return "\n".join([*info.lines(), "sbatch " + shlex.join(sbatch_args)])
