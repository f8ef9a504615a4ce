"""``synergy controller run`` and ``synergy status``."""

from __future__ import annotations

import json
import logging
import os
import pwd
import signal
import threading
from pathlib import Path

import click

from ..config import MODES
from ..controller.daemon import Controller, RoundResult
from ..controller.snapshot_round import plan_on_snapshot
from ..controller.state import StateStore
from ..controller.status import StatusSource, explain_job, select, status_lines
from ..controller.views import read_view, view_dir
from ..owndir import check_target
from ..slurm import recording
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.writer import Shape
from .errors import Failed, writable_dir
from .options import config_or_exit

log = logging.getLogger(__name__)



@click.group("controller")
def controller() -> None:
    """The controller daemon: Synergy's rounds on a live Slurm cluster."""


@controller.command("run")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml (default /etc/slurm/synergy.toml).")
@click.option("--once", is_flag=True, help="Run one round and exit.")
@click.option("--dry-run", is_flag=True,
              help="Plan and print, change nothing in Slurm (observe mode for this run).")
@click.option("--mode", type=click.Choice(MODES),
              help="Override [controller] mode.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="With --once: json prints the round's actions as a JSON list.")
def run_cmd(config_path, once, dry_run, mode, fmt) -> None:
    """Run the controller: every interval_s, read Slurm, plan with the configured policy
    and allocator, and (in enforce mode) reshape pending GPU jobs, release the jobs the
    hook held, and requeue running jobs into larger shapes when it pays.

    Modes: observe (default: plan, and record the plan for `synergy status` and the audit
    log, sending nothing to Slurm) and enforce (act). --dry-run forces observe. Every
    action is written to the audit log ([controller] audit_log) whatever the mode.

    What this Slurm allows (lowering scheduled jobs, lowering running jobs' memory, which
    needs PrologFlags=Contain) is read at the first round and logged. SIGHUP (systemctl
    reload) re-reads and checks --config before the next round (mode, interval, policy,
    profiles, hook table, ...) and what Slurm allows: a file with a problem keeps the
    running configuration and the log says why in one line; `synergy status` shows the
    mode and when the configuration was read. SIGTERM stops after the current round and
    releases the jobs the hook held.
    """
    cfg = config_or_exit(config_path)
    # Only --dry-run and --mode override the file's mode: a reload (SIGHUP) may change it.
    ctl = Controller(cfg, mode="observe" if dry_run else mode)
    if cfg.controller.metrics_port and not once:
        try:
            ctl.metrics.serve(cfg.controller.metrics_port, cfg.controller.metrics_address)
        except OSError as exc:
            # Metrics are on by default: a port taken (a second controller in observe, a
            # test cluster) costs the metrics, never the controller.
            log.error("metrics: cannot listen on %s:%d (%s): running without them; set "
                      "[controller] metrics_port", cfg.controller.metrics_address,
                      cfg.controller.metrics_port, exc.strerror or exc)
    stop = threading.Event()
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        # synergy.toml, and what this Slurm allows (release, PrologFlags=Contain), are
        # read again before the next round (a bad file keeps the running configuration).
        def reload(*_: object) -> None:
            ctl.reload_pending = True

        signal.signal(signal.SIGHUP, reload)

    def show(res: RoundResult) -> None:
        if once and fmt == "json":
            click.echo(json.dumps([a.as_dict() for a in res.actions]))
        else:
            _print_round(res, ctl.mode)

    rc = ctl.run(stop, once=once, on_round=show)
    if rc:
        if once and fmt == "json":
            click.echo(json.dumps({"error": ctl.last_error}))
        raise Failed(f"the round failed: {ctl.last_error}")


def _print_round(res: RoundResult, mode: str, outcomes: bool = True) -> None:
    """A round in lines; ``outcomes``: each action's result (a replay's are all "done" by
    its recording writer, so it leaves them out)."""
    click.echo(f"round {res.round_id} ({mode}): {res.managed} managed jobs, "
               f"{len(res.actions)} actions, {res.errors} errors, {res.duration_s:.2f} s")
    for a in res.actions:
        b = a.before and f"{a.before.cpus_per_gpu}c/{a.before.mem_per_gpu_mb}MB"
        f = a.after and f"{a.after.cpus_per_gpu}c/{a.after.mem_per_gpu_mb}MB"
        outcome = f" [{res.results.get(a.job_id, '')}]" if outcomes else ""
        click.echo(f"  job {a.job_id} {a.kind}: {b} -> {f} ({a.reason}){outcome}")
    for e in res.profiling:
        click.echo(f"  profile {e.key} (job {e.for_job}, {e.user}): {e.what} {e.detail}")


@controller.command("snapshot")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml (default /etc/slurm/synergy.toml): which Slurm to read.")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def snapshot_cmd(config_path, directory: Path) -> None:
    """Save what the controller reads from Slurm into DIRECTORY, as Slurm prints it
    (squeue --json, the nodes' JSON, scontrol show partition -o, the release, PrologFlags
    and, with accounting, the QOS and association limits), to replay it later or
    elsewhere with `synergy controller replay DIRECTORY`, or to attach it to a report.

    Only reads Slurm. The files hold every live job's name, user, comment and working
    directory: share them as you would squeue's output.
    """
    cfg = config_or_exit(config_path)
    writable_dir(directory, "DIRECTORY")      # before Slurm is read
    check_target(directory)
    try:
        written = recording.save(SlurmCLI.for_config(cfg.slurm), directory)
    except SlurmError as exc:
        raise Failed(f"cannot read Slurm: {exc}") from None
    except OSError as exc:
        raise Failed(f"cannot write {directory}: {exc}") from None
    for path in written:
        click.echo(f"wrote {path}")


@controller.command("replay")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml (default /etc/slurm/synergy.toml): the policy, allocator, "
              "profiles and partitions to plan with.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
def replay_cmd(config_path, fmt, directory: Path) -> None:
    """Plan one round on a snapshot (`synergy controller snapshot DIRECTORY`) instead of
    the live Slurm, and print what the controller would do there and each change it would
    ask Slurm for, at the time the snapshot was taken.

    Changes nothing and asks Slurm nothing: the round runs against a recording stand-in
    for Slurm, its state, audit log and hook table go to a temporary directory that is
    removed, and no profiling job is submitted. Try a new policy, allocator or profile on
    your own queue before you enforce it, or see what the controller made of a round you
    saved.

    \b
      synergy controller snapshot ~/snap
      synergy controller replay ~/snap --config new-synergy.toml
    """
    cfg = config_or_exit(config_path)
    saved = recording.load(directory)
    run = plan_on_snapshot(cfg, saved.reader, saved.taken_at)
    if fmt == "json":
        click.echo(json.dumps({"actions": [a.as_dict() for a in run.result.actions],
                               "slurm_changes": [_change(c) for c in run.calls],
                               "errors": run.result.errors}))
        return
    _print_round(run.result, "replay", outcomes=False)
    for call in run.calls:
        click.echo(f"  would ask Slurm: {_change(call)}")


def _change(call: tuple) -> str:
    """A recorded writer call in words: ``reshape 5 12c/125000MB``."""
    return " ".join(f"{a.cpus_per_gpu}c/{a.mem_per_gpu_mb}MB" if isinstance(a, Shape)
                    else str(a) for a in call)


def _status_source(path: Path) -> StatusSource:
    """The state itself where this user may read it, else their view of it."""
    views = view_dir(path)
    if not path.exists() and not views.exists():
        raise Failed(f"no controller state at {path}: the controller has not run yet "
                     "(synergy controller run)")
    if os.access(path, os.R_OK):
        return StateStore(path, readonly=True)
    return read_view(views, pwd.getpwuid(os.getuid()).pw_name)


@click.command("status")
@click.option("--config", "config_path", type=click.Path(dir_okay=False),
              help="synergy.toml (default /etc/slurm/synergy.toml).")
@click.option("--user", help="Only this user's jobs.")
@click.option("--job", "job_id", type=click.IntRange(1),
              help="One job, and why it has its cores and memory.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def status_cmd(config_path, user, job_id, fmt) -> None:
    """Managed jobs as of the controller's last round: shape now, planned shape, profile,
    expected speedup, and what the controller did or why the job waits. With --job, why
    that job has the cores and memory it has and what was done to it.

    Reads the controller's state ([controller] state_db) read-only where you may (root,
    the controller's account); any other user sees their own jobs, from the view the
    controller writes for them (every job where Slurm's PrivateData shows every job).
    It changes nothing.
    """
    cfg = config_or_exit(config_path)
    store = _status_source(Path(cfg.controller.state_db))
    if fmt == "json":
        click.echo(json.dumps({"last_round": store.last_round(),
                               "jobs": select(store.jobs(), user=user, job_id=job_id),
                               "past": select(store.past(), user=user, job_id=job_id),
                               "suspects": [s for s in store.suspects()
                                            if user is None or s["user"] == user]}))
        return
    lines = explain_job(store, job_id) if job_id else status_lines(store, user=user)
    for line in lines:
        click.echo(line)
