"""Measuring a training command's throughput at a given core count.

The command runs as a child process with its CPU affinity restricted to the allotment
(psutil; at most the CPUs this process may use), ``SYNERGY_PROFILE_CPUS`` and the usual
thread variables (OMP/MKL/torch) set to it, and ``SYNERGY_PROGRESS_FILE`` pointing at a
fresh file. The harness reads the progress lines, drops the warm-up steps, and measures
samples/s over windows of steps; it stops the child when it has enough steps (or, with
``duration_s``, enough seconds after warm-up), when the point's time budget is spent, or
when the child dies. A point is an error (not a measurement) when the command crashes,
hangs without progress, or prints garbage.

Every ``sample_every_s`` it also reads the GPUs (the ``gpu_probe`` it is given, after
warm-up: what the point runs at, not its start-up) and the memory of the command's process
tree (proportional set size where Linux gives it: forked data-loader workers share most of
their pages with the main process, and resident sizes would count those once per worker).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from .cpulimit import join, quota_group
from .gpu import summarise_gpu


class MeasureError(RuntimeError):
    """The command could not be measured at this point (the message says why)."""


@dataclass(frozen=True)
class Measurement:
    cpus: int
    samples_per_s: float
    steps_per_s: float
    cv: float                      # coefficient of variation over the windows
    steps: int
    wall_s: float
    cpu_s: float                   # CPU time the child used (user + system)
    gpu: dict = field(default_factory=dict)
    # Bytes the command and its workers read per sample after warm-up (read(2) calls,
    # page cache or not): with a dataset's size this gives its samples per epoch.
    # None where the platform cannot tell.
    read_bytes_per_sample: float | None = None
    # The share of the allotted cores the tree kept busy after warm-up (0-1; more when it
    # ran more threads than cores), and the tree's peak memory over the point (MB).
    core_use: float | None = None
    peak_mem_mb: float | None = None
    peak_mem_kind: str = ""        # "pss", or "rss" where some process had no PSS


@dataclass(frozen=True)
class PointConfig:
    warmup_steps: int = 5
    steps: int = 30                # measured steps after warm-up
    window: int = 10               # steps per window for the CV
    budget_s: float = 60.0         # wall budget for this point
    stall_s: float = 20.0          # no new step for this long once started: it hangs
    # Measure this many seconds after warm-up instead of ``steps`` steps (at least two
    # windows): a point of a slow allotment then costs what a fast one does.
    duration_s: float | None = None
    sample_every_s: float = 0.5    # GPU and memory readings


def _usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def child_env(cpus: int, progress_file: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SYNERGY_PROGRESS_FILE": str(progress_file), "SYNERGY_PROFILE_CPUS": str(cpus),
                "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                "SYNERGY_NUM_WORKERS": str(max(0, cpus - 1))})
    return env


def measure(command: Sequence[str], cpus: int, cfg: PointConfig,
            gpu_probe=None, core_fraction: float | None = None) -> Measurement:
    """Run ``command`` at ``cpus`` cores until ``cfg.steps`` steps after warm-up.

    With ``core_fraction``, each of the ``cpus`` cores is that fraction of a physical core:
    the child gets a CFS quota of ``cpus * core_fraction`` cores (see profiler.cpulimit)
    on an affinity mask of as many whole cores as that needs.
    """
    if cpus < 1:
        raise ValueError("cpus must be >= 1")
    if core_fraction is None:
        return _measure(command, cpus, cfg, gpu_probe, None, cpus, float(cpus))
    if not 0 < core_fraction <= 1:
        raise ValueError("core_fraction must be in (0, 1]")
    with quota_group(cpus * core_fraction) as procs:
        return _measure(command, cpus, cfg, gpu_probe, procs,
                        math.ceil(cpus * core_fraction - 1e-9), cpus * core_fraction)


def _measure(command: Sequence[str], cpus: int, cfg: PointConfig, gpu_probe,
             procs: Path | None, whole_cores: int, allotted: float) -> Measurement:
    usable = _usable_cpus()
    mask = usable[:max(1, min(whole_cores, len(usable)))]
    with tempfile.TemporaryDirectory(prefix="synergy-profile-") as tmp:
        progress = Path(tmp) / "progress"
        progress.touch()
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(list(command), env=child_env(cpus, progress),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True,
                                    preexec_fn=(lambda: join(procs)) if procs else None)
        except OSError as exc:
            raise MeasureError(f"cannot start {command[0]!r}: {exc}") from None
        ps = psutil.Process(proc.pid)
        with contextlib.suppress(psutil.Error, AttributeError):
            ps.cpu_affinity(mask)
        try:
            seen = _watch(proc, ps, progress, cfg, gpu_probe, t0)
        finally:
            _stop(proc)
        wall = time.monotonic() - t0
    m = _summarise(cpus, seen.stamps, cfg, wall, seen.cpu_s,
                   summarise_gpu(seen.gpu) if gpu_probe is not None else {})
    return dataclasses.replace(m, read_bytes_per_sample=seen.read_bytes_per_sample(),
                               core_use=seen.core_use(allotted), peak_mem_mb=seen.peak_mem_mb,
                               peak_mem_kind=seen.mem_kind if seen.peak_mem_mb else "")


@dataclasses.dataclass
class _Seen:
    """What watching one point's command saw: its step stamps, the CPU time of its process
    tree, bytes read and samples done, and CPU time, at the end of warm-up and at the last
    reading, the GPU readings after warm-up and the tree's peak memory."""

    stamps: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    cpu_s: float = 0.0
    io_mark: tuple[float, float] | None = None     # (bytes read, samples) at warm-up
    io_end: tuple[float, float] | None = None
    cpu_mark: tuple[float, float] | None = None    # (CPU seconds, monotonic s) at warm-up
    cpu_end: tuple[float, float] | None = None
    gpu: list[dict] = dataclasses.field(default_factory=list)
    peak_mem_mb: float | None = None
    mem_kind: str = "pss"
    next_sample: float = 0.0

    def read_bytes_per_sample(self) -> float | None:
        if self.io_mark is None or self.io_end is None or self.io_end[1] <= self.io_mark[1]:
            return None
        return max(0.0, (self.io_end[0] - self.io_mark[0]) / (self.io_end[1] - self.io_mark[1]))

    def core_use(self, allotted: float) -> float | None:
        if self.cpu_mark is None or self.cpu_end is None:
            return None
        dt = self.cpu_end[1] - self.cpu_mark[1]
        if dt <= 0 or allotted <= 0:
            return None
        return round((self.cpu_end[0] - self.cpu_mark[0]) / (dt * allotted), 3)

    def after_warmup(self, io: int | None, now: float) -> None:
        """A reading past warm-up: the first one marks where measuring starts."""
        self.cpu_mark = self.cpu_mark or (self.cpu_s, now)
        self.cpu_end = (self.cpu_s, now)
        if io is not None:
            done = (io, sum(n for _, n in self.stamps))
            self.io_mark = self.io_mark or done
            self.io_end = done

    def sample(self, ps: psutil.Process, gpu_probe, now: float, every_s: float) -> None:
        """Memory always (start-up counts towards the peak), the GPUs when given a probe."""
        self.next_sample = now + every_s
        mem = _tree_mem_mb(ps)
        if mem is not None:
            self.peak_mem_mb = max(self.peak_mem_mb or 0.0, round(mem[0], 1))
            if mem[1] == "rss":
                self.mem_kind = "rss"
        if gpu_probe is not None:
            self.gpu.append(gpu_probe())


