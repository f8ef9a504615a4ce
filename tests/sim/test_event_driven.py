"""The event-driven simulation (rounds without an event skipped) gives, job by job, what
the round-by-round loop gives wherever running jobs keep their shape."""

from __future__ import annotations

import itertools

import pytest

from synergy_slurm.core import ClusterState, Resources
from synergy_slurm.sim.engine import (
    Occupancy,
    SimConfig,
    _simulate_events,
    _simulate_rounds,
    event_driven,
)
from synergy_slurm.sim.trace import philly_jobs


@pytest.mark.parametrize("allocator, policy, seed", [
    ("proportional", "fifo", 1), ("tune", "fifo", 2), ("tune", "srtf", 3),
    ("greedy", "las", 4), ("tune", "ftf", 5)])
def test_events_and_rounds_agree(paper_profiles, allocator, policy, seed):
    cluster = ClusterState.uniform(3, 8, 24, 500.0)
    trace = list(itertools.islice(philly_jobs(paper_profiles, 6, multi_gpu=True, seed=seed),
                                  120))
    # Background: a CPU-only job holding half a server for a while, as whatif adds them.
    bg = (Occupancy(3600.0, 20_000.0, cluster.servers[0].name, Resources(0, 12, 200.0)),)
    cfg = SimConfig(cluster, policy=policy, allocator=allocator, round_s=300,
                    preemptive=False, background=bg)
    assert event_driven(cfg)
    slow = _simulate_rounds(trace, paper_profiles, cfg, None, 10_000_000)
    fast = _simulate_events(trace, paper_profiles, cfg, None, 10_000_000)
    assert [(j.job_id, j.start, j.finish) for j in fast.jobs] == \
        [(j.job_id, j.start, j.finish) for j in slow.jobs]
    assert fast.rounds == slow.rounds
    flat = [[x for r in res.utilisation for x in r] for res in (fast, slow)]
    assert flat[0] == pytest.approx(flat[1])


def test_a_window_ends_both_alike_with_later_jobs_still_running(paper_profiles):
    # The run stops when the window's jobs are done; later jobs still running have no end
    # yet on either path (the event path knew their ends at their starts).
    trace = list(itertools.islice(philly_jobs(paper_profiles, 9, multi_gpu=True, seed=6),
                                  300))
    cfg = SimConfig(ClusterState.uniform(4, 8, 24, 500.0), preemptive=False, window=(20, 59))
    slow = _simulate_rounds(trace, paper_profiles, cfg, None, 10_000_000)
    fast = _simulate_events(trace, paper_profiles, cfg, None, 10_000_000)
    assert any(j.start is not None and j.finish is None for j in slow.jobs)
    assert [(j.job_id, j.start, j.finish) for j in fast.jobs] == \
        [(j.job_id, j.start, j.finish) for j in slow.jobs]
    assert fast.makespan_s == slow.makespan_s


def test_only_fixed_shapes_take_the_event_path():
    cluster = ClusterState.uniform(1, 8, 24, 500.0)
    assert not event_driven(SimConfig(cluster))                       # the paper's rounds
    assert not event_driven(SimConfig(cluster, preemptive=False, requeue_budget=2))
    assert event_driven(SimConfig(cluster, preemptive=False, requeue_budget=2,
                                  allocator="proportional"))
    assert not event_driven(SimConfig(cluster, preemptive=False, reference_speedups=True))
    assert not event_driven(SimConfig(cluster, preemptive=False, shrink_memory=True))
