"""``synergy controller run`` and ``synergy status``."""

from __future__ import annotations

import json
import logging
import signal
import sqlite3
import threading
from pathlib import Path

import click

from ..controller.daemon import Controller, RoundResult
from ..controller.state import StateStore
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
@click.option("--mode", type=click.Choice(["observe", "advise", "enforce"]),
              help="Override [controller] mode.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="With --once: json prints the round's actions as a JSON list.")
def run_cmd(config_path, once, dry_run, mode, fmt) -> None:
    """Run the controller: every interval_s, read Slurm, plan with the configured policy
    and allocator, and (in enforce mode) reshape pending GPU jobs, release the jobs the
    hook held, and requeue running jobs into larger shapes when it pays.

    Modes: observe (default: plan and log only), advise (also record the advice for
    `synergy status`), enforce (act). --dry-run forces observe. Every action is written to
    the audit log ([controller] audit_log) whatever the mode.
    """
    cfg = config_or_exit(config_path)
    effective = "observe" if dry_run else (mode or cfg.controller.mode)
    ctl = Controller(cfg, mode=effective)
    if cfg.controller.metrics_port and not once:
        ctl.metrics.serve(cfg.controller.metrics_port)
    stop = threading.Event()
    if not once:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())

    def show(res: RoundResult) -> None:
        if once and fmt == "json":
            click.echo(json.dumps([a.as_dict() for a in res.actions]))
            return
        click.echo(f"round {res.round_id} ({effective}): {res.managed} managed jobs, "
                   f"{len(res.actions)} actions, {res.errors} errors, {res.duration_s:.2f} s")
        for a in res.actions:
            b = a.before and f"{a.before.cpus_per_gpu}c/{a.before.mem_per_gpu_mb}MB"
            f = a.after and f"{a.after.cpus_per_gpu}c/{a.after.mem_per_gpu_mb}MB"
            click.echo(f"  job {a.job_id} {a.kind}: {b} -> {f} ({a.reason}) "
                       f"[{res.results.get(a.job_id, '')}]")
        for e in res.profiling:
            click.echo(f"  profile {e.key} (job {e.for_job}, {e.user}): {e.what} {e.detail}")

    rc = ctl.run(stop, once=once, on_round=show)
    if rc:
        raise SystemExit(rc)


@click.command("status")
@click.option("--config", "config_path", type=click.Path(dir_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
def status_cmd(config_path, fmt) -> None:
    """Managed jobs as of the controller's last round: shape now, planned shape, profile,
    expected speedup, and what the controller did or why it waits."""
    cfg = config_or_exit(config_path)
    if not Path(cfg.controller.state_db).exists():
        raise click.ClickException(f"no controller state at {cfg.controller.state_db}: the "
                                   "controller has not run yet (synergy controller run)")
    try:
        store = StateStore(cfg.controller.state_db)
    except sqlite3.Error as exc:
        raise click.ClickException(f"cannot read {cfg.controller.state_db}: {exc}") from None
    if fmt == "json":
        click.echo(json.dumps(store.jobs()))
        return
    for line in status_lines(store):
        click.echo(line)


def status_lines(store: StateStore, pending_first: bool = False) -> list[str]:
    """The status table of the controller's last round (``pending_first``: waiting jobs,
    whose plan is about to be applied, before running ones)."""
    jobs = store.jobs()
    if pending_first:
        jobs.sort(key=lambda j: j["state"] != "PENDING")
    last = store.last_round()
    profiling = store.profiling()
    out = []
    if last:
        out.append(f"last round {last['id']} ({last['mode']}): {last['managed']} managed, "
                   f"{last['actions']} actions, {last['errors']} errors")
    out.append(f"{'job':>8} {'user':<10} {'state':<8} {'gpus':>4} {'now c/GPU':>9} "
               f"{'plan c/GPU':>10} {'plan MB/GPU':>11} {'speedup':>7} {'profile':<12} note")

    def cell(v, w):
        return f"{'-' if v is None else v:>{w}}"

    for j in jobs:
        sp = "-" if j["speedup"] is None else f"{j['speedup']:.2f}x"
        out.append(f"{j['job_id']:>8} {j['user'] or '':<10} {j['state'] or '':<8} "
                   f"{cell(j['gpus'], 4)} {cell(j['cpus_per_gpu'], 9)} "
                   f"{cell(j['planned_cpus'], 10)} {cell(j['planned_mem_mb'], 11)} {sp:>7} "
                   f"{j['profile_key'] or '-':<12} {j['note'] or ''}")
    if profiling:
        out.append("\nprofiling jobs (what they cost is theirs, not the jobs'):")
        for key, r in profiling.items():
            cost = "-" if r["cpu_s"] is None else f"{r['cpu_s']:.1f} CPU-s"
            out.append(f"  {key:<20} {r['status']:<9} Slurm job {r['slurm_job'] or '-'} for "
                       f"job {r['for_job']} ({r['user']}), {cost} {r['note'] or ''}")
    return out