def _enough(stamps: list[tuple[float, float]], cfg: PointConfig) -> bool:
    if cfg.duration_s is None:
        return len(stamps) >= cfg.warmup_steps + cfg.steps
    measured = len(stamps) - cfg.warmup_steps - 1
    return measured >= 2 * cfg.window and \
        stamps[-1][0] - stamps[cfg.warmup_steps][0] >= cfg.duration_s


def _watch(proc: subprocess.Popen, ps: psutil.Process, progress: Path, cfg: PointConfig,
           gpu_probe, t0: float) -> _Seen:
    """Poll the command's progress file and its process tree until the point has its
    steps; a MeasureError when it exits too early, runs past the budget or stalls."""
    seen = _Seen()
    tree_cpu: dict[int, float] = {}
    tree_io: dict[int, int] = {}
    steps_seen, last_progress = 0, time.monotonic()
    while True:
        seen.stamps = stamps = _read(progress)
        seen.cpu_s, io = _tree_usage(ps, tree_cpu, tree_io)   # never decreases
        now = time.monotonic()
        warm = len(stamps) > cfg.warmup_steps
        if warm:
            seen.after_warmup(io, now)
        if now >= seen.next_sample:
            seen.sample(ps, gpu_probe if warm else None, now, cfg.sample_every_s)
        if _enough(stamps, cfg):
            if gpu_probe is not None and not seen.gpu:
                seen.gpu.append(gpu_probe())     # a point shorter than one sampling period
            return seen
        if proc.poll() is not None:
            assert proc.stderr is not None
            err = (proc.stderr.read() or b"").decode(errors="replace").strip()[-300:]
            if len(stamps) >= cfg.warmup_steps + cfg.window + 1:
                return seen    # ended early but long enough to measure
            raise MeasureError(f"the command exited ({proc.returncode}) after "
                               f"{len(stamps)} steps: {err or 'no error output'}")
        if now - t0 > cfg.budget_s:
            raise MeasureError(f"time budget of {cfg.budget_s:.0f} s spent after "
                               f"{len(stamps)} steps")
        if len(stamps) > steps_seen:
            steps_seen, last_progress = len(stamps), now
        elif steps_seen and now - last_progress > cfg.stall_s:
            raise MeasureError(f"no progress for {cfg.stall_s:.0f} s "
                               f"({len(stamps)} steps)")
        time.sleep(0.05)


