"""``synergy simulate``: replay or generate a trace and compare schedulers."""

from __future__ import annotations

import csv
import io
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from ..core import ALLOCATOR_NAMES, POLICIES, ClusterState
from ..core.ledger import PLACEMENTS
from ..core.pools import Pool
from ..core.usage import UsageRule
from ..sim.config import RoundsConfig, SimConfig, SlurmConfig
from ..sim.metrics import summary_row
from ..sim.report import write_results
from ..sim.results import SimulationCapped
from ..sim.runner import Run, Workload, plan_runs, run_all
from ..sim.trace import TraceError, read_trace, write_trace
from .errors import BadInput, Failed, writable_dir, writable_file
from .options import check_server, cluster_option_value, csv_list, profiles_option_value

COLUMNS = ("policy", "allocator", "load", "jobs", "mean_jct_h", "p50_jct_h", "p99_jct_h",
           "p999_jct_h", "makespan_h", "wall_s")


def _numbers(value: str, what: str) -> list[float]:
    try:
        return [float(x) for x in csv_list(value, what=what)]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None


@click.command("simulate")
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Replay a recorded trace: headerless CSV job_id,model,arrival,iterations,gpus.")
@click.option("--generate", type=click.Choice(["philly"]),
              help="Generate a Philly-derived trace instead of replaying one.")
@click.option("--jobs-per-hour", "loads", default="9", show_default=True,
              help="With --generate: comma-separated arrival rates, one run set per load.")
@click.option("--split", default="20,70,10", show_default=True,
              help="With --generate: image,language,speech percentages.")
@click.option("--multi-gpu", is_flag=True,
              help="With --generate: GPU counts from {1,2,4,8,16} "
              "(weights 70/10/10/7/3 %) instead of single-GPU jobs.")
@click.option("--seed", default=0, show_default=True, type=int,
              help="With --generate: the trace's seed (same trace for every scheduler).")
@click.option("--jobs", "count", default=None, type=click.IntRange(1),
              help="With --generate: jobs in the trace. Arrivals stop after them, so every "
              "run ends even where a policy starves jobs under overload. "
              "Default: the window's last id + 1001.")
@click.option("--window", default=None, metavar="FIRST,LAST",
              help="Job ids the statistics cover. Default: 4000,4999 for generated traces, "
              "all jobs for replays.")
@click.option("--cluster", "cluster_file", metavar="FILE|NAME", default=None,
              help="Simulate on a cluster description (node kinds and partitions, as "
              "'synergy dev-cluster up --cluster' starts it; shipped: mixed, paper) instead "
              "of --servers identical servers: every node, with the default partition's "
              "proportional share.")
@click.option("--servers", default=16, show_default=True, type=click.IntRange(1, 100000))
@click.option("--gpus-per-server", default=8, show_default=True, type=click.IntRange(1, 64))
@click.option("--cpus-per-server", default=24, show_default=True, type=click.IntRange(1, 4096))
@click.option("--mem-per-server", default=500.0, show_default=True,
              type=click.FloatRange(1, 1e7), help="GB per server.")
@click.option("--policy", "policies", default="fifo", show_default=True,
              help=f"Comma-separated base policies: {', '.join(POLICIES)}.")
@click.option("--allocator", "allocators", default="proportional,tune", show_default=True,
              help=f"Comma-separated allocators: {', '.join(ALLOCATOR_NAMES)}.")
@click.option("--profiles", "profiles_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Profiles JSON (model_profiles.json shape). "
              "Default: $SYNERGY_PROFILES or the reference profiles.")
@click.option("--static", is_flag=True, help="All jobs arrive at t=0 (makespan experiments).")
@click.option("--round-seconds", default=300.0, show_default=True,
              type=click.FloatRange(1, 86400, min_open=False))
@click.option("--restart-cost", default=0.0, show_default=True, type=click.FloatRange(0),
              help="Seconds lost by a job each time its allocation changes or it restarts.")
@click.option("--reference-speedups", is_flag=True,
              help="Run a job at its ideal speedup only at its ideal share and at 1.0 "
              "otherwise, as the reference simulator does.")
