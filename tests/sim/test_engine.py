"""The round loop on hand-made traces: progress per round, waiting, restarts, metrics."""

from __future__ import annotations

import pytest

from synergy_slurm.core import (
    ClusterState,
    PerGpu,
    Profile,
)
from synergy_slurm.core.backfill import Start
from synergy_slurm.core.usage import UsageRule
from synergy_slurm.sim.config import SimConfig, SlurmConfig
from synergy_slurm.sim.controller_model import _Model
from synergy_slurm.sim.metrics import jct_stats
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import TraceJob, mislabel

ONE_GPU = ClusterState.uniform(1, gpus=1, cpus=3, mem_gb=62.5)


def flat(key="m", iter_s=1.0):
    """Throughput 1.0 everywhere: speedup 1 whatever the share."""
    return Profile(key, (1, 3), (10, 62.5), ((1, 1), (1, 1)), iter_time_s=iter_s)


def hungry(key="h", iter_s=1.0):
    """Twice as fast with 6 cores per GPU as with 3."""
    return Profile(key, (3, 6), (62.5, 125), ((1, 1), (2, 2)), iter_time_s=iter_s)


def test_completion_lands_on_the_round_end():
    # 250 iterations of 1 s: done during the first 300 s round, so JCT is one round.
    res = simulate([TraceJob(0, "m", 0, 250, 1)], {"m": flat()}, SimConfig(ONE_GPU))
    assert res.jobs[0].finish == 300 and res.rounds == 1
    # 301 iterations need a second round.
    res = simulate([TraceJob(0, "m", 0, 301, 1)], {"m": flat()}, SimConfig(ONE_GPU))
    assert res.jobs[0].finish == 600


def test_fifo_queueing_and_metrics():
    trace = [TraceJob(0, "m", 0, 600, 1), TraceJob(1, "m", 10, 300, 1)]
    res = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU))
    by_id = {j.job_id: j for j in res.jobs}
    assert by_id[0].finish == 600          # 2 rounds
    assert by_id[1].start == 600 and by_id[1].finish == 900
    st = jct_stats(res.jobs)
    assert st.jobs == 2 and st.mean_h == pytest.approx(((600 - 0) + (900 - 10)) / 2 / 3600)
    assert res.makespan_s == 900
    assert all(0 <= u <= 1 for row in res.utilisation for u in row[1:])


def test_first_round_is_the_first_arrival_rounded_up():
    res = simulate([TraceJob(0, "m", 1000, 10, 1)], {"m": flat()}, SimConfig(ONE_GPU))
    assert res.jobs[0].start == 1200 and res.jobs[0].finish == 1500


def test_speedup_shortens_the_job_and_restart_cost_lengthens_it():
    # 2 GPUs and 9 cores: the fair share is 4 cores/GPU, where the hungry profile runs at
    # 4/3; its ideal (6 cores) runs at 2, a 1.5x speedup.
    small = ClusterState.uniform(1, gpus=2, cpus=9, mem_gb=250)
    assert small.fair.cpus == 4
    prof = {"h": hungry()}
    base = simulate([TraceJob(0, "h", 0, 3000, 1)], prof,
                    SimConfig(small, allocator="proportional"))
    fast = simulate([TraceJob(0, "h", 0, 3000, 1)], prof, SimConfig(small, allocator="tune"))
    assert fast.jobs[0].finish < base.jobs[0].finish
    costly = simulate([TraceJob(0, "h", 0, 3000, 1)], prof,
                      SimConfig(small, allocator="tune", restart_cost_s=100))
    # The first start is free and the lease is extended while the shape does not change:
    # no restart, no cost.
    assert costly.jobs[0].restarts == 0
    assert costly.jobs[0].finish == fast.jobs[0].finish


def test_preemption_counts_restarts_and_costs_time():
    # SRTF: a short job arriving later preempts the long one, which restarts afterwards.
    trace = [TraceJob(0, "m", 0, 3000, 1), TraceJob(1, "m", 100, 300, 1)]
    free = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, policy="srtf"))
    cost = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, policy="srtf", restart_cost_s=60))
    long_free = next(j for j in free.jobs if j.job_id == 0)
    long_cost = next(j for j in cost.jobs if j.job_id == 0)
    assert long_free.restarts == 1 and long_cost.restarts == 1
    assert long_cost.finish > long_free.finish


def test_window_ends_the_run_early():
    trace = [TraceJob(i, "m", i * 300.0, 300, 1) for i in range(50)]
    res = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, window=(0, 4)))
    assert res.end_s < 50 * 300
    assert jct_stats(res.jobs, (0, 4)).jobs == 5


def test_bad_config_is_rejected():
    with pytest.raises(ValueError):
        SimConfig(ONE_GPU, round_s=0)
    with pytest.raises(ValueError):
        SimConfig(ONE_GPU, restart_cost_s=-1)


def test_restart_cost_longer_than_a_round_carries_over():
    # SRTF: job 1 preempts job 0 at t=300; job 0 resumes at 600 and first pays 600 s of
    # restart (two whole rounds), then needs two more rounds: it ends at 1800, not 1200.
    trace = [TraceJob(0, "m", 0, 900, 1), TraceJob(1, "m", 100, 300, 1)]
    free = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, policy="srtf"))
    slow = simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, policy="srtf",
                                                    restart_cost_s=600))
    assert {j.job_id: j.finish for j in free.jobs} == {0: 1200, 1: 600}
    assert {j.job_id: j.finish for j in slow.jobs} == {0: 1800, 1: 600}