def _tree(ps: psutil.Process) -> list[psutil.Process]:
    procs = [ps]
    with contextlib.suppress(psutil.Error):
        procs += ps.children(recursive=True)
    return procs


def _tree_usage(ps: psutil.Process, cpu: dict[int, float], read: dict[int, int]
                ) -> tuple[float, int | None]:
    """CPU seconds and bytes read (``read_chars``: what read(2) returned, page cache or
    not; Linux) of the child and every descendant it has had, data-loader workers
    included: each gone pid's last reading is kept. Bytes are None where unknown."""
    for p in _tree(ps):
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            cpu[p.pid] = t.user + t.system
        with contextlib.suppress(psutil.Error, AttributeError):
            read[p.pid] = p.io_counters().read_chars
    return sum(cpu.values()), (sum(read.values()) if read else None)


def _tree_mem_mb(ps: psutil.Process) -> tuple[float, str] | None:
    """The tree's memory now, in MB, and what was added up: its processes' proportional
    set sizes ("pss": a page shared by n processes counts 1/n in each), or, where one
    cannot be read (no smaps in a sandbox, another platform), resident sizes ("rss",
    which count shared pages once per process). None when no process could be read."""
    total, kind, known = 0, "pss", False
    for p in _tree(ps):
        try:
            info = p.memory_full_info()
            total += info.pss
            known = True
            continue
        except (psutil.Error, AttributeError, NotImplementedError, OSError):
            pass
        with contextlib.suppress(psutil.Error, OSError):
            total += p.memory_info().rss
            kind, known = "rss", True
    return (total / (1024 * 1024), kind) if known else None


def _read(path: Path) -> list[tuple[float, float]]:
    out = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for i, line in enumerate(text.splitlines()):
        parts = line.split()
        if not parts or parts[0] == "total":   # how far the job goes (Progress(total=))
            continue
        if i == len(text.splitlines()) - 1 and not text.endswith("\n"):
            break   # a line still being written
        try:
            t, n = float(parts[0]), float(parts[1]) if len(parts) > 1 else 1.0
        except (ValueError, IndexError):
            raise MeasureError(f"garbage progress line {i + 1}: {line[:60]!r}") from None
        if not (t == t and n > 0) or (out and t < out[-1][0]):
            raise MeasureError(f"bad progress line {i + 1}: {line[:60]!r}")
        out.append((t, n))
    return out


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=5)
    except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _summarise(cpus: int, stamps: list[tuple[float, float]], cfg: PointConfig, wall: float,
               cpu_s: float, gpu: dict) -> Measurement:
    use = stamps[cfg.warmup_steps:] if cfg.duration_s is not None else \
        stamps[cfg.warmup_steps:cfg.warmup_steps + cfg.steps + 1]
    if len(use) < cfg.window + 1:
        raise MeasureError(f"only {len(use)} steps after warm-up")
    rates = []
    for i in range(0, len(use) - cfg.window, cfg.window):
        a, b = use[i], use[i + cfg.window]
        dt = b[0] - a[0]
        if dt > 0:
            rates.append(sum(n for _, n in use[i + 1:i + cfg.window + 1]) / dt)
    dt = use[-1][0] - use[0][0]
    if dt <= 0 or not rates:
        raise MeasureError("progress timestamps do not advance")
    samples = sum(n for _, n in use[1:]) / dt
    steps = (len(use) - 1) / dt
    cv = statistics.pstdev(rates) / statistics.mean(rates) if len(rates) > 1 else 0.0
    return Measurement(cpus, samples, steps, cv, len(use) - 1, wall, cpu_s, gpu)
