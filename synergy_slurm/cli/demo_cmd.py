"""``synergy demo``: a local 4-node Slurm, the same job mix plain and with synergy."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import click

from .. import devcluster
from ..config import load_config
from ..controller.daemon import Controller
from ..controller.state import StateStore
from ..controller.status import status_lines
from ..core import PerGpu
from ..demo import (
    KINDS,
    PhaseResult,
    demo_mix,
    failures,
    phase_result,
    plot_timelines,
    predict,
    submit_mix,
    wait_all,
)
from ..devcluster.controller_config import controller_dict, controller_toml
from ..owndir import own_dir
from ..slurm import queue
from ..slurm.commands import SlurmCLI, SlurmError
from ..slurm.release import Release
from .devcluster_cmd import CACHE_OPTION, CLUSTER_OPTION, SLURM_OPTION
from .errors import BadInput, Failed
from .options import cluster_option_value, default_profiles_path, profiles_option_value


@click.command("demo")
@click.option("--dir", "state_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("/tmp/synergy-demo"), show_default=True,
              help="The demo's directory: the cluster (DIR/cluster, removed at the end unless "
              "--keep), the controller's config, state and audit log, and job output (kept).")
@click.option("--port", default=16717, show_default=True, type=click.IntRange(1024, 65000),
              help="The demo cluster's slurmctld port.")
@click.option("--jobs", default=48, show_default=True, type=click.IntRange(4, 500),
              help="Jobs in the mix (exactly 30% CPU-hungry, 20% memory-hungry, 50% insensitive; "
              "one GPU each, as in the paper's main experiment).")
@click.option("--mean-s", default=48.0, show_default=True, type=click.FloatRange(5),
              help="Mean job length at the GPU-proportional share (wall seconds).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Seed of the mix: the same seed gives the same jobs.")
@click.option("--profiles", "profiles_path", type=click.Path(exists=True, dir_okay=False,
                                                                path_type=Path),
              help="Profiles file (default: the reference model_profiles.json).")
@click.option("--status-every", default=20.0, show_default=True, type=click.FloatRange(2),
              help="Seconds between progress lines.")
@click.option("--keep", is_flag=True, help="Leave the cluster running afterwards.")
@SLURM_OPTION
@CLUSTER_OPTION
@click.option("--accounting", is_flag=True,
              help="Run the cluster with a site's accounting (slurmdbd over a private "
              "MariaDB, multifactor priority with fair-share; see synergy dev-cluster up).")
@CACHE_OPTION
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              help="json: the comparison as one JSON object at the end.")
def demo_cmd(state_dir: Path, port: int, jobs: int, mean_s: float, seed: int, profiles_path,
             status_every: float, keep: bool, release: str, cluster: str | None,
             accounting: bool, cache: Path, fmt: str) -> None:
    """Run a demo workload twice on a local Slurm and compare.

    Brings up a 4-node cluster with 8 fake GPUs, 24 cores and 500 GB per node and the
    job_submit hook (synergy dev-cluster up --hook), then submits a seeded mix of emulated
    training jobs with synergy-sbatch: CPU-hungry image models, a memory-hungry speech
    model, and language models that need neither. First with plain Slurm's
    GPU-proportional shares, then with the controller (FIFO + TUNE) shaping every job.
    Prints progress and `synergy status` while it runs, then both makespans and the mean
    job time per kind (each job's from its own submission), beside what the simulator
    (its model of Slurm and the controller) predicts for the same mix, cluster and
    submission times, with the gap; and writes DIR/demo.png, both runs' timelines side by
    side (GPUs busy, cores given to each kind, as squeue showed them). A job that does not
    complete stops the demo with its id, state and first lines of output, and no figures.
    Needs root; about 4 minutes with the defaults on a 2-core machine (two phases of about
    2 minutes: 48 single-GPU jobs of 24-72 s at the proportional share on 32 GPUs).

    With --cluster (e.g. ``mixed``: A100 and H100 partitions and one over both) the jobs
    go to its partitions in turn, each job's length set at its partition's proportional
    share, the controller plans every partition, and the comparison is also printed per
    partition.
    """
    if os.geteuid() != 0:
        raise Failed("the demo starts slurmctld and slurmd: run it as root")
    path = profiles_path or default_profiles_path()
    profiles = profiles_option_value(path)
    missing = sorted({m for ms in KINDS.values() for m in ms} - set(profiles))
    if missing:
        raise BadInput(f"{path} lacks the demo's models: {', '.join(missing)}")
    sbatch_exe = shutil.which("synergy-sbatch", path=str(Path(sys.executable).parent)) or \
        shutil.which("synergy-sbatch")
    if sbatch_exe is None:
        raise Failed("synergy-sbatch is not installed beside this synergy")
    state_dir = own_dir(state_dir, 0o755)   # made here, or ours: never another user's
    say = click.echo if fmt == "text" else (lambda *a, **k: None)
    spec, version = _start_cluster(state_dir, port, release, path, accounting, cluster, cache,
                                   say)
    layout = spec.layout
    parts = [p.name for p in layout.partitions]
    cli = devcluster.slurm_cli(spec, timeout_s=60)
    # Each partition's defaults, what plain Slurm gives a job there.
    fair = {p.name: PerGpu(p.def_cpu_per_gpu, p.def_mem_gb_per_gpu) for p in layout.partitions}
    mix = demo_mix(jobs, mean_s, seed, parts)
    counts = {k: sum(j.kind == k for j in mix) for k in KINDS}
    say(f"[demo] mix: {jobs} jobs, {sum(j.gpus for j in mix)} GPUs in all: "
        + ", ".join(f"{n} {k}" for k, n in counts.items()))
    work = state_dir / "jobs"
    # A new cluster numbers its jobs from the same first id: state and logs of an earlier
    # demo would describe other jobs under the same ids.
    shutil.rmtree(work, ignore_errors=True)
    for old in ("state.db", "audit.jsonl", "profiles.db", "synergy.toml"):
        (state_dir / old).unlink(missing_ok=True)
    # Where the jobs report their progress: the controller prices a requeue on the work a
    # job really has left (the jobs run as root, so their files are root's).
    progress = state_dir / "progress"
    shutil.rmtree(progress, ignore_errors=True)
    progress.mkdir(mode=0o755)
    cfg_path = state_dir / "synergy.toml"
    try:
        results = [_phase(phase, cli, spec, cfg_path, mix, profiles, path, fair, work,
                          sbatch_exe, status_every, say, progress)
                   for phase in ("proportional", "synergy")]
    except (SlurmError, RuntimeError, TimeoutError) as exc:
        raise Failed(f"demo failed: {exc}") from None
    finally:
        if not keep:
            devcluster.down(spec)
    # The simulator's controller model on the same mix, cluster and submission times.
    try:
        rel: Release | None = Release.parse(version)
    except ValueError:
        rel = None
    pred = predict(mix, {r.name: r.submitted for r in results}, profiles, layout.pools(),
                   controller_dict(spec, path, state_dir)["controller"],
                   bool(rel and rel.lowers_pending), devcluster.SCHED_INTERVAL_S,
                   progress_reports=True, idle_first=bool(rel and rel.prefers_idle_node))
    total = layout.cluster_state().total
    picture = plot_timelines(
        mix, results, state_dir / "demo.png", total,
        f"synergy demo: {len(mix)} jobs on {len(spec.node_names)} nodes, {total.gpus} GPUs, "
        f"{total.cpus} cores, {total.mem_gb:.0f} GB (Slurm {version})")
    out = _comparison(mix, results, pred, parts, seed, picture, state_dir)
    # Each job's submission and JCT in both runs, so that a prediction (or another model)
    # can be replayed on this very run later.
    (state_dir / "runs.json").write_text(json.dumps(
        {"slurm": version, "phases": {r.name: {"submitted_s": r.submitted, "jct_s": r.jct_s,
                                               "makespan_s": r.makespan_s}
                                      for r in results}}))
    out["runs"] = str(state_dir / "runs.json")
    if fmt == "json":
        click.echo(json.dumps(out))
        return
    _print_comparison(mix, results, pred, out, keep)


def _start_cluster(state_dir: Path, port: int, release: str, profiles_path: Path,
                   accounting: bool, cluster: str | None, cache: Path,
                   say: Callable[..., None]) -> tuple[devcluster.DevClusterSpec, str]:
    """The demo's cluster, up and idle (an earlier one on this port stopped first), and the
    Slurm version it runs."""
    spec = devcluster.local_spec(state_dir / "cluster", port=port, hook=True, slurm=release,
                                 binds=(str(profiles_path.resolve().parent),),
                                 accounting=accounting, site=cluster_option_value(cluster))
    parts = [p.name for p in spec.layout.partitions]
    say(f"[demo] starting a {len(spec.node_names)}-node Slurm in {spec.state_dir} "
        f"(port {port}{', accounting' if accounting else ''}) ...")
    try:
        devcluster.down(spec)
        up_s, spec = devcluster.up(spec, timeout_s=120, cache=cache.resolve())
    except devcluster.DevClusterError as exc:
        raise Failed(str(exc)) from None
    version = devcluster.release_info(spec).get("version", "?")
    path_note = f" PATH={spec.bindir}:$PATH" if spec.bindir.is_dir() else ""
    total = spec.layout.cluster_state().total
    say(f"[demo] Slurm {version}: {len(spec.node_names)} nodes, {total.gpus} GPUs idle "
        f"after {up_s:.1f} s (partitions {', '.join(parts)}); "
        f"export SLURM_CONF={spec.conf_path}{path_note} to look around")
    return spec, version


def _comparison(mix, results: list[PhaseResult], pred: dict[str, PhaseResult],
                parts: list[str], seed: int, picture: Path, state_dir: Path) -> dict:
    """Both runs, the prediction and its gap, as the JSON the demo prints."""
    prop, syn = results
    return {"jobs": len(mix), "seed": seed,
            "proportional_makespan_s": round(prop.makespan_s, 1),
            "synergy_makespan_s": round(syn.makespan_s, 1),
            "makespan_ratio": round(prop.makespan_s / syn.makespan_s, 3),
            "mean_jct_s": {k or "all": {"proportional": round(prop.mean_jct(mix, k), 1),
                                        "synergy": round(syn.mean_jct(mix, k), 1)}
                           for k in (*KINDS, None)},
            "per_partition": {
                p: {"jobs": sum(j.partition == p for j in mix),
                    "makespan_s": {"proportional": round(prop.makespan(mix, p), 1),
                                   "synergy": round(syn.makespan(mix, p), 1)},
                    "mean_jct_s": {"proportional": round(prop.mean_jct(mix, partition=p), 1),
                                   "synergy": round(syn.mean_jct(mix, partition=p), 1)}}
                for p in (parts if len(parts) > 1 else ())},
            "predicted": {ph: {"makespan_s": round(r.makespan_s, 1),
                               "mean_jct_s": {k or "all": round(r.mean_jct(mix, k), 1)
                                              for k in (*KINDS, None)}}
                          for ph, r in pred.items()},
            "prediction_gap": _gaps(mix, {"proportional": prop, "synergy": syn}, pred),
            "timelines_png": str(picture),
            "controller_state": str(state_dir / "state.db"),
            "audit_log": str(state_dir / "audit.jsonl")}


def _print_comparison(mix, results: list[PhaseResult], pred: dict[str, PhaseResult],
                      out: dict, keep: bool) -> None:
    prop, syn = results
    gaps = out["prediction_gap"]
    click.echo("\n[demo] result (wall seconds, same jobs, same cluster)")
    click.echo(f"  makespan       proportional {prop.makespan_s:7.1f}   synergy "
               f"{syn.makespan_s:7.1f}   {out['makespan_ratio']:.2f}x")
    for k in KINDS:
        a, b = prop.mean_jct(mix, k), syn.mean_jct(mix, k)
        click.echo(f"  mean JCT {k:<14} {a:7.1f} -> {b:7.1f} s   ({a / b:.2f}x)")
    a, b = prop.mean_jct(mix), syn.mean_jct(mix)
    click.echo(f"  mean JCT all            {a:7.1f} -> {b:7.1f} s   ({a / b:.2f}x)")
    for p, row in out["per_partition"].items():
        (ma, mb), (ja, jb) = row["makespan_s"].values(), row["mean_jct_s"].values()
        click.echo(f"  partition {p:<8} {row['jobs']:3d} jobs: makespan {ma:7.1f} -> "
                   f"{mb:7.1f} s ({ma / mb:.2f}x), mean JCT {ja:7.1f} -> {jb:7.1f} s "
                   f"({ja / jb:.2f}x)")
    click.echo("\n[demo] the simulator's prediction for the same mix, cluster and "
               "submissions (gap: real over predicted, less one)")
    real = {"proportional": prop, "synergy": syn}
    for ph, r in pred.items():
        click.echo(f"  {ph:<13} makespan {r.makespan_s:7.1f} s (real {real[ph].makespan_s:7.1f},"
                   f" gap {gaps[ph]['makespan']:+.1%}); mean JCT " + ", ".join(
                       f"{k or 'all'} {r.mean_jct(mix, k):.1f} ({gaps[ph][k or 'all']:+.1%})"
                       for k in (*KINDS, None)))
    pp, ps = pred["proportional"], pred["synergy"]
    click.echo(f"  predicted gain: makespan {pp.makespan_s / ps.makespan_s:.2f}x, mean JCT "
               f"{pp.mean_jct(mix) / ps.mean_jct(mix):.2f}x")
    click.echo(f"  timelines (GPUs busy, cores by kind): {out['timelines_png']}")
    click.echo(f"  what the controller did: {out['audit_log']}"
               + ("" if keep else " (the cluster is down; --keep leaves it up)"))


def _gaps(mix, real: dict[str, PhaseResult], pred: dict[str, PhaseResult]) -> dict:
    """Per phase, real over predicted less one: makespan and mean JCT per kind."""
    def gap(a: float, b: float) -> float:
        return round(a / b - 1.0, 4) if b > 0 else float("nan")
    return {ph: {"makespan": gap(real[ph].makespan_s, pred[ph].makespan_s),
                 **{k or "all": gap(real[ph].mean_jct(mix, k), pred[ph].mean_jct(mix, k))
                    for k in (*KINDS, None)}}
            for ph in real}


def _phase(name: str, cli: SlurmCLI, spec, cfg_path: Path, mix, profiles, profiles_path,
           fair: dict[str, PerGpu], work: Path, sbatch_exe: str, status_every: float,
           say, progress: Path) -> PhaseResult:
    view: StateStore | None = None
    stop = threading.Event()
    thread = None
    if name == "synergy":
        # The controller runs from the file it writes, so `synergy status --config` and an
        # admin reading it see exactly what ran.
        cfg_path.write_text(controller_toml(spec, profiles_path, cfg_path.parent,
                                             "synergy demo", progress_dir=str(progress)))
        cfg = load_config(cfg_path, missing_ok=False)
        ctl = Controller(cfg)
        ctl.run_round()       # writes the hook table: from now on the hook holds new jobs
        # Its own connection to the state (WAL): the controller thread writes through its own.
        view = StateStore(cfg.controller.state_db, readonly=True)
        thread = threading.Thread(target=ctl.run, args=(stop,), daemon=True)
        thread.start()
        say(f"[demo] controller running (enforce, fifo + tune, every "
            f"{cfg.controller.interval_s:g} s); config {cfg_path}")
    say(f"[demo] {name}: submitting {len(mix)} jobs with synergy-sbatch ...")
    ticks = {"n": 0}
    timeline: list = []

    def tick(elapsed: float, left: int) -> None:
        rows = [r for r in queue.all_rows(cli) if not r.ended]
        running = sum(r.running for r in rows)
        say(f"[demo] {name} t={elapsed:5.0f} s: {running} running, "
            f"{len(rows) - running} pending, {len(mix) - left} done")
        ticks["n"] += 1
        if view is not None and rows and ticks["n"] % 4 == 1:
            say(f"[demo] synergy status --config {cfg_path}  (pending first)")
            for line in status_lines(view, pending_first=True)[:14]:
                say("    " + line)

    try:
        t0 = time.monotonic()
        ids, submitted = submit_mix(sbatch_exe, cli, mix, profiles, profiles_path,
                                    sys.executable, fair, work / name, t0,
                                    progress_dir=progress, timeline=timeline)
        ended = wait_all(cli, ids, t0, tick, status_every, timeline=timeline)
    finally:
        if thread is not None:
            stop.set()
            thread.join(timeout=60)
        if view is not None:
            view.close()
    failed = failures(ended, ids, work / name)
    if failed:
        # A figure from jobs that did not run would be no figure at all.
        raise RuntimeError(f"{len(failed)} of the {name} phase's jobs did not complete, so "
                           "no result is given:\n  " + "\n  ".join(failed))
    res = phase_result(name, {idx: e.seconds for idx, e in ended.items()}, submitted)
    res.timeline = timeline
    say(f"[demo] {name}: all {len(mix)} jobs done, makespan {res.makespan_s:.1f} s")
    return res

