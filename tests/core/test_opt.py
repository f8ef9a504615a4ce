"""OPT: the bound, the rounded plan, the time limit's fallback, and TUNE's gap to it."""

from __future__ import annotations

import random

import pytest

from synergy_slurm.core import (
    ClusterState,
    JobSpec,
    Resources,
    Server,
    get_allocator,
    get_policy,
    make_plan,
)
from synergy_slurm.core.allocators.opt import candidates
from synergy_slurm.sim.jobsets import full_cluster_jobs

FIFO = get_policy("fifo")


def test_candidates_keep_the_floor_and_fit_a_server(paper_profiles):
    cl = ClusterState.uniform(1)
    for name, prof in paper_profiles.items():
        for g in (1, 2, 4, 8):
            cands = candidates(JobSpec(0, g, profile=prof), cl)
            assert any(c.share == cl.fair for c in cands) or name in ("gnmt", "lstm",
                                                                     "transformer", "res50",
                                                                     "deepspeech")
            for c in cands:
                assert c.speedup >= 1 - 1e-9
                assert c.share.cpus * g <= 24 and c.share.mem_gb * g <= 500 + 1e-6


def test_opt_beats_tune_on_a_small_case(paper_profiles):
    one = ClusterState.uniform(1)
    jobs = [JobSpec(i, 1, submitted=i, profile=paper_profiles[m])
            for i, m in enumerate(["alexnet", "res18", "alexnet", "m5", "gnmt", "gnmt",
                                   "res18", "shufflenet"])]
    tune = make_plan(jobs, one, FIFO, get_allocator("tune-ref"), now=0)
    opt = make_plan(jobs, one, FIFO, get_allocator("opt"), now=0)
    assert opt.fallback is None
    assert opt.bound >= opt.total_speedup >= tune.total_speedup
    assert len(opt.allocations) == 8


def test_stage1_failure_falls_back_to_tune(paper_profiles):
    # 8 free GPUs but only 4 free cores: proportional for all is not possible, so the
    # stage-1 MILP is infeasible; the plan is TUNE's and says so.
    cl = ClusterState((Server("s0", Resources(8, 24, 500.0)),),
                      reserved=(("s0", Resources(0, 20, 0.0)),))
    jobs = [JobSpec(i, 1, submitted=i, profile=paper_profiles["gnmt"]) for i in range(8)]
    plan = make_plan(jobs, cl, FIFO, get_allocator("opt"), now=0)
    assert plan.fallback is not None and plan.fallback.startswith("tune:")
    assert plan.allocator == "opt"
    assert len(plan.allocations) == 4   # gnmt needs one core each


@pytest.mark.parametrize("split", [None, (20, 70, 10)])
def test_tune_within_ten_percent_of_opt_bound(paper_profiles, split):
    """The paper's claim, on its server shape and its ten models: 50 full-cluster sets."""
    rng = random.Random(7)
    gaps = {"tune-ref": [], "tune": []}
    for _ in range(50):
        servers = rng.choice([2, 4, 8])
        cl = ClusterState.uniform(servers)
        jobs = full_cluster_jobs(rng, paper_profiles, servers * 8, sizes=(1, 1, 2, 4, 8),
                                 split=split)
        opt = make_plan(jobs, cl, FIFO, get_allocator("opt"), now=0)
        assert opt.fallback is None
        for name in gaps:
            t = make_plan(jobs, cl, FIFO, get_allocator(name), now=0)
            assert opt.bound >= t.total_speedup - 1e-6
            gaps[name].append(1 - t.total_speedup / opt.bound)
    mean = {k: sum(v) / len(v) for k, v in gaps.items()}
    assert mean["tune"] < 0.10, mean
    assert mean["tune"] <= mean["tune-ref"] + 1e-9, mean


def test_opt_never_drops_a_job_tune_would_place_on_uneven_servers():
    """A case hypothesis found (tests/core/test_properties.py): every GPU is asked for, and
    the LP's packing left a 1-GPU job no server with room; OPT now re-places or takes TUNE's
    plan rather than drop it."""
    from synergy_slurm.core import PerGpu, Profile

    grid_c, grid_m = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0), (16.0, 32.0, 64.0, 128.0)
    flat = tuple((1.0,) * 4 for _ in grid_c)

    def prof(rows, ideal):
        t = [list(r) for r in flat]
        for (i, j), v in rows.items():
            t[i][j] = v
        return Profile("p", grid_c, grid_m, tuple(tuple(r) for r in t), ideal=ideal)

    six = prof({(4, 0): 2.0}, PerGpu(6, 16.0))
    servers = tuple(Server(n, Resources(g, c, m)) for n, g, c, m in (
        ("n0", 8, 35, 256.0), ("n1", 2, 6, 32.0), ("n2", 8, 34, 256.0), ("n3", 4, 24, 64.0),
        ("n4", 1, 3, 16.0)))
    cluster = ClusterState(servers, (), PerGpu(3, 16.0))
    kw = {"submitted": 1.0, "duration_s": 60.0, "remaining_s": 60.0}
    jobs = [JobSpec(0, 1, **kw), JobSpec(1, 1, **{**kw, "submitted": 0.0},
                                         profile=prof({}, PerGpu(1, 16.0))),
            JobSpec(2, 1, **kw, profile=six), JobSpec(3, 12, **kw, profile=six),
            JobSpec(4, 1, **kw),
            JobSpec(5, 4, **kw, profile=prof({(0, 2): 2.0, (2, 0): 2.0}, PerGpu(1, 64.0))),
            JobSpec(6, 3, **{**kw, "submitted": 0.0})]
    for name in ("tune", "opt"):
        plan = make_plan(jobs, cluster, FIFO, get_allocator(name), now=0)
        assert plan.skipped == {}, (name, plan.skipped)
