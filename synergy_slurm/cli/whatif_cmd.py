"""``synergy whatif``: what Synergy would have done with this site's own job history."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from ..controller.usage import rule_of
from ..core import ALLOCATOR_NAMES, ClusterState
from ..core.pools import Pool
from ..owndir import check_target, own_dir
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.release import Release, detect
from ..slurm.sacct import HISTORY_JSON_ARGS, HISTORY_TEXT_ARGS
from ..whatif import HistoryError, Rule, pipeline, report
from ..whatif import replay as replay_mod
from .errors import Failed, writable_dir
from .options import (
    check_server,
    cluster_option_value,
    config_or_exit,
    default_profiles_path,
    profiles_option_value,
)


@click.command("whatif")
@click.option("--from", "export", type=click.Path(dir_okay=False, path_type=Path),
              help="A saved history instead of asking sacct: the output of "
              f"'sacct {' '.join(HISTORY_JSON_ARGS)} -S .. -E ..' (without -X: each job's "
              f"steps say what it used) or of 'sacct {' '.join(HISTORY_TEXT_ARGS)}'.")
@click.option("--start", "-S", default="now-7days", show_default=True,
              help="Without --from: the window's start, as sacct -S takes it.")
@click.option("--end", "-E", default="now", show_default=True,
              help="Without --from: the window's end, as sacct -E takes it.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml ([slurm] to reach sacct/sinfo, [profiles], [whatif] rules)."
              " Default: /etc/slurm/synergy.toml if it exists.")
@click.option("--rule", "rules", multiple=True, metavar="FIELD:REGEX=KEY",
              help="Profile KEY for jobs whose FIELD (name, account, user, partition, "
              "comment, qos) matches REGEX, when their comment names no profile. Tried "
              "before [whatif] rules; repeatable.")
@click.option("--assume-mix", default=None, metavar="IMAGE,LANGUAGE,SPEECH",
              help="The optimistic forecast: jobs with no profile drawn from this class mix "
              "(percentages that sum to 100; the paper's is 20,70,10). Without it there is "
              "no optimistic forecast: it is an assumption, not a measurement.")
@click.option("--seed", default=0, show_default=True, type=int,
              help="The optimistic forecast's draws' seed.")
@click.option("--cluster", "cluster_file", metavar="FILE|NAME", default=None,
              help="Replay on a cluster description (as 'synergy dev-cluster up --cluster' "
              "takes it) instead of the live cluster's nodes.")
@click.option("--servers", default=None, type=click.IntRange(1, 100000),
              help="Replay on this many identical servers instead of the live cluster's "
              "GPU nodes (read with sinfo/scontrol).")
@click.option("--gpus-per-server", default=8, show_default=True, type=click.IntRange(1, 64))
@click.option("--cpus-per-server", default=24, show_default=True, type=click.IntRange(1, 4096))
@click.option("--mem-per-server", default=500.0, show_default=True,
              type=click.FloatRange(1, 1e7), help="GB per server.")
@click.option("--allocator", default="tune", show_default=True,
              type=click.Choice([a for a in ALLOCATOR_NAMES if a != "proportional"]),
              help="Synergy's allocator in the prediction.")
@click.option("--round-seconds", default=30.0, show_default=True,
              type=click.FloatRange(1, 3600),
              help="How often Slurm's backfill runs (bf_interval: 30 s unless "
              "SchedulerParameters says otherwise); the main scheduler also runs on every "
              "submission, end and release.")
@click.option("--controller-interval", default=None, type=click.FloatRange(0.1, 86400),
              help="Seconds between the controller's rounds in the synergy replay. "
              "Default: [controller] interval_s.")
@click.option("--release-delay", default=2.0, show_default=True,
              type=click.FloatRange(0, 3600),
              help="Seconds from the controller's round to Slurm starting a job it released:"
              " the round's own duration (synergy status shows it) and Slurm's start "
              "(about 2 s together on the dev cluster).")
@click.option("--slurm-release", default="auto", show_default=True, metavar="auto|X.Y",
              help="The Slurm release the synergy replay runs on: 26.05 and later shape "
              "jobs with a known profile at submission and lower pending jobs; earlier "
              "releases hold them until the controller's round (docs/slurm-notes.md). "
              "auto: the running Slurm's (scontrol --version), else 22.05's rules.")
@click.option("--startup-seconds", default=0.0, show_default=True,
              type=click.FloatRange(0, 86400),
              help="Seconds each job spends before its training loop (imports, data "
              "loading), which no share of cores or memory speeds up.")
@click.option("--default-time-limit", default=0.0, show_default=True,
              type=click.FloatRange(0), metavar="MINUTES",
              help="Time limit for jobs whose record has none (0: unlimited, as Slurm "
              "plans a job without one). Slurm's backfill plans with time limits.")
@click.option("--restart-cost", default=None, type=click.FloatRange(0),
              help="Seconds a requeue costs a job. Default: [controller] restart_cost_s.")
@click.option("--requeue-budget", default=None, type=click.IntRange(0),
              help="Requeues per round in the synergy replay, of jobs that opted in "
              "(synergy:requeue-ok in their comment). Default: [controller] requeue_budget; "
              "0: none.")
@click.option("--profiles", "profiles_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Profiles JSON. Default: the config's profiles (file and store), else the "
              "paper's.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--report", "report_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Also write report.html (self-contained) and its PNG plots here.")
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr (default: when stderr is a terminal).")
def whatif_cmd(export, start, end, config_path, rules, assume_mix, seed, cluster_file, servers,
               gpus_per_server, cpus_per_server, mem_per_server, allocator, round_seconds,
               controller_interval, release_delay, slurm_release, startup_seconds,
               default_time_limit, restart_cost, requeue_budget, profiles_path, fmt,
               report_dir, progress) -> None:
    """Replay this site's job history through synergy's scheduler and report what it
    would have changed.

    Reads the window's jobs from the accounting database (sacct, read-only) or from a
    saved export, and replays them twice on the cluster's partitions, as Slurm schedules
    them (its queue from each job's submission, its backfill planning by time limits,
    cons_tres placement): once without synergy, once with the hook and the controller as
    they act on your Slurm release, through the same core the controller runs.

    The report leads with the answer: where synergy did not run in the window, the
    forecast (the plain replay's mean JCT over the synergy replay's: the model's own
    error cancels); where it ran, what happened (Slurm's records) against the replay
    without it. Then how far to trust it (the replay of what ran against what happened,
    split into the waiting and the running it misses), the warnings this history earns
    (waiting missed, far fewer nodes or GPUs used than described, a release assumed,
    records skipped) and what to do next. Then waits, JCTs (mean, p50, p99), makespan and
    utilisation, overall, by job size, per partition and per account.

    What synergy changes about each job is the hook's and the controller's own rule:
    reshaped with a known profile, released as it is when its profile is unknown, left
    as submitted otherwise (no GPUs, opted out, -c, --exclusive, --gpus-per-task, ...,
    read from the hook's tags or the submit line): jobs left or released keep the cores
    and memory they had in both replays.

    A job that hit its time limit, failed or was cancelled runs as long as it did in both
    replays; --startup-seconds of each job are never sped up.

    A job's profile comes from the hook's tag or its comment (synergy:profile=KEY, as
    synergy-sbatch writes it), else from --rule / [whatif] rules, and is picked as the
    controller picks it: measured on the GPU type the job asked for (else an untyped one),
    among those [profiles] trust lets shape its user's jobs. Other jobs are replayed by the
    class their measured use suggests (export without -X: the steps carry TotalCPU and
    MaxRSS), else unknown and released as they were. Jobs that never started are counted and left
    out; jobs without GPUs keep their cores and memory where they ran. Records that cannot
    be read are skipped with a count and a reason.

    Three forecasts, each with what it assumes: guaranteed (only what measured use
    proves: jobs ask for what they used, none runs faster), expected (profiles, else the
    class by use: the synergy replay above) and, with --assume-mix, optimistic (unknown
    jobs drawn from that mix); then the keys whose profiling would most narrow the gap, with the
    commands that profile them, and the GPU-hours in shapes synergy does not reshape.

    \b
    Examples:
      synergy whatif -S 2026-11-01 -E 2026-12-01 --report ~/whatif-nov
      sacct -a -D --json -S 2026-11-01 > nov.json; synergy whatif --from nov.json \\
          --servers 16 --rule 'name:^bert=transformer' --format json
    """
    cfg = config_or_exit(config_path)
    if servers is not None:
        check_server(gpus_per_server, cpus_per_server)
    if report_dir is not None:
        writable_dir(report_dir, "--report")
        check_target(report_dir)
    try:
        parsed_rules = [Rule.parse(r) for r in (*rules, *cfg.whatif.rules)]
    except HistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="--rule / [whatif] rules") from None
    mix = _assumed_mix(assume_mix)
    profiles, owners, profiles_from = _profiles(cfg, profiles_path)
    with _option_errors():
        pipeline.check_rule_keys(parsed_rules, profiles)
    cli = SlurmCLI.for_config(cfg.slurm, timeout_s=max(cfg.slurm.timeout_s, 300))
    req = pipeline.Request(
        export=export, start=start, end=end, rules=tuple(parsed_rules),
        mix=tuple(mix) if mix is not None else None, seed=seed, allocator=allocator,
        startup_s=startup_seconds, default_time_limit_min=default_time_limit,
        headroom=cfg.usage.headroom, trust=cfg.profiles.trust,
        usage_rule=rule_of(cfg.usage) if cfg.usage.enabled else None)
    with _option_errors():
        history = pipeline.read(req, cli)
    parsed = pipeline.parse(history)
    site = cluster_option_value(cluster_file)
    release = None
    if site is not None:
        found = site.pools()
    elif servers is not None:
        found = (Pool("", ClusterState.uniform(servers, gpus_per_server, cpus_per_server,
                                              mem_per_server)),)
    else:
        found, release = _live_pools(cfg, cli)
    release = _release(slurm_release, release, cli)
    ctl = _controller(cfg, release, controller_interval, release_delay, round_seconds,
                      restart_cost, requeue_budget)
    inputs = pipeline.Inputs(profiles, found, ctl, release, owners, profiles_from)
    show = sys.stderr.isatty() if progress is None else progress
    with _progress(show) as on_progress:
        result = pipeline.replay_history(req, inputs, history, parsed, on_progress)
    doc = result.doc
    if report_dir is not None:
        own_dir(report_dir)     # checked before the replay; made here, or the caller's own
        for path in report.write_html(doc, result.outcome, report_dir / "report.html",
                                      result.used):
            click.echo(f"wrote {path}", err=True)
    click.echo(json.dumps(doc) if fmt == "json" else report.as_text(doc))


@contextmanager
def _option_errors() -> Iterator[None]:
    """The pipeline's errors about an option's value, as click shows a bad option."""
    try:
        yield
    except pipeline.OptionError as exc:
        raise click.BadParameter(str(exc), param_hint=exc.option) from None


@contextmanager
def _progress(show: bool) -> Iterator[Callable[[float], None] | None]:
    """A progress bar on stderr over the replays when ``show`` (the share done)."""
    if not show:
        yield None
        return
    steps = 1000
    with click.progressbar(length=steps, label="replaying", file=sys.stderr,
                           show_percent=True) as bar:
        state = {"pos": 0}

        def on_progress(done: float) -> None:
            pos = int(done * steps)
            if pos > state["pos"]:
                bar.update(pos - state["pos"])
                state["pos"] = pos

        yield on_progress


def _assumed_mix(assume_mix: str | None) -> list[float] | None:
    if assume_mix is None:
        return None
    try:
        mix = [float(x) for x in assume_mix.split(",")]
    except ValueError:
        mix = []
    if len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0:
        raise click.BadParameter("give three non-negative percentages",
                                 param_hint="--assume-mix")
    if abs(sum(mix) - 100) > 0.5:
        # Not normalised quietly: 90,90,90 may be a typo for 90,9,1, and a forecast on a
        # mix the admin did not mean would be reported as theirs.
        raise click.BadParameter(f"{assume_mix} sums to {sum(mix):g}%: the three "
                                 "percentages must sum to 100 (e.g. 20,70,10)",
                                 param_hint="--assume-mix")
    return mix


def _profiles(cfg, path: Path | None) -> tuple[dict, dict[str, str], str]:
    """--profiles FILE, else what the controller would plan with ([profiles] file, then
    the store), else the paper's shipped profiles; who measured each (for [profiles]
    trust); and which it was."""
    if path is not None:
        return profiles_option_value(path), {}, f"--profiles {path}"
    from ..profiles.resolve import configured

    known = configured(cfg.profiles.file, cfg.profiles.store)
    for problem in known.problems:
        click.echo(f"warning: {problem}", err=True)
    if known.profiles:
        return known.profiles, dict(known.owners), known.describe()
    shipped = default_profiles_path()
    return profiles_option_value(None), {}, (f"the paper's profiles ({shipped}): no [profiles] "
                                         f"file and no store at {cfg.profiles.store}")


def _live_pools(cfg, cli: SlurmCLI) -> tuple[tuple[Pool, ...], Release | None]:
    """The managed partitions as the controller plans them, empty (the replay starts
    from nothing), and the running release."""
    from ..controller.observe import pools
    from ..slurm.reader import make_reader

    try:
        snap = make_reader(cli, cfg.slurm.reader).snapshot()
    except SlurmError as exc:
        raise Failed(f"could not read the cluster's nodes ({exc}); give its shape with "
                     "--servers N --gpus-per-server G --cpus-per-server C "
                     "--mem-per-server GB, or --cluster FILE") from None
    found = tuple(p.with_reserved(()) for p in pools(snap, cfg) if p.cluster.servers)
    if not found:
        raise Failed(f"no usable GPU nodes in the managed partitions "
                     f"({', '.join(cfg.hook.partitions)}); give --servers N ...")
    try:
        release = detect(cli)
    except SlurmError:
        release = None
    return found, release


def _release(option: str, live: Release | None, cli: SlurmCLI) -> Release | None:
    """The release the synergy replay runs on: the option's, else the running Slurm's
    (None where none answers: 22.05's rules)."""
    if option != "auto":
        try:
            return Release.parse(option)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--slurm-release") from None
    if live is not None:
        return live
    try:
        return detect(cli)
    except SlurmError:
        return None


def _controller(cfg, release: Release | None, interval: float | None, release_delay: float,
                sched_s: float, restart_cost: float | None, requeue_budget: int | None
                ) -> replay_mod.Controller:
    """The controller and Slurm of the synergy replay: the config's, the options', and what
    the release offers."""
    c = cfg.controller
    lowers = release.lowers_pending if release else False
    return replay_mod.Controller(
        interval_s=c.interval_s if interval is None else interval,
        release_delay_s=release_delay, lowers_pending=lowers,
        shrink_memory=bool(release and release.lowers_running_memory
                           and c.shrink_running_memory),
        requeue_budget=c.requeue_budget if requeue_budget is None else requeue_budget,
        requeue_interval_s=c.requeue_min_interval_s,
        restart_cost_s=c.restart_cost_s if restart_cost is None else restart_cost,
        sched_s=sched_s, policy=c.policy, hold_known=cfg.hook.hold_known,
        hold_unknown=cfg.hook.hold_unknown)
