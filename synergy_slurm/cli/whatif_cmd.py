"""``synergy whatif``: what Synergy would have done with this site's own job history."""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from contextlib import nullcontext
from datetime import datetime
from pathlib import Path

import click

from ..core import ALLOCATOR_NAMES, ClusterState, ProfileError
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.parse import ParseError
from ..slurm.sacct import PRIORITY_FIELDS, parse_history
from ..whatif import HistoryError, Rule, build_replay, report
from ..whatif import replay as replay_mod
from .errors import BadInput, Failed, writable_dir
from .options import check_server, cluster_option_value, config_or_exit, profiles_option_value

# Allocations only (-X), every user (-a), every run of a requeued job (-D: its first
# submission is only in the first run's record).
SACCT_ARGS = ("-a", "-X", "-D", "--json")


@click.command("whatif")
@click.option("--from", "export", type=click.Path(dir_okay=False, path_type=Path),
              help="A saved history instead of asking sacct: the output of "
              "'sacct -a -X -D --json -S .. -E ..' or of 'sacct -a -X -D -P -o "
              + ",".join(PRIORITY_FIELDS) + "'.")
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
              help="Draw a profile for each unknown job from this class mix (percentages) "
              "instead of leaving it proportional; the report counts them as assumed.")
@click.option("--seed", default=0, show_default=True, type=int,
              help="With --assume-mix: the draws' seed.")
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
@click.option("--round-seconds", default=60.0, show_default=True,
              type=click.FloatRange(1, 3600),
              help="Planning rounds of the replay: the cadence of your scheduler (Slurm's "
              "sched_interval, 60 s unless SchedulerParameters says otherwise).")
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
               restart_cost, requeue_budget, profiles_path, fmt, report_dir,
               progress) -> None:
    """Replay this site's job history through synergy's scheduler and report what it
    would have changed.

    Reads the window's jobs from the accounting database (sacct, read-only) or from a
    saved export, replays them twice on the cluster's GPU nodes through the same core the
    controller uses: proportionally (what happened) and with synergy. The first figure is
    the replay's error against what really happened, so you know how far to trust the
    prediction. Then waits, JCTs (mean, p50, p99), makespan and utilisation, overall, per
    partition and per account.

    A job's profile comes from its comment (synergy:profile=KEY, as synergy-sbatch writes
    it), else from --rule / [whatif] rules; other jobs are unknown and stay proportional
    (or, with --assume-mix, are drawn from a class mix). Jobs that never started are
    counted and left out; jobs without GPUs keep their cores and memory where they ran.
    Records that cannot be read are skipped with a count and a reason.

    \b
    Examples:
      synergy whatif -S 2026-11-01 -E 2026-12-01 --report /tmp/whatif
      sacct -a -X -D --json -S 2026-11-01 > nov.json; synergy whatif --from nov.json \\
          --servers 16 --rule 'name:^bert=transformer' --format json
    """
    cfg = config_or_exit(config_path)
    if servers is not None:
        check_server(gpus_per_server, cpus_per_server)
    if report_dir is not None:
        writable_dir(report_dir, "--report")
    try:
        parsed_rules = [Rule.parse(r) for r in (*rules, *cfg.whatif.rules)]
    except HistoryError as exc:
        raise click.BadParameter(str(exc), param_hint="--rule / [whatif] rules") from None
    mix = None
    if assume_mix is not None:
        try:
            mix = [float(x) for x in assume_mix.split(",")]
        except ValueError:
            mix = []
        if len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0:
            raise click.BadParameter("give three non-negative percentages",
                                     param_hint="--assume-mix")
    profiles = _profiles(cfg, profiles_path)
    cli = SlurmCLI.for_config(cfg.slurm, timeout_s=max(cfg.slurm.timeout_s, 300))
    raw, source, export_time = _history(export, start, end, cli)
    try:
        history, skipped = parse_history(raw)
    except ParseError as exc:
        raise BadInput(f"{source}: {exc}") from None
    reasons = dict(Counter(s.reason for s in skipped))
    site = cluster_option_value(cluster_file)
    if site is not None:
        cluster = site.cluster_state()
    elif servers is not None:
        cluster = ClusterState.uniform(servers, gpus_per_server, cpus_per_server,
                                       mem_per_server)
    else:
        cluster = _live_cluster(cfg, cli)
    try:
        rp = build_replay(history, profiles, cluster.fair, [s.name for s in cluster.servers],
                          parsed_rules, mix, seed, export_time)
    except HistoryError as exc:
        raise BadInput(f"{source}: {exc}") from None
    too_big = [j for j in rp.trace if j.gpus > cluster.total.gpus]
    if too_big:
        raise BadInput(f"{len(too_big)} jobs ran on more GPUs than the replayed cluster has "
                       f"({cluster.total.gpus}), e.g. job {too_big[0].job_id}: replay on the "
                       "site's own nodes, or give --servers")
    show = sys.stderr.isatty() if progress is None else progress
    span = max(1.0, max(t.arrival for t in rp.trace))
    state = {"pos": 0}
    with (click.progressbar(length=200, label="replaying", file=sys.stderr,
                            show_percent=True) if show else nullcontext()) as bar:

        def on_round(which: str, now: float) -> None:
            if bar is None:
                return
            pos = int(min(1.0, now / span) * 100) + (100 if which == "synergy" else 0)
            if pos > state["pos"]:
                bar.update(pos - state["pos"])
                state["pos"] = pos

        try:
            ctl = cfg.controller
            outcome = replay_mod.run(
                rp, profiles, cluster, allocator, round_seconds,
                ctl.restart_cost_s if restart_cost is None else restart_cost, on_round,
                ctl.requeue_budget if requeue_budget is None else requeue_budget,
                ctl.requeue_min_interval_s)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    doc = report.build(rp, outcome, cluster, source, len(skipped), reasons)
    if report_dir is not None:
        for path in report.write_html(doc, outcome, report_dir / "report.html"):
            click.echo(f"wrote {path}", err=True)
    click.echo(json.dumps(doc) if fmt == "json" else report.as_text(doc))


