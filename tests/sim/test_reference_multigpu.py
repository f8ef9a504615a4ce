"""Multi-GPU fidelity: tune-ref is the reference's TUNE, job for job.

The traces and the reference simulator's own results (per-job finish times) are in
shared/reference/multigpu (its README says how they were made). FIFO, 300 s rounds, no
restart cost, the reference's speedup rule.
"""

from __future__ import annotations

import json

import pytest

from synergy_slurm.core import ClusterState
from synergy_slurm.sim.config import RoundsConfig
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import read_trace


def replay(reference_dir, paper_profiles, name: str, allocator: str, reference: bool = True,
           placement: str | None = None):
    ref = json.loads((reference_dir / "multigpu" / f"reference_{name}.json").read_text())
    c = ref["cluster"]
    cluster = ClusterState.uniform(c["servers"], c["gpus_per_server"], c["cpus_per_server"],
                                   c["mem_gb_per_server"])
    window = tuple(ref["window_job_ids"])
    trace = read_trace(reference_dir / "multigpu" / f"trace_{name}.csv", paper_profiles)
    cfg = RoundsConfig(cluster, "fifo", allocator, round_s=c["round_s"],
                    reference_speedups=reference, window=window, placement=placement)
    res = simulate(trace, paper_profiles, cfg)
    in_window = [j for j in res.jobs if window[0] <= j.job_id <= window[1]]
    mean_h = sum(j.jct_s for j in in_window) / len(in_window) / 3600
    return ref, res, mean_h


@pytest.mark.parametrize("allocator", ["proportional", "tune-ref"])
def test_small_trace_every_finish_time_equals_the_reference(reference_dir, paper_profiles,
                                                           allocator):
    ref, res, mean_h = replay(reference_dir, paper_profiles, "small_0.5jph_seed3", allocator)
    want = ref["allocators"][allocator]
    finished = {j.job_id: j.finish for j in res.jobs if j.finish is not None}
    per_job = {int(k): v[0] for k, v in want["per_job"].items()}
    assert per_job.keys() <= finished.keys()
    wrong = {k: (finished[k], v) for k, v in per_job.items() if finished[k] != v}
    assert wrong == {}
    assert mean_h == pytest.approx(want["mean_jct_h"], abs=1e-4)


@pytest.mark.slow
def test_big_trace_mean_jct_within_one_percent_of_the_reference(reference_dir, paper_profiles):
    ref, _, mean_h = replay(reference_dir, paper_profiles, "3.5jph_seed0", "tune-ref")
    assert mean_h == pytest.approx(ref["allocators"]["tune-ref"]["mean_jct_h"], rel=0.01)


@pytest.mark.parametrize("name", ["small_0.5jph_seed3",
                                  pytest.param("3.5jph_seed0", marks=pytest.mark.slow)])
def test_our_tune_beats_the_reference_tune(reference_dir, paper_profiles, name):
    """`tune` on its full profiles (no reference speedups), default placement."""
    ref, _, mean_h = replay(reference_dir, paper_profiles, name, "tune", reference=False)
    assert mean_h < ref["allocators"]["tune-ref"]["mean_jct_h"]
