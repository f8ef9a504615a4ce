"""TUNE's documented steps, backfill, placement and demand capping on hand-made cases."""

from __future__ import annotations

import pytest

from synergy_slurm.core import (
    ClusterState,
    JobSpec,
    PerGpu,
    Resources,
    Server,
    get_allocator,
    get_policy,
    make_plan,
)

from .plan_checks import check_capacity

FIFO = get_policy("fifo")


def jobs_of(profiles, *specs):
    """specs: (model or None, gpus); submitted in the given order."""
    return [JobSpec(i, g, submitted=float(i), duration_s=100, remaining_s=100,
                    profile=None if m is None else profiles[m])
            for i, (m, g) in enumerate(specs)]


def plan_of(jobs, cluster, allocator="tune-ref"):
    return make_plan(jobs, cluster, FIFO, get_allocator(allocator), now=0)


def test_tune_three_steps(paper_profiles):
    one = ClusterState.uniform(1)
    jobs = jobs_of(paper_profiles, ("alexnet", 1), ("res18", 1), ("alexnet", 1), ("gnmt", 1))
    p = plan_of(jobs, one).by_job()
    # Step 1: ideal fits (12 cores, 125 GB).
    assert p[1].share == PerGpu(9, 62.5) and p[1].how == "ideal"
    # Step 2: alexnet's ideal (12 cores) no longer fits in the 3 cores left: lowers itself.
    assert p[2].share == PerGpu(3, 62.5) and p[2].how == "self-downgrade"
    assert p[2].speedup == pytest.approx(1.0)
    # Step 3: gnmt needs 1 core, none is free: the peer with most cores/GPU is lowered.
    assert p[3].share == PerGpu(1, 20.0) and p[3].how == "ideal"
    assert p[0].share == PerGpu(3, 62.5) and p[0].how == "peer-downgraded"
    assert p[1].how == "ideal"  # the job with fewer cores/GPU kept its share


def test_greedy_skips_what_tune_downgrades(paper_profiles):
    one = ClusterState.uniform(1)
    jobs = jobs_of(paper_profiles, ("alexnet", 1), ("res18", 1), ("alexnet", 1), ("gnmt", 1))
    g = plan_of(jobs, one, "greedy")
    # 12 + 9 cores taken: the second alexnet's 12 do not fit, gnmt's 1 core does.
    assert {a.job_id for a in g.allocations} == {0, 1, 3}
    assert "does not fit" in g.skipped[2]


def test_backfill_after_a_job_that_does_not_fit(paper_profiles):
    one = ClusterState.uniform(1)
    jobs = jobs_of(paper_profiles, ("gnmt", 4), ("gnmt", 8), ("gnmt", 4))
    for name in ("proportional", "greedy", "tune-ref", "opt"):
        p = plan_of(jobs, one, name)
        assert {a.job_id for a in p.allocations} == {0, 2}, name
        assert p.skipped[1] == "needs 8 GPUs, 4 free this round"


def test_job_larger_than_the_cluster_is_skipped_with_reason(paper_profiles):
    p = plan_of(jobs_of(paper_profiles, ("gnmt", 40)), ClusterState.uniform(4))
    assert p.skipped[0] == "needs 40 GPUs, the cluster has 32"


def test_multi_gpu_job_goes_whole_on_the_fullest_server_where_it_fits(paper_profiles):
    servers = tuple(Server(f"s{i}", Resources(8, 24, 500.0)) for i in range(3))
    cl = ClusterState(servers, reserved=(("s1", Resources(4, 12, 250.0)),
                                         ("s2", Resources(2, 6, 125.0))))
    jobs = jobs_of(paper_profiles, ("gnmt", 4), ("gnmt", 6))
    p = plan_of(jobs, cl, "proportional").by_job()
    assert p[0].placement == (("s1", 4),)   # 4 free on s1: the fullest that fits
    assert p[1].placement == (("s2", 6),)   # then s2 (6 free) rather than s0 (8 free)


def test_multi_gpu_job_is_spread_fewest_free_first_when_no_server_fits(paper_profiles):
    servers = tuple(Server(f"s{i}", Resources(8, 24, 500.0)) for i in range(3))
    cl = ClusterState(servers, reserved=(("s0", Resources(5, 15, 312.5)),
                                         ("s1", Resources(3, 9, 187.5)),
                                         ("s2", Resources(2, 6, 125.0))))
    p = plan_of(jobs_of(paper_profiles, ("gnmt", 8)), cl, "proportional").by_job()
    assert p[0].placement == (("s0", 3), ("s1", 5))


def test_capped_demand_and_jobs_larger_than_a_server(paper_profiles):
    cl = ClusterState.uniform(2)
    jobs = jobs_of(paper_profiles, ("alexnet", 2), ("alexnet", 4), ("alexnet", 16))
    # Each alone, so that nothing else competes.
    p2 = plan_of(jobs[:1], cl).by_job()[0]
    assert p2.share == PerGpu(12, 125.0) and p2.how == "ideal"
    p4 = plan_of(jobs[1:2], cl).by_job()[1]
    assert p4.share == PerGpu(6, 125.0) and p4.how == "capped"
    assert p4.speedup == pytest.approx(1.75)
    p16 = plan_of(jobs[2:], cl).by_job()[2]
    assert p16.share == cl.fair and p16.how == "proportional"
    assert sorted(p16.placement) == [("s0", 8), ("s1", 8)]


