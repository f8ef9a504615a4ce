"""OPT's plan depends on its input only: deterministic work limits (nodes, iterations)
decide, not the wall clock, so a loaded machine gives the same plan."""

from __future__ import annotations

import multiprocessing
import random
import time

from synergy_slurm.core import ClusterState, get_allocator, get_policy, make_plan
from synergy_slurm.sim.jobsets import full_cluster_jobs


def _spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def test_opt_plans_are_identical_beside_a_cpu_hog(paper_profiles):
    rng = random.Random(3)
    cluster = ClusterState.uniform(64)
    jobs = full_cluster_jobs(rng, paper_profiles, 64 * 8, sizes=(1, 1, 1, 2, 4))
    fifo = get_policy("fifo")

    def plan():
        t0 = time.process_time()
        # The default wall-time limit: the safety net must not be what decides.
        p = make_plan(jobs, cluster, fifo, get_allocator("opt"), now=0)
        return p, time.process_time() - t0

    quiet, cpu_s = plan()
    assert quiet.fallback is None and quiet.bound is not None
    hogs = [multiprocessing.Process(target=_spin, args=(time.time() + 60,))
            for _ in range(multiprocessing.cpu_count())]
    for h in hogs:
        h.start()
    try:
        loaded = [plan()[0] for _ in range(3)]
    finally:
        for h in hogs:
            h.terminate()
            h.join()
    for p in loaded:
        assert p == quiet
    print(f"OPT plan of {len(jobs)} jobs: {cpu_s:.2f} CPU-s; identical 3 times beside "
          f"{len(hogs)} busy processes")
