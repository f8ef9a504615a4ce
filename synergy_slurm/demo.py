"""The demo: one workload, run twice on a local Slurm, plain and with synergy.

A seeded mix of emulated training jobs (``synergy_slurm.emulate``: each iteration takes
the time its profile gives for the cores and memory Slurm really granted) of three kinds:
CPU-hungry image models, a memory-hungry speech model, and language models that need
neither. Every job is submitted with ``synergy-sbatch``. First run: GPU-proportional, as
plain Slurm does it (the hook passes jobs through while no controller runs). Second run:
the controller (TUNE) shapes each job through the hook. The comparison is the makespan
and the mean job time per kind.
"""

from __future__ import annotations

import random
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from .core import PerGpu, Profile
from .core.pools import Pool, merged
from .core.resources import Resources
from .decide import ControllerSettings
from .sim.config import slurm_config
from .sim.simulate import simulate
from .sim.trace import TraceJob
from .slurm import queue
from .slurm.commands import SlurmCLI

T = TypeVar("T")
KINDS: dict[str, tuple[str, ...]] = {
    "cpu-hungry": ("alexnet", "res18", "shufflenet"),
    "memory-hungry": ("m5",),
    "insensitive": ("gnmt", "transformer", "lstm"),
}
# Half the jobs give cores and memory away, half run faster with them, every job on one
# GPU, as in the paper's main experiment. Multi-GPU jobs (1/2/4 GPUs at 60/30/10 % until
# 2026-12-07) were where the demo measured Slurm's placement rather than synergy: a job
# spread over nodes gets its cores per node by rules of its own (docs/results §10), and
# the saturated 40/20/40 mix could not gain 1.2x even in the model (1.07x makespan).
KIND_WEIGHTS = (0.3, 0.2, 0.5)
GPU_CHOICES = ((1, 1.0),)
RUNNER = '#!/bin/sh\n# synergy demo: runs the emulated job given as arguments.\nexec "$@"\n'


@dataclass(frozen=True)
class DemoJob:
    index: int
    model: str
    kind: str
    gpus: int
    seconds: float            # wall seconds at the GPU-proportional share
    partition: str = ""       # "": the cluster's default partition

    def iterations(self, profile: Profile, fair: PerGpu) -> int:
        return profile.iterations_in(self.seconds, fair.cpus, fair.mem_gb)


def demo_mix(jobs: int, mean_s: float, seed: int = 0,
             partitions: Sequence[str] = ("",)) -> list[DemoJob]:
    """``jobs`` jobs: kinds 30/20/50 % (KIND_WEIGHTS), GPUs by GPU_CHOICES, durations uniform in
    0.5-1.5 x ``mean_s``; models round-robin within a kind; partitions in turn (the
    same jobs for a seed, whatever the partitions)."""
    rng = random.Random(seed)
    kinds = in_proportion(rng, list(KINDS), KIND_WEIGHTS, jobs)
    sizes = in_proportion(rng, [g for g, _ in GPU_CHOICES], [w for _, w in GPU_CHOICES], jobs)
    turn = dict.fromkeys(KINDS, 0)
    out = []
    for i in range(jobs):
        kind, gpus = kinds[i], sizes[i]
        model = KINDS[kind][turn[kind] % len(KINDS[kind])]
        turn[kind] += 1
        out.append(DemoJob(i, model, kind, gpus, round(rng.uniform(0.5, 1.5) * mean_s, 1),
                           partitions[i % len(partitions)]))
    return out


def in_proportion(rng: random.Random, values: Sequence[T], weights: Sequence[float],
                  n: int) -> list[T]:
    """``n`` draws of ``values``, each as many times as its weight's share of ``n``
    (largest remainders), in a seeded order. Drawing each job's kind and size at random
    gave the default mix 14/9/25 kinds of 48 (29/19/52 %) where the demo says 40/20/40: the
    mix it runs is the one it names."""
    want = [w / sum(weights) * n for w in weights]
    counts = [int(x) for x in want]
    for k in sorted(range(len(want)), key=lambda k: counts[k] - want[k])[:n - sum(counts)]:
        counts[k] += 1
    deck = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
    rng.shuffle(deck)
    return deck


