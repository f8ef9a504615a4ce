"""What the harness reads while a point runs: the GPUs after warm-up, the share of cores
kept busy, the process tree's peak memory; and points measured by time, not steps."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from profiler.harness import PointConfig, measure

STEPS = """
import os, sys, time
warmup, slow, fast = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
{setup}
with open(os.environ["SYNERGY_PROGRESS_FILE"], "a") as f:
    for i in range(100000):
        {work}
        f.write(f"{{time.monotonic()}} 4\\n"); f.flush()
        if i == warmup and len(sys.argv) > 4:
            open(sys.argv[4], "w").write(repr(time.monotonic()))
"""


def child(setup: str = "pass", work: str = "time.sleep(slow if i < warmup else fast)",
          *args: object) -> list[str]:
    return [sys.executable, "-c", STEPS.format(setup=setup, work=work), *map(str, args)]


def test_gpus_are_read_through_the_measured_window_not_during_warm_up(tmp_path: Path):
    calls: list[float] = []

    def probe() -> dict:
        calls.append(time.monotonic())
        return {"gpus": 1, "util_pct": [30 + 10 * (len(calls) % 2)], "mem_used_mb": [
            1000 + len(calls)]}

    mark = tmp_path / "warm"
    cfg = PointConfig(warmup_steps=3, window=5, duration_s=1.5, sample_every_s=0.25,
                      budget_s=60)
    m = measure(child("pass", "time.sleep(slow if i < warmup else fast)", 3, 0.5, 0.05,
                      mark), 1, cfg, gpu_probe=probe)
    warm_at = float(mark.read_text())
    # Warm-up (3 steps of 0.5 s) is never sampled; the 1.5 s after it is, every 0.25 s.
    assert calls and min(calls) >= warm_at - 0.1, (min(calls), warm_at)
    assert 3 <= len(calls) <= 10, len(calls)
    assert m.gpu["samples"] == len(calls)
    assert m.gpu["util_pct"][0] == pytest.approx(
        sum(30 + 10 * (k % 2) for k in range(1, len(calls) + 1)) / len(calls), abs=0.05)
    assert m.gpu["mem_used_mb"] == [1000 + len(calls)]
    # Measured by time: about 1.5 s of 0.05 s steps after warm-up, not `steps` (30) steps.
    assert m.steps >= 2 * cfg.window
    assert m.steps * 0.05 >= 1.0


def test_a_point_in_steps_takes_one_gpu_reading_at_least():
    cfg = PointConfig(warmup_steps=0, window=5, steps=10, sample_every_s=60, budget_s=60)
    m = measure(child("pass", "time.sleep(0.01)", 0, 0, 0), 1, cfg,
                gpu_probe=lambda: {"gpus": 0, "why": "NVML: no GPU"})
    assert m.gpu == {"gpus": 0, "why": "NVML: no GPU"}
    assert measure(child("pass", "time.sleep(0.01)", 0, 0, 0), 1, cfg).gpu == {}


def test_peak_memory_is_the_trees_and_counts_shared_pages_once():
    cfg = PointConfig(warmup_steps=2, window=5, steps=20, sample_every_s=0.1, budget_s=60)
    small = measure(child("pass", "time.sleep(0.05)", 2, 0, 0), 1, cfg)
    big = measure(child("blob = b'x' * (300 << 20)", "time.sleep(0.05)", 2, 0, 0), 1, cfg)
    # 300 MB written by the parent, then three forked children that keep it (shared
    # pages): resident sizes would add up to ~1.2 GB, proportional ones to ~300 MB.
    forked = measure(child("blob = b'x' * (300 << 20)\nfor _ in range(3):\n"
                           "    if os.fork() == 0:\n        time.sleep(60)\n        os._exit(0)",
                           "time.sleep(0.05)", 2, 0, 0), 1, cfg)
    assert small.peak_mem_mb is not None and small.peak_mem_mb < 100, small.peak_mem_mb
    assert big.peak_mem_mb is not None and 290 <= big.peak_mem_mb <= 450, big.peak_mem_mb
    assert forked.peak_mem_mb is not None and 290 <= forked.peak_mem_mb <= 600, \
        forked.peak_mem_mb
    assert forked.peak_mem_kind == "pss"      # Linux gives every process's PSS here


@pytest.mark.timing
def test_core_use_tells_a_busy_command_from_an_idle_one():
    cfg = PointConfig(warmup_steps=2, window=5, duration_s=1.5, budget_s=60)
    idle = measure(child("pass", "time.sleep(0.05)", 2, 0, 0), 1, cfg)
    busy = measure(child("pass", "t = time.monotonic()\n        while time.monotonic() - t "
                                 "< 0.05: pass", 2, 0, 0), 1, cfg)
    assert idle.core_use is not None and idle.core_use < 0.1, idle.core_use
    assert busy.core_use is not None and busy.core_use > 0.5, busy.core_use


def test_a_point_read_through_nvml_carries_the_gpus_figures_and_names(monkeypatch):
    from profiler.gpu import NvmlSampler
    from tests.profiler.test_gpu import FakeNvml

    fake = FakeNvml()
    fake.util, fake.mem_mb = [70], [12000]
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    cfg = PointConfig(warmup_steps=2, window=5, duration_s=1.0, sample_every_s=0.2,
                      budget_s=60)
    with NvmlSampler() as probe:
        m = measure(child("pass", "time.sleep(0.05)", 2, 0, 0), 1, cfg, gpu_probe=probe)
    assert fake.opened == fake.closed == 1          # once for the point, not per reading
    assert m.gpu["util_pct"] == [70.0] and m.gpu["mem_used_mb"] == [12000]
    assert m.gpu["names"] == ["NVIDIA H100 80GB HBM3"] and m.gpu["samples"] >= 3


def test_a_total_line_is_not_a_step(tmp_path: Path):
    """Progress(total=) writes ``total <samples> <done>`` lines for the controller; the
    profiler, reading the same protocol, skips them rather than failing the run."""
    from profiler.harness import _read
    from profiler.progress import Progress

    path = tmp_path / "p"
    with Progress(path=str(path), total=50) as p:
        for _ in range(3):
            p.step(10)
    assert [n for _, n in _read(path)] == [10, 10, 10]
