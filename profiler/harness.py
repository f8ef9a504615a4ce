"""Measuring a training command's throughput at a given core count.

The command runs as a child process with its CPU affinity restricted to the allotment
(psutil; at most the CPUs this process may use), ``SYNERGY_PROFILE_CPUS`` and the usual
thread variables (OMP/MKL/torch) set to it, and ``SYNERGY_PROGRESS_FILE`` pointing at a
fresh file. The harness reads the progress lines, drops the warm-up steps, and measures
samples/s over windows of steps; it stops the child when it has enough steps, when the
point's time budget is spent, or when the child dies. A point is an error (not a
measurement) when the command crashes, hangs without progress, or prints garbage.
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


@dataclass(frozen=True)
class PointConfig:
    warmup_steps: int = 5
    steps: int = 30                # measured steps after warm-up
    window: int = 10               # steps per window for the CV
    budget_s: float = 60.0         # wall budget for this point
    stall_s: float = 20.0          # no new step for this long once started: it hangs


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
        return _measure(command, cpus, cfg, gpu_probe, None, cpus)
    if not 0 < core_fraction <= 1:
        raise ValueError("core_fraction must be in (0, 1]")
    with quota_group(cpus * core_fraction) as procs:
        return _measure(command, cpus, cfg, gpu_probe, procs,
                        math.ceil(cpus * core_fraction - 1e-9))


def _measure(command: Sequence[str], cpus: int, cfg: PointConfig, gpu_probe,
             procs: Path | None, whole_cores: int) -> Measurement:
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
    m = _summarise(cpus, seen.stamps, cfg, wall, seen.cpu_s, seen.gpu)
    per_sample = seen.read_bytes_per_sample()
    if per_sample is not None:
        m = dataclasses.replace(m, read_bytes_per_sample=per_sample)
    return m


@dataclasses.dataclass
class _Seen:
    """What watching one point's command saw: its step stamps, the CPU time of its process
    tree, bytes read and samples done at the end of warm-up and at the last reading, and
    the GPU (once)."""

    stamps: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    cpu_s: float = 0.0
    io_mark: tuple[float, float] | None = None     # (bytes read, samples) at warm-up
    io_end: tuple[float, float] | None = None
    gpu: dict = dataclasses.field(default_factory=dict)

    def read_bytes_per_sample(self) -> float | None:
        if self.io_mark is None or self.io_end is None or self.io_end[1] <= self.io_mark[1]:
            return None
        return max(0.0, (self.io_end[0] - self.io_mark[0]) / (self.io_end[1] - self.io_mark[1]))


def _watch(proc: subprocess.Popen, ps: psutil.Process, progress: Path, cfg: PointConfig,
           gpu_probe, t0: float) -> _Seen:
    """Poll the command's progress file and its process tree until the point has its
    steps; a MeasureError when it exits too early, runs past the budget or stalls."""
    need = cfg.warmup_steps + cfg.steps
    seen = _Seen()
    tree_cpu: dict[int, float] = {}
    tree_io: dict[int, int] = {}
    steps_seen, last_progress = 0, time.monotonic()
    while True:
        seen.stamps = stamps = _read(progress)
        seen.cpu_s, io = _tree_usage(ps, tree_cpu, tree_io)   # never decreases
        if io is not None and len(stamps) > cfg.warmup_steps:
            done = (io, sum(n for _, n in stamps))
            seen.io_mark = seen.io_mark or done
            seen.io_end = done
        if len(stamps) >= need:
            return seen
        now = time.monotonic()
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
        if gpu_probe is not None and not seen.gpu:
            seen.gpu = gpu_probe()
        time.sleep(0.05)


def _tree_usage(ps: psutil.Process, cpu: dict[int, float], read: dict[int, int]
                ) -> tuple[float, int | None]:
    """CPU seconds and bytes read (``read_chars``: what read(2) returned, page cache or
    not; Linux) of the child and every descendant it has had, data-loader workers
    included: each gone pid's last reading is kept. Bytes are None where unknown."""
    procs = [ps]
    with contextlib.suppress(psutil.Error):
        procs += ps.children(recursive=True)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            cpu[p.pid] = t.user + t.system
        with contextlib.suppress(psutil.Error, AttributeError):
            read[p.pid] = p.io_counters().read_chars
    return sum(cpu.values()), (sum(read.values()) if read else None)


def _read(path: Path) -> list[tuple[float, float]]:
    out = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for i, line in enumerate(text.splitlines()):
        parts = line.split()
        if not parts:
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
    use = stamps[cfg.warmup_steps:cfg.warmup_steps + cfg.steps + 1]
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
