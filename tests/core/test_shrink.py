"""Lowering a running job's memory in place (Slurm 26.05): only to what its profile needs
at its cores, never slower, and the memory freed is planned for pending jobs that round."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from synergy_slurm.core import (
    Allocation,
    ClusterState,
    JobSpec,
    PerGpu,
    Profile,
    RequeueRule,
    get_allocator,
    get_policy,
    plan_round,
)
from synergy_slurm.core.shrink import MIN_SHRINK_GB, memory_needed, memory_shrinks

from .strategies import examples

MEM_GRID = (20.0, 60.0, 120.0)
# Memory-insensitive: the same speed with 20 GB per GPU as with 120.
FLAT = Profile("flat", (2, 4, 8), MEM_GRID, ((0.5,) * 3, (1.0,) * 3, (1.5,) * 3))
# Memory-sensitive: each step of memory helps.
CACHE = Profile("cache", (2, 4, 8), MEM_GRID, ((0.4, 0.5, 0.6), (0.8, 1.0, 1.2),
                                               (1.2, 1.5, 1.8)))
# Flat up to 60 GB, then nothing more: needs 60 at most.
KNEE = Profile("knee", (2, 4, 8), MEM_GRID, ((0.4, 0.5, 0.5), (0.8, 1.0, 1.0),
                                             (1.2, 1.5, 1.5)))
FAIR = PerGpu(4, 60.0)
SERVERS = ClusterState.uniform(1, gpus=4, cpus=32, mem_gb=240).servers
FIFO = get_policy("fifo")
TUNE = get_allocator("tune")


def held(job_id: int, profile: Profile | None, share: PerGpu, gpus: int = 1
         ) -> tuple[JobSpec, Allocation]:
    return (JobSpec(job_id, gpus, profile=profile, remaining_s=1000),
            Allocation(job_id, gpus, share, ((SERVERS[0].name, gpus),), 1.0, "running"))


def test_memory_needed_is_the_least_memory_as_fast():
    assert memory_needed(FLAT, PerGpu(4, 120.0), FAIR) == 20.0
    assert memory_needed(KNEE, PerGpu(4, 120.0), FAIR) == 60.0
    assert memory_needed(CACHE, PerGpu(4, 120.0), FAIR) == 120.0
    # Between grid points on a rising slope: the job's own memory is already the least.
    assert memory_needed(CACHE, PerGpu(4, 90.0), FAIR) == 90.0
    # A job already below proportional speed (2 cores: 0.5x) is left as it is: no lower
    # point reaches proportional.
    assert memory_needed(FLAT, PerGpu(2, 120.0), FAIR) == 120.0


def test_only_insensitive_memory_with_a_profile_is_shrunk():
    running = [held(1, FLAT, PerGpu(4, 120.0), gpus=2), held(2, CACHE, PerGpu(4, 120.0)),
               held(3, None, PerGpu(4, 120.0)), held(4, KNEE, PerGpu(4, 60.5))]
    shrinks = memory_shrinks(running, FAIR)
    assert [s.job_id for s in shrinks] == [1]
    [s] = shrinks
    assert s.share == PerGpu(4, 20.0) and s.speedup == 1.0
    assert s.freed == ((SERVERS[0].name, s.freed[0][1]),)
    assert s.freed[0][1].mem_gb == 2 * 100.0 and s.freed[0][1].cpus == 0
    assert MIN_SHRINK_GB > 0.5   # job 4 would free 0.5 GB: not worth an update


def test_freed_memory_admits_a_pending_job_the_same_round():
    # The running flat job holds 230 of the node's 240 GB; the pending job needs 20 GB.
    running = [held(1, FLAT, PerGpu(4, 230.0))]
    cluster = ClusterState(SERVERS, ((SERVERS[0].name, PerGpu(4, 230.0).times(1)),), FAIR)
    pending = [JobSpec(2, 1, submitted=1, profile=CACHE)]
    without = plan_round(pending, (), cluster, FIFO, TUNE, RequeueRule(), {}, 0)
    assert without.plan.get(2) is None and without.shrinks == ()
    rp = plan_round(pending, (), cluster, FIFO, TUNE, RequeueRule(), {}, 0, shrinkable=running)
    assert [s.job_id for s in rp.shrinks] == [1]
    assert rp.plan.get(2) is not None
    # The proportional baseline changes nobody's share: it shrinks nothing.
    base = plan_round(pending, (), cluster, FIFO, get_allocator("proportional"),
                      RequeueRule(), {}, 0, shrinkable=running)
    assert base.shrinks == ()


def test_a_job_shrunk_is_not_requeued_in_the_same_round():
    running = [held(1, FLAT, PerGpu(4, 120.0))]
    cluster = ClusterState(SERVERS, ((SERVERS[0].name, PerGpu(4, 120.0).times(1)),), FAIR)
    rule = RequeueRule(restart_cost_s=1, budget=5)
    grow = plan_round((), running, cluster, FIFO, TUNE, rule, {}, 0)
    assert [r.job_id for r in grow.requeues] == [1]      # 8 cores would be 1.5x
    both = plan_round((), running, cluster, FIFO, TUNE, rule, {}, 0, shrinkable=running)
    assert [s.job_id for s in both.shrinks] == [1] and both.requeues == ()


@settings(max_examples=examples(200), deadline=None)
@given(cpus=st.sampled_from([2, 3, 4, 6, 8]), mem=st.floats(20.0, 240.0),
       rows=st.lists(st.lists(st.floats(0.1, 5.0), min_size=3, max_size=3),
                     min_size=3, max_size=3))
def test_a_shrink_never_costs_throughput_and_never_grows(cpus, mem, rows):
    prof = Profile("p", (2, 4, 8), MEM_GRID, tuple(tuple(r) for r in rows))
    share = PerGpu(cpus, mem)
    for s in memory_shrinks([held(1, prof, share)], FAIR):
        assert s.share.cpus == cpus and s.share.mem_gb <= mem - MIN_SHRINK_GB
        before = prof.speedup(share, FAIR)
        assert s.speedup >= max(before, 1.0) * (1 - 1e-9)