# One poll of squeue: (seconds from the phase's start, ((demo index, cores, GB), ...)).
Sample = tuple[float, tuple[tuple[int, int, float], ...]]


def running_now(rows: Sequence[queue.QueueRow], ids: Mapping[int, int], at: float
                ) -> Sample:
    """The demo jobs ``rows`` show running, each with the cores and memory it holds."""
    return (at, tuple((ids[r.job_id], r.cpus, r.mem_mb / 1024) for r in rows
                      if r.running and r.job_id in ids))


@dataclass
class PhaseResult:
    name: str
    makespan_s: float
    jct_s: dict[int, float] = field(default_factory=dict)     # demo job index -> seconds
    # What Slurm showed running at each poll: (seconds from the phase's start, ((demo
    # index, cores, memory GB), ...)); empty for a prediction.
    timeline: list[Sample] = field(default_factory=list)
    # When each job was submitted (demo index -> seconds from the phase's start).
    submitted: dict[int, float] = field(default_factory=dict)

    def mean_jct(self, jobs: Sequence[DemoJob], kind: str | None = None,
                 partition: str | None = None) -> float:
        vals = [self.jct_s[j.index] for j in jobs if (kind is None or j.kind == kind)
                and (partition is None or j.partition == partition)]
        return sum(vals) / len(vals) if vals else 0.0

    def makespan(self, jobs: Sequence[DemoJob], partition: str) -> float:
        """When the last of the partition's jobs was done."""
        return max((self.jct_s[j.index] for j in jobs if j.partition == partition),
                   default=0.0)


def phase_result(name: str, ended: Mapping[int, float], submitted: Mapping[int, float]
                 ) -> PhaseResult:
    """A phase's figures from each job's end and submission (seconds from the phase's
    start): JCT from the job's own submission, makespan to the last end."""
    return PhaseResult(name, max(ended.values()),
                       {i: end - submitted.get(i, 0.0) for i, end in ended.items()},
                       submitted=dict(submitted))


# What the prediction assumes of the demo's cluster: the delay from the controller's
# release to Slurm's start, and an emulated job's own start-up (a Python process on a
# loaded 2-core machine).
RELEASE_DELAY_S = 2.0
STARTUP_S = 1.5


def predict(jobs: Sequence[DemoJob], submitted: Mapping[str, Mapping[int, float]],
            profiles: Mapping[str, Profile], pools: Sequence[Pool], controller: Mapping,
            lowers_pending: bool, sched_s: float, progress_reports: bool = False,
            idle_first: bool = False) -> dict[str, PhaseResult]:
    """What the simulator's controller model predicts for both phases of this mix on
    this cluster (``pools``, Slurm passing every ``sched_s``), each job arriving when it
    was really submitted in that phase (``submitted``: phase -> index -> seconds), the
    controller as configured (``controller``: the [controller] section the demo ran), which
    knows the work running jobs have left where they report progress (``progress_reports``),
    Slurm placing a job on an idle node first where the release does (``idle_first``)."""
    settings = ControllerSettings(
        interval_s=controller["interval_s"], release_delay_s=RELEASE_DELAY_S,
        lowers_pending=lowers_pending, requeue_budget=controller["requeue_budget"],
        requeue_interval_s=controller["requeue_min_interval_s"],
        restart_cost_s=controller["restart_cost_s"], sched_s=sched_s,
        policy=controller["policy"])
    out = {}
    for phase, alloc in (("proportional", "proportional"), ("synergy", "tune")):
        at = submitted.get(phase, {})
        trace = sorted((TraceJob(j.index, j.model, at.get(j.index, 0.0), 1, j.gpus,
                                 requeue_ok=True, partition=j.partition,
                                 work_s=j.seconds, startup_s=STARTUP_S) for j in jobs),
                       key=lambda t: (t.arrival, t.job_id))
        cfg = slurm_config(settings, merged(pools), alloc, tuple(pools),
                           progress_reports=progress_reports, idle_first=idle_first)
        res = simulate(trace, profiles, cfg)
        ends = {r.job_id: r.finish for r in res.jobs if r.finish is not None}
        out[phase] = phase_result(phase, ends, at)
    return out