def test_jobs_needing_less_than_proportional_leave_room(paper_profiles):
    one = ClusterState.uniform(1)
    jobs = jobs_of(paper_profiles, *[("transformer", 1)] * 7, ("alexnet", 1))
    p = plan_of(jobs, one).by_job()
    assert all(p[i].share == PerGpu(1, 20.0) for i in range(7))
    # 24 - 7 cores left for alexnet: its ideal 12 fits, so it runs at 2.94x.
    assert p[7].share == PerGpu(12, 125.0)
    assert p[7].speedup == pytest.approx(2.94)


def test_unknown_profile_gets_proportional(paper_profiles):
    p = plan_of(jobs_of(paper_profiles, (None, 2)), ClusterState.uniform(1))
    assert p.allocations[0].share == PerGpu(3, 62.5)
    assert p.allocations[0].how == "proportional"


def test_fair_share_follows_the_server_shape(paper_profiles):
    cl = ClusterState.uniform(1, cpus=32)
    assert cl.fair == PerGpu(4, 62.5)
    p = plan_of(jobs_of(paper_profiles, ("res50", 1)), cl).by_job()[0]
    # res50 saturates at 4 cores: its ideal is the (new) proportional point.
    assert p.share == PerGpu(4, 62.5) and p.speedup == pytest.approx(1.0)


def test_interpolating_tune_gives_the_best_point_that_fits(paper_profiles):
    # 27 cores: alexnet (12) and res18 (9) at their ideal leave 6 for the second alexnet.
    cl = ClusterState.uniform(1, cpus=27)
    assert cl.fair == PerGpu(3, 62.5)
    jobs = jobs_of(paper_profiles, ("alexnet", 1), ("res18", 1), ("alexnet", 1))
    ref = plan_of(jobs, cl, "tune-ref").by_job()
    interp = plan_of(jobs, cl, "tune").by_job()
    assert ref[2].share == PerGpu(3, 62.5) and ref[2].speedup == pytest.approx(1.0)
    assert interp[2].share.cpus == 6 and interp[2].speedup == pytest.approx(1.75)
    assert interp[2].how == "interpolated"
    assert interp[0].share == ref[0].share == PerGpu(12, 125.0)


def test_interpolating_tune_hands_idle_cores_to_lowered_jobs(paper_profiles):
    # Three alexnets on one 24-core server: two take 12 cores each, the third forces a peer
    # down to 3 cores; the reference TUNE then leaves 6 cores idle, ours hands them back.
    one = ClusterState.uniform(1)
    jobs = jobs_of(paper_profiles, *[("alexnet", 1)] * 3)
    p = plan_of(jobs, one, "tune")
    assert sum(a.share.cpus for a in p.allocations) == 24
    assert p.total_speedup > plan_of(jobs, one, "tune-ref").total_speedup


@pytest.mark.parametrize("allocator", ["tune", "tune-ref"])
def test_peer_downgrades_that_trade_cores_for_memory_apply_together(allocator):
    """Found by hypothesis: making room for a job lowers two peers on one server, one
    giving back cores but taking memory (too slow at the lowered point otherwise), the
    other the reverse. Neither fits alone first; together they do."""
    from synergy_slurm.core import Profile

    grid_c, grid_m = (1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0), (16.0, 32.0, 64.0, 128.0)
    flat = (1.0, 1.0, 1.0, 1.0)

    def prof(rows, ideal):
        return Profile("p", grid_c, grid_m, rows, ideal=ideal)

    cores_hungry = prof((flat, flat, flat, (1.0, 2.0, 1.0, 1.0), (3.0, 1.0, 1.0, 1.0), flat,
                         flat), PerGpu(6, 16.0))
    memory_hungry = prof((flat, flat, (1.0, 0.5, 1.0, 2.0), flat, flat, flat, flat),
                         PerGpu(3, 128.0))
    cluster = ClusterState(
        servers=(Server("n0", Resources(1, 4, 32.0)),
                 *(Server(f"n{i}", Resources(8, 32, 256.0)) for i in (1, 2, 3))),
        reserved=(("n1", Resources(5, 0, 0.0)),), fair=PerGpu(4, 32.0))

    def job(i, gpus, remaining, profile=None):
        return JobSpec(i, gpus, submitted=0.0, duration_s=60.0, remaining_s=remaining,
                       profile=profile)

    jobs = [job(0, 4, 60, cores_hungry), job(1, 1, 30), job(2, 1, 30), job(3, 1, 30),
            job(4, 1, 60), job(5, 1, 60), job(6, 1, 30), job(7, 8, 60),
            job(8, 1, 30, memory_hungry)]
    plan = make_plan(jobs, cluster, get_policy("srtf"), get_allocator(allocator), now=1e4)
    check_capacity(plan, cluster, mem_tol_gb=1e-6)
    by_job = plan.by_job()
    assert {0, 8} <= set(by_job) and all(a.speedup >= 1 - 1e-9 for a in plan.allocations)
