"""The reference simulator's makespans on the physical cluster's static 100-job trace."""

from __future__ import annotations

import pytest

from synergy_slurm.core import ClusterState
from synergy_slurm.sim.config import RoundsConfig, SimConfig
from synergy_slurm.sim.runner import Workload
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import read_trace

# 4 x 8 GPUs, 24 cores, 500 GB; FIFO; all jobs at t=0 (SYNERGY.md, "Published results").
REFERENCE_H = {"proportional": 15.25, "greedy": 12.25, "tune-ref": 11.00}


@pytest.mark.parametrize("allocator", sorted(REFERENCE_H))
def test_static_trace_makespan_matches_reference(reference_dir, paper_profiles, allocator):
    trace = read_trace(reference_dir / "static_100job.csv", paper_profiles)
    stream = Workload(jobs=tuple(trace), static=True).stream(paper_profiles, None)
    cfg = RoundsConfig(ClusterState.uniform(4), "fifo", allocator, reference_speedups=True)
    res = simulate(stream, paper_profiles, cfg)
    assert all(j.finish is not None for j in res.jobs) and len(res.jobs) == 100
    assert res.makespan_s / 3600 == pytest.approx(REFERENCE_H[allocator], rel=0.03)


def test_our_tune_and_opt_beat_the_reference_tune(reference_dir, paper_profiles):
    trace = read_trace(reference_dir / "static_100job.csv", paper_profiles)
    spans = {}
    for alloc in ("tune", "opt"):
        stream = Workload(jobs=tuple(trace), static=True).stream(paper_profiles, None)
        res = simulate(stream, paper_profiles, SimConfig(ClusterState.uniform(4), "fifo", alloc))
        spans[alloc] = res.makespan_s / 3600
    assert spans["tune"] <= REFERENCE_H["tune-ref"]
    assert spans["opt"] <= REFERENCE_H["tune-ref"]