@click.option("--no-preempt", is_flag=True,
              help="The controller model instead of the paper's rounds: Slurm's queue, "
              "main and backfill scheduler (every --round-seconds) and placement, with "
              "synergy's hook and controller (a round every --round-seconds) on top; a "
              "running job keeps its allocation until it ends. What whatif replays.")
@click.option("--time-limit", default=0.0, show_default=True, type=click.FloatRange(0),
              metavar="HOURS",
              help="With --no-preempt: every job's time limit, what Slurm's backfill plans "
              "with (0: unlimited).")
@click.option("--requeue-budget", default=0, show_default=True, type=click.IntRange(0),
              help="With --no-preempt: running jobs restarted into idle resources per "
              "round when the gain beats --restart-cost (the controller's requeue).")
@click.option("--requeue-interval", default=0.0, show_default=True,
              type=click.FloatRange(0), help="With --requeue-budget: seconds between "
              "restarts of one job.")
@click.option("--shrink-memory", is_flag=True,
              help="With --no-preempt: lower a running job's memory to what its profile "
              "needs, in place, so pending jobs can use the rest (the controller's "
              "behaviour on Slurm 26.05, which can lower a running job's memory).")
@click.option("--mislabel", metavar="SHARE[:KEY]",
              help="Mislabelled jobs: this share of users (of 20) label every job with KEY "
              "(default alexnet, the hungriest) whatever it really is; planned by KEY's "
              "profile, they run as what they are.")
@click.option("--closed-loop", is_flag=True,
              help="Watch what running jobs use and cap a user's key whose jobs use far "
              "less than they get (the controller's [usage] loop, with its defaults).")
@click.option("--placement", type=click.Choice(PLACEMENTS), default=None,
              help="How a job's GPUs are chosen: 'fullest' (whole on the fullest server "
              "where it fits, else spread) or 'first-free' (the reference simulator's: the "
              "first free GPUs in index order). Default: each allocator's own (tune-ref: "
              "first-free).")
