"""Running many (policy, allocator, load) simulations over the same trace, in parallel."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace

from ..core import Profile
from .config import SimConfig
from .results import SimResult
from .simulate import simulate
from .trace import TraceJob, mislabel, philly_jobs


@dataclass(frozen=True)
class Workload:
    """Either a recorded trace (``jobs``) or a Philly-derived one of ``count`` jobs."""

    jobs: tuple[TraceJob, ...] | None = None
    split: tuple[float, float, float] = (20, 70, 10)
    multi_gpu: bool = False
    seed: int = 0
    static: bool = False
    count: int = 6000
    # A share of users who label every job with this key whatever it is (sim.trace.mislabel)
    mislabel: tuple[float, str] | None = None

    def stream(self, profiles: Mapping[str, Profile], load: float | None) -> Iterable[TraceJob]:
        if self.jobs is not None:
            jobs: Iterable[TraceJob] = sorted(self.jobs, key=lambda j: (j.arrival, j.job_id))
        else:
            assert load is not None
            jobs = itertools.islice(
                philly_jobs(profiles, load, self.split, self.multi_gpu, self.seed), self.count)
        if self.static:
            jobs = (replace(j, arrival=0.0) for j in jobs)
        if self.mislabel is not None:
            jobs = mislabel(jobs, self.mislabel[0], self.mislabel[1], seed=self.seed)
        return jobs


@dataclass(frozen=True)
class Run:
    policy: str
    allocator: str
    load: float | None


def plan_runs(policies: Sequence[str], allocators: Sequence[str],
              loads: Sequence[float | None]) -> list[Run]:
    return [Run(p, a, lo) for lo, p, a in itertools.product(loads, policies, allocators)]


def _one(run: Run, workload: Workload, profiles: Mapping[str, Profile], base: SimConfig,
         on_round: Callable[[float, int], None] | None = None) -> tuple[Run, SimResult]:
    cfg = replace(base, policy=run.policy, allocator=run.allocator)
    return run, simulate(workload.stream(profiles, run.load), profiles, cfg, on_round=on_round)


def run_all(runs: Sequence[Run], workload: Workload, profiles: Mapping[str, Profile],
            base: SimConfig, workers: int = 1,
            done: Callable[[Run, SimResult], None] | None = None,
            on_round: Callable[[float, int], None] | None = None,
            ) -> list[tuple[Run, SimResult]]:
    """Every run over the same workload; results in the order of ``runs``. ``on_round``
    (time, jobs finished) is called after each round when runs are sequential."""
    results: dict[Run, SimResult] = {}
    if workers <= 1 or len(runs) <= 1:
        for run in runs:
            _, res = _one(run, workload, profiles, base, on_round)
            results[run] = res
            if done:
                done(run, res)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futs = [pool.submit(_one, run, workload, profiles, base) for run in runs]
            for fut in as_completed(futs):
                run, res = fut.result()
                results[run] = res
                if done:
                    done(run, res)
    return [(run, results[run]) for run in runs]