def submit_mix(sbatch_exe: str, cli: SlurmCLI, jobs: Sequence[DemoJob],
               profiles: Mapping[str, Profile], profiles_path: Path, python: str,
               fair: Mapping[str, PerGpu], work: Path, t0: float,
               progress_dir: Path | None = None, timeline: list[Sample] | None = None
               ) -> tuple[dict[int, int], dict[int, float]]:
    """Submit every job with synergy-sbatch, its length set at its partition's
    proportional share (``fair``, by partition), reporting its progress to
    ``progress_dir`` if given; {Slurm job id: demo index} and {demo index: when it was
    submitted, seconds from ``t0``} (a job's JCT runs from there). ``timeline`` gets what
    runs after each submission (jobs start while the rest are submitted)."""
    env = cli.env()
    if progress_dir is not None:
        env["SYNERGY_PROGRESS_DIR"] = str(progress_dir)
    work.mkdir(parents=True, exist_ok=True)
    runner = work / "run.sh"
    runner.write_text(RUNNER)
    runner.chmod(0o755)
    ids: dict[int, int] = {}
    submitted: dict[int, float] = {}
    for j in jobs:
        where = [f"--partition={j.partition}"] if j.partition else []
        argv = [sbatch_exe, "--parsable", "--profile-key", j.model, "--requeue-ok",
                f"--gpus={j.gpus}", "--time=60", f"--job-name=demo-{j.kind}-{j.index}",
                *where, "-o", str(work / f"job{j.index}.out"), str(runner),
                python, "-m", "synergy_slurm.emulate", "--profiles", str(profiles_path),
                "--model", j.model, "--iterations",
                str(j.iterations(profiles[j.model], fair[j.partition])),
                "--state", str(work / f"job{j.index}.state")]
        res = subprocess.run(argv, capture_output=True, text=True, env=env,
                             check=False, timeout=60)
        if res.returncode != 0:
            raise RuntimeError(f"synergy-sbatch failed for demo job {j.index}: "
                               f"{res.stderr.strip()}")
        ids[int(res.stdout.strip().split(";")[0])] = j.index
        submitted[j.index] = time.monotonic() - t0
        if timeline is not None:
            timeline.append(running_now(queue.all_rows(cli), ids, time.monotonic() - t0))
    return ids, submitted


@dataclass(frozen=True)
class Ended:
    """When a demo job was seen gone from the queue (seconds from the phase's start) and
    the state Slurm ended it in ("" where it was purged before it was seen ended)."""

    seconds: float
    state: str


def wait_all(cli, ids: Mapping[int, int], t0: float,
             tick: Callable[[float, int], None] | None = None, tick_s: float = 20.0,
             timeout_s: float = 1800.0,
             timeline: list[Sample] | None = None) -> dict[int, Ended]:
    """Poll squeue (every state: a finished job stays listed for MinJobAge) until each of
    ``ids`` has ended; {demo index: when and how}. ``timeline`` gets, at each poll, the
    demo jobs running and the cores and memory each holds."""
    done: dict[int, Ended] = {}
    next_tick = time.monotonic() + tick_s
    while len(done) < len(ids):
        now = time.monotonic()
        if now - t0 > timeout_s:
            raise TimeoutError(f"{len(ids) - len(done)} demo jobs still queued after "
                               f"{timeout_s:.0f} s")
        rows = {r.job_id: r for r in queue.all_rows(cli)}
        if timeline is not None:
            timeline.append(running_now(list(rows.values()), ids, now - t0))
        for jid, idx in ids.items():
            row = rows.get(jid)
            if idx not in done and (row is None or row.ended):
                done[idx] = Ended(now - t0, row.state if row else "")
        if tick is not None and now >= next_tick:
            tick(now - t0, len(ids) - len(done))
            next_tick = now + tick_s
        time.sleep(0.5)
    return done


def failures(ended: Mapping[int, Ended], ids: Mapping[int, int], outputs: Path,
             lines: int = 5) -> list[str]:
    """What went wrong, one entry per demo job that did not complete: its Slurm id, its
    state and the first lines of its output (``outputs``/job<index>.out)."""
    by_index = {idx: jid for jid, idx in ids.items()}
    out = []
    for idx, end in sorted(ended.items()):
        if end.state == "COMPLETED":
            continue
        try:
            head = (outputs / f"job{idx}.out").read_text(errors="replace").splitlines()[:lines]
        except OSError:
            head = ["(no output)"]
        out.append(f"job {by_index[idx]} (demo job {idx}) ended "
                   f"{end.state or 'unseen (purged from the queue)'}: "
                   + " | ".join(head))
    return out