def test_non_preemptive_mode_keeps_running_jobs_and_requeues_when_it_pays():
    # Two hungry jobs on one 2-GPU server with 8 cores (fair share 4 cores/GPU): planned
    # together, TUNE gives both 4 cores. When the short one ends, the long one can use the
    # idle cores only by a restart, which the requeue step does when it pays.
    prof = {"h": Profile("h", (2, 4, 6), (62.5, 125), ((0.5, 0.5), (1, 1), (2, 2)),
                         iter_time_s=1.0)}
    cl = ClusterState.uniform(1, gpus=2, cpus=8, mem_gb=250)
    trace = [TraceJob(0, "h", 0, 600, 1), TraceJob(1, "h", 0, 6000, 1)]
    keep = simulate(trace, prof, SlurmConfig(cl, allocator="tune"))
    grow = simulate(trace, prof, SlurmConfig(cl, allocator="tune",
                                           requeue_budget=1, restart_cost_s=60))
    j1_keep = next(j for j in keep.jobs if j.job_id == 1)
    j1_grow = next(j for j in grow.jobs if j.job_id == 1)
    assert j1_keep.restarts == 0 and j1_grow.restarts == 1
    assert j1_grow.finish < j1_keep.finish
    costly = simulate(trace, prof, SlurmConfig(cl, allocator="tune",
                                             requeue_budget=1, restart_cost_s=1e6))
    assert next(j for j in costly.jobs if j.job_id == 1).restarts == 0   # never pays


def test_the_controller_model_lowers_running_memory_in_place_when_asked():
    # A running job holds the node's memory (its user asked for 125 GB; it started before
    # synergy planned it) though its profile runs as fast with 10 GB; a waiting job needs
    # 62.5 GB. Lowering the running job's memory in place (Slurm 26.05) lets the
    # controller plan the waiting one this round, without restarting the running one.
    cl = ClusterState.uniform(1, gpus=2, cpus=6, mem_gb=125.0)
    flat_mem = Profile("lm", (1, 3), (10, 62.5, 125), ((0.5, 0.5, 0.5), (1, 1, 1)))
    profiles = {"lm": flat_mem, "h": hungry()}
    trace = [TraceJob(0, "lm", 0, 1000, 1), TraceJob(1, "h", 0, 1000, 1)]
    for shrink in (False, True):
        model = _Model(profiles, SlurmConfig(cl, allocator="tune",
                                           shrink_memory=shrink), None)
        for tj in trace:
            model._arrive(tj)
        model.waiting[0].share, model.waiting[0].held = PerGpu(3, 125.0), False
        model._start([Start(0, ((cl.servers[0].name, 1),))], 0.0)
        model._controller(300.0)
        waiting = model.waiting[1]
        assert waiting.held is not shrink      # planned and released only after a shrink
        held = model.running[0].alloc
        if shrink:
            assert held.share == PerGpu(3, 10) and held.how == "shrunk"
            assert model.running[0].restarts == 0      # lowered in place, not restarted
        else:
            assert held.share == PerGpu(3, 125.0)


def test_the_closed_loop_caps_a_users_mislabelled_key(paper_profiles):
    # gnmt jobs (1 core is all they use) labelled alexnet (12 cores per GPU) by user u0:
    # without the loop the second gets 12 cores too; with it, the first job's use caps
    # the second at the proportional 6 (48 cores, 8 GPUs). An honest alexnet job of
    # another user is not.
    cl = ClusterState.uniform(1, gpus=8, cpus=48, mem_gb=500.0)
    lies = list(mislabel([TraceJob(0, "gnmt", 0, 90_000, 1),
                          TraceJob(1, "gnmt", 3600, 90_000, 1)], 1.0, "alexnet", users=1))
    assert [(j.model, j.true_model, j.user) for j in lies] == [("alexnet", "gnmt", "u0")] * 2
    honest = TraceJob(2, "alexnet", 3600, 90_000, 1, user="u1")
    trace = [*lies, honest]

    def cores_at(res, t):
        row = next(r for r in res.utilisation if r[0] == t)
        return round(row[2] * 48)

    rule = UsageRule(min_observed_s=300)
    off = simulate(trace, paper_profiles, SlurmConfig(cl, round_s=300,
                                                    usage=None))
    on = simulate(trace, paper_profiles, SlurmConfig(cl, round_s=300,
                                                   usage=rule))
    assert cores_at(off, 0) == cores_at(on, 0) == 12
    assert cores_at(off, 3600) == 36 and cores_at(on, 3600) == 12 + 6 + 12
    # Mislabelled jobs run as what they are: gnmt's speed, whatever they were given.
    assert [j.finish for j in off.jobs][:1] == [j.finish for j in on.jobs][:1]


def test_a_run_that_hits_its_round_cap_is_an_error_not_an_empty_result():
    from synergy_slurm.sim.results import SimulationCapped

    # (The controller model steps from event to event: one long job is a few steps.)
    trace = [TraceJob(0, "m", 0, 10_000, 1)]
    with pytest.raises(SimulationCapped, match="cap of 5 rounds with 1 jobs"):
        simulate(trace, {"m": flat()}, SimConfig(ONE_GPU, round_s=1.0), max_rounds=5)
