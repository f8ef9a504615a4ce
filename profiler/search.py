"""Optimistic profiling: throughput against core counts, with all memory (SYNERGY.md).

Start at the most cores; halve while throughput stays within ``tolerance`` (10%) of the
previous point; where it drops, refine between the last two points (bisect while the gap
is more than a core and the point budget allows). A noisy point (coefficient of variation
above ``max_cv``) is measured again once. Stops at ``max_points`` or the time budget.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .harness import MeasureError, Measurement


class SearchError(RuntimeError):
    pass


@dataclass
class SearchResult:
    points: dict[int, Measurement] = field(default_factory=dict)
    repeats: int = 0
    wall_s: float = 0.0

    @property
    def cpu_s(self) -> float:
        return sum(m.cpu_s for m in self.points.values())

    def curve(self) -> dict[int, float]:
        return {c: m.samples_per_s for c, m in sorted(self.points.items())}


def optimistic_search(measure: Callable[[int], Measurement], max_cpus: int,
                      max_points: int = 8, tolerance: float = 0.10, max_cv: float = 0.10,
                      budget_s: float = 600.0) -> SearchResult:
    if max_cpus < 1:
        raise ValueError("max_cpus must be >= 1")
    res = SearchResult()
    t0 = time.monotonic()

    def take(c: int) -> Measurement:
        if time.monotonic() - t0 > budget_s:
            raise SearchError(f"profiling budget of {budget_s:.0f} s spent "
                              f"({len(res.points)} points measured)")
        m = measure(c)
        if m.cv > max_cv:
            res.repeats += 1
            again = measure(c)
            m = again if again.cv < m.cv else m
        res.points[c] = m
        return m

    try:
        c = max_cpus
        prev = take(c)
        dropped_between: tuple[int, int] | None = None
        while c > 1 and len(res.points) < max_points:
            nxt = max(1, c // 2)
            m = take(nxt)
            if m.samples_per_s >= prev.samples_per_s * (1 - tolerance):
                c, prev = nxt, m
            else:
                dropped_between = (nxt, c)
                break
        # Refine where it dropped: bisect the interval towards where throughput holds.
        while dropped_between and len(res.points) < max_points:
            lo, hi = dropped_between
            if hi - lo <= 1:
                break
            mid = (lo + hi) // 2
            m = take(mid)
            if m.samples_per_s >= res.points[hi].samples_per_s * (1 - tolerance):
                dropped_between = (lo, mid)
            else:
                dropped_between = (mid, hi)
    except MeasureError as exc:
        raise SearchError(f"measuring failed: {exc}") from exc
    res.wall_s = time.monotonic() - t0
    return res