# Why the synergy phase can end sooner while fewer GPUs are busy at times: the picture says it.
WHY = ("Why synergy can end sooner with fewer GPUs busy: it gives the cores and memory that "
       "insensitive jobs do not need to the CPU- and memory-hungry ones, which then run "
       "faster;\na node's cores or memory can run out before its GPUs do, so a GPU may wait "
       "for a while, but the jobs that run finish sooner and so does the whole mix.")


def plot_timelines(jobs: Sequence[DemoJob], phases: Sequence[PhaseResult], path: Path,
                   total: Resources, title: str = "") -> Path:
    """One PNG: each phase's timeline side by side, as Slurm showed it: GPUs busy, and
    the cores and memory given to each kind of job, over time, each against the cluster's
    capacity (labelled); each phase titled with its makespan and mean JCT (all, and per
    kind), the figure with the cluster's size, one legend outside the data, and a word on
    why the synergy phase ends sooner with fewer GPUs busy at times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    span = max((t for ph in phases for t, _ in ph.timeline), default=1.0)
    fig, axes = plt.subplots(3, len(phases), figsize=(6.5 * len(phases), 9.5), sharex=True,
                             sharey="row", squeeze=False)
    first = phases[0]
    for col, ph in enumerate(phases):
        _plot_phase(axes[:, col], ph, jobs, total, span)
        gain = (f" ({first.makespan_s / ph.makespan_s:.2f}x, "
                f"{first.mean_jct(jobs) / ph.mean_jct(jobs):.2f}x)" if col else "")
        axes[0][col].set_title(
            f"{ph.name}: makespan {ph.makespan_s:.0f} s, mean JCT {ph.mean_jct(jobs):.0f} s"
            f"{gain}\n" + ", ".join(f"{k} {ph.mean_jct(jobs, k):.0f} s" for k in KINDS
                                     if any(j.kind == k for j in jobs)),
            fontsize="medium")
    for row, label in enumerate(("GPUs busy", "cores given, by kind",
                                 "memory given (GB), by kind")):
        axes[row][0].set_ylabel(label)
    handles, labels = axes[1][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(KINDS), frameon=False,
               bbox_to_anchor=(0.5, 0.935))
    fig.suptitle(title or f"{len(jobs)} jobs on {total.gpus} GPUs, {total.cpus} cores, "
                 f"{total.mem_gb:.0f} GB", fontsize="large")
    fig.text(0.5, 0.01, WHY, ha="center", va="bottom", fontsize="small", wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 0.92))
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _plot_phase(axes, ph: PhaseResult, jobs: Sequence[DemoJob], total: Resources,
                span: float) -> None:
    """One phase's column: GPUs busy, then cores and memory stacked by kind, each with its
    capacity line labelled."""
    by_index = {j.index: j for j in jobs}
    times = [t for t, _ in ph.timeline]
    gpus = [sum(by_index[i].gpus for i, _, _ in running) for _, running in ph.timeline]
    cores = [[sum(c for i, c, _ in running if by_index[i].kind == k)
              for _, running in ph.timeline] for k in KINDS]
    mem = [[sum(m for i, _, m in running if by_index[i].kind == k)
            for _, running in ph.timeline] for k in KINDS]
    axes[0].step(times, gpus, where="post", color="black")
    axes[1].stackplot(times, cores, labels=list(KINDS), step="post")
    axes[2].stackplot(times, mem, labels=list(KINDS), step="post")
    for ax, cap, unit in ((axes[0], total.gpus, "GPUs"), (axes[1], total.cpus, "cores"),
                          (axes[2], total.mem_gb, "GB")):
        ax.axhline(cap, color="grey", linestyle=":")
        ax.text(span, cap, f"{cap:.0f} {unit}", ha="right", va="bottom", fontsize="small",
                color="dimgrey")
        ax.set_ylim(0, cap * 1.12)
    axes[2].set_xlabel("seconds from the first submission")
    axes[2].set_xlim(0, span)