@click.option("--opt-time-limit", default=1.5, show_default=True, type=click.FloatRange(0.01),
              help="Seconds HiGHS may spend per round with --allocator opt.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64),
              help="Simulations run in parallel processes.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default="table",
              show_default=True)
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Write jobs.csv, summary.json and PNG plots here.")
@click.option("--record-trace", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the generated trace (every job that arrived) as CSV.")
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr (default: when stderr is a terminal).")
def simulate_cmd(trace_path, generate, loads, split, multi_gpu, seed, count, window,
                 cluster_file, servers,
                 gpus_per_server, cpus_per_server, mem_per_server, policies, allocators,
                 profiles_path, static, round_seconds, restart_cost, reference_speedups,
                 no_preempt, time_limit, requeue_budget, requeue_interval, shrink_memory,
                 mislabel,
                 closed_loop, placement, opt_time_limit,
                 workers, fmt, out, record_trace, progress) -> None:
    """Simulate Synergy over a trace and compare schedulers: the paper's rounds, or
    (--no-preempt) the controller model on Slurm.

    Every policy x allocator (x load) combination runs over the same trace through the
    same scheduling core the controller uses. Examples:

    \b
      synergy simulate --trace static_100job.csv --servers 4 --static \\
          --allocator proportional,greedy,tune-ref --reference-speedups
      synergy simulate --generate philly --jobs-per-hour 4,6,8,10 \\
          --policy fifo,srtf,las,ftf --allocator proportional,tune --out results/
    """
    if bool(trace_path) == bool(generate):
        raise click.UsageError("give exactly one of --trace CSV or --generate philly")
    check_server(gpus_per_server, cpus_per_server)
    if shrink_memory and not no_preempt:
        raise click.UsageError("--shrink-memory models running jobs that keep running: "
                               "give --no-preempt too (the paper's rounds re-plan every job)")
    # Where results go is checked before a simulation that may run for minutes.
    if out is not None:
        writable_dir(out)
    if record_trace is not None:
        writable_file(record_trace, "--record-trace")
    pols = csv_list(policies, tuple(POLICIES), "policy")
    allocs = csv_list(allocators, ALLOCATOR_NAMES, "allocator")
    profiles = profiles_option_value(profiles_path)
    workload, load_list, win = _workload(trace_path, profiles, static, window, split, loads,
                                         count, multi_gpu, seed)
    if mislabel:
        workload = replace(workload, mislabel=_mislabel(mislabel, profiles))
    cluster, pools = _cluster(cluster_file, no_preempt, servers, gpus_per_server,
                              cpus_per_server, mem_per_server)
    if any(g > cluster.total.gpus for g in _gpu_counts(workload)):
        raise BadInput("the trace has jobs larger than the cluster")
    try:
        base = _config(cluster, pools, no_preempt, reference_speedups, requeue_budget,
                       requeue_interval, shrink_memory, time_limit,
                       round_s=round_seconds, restart_cost_s=restart_cost, window=win,
                       opt_time_limit_s=opt_time_limit, placement=placement,
                       usage=UsageRule() if closed_loop else None)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    runs = plan_runs(pols, allocs, load_list)
    show = sys.stderr.isatty() if progress is None else progress
    results = _run_with_progress(runs, workload, profiles, base, workers, show)
    rows = [summary_row(res, run.load) for run, res in results]
    if out is not None:
        for p in write_results(out, [(res, run.load) for run, res in results]):
            click.echo(f"wrote {p}", err=True)
    if record_trace is not None:
        _record(record_trace, workload, profiles, load_list)
    _print(rows, fmt)


def _cluster(cluster_file, no_preempt: bool, servers: int, gpus: int, cpus: int,
             mem_gb: float) -> tuple[ClusterState, tuple[Pool, ...]]:
    """The cluster of --cluster (its partitions as pools under --no-preempt, where Slurm's
    partitions are modelled), else --servers uniform servers in one pool."""
    site = cluster_option_value(cluster_file)
    if site is None:
        return ClusterState.uniform(servers, gpus, cpus, mem_gb), ()
    return site.cluster_state(), (site.pools() if no_preempt else ())


def _record(path: Path, workload, profiles, load_list) -> None:
    """Write every job of the trace (the first load's, for a generated one) as CSV."""
    load = None if workload.jobs is not None else load_list[0]
    jobs = list(workload.stream(profiles, load))
    write_trace(path, jobs)
    click.echo(f"wrote {path} ({len(jobs)} jobs)", err=True)


def _workload(trace_path, profiles, static: bool, window: str | None, split: str, loads: str,
              count: int | None, multi_gpu: bool, seed: int
              ) -> tuple[Workload, list[float | None], tuple[int, int] | None]:
    """The jobs (a trace, or a generated stream), the loads to run it at and the window
    of job ids measured."""
    win = None
    if window is not None:
        nums = _numbers(window, "job id")
        if len(nums) != 2 or nums[0] > nums[1] or nums[0] < 0:
            raise click.BadParameter("expected FIRST,LAST with FIRST <= LAST",
                                     param_hint="--window")
        win = (int(nums[0]), int(nums[1]))
    if trace_path:
        try:
            workload = Workload(jobs=tuple(read_trace(trace_path, profiles)), static=static)
        except TraceError as exc:
            raise BadInput(str(exc)) from None
        return workload, [None], win
    mix = _numbers(split, "percentage")
    if len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0:
        raise click.BadParameter("give three non-negative percentages", param_hint="--split")
    load_list: list[float | None] = list(_numbers(loads, "load"))
    if min(x for x in load_list if x is not None) <= 0:
        raise click.BadParameter("loads must be positive", param_hint="--jobs-per-hour")
    win = win or (4000, 4999)
    count = count or win[1] + 1001
    if count <= win[1]:
        raise click.BadParameter("the trace must reach the window's last job",
                                 param_hint="--jobs")
    return (Workload(split=(mix[0], mix[1], mix[2]), multi_gpu=multi_gpu, seed=seed,
                     static=static, count=count), load_list, win)


def _config(cluster, pools, no_preempt: bool, reference_speedups: bool, requeue_budget: int,
            requeue_interval: float, shrink_memory: bool, time_limit: float, **common
            ) -> SimConfig:
    """The controller model's config (--no-preempt), else the paper's rounds'; an option of
    the other simulator's is refused."""
    if not no_preempt:
        if shrink_memory or time_limit:
            raise ValueError("--shrink-memory and --time-limit belong to the controller "
                             "model: give --no-preempt")
        return RoundsConfig(cluster, reference_speedups=reference_speedups, **common)
    if reference_speedups:
        raise ValueError("the reference's speedups belong to the paper's rounds, not the "
                         "controller model")
    return SlurmConfig(cluster, requeue_budget=requeue_budget,
                       requeue_interval_s=requeue_interval, shrink_memory=shrink_memory,
                       pools=pools, default_time_limit_s=time_limit * 3600, **common)


def _run_with_progress(runs, workload: Workload, profiles, base: SimConfig, workers: int,
                       show: bool) -> list:
    """Every run, with a progress bar (a line per tenth off a terminal) when ``show``."""
    per_run = len(workload.jobs) if workload.jobs is not None else workload.count
    bar: Any = None
    if show and sys.stderr.isatty():
        bar = click.progressbar(length=per_run * len(runs), label="simulating",
                                file=sys.stderr, show_pos=False, show_percent=True,
                                show_eta=True, item_show_func=lambda x: x)
    elif show:     # off a terminal (a log, a batch job): a line every tenth
        bar = LineProgress(per_run * len(runs), "simulating")
    state = {"base": 0, "last": 0}

    def on_round(now: float, finished: int) -> None:
        if bar is not None and finished != state["last"]:
            bar.update(finished - state["last"], f"t={now / 3600:.0f} h")
            state["last"] = finished

    def done(run: Run, res) -> None:
        if bar is None:
            return
        state["base"] += per_run
        bar.update(state["base"] - bar.pos, f"{run.policy}+{run.allocator}"
                   + ("" if run.load is None else f" @{run.load:g}/h"))
        state["last"] = 0

    if bar is not None:
        bar.__enter__()
    try:
        return run_all(runs, workload, profiles, base, workers=workers, done=done,
                       on_round=on_round if workers == 1 else None)
    except SimulationCapped as exc:
        raise Failed(str(exc)) from None
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


class LineProgress:
    """click's progress bar's calls, printed as a line per tenth of the work on stderr."""

    def __init__(self, length: int, label: str) -> None:
        self.length, self.label, self.pos, self.shown = max(1, length), label, 0, -1

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *_) -> None:
        return None

    def update(self, n: int, item: str = "") -> None:
        self.pos += n
        tenth = min(10, self.pos * 10 // self.length)
        if tenth > self.shown:
            self.shown = tenth
            click.echo(f"{self.label}: {tenth * 10}% {item}".rstrip(), err=True)


def _mislabel(text: str, profiles) -> tuple[float, str]:
    share, _, key = text.partition(":")
    key = key or "alexnet"
    try:
        value = float(share)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise click.BadParameter(f"{share!r}: a share between 0 and 1", param_hint="--mislabel")
    if key not in profiles:
        raise click.BadParameter(f"no profile {key!r}", param_hint="--mislabel")
    return value, key


def _gpu_counts(workload: Workload) -> list[int]:
    return [j.gpus for j in workload.jobs] if workload.jobs is not None else \
        ([16] if workload.multi_gpu else [1])


def _print(rows: list[dict], fmt: str) -> None:
    if fmt == "json":
        click.echo(json.dumps([{k: r[k] for k in COLUMNS} for r in rows]))
        return
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
        click.echo(buf.getvalue(), nl=False)
        return
    head = f"{'policy':<6} {'allocator':<13} {'load':>5} {'jobs':>5} {'mean h':>8} " \
           f"{'p50 h':>8} {'p99 h':>8} {'p99.9 h':>8} {'makespan h':>10} {'wall s':>7}"
    click.echo(head)
    for r in rows:
        load = "-" if r["load"] is None else f"{r['load']:g}"
        cells = [r[k] for k in ("mean_jct_h", "p50_jct_h", "p99_jct_h", "p999_jct_h")]
        click.echo(f"{r['policy']:<6} {r['allocator']:<13} {load:>5} {r['jobs']:>5} "
                   + " ".join(f"{c:8.2f}" if c is not None else f"{'-':>8}" for c in cells)
                   + f" {r['makespan_h']:10.2f} {r['wall_s']:7.1f}")
