"""Job completion time statistics over a window of job ids, and makespan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .results import JobResult, SimResult


@dataclass(frozen=True)
class JctStats:
    jobs: int
    unfinished: int
    mean_h: float
    p50_h: float
    p99_h: float
    p999_h: float


def in_window(jobs: Sequence[JobResult], window: tuple[int, int] | None) -> list[JobResult]:
    if window is None:
        return list(jobs)
    lo, hi = window
    return [j for j in jobs if lo <= j.job_id <= hi]


def jct_stats(jobs: Sequence[JobResult], window: tuple[int, int] | None = None) -> JctStats:
    """Mean and percentiles (linear interpolation) of JCT in hours over finished jobs."""
    sel = in_window(jobs, window)
    jct = np.array([j.jct_s for j in sel if j.jct_s is not None], dtype=float) / 3600.0
    unfinished = len(sel) - len(jct)
    if len(jct) == 0:
        nan = float("nan")
        return JctStats(0, unfinished, nan, nan, nan, nan)
    p50, p99, p999 = np.percentile(jct, [50, 99, 99.9])
    return JctStats(len(jct), unfinished, float(jct.mean()), float(p50), float(p99), float(p999))


def summary_row(result: SimResult, load: float | None) -> dict[str, Any]:
    """The row ``synergy simulate --format json`` prints for one run (a JSON document:
    its values are strings, numbers and None)."""
    st = jct_stats(result.jobs, result.config.window)
    return {
        "policy": result.config.policy, "allocator": result.config.allocator, "load": load,
        "jobs": st.jobs, "mean_jct_h": _r(st.mean_h), "p50_jct_h": _r(st.p50_h),
        "p99_jct_h": _r(st.p99_h), "p999_jct_h": _r(st.p999_h),
        "makespan_h": _r(result.makespan_s / 3600.0), "wall_s": round(result.wall_s, 2),
        "restart_cost_s": result.config.restart_cost_s, "rounds": result.rounds,
        "unfinished": st.unfinished,
    }


def _r(x: float) -> float | None:
    return None if x != x else round(x, 4)