def _profiles(cfg, path: Path | None) -> dict:
    if path is not None or not cfg.profiles.file:
        return profiles_option_value(path)
    from ..profiles import load_profiles
    from ..profiles.resolve import with_store

    try:
        base = load_profiles(cfg.profiles.file)
    except ProfileError as exc:
        raise BadInput(f"[profiles] file: {exc}") from None
    merged, problems = with_store(base, cfg.profiles.store)
    for p in problems:
        click.echo(f"warning: {p}", err=True)
    return merged


def _history(export: Path | None, start: str, end: str, cli: SlurmCLI
             ) -> tuple[str, str, float | None]:
    """The raw history, where it came from, and when it was read (None: unknown)."""
    if export is not None:
        try:
            return export.read_text(errors="replace"), str(export), None
        except OSError as exc:
            raise BadInput(f"--from {export}: {exc.strerror or exc}") from None
    for v, name in ((start, "--start"), (end, "--end")):
        if not v or any(c.isspace() for c in v) or v.startswith("-"):
            raise click.BadParameter(f"{v!r} is not a time sacct takes", param_hint=name)
    now = time.time()
    try:
        raw = cli.run("sacct", [*SACCT_ARGS, "-S", start, "-E", end])
    except SlurmError as exc:
        if "json" in str(exc).lower():
            # A Slurm without --json: the parsable text form.
            raw = cli.run("sacct", ["-a", "-X", "-D", "-P", "-o", ",".join(PRIORITY_FIELDS),
                                    "-S", start, "-E", end])
        else:
            raise Failed(f"could not read the history: {exc}") from None
    return raw, f"sacct -S {start} -E {end} ({datetime.now().strftime('%Y-%m-%d %H:%M')})", now


def _live_cluster(cfg, cli: SlurmCLI) -> ClusterState:
    from ..controller.observe import cluster_state
    from ..slurm.reader import SlurmReader

    try:
        snap = SlurmReader(cli).snapshot()
    except SlurmError as exc:
        raise Failed(f"could not read the cluster's nodes ({exc}); give its shape with "
                     "--servers N --gpus-per-server G --cpus-per-server C "
                     "--mem-per-server GB") from None
    cluster = cluster_state(snap, cfg)
    if not cluster.servers:
        raise Failed(f"no usable GPU nodes in the managed partitions "
                     f"({', '.join(cfg.hook.partitions)}); give --servers N ...")
    return cluster
