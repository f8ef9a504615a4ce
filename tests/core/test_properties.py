"""Properties every allocator must keep, over random clusters, job mixes and profiles."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synergy_slurm.core import ALLOCATOR_NAMES, PerGpu, get_allocator, get_policy, make_plan

from .plan_checks import check_capacity
from .strategies import clusters, examples, job_mixes

SETTINGS = settings(max_examples=examples(150), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
FLOOR = 1 - 1e-9


@pytest.mark.parametrize("allocator", ALLOCATOR_NAMES)
@SETTINGS
@given(cluster=clusters(reserved=True), jobs=job_mixes(),
       policy=st.sampled_from(["fifo", "srtf", "las", "ftf"]))
def test_plan_is_feasible_and_complete(allocator, cluster, jobs, policy):
    plan = make_plan(jobs, cluster, get_policy(policy), get_allocator(allocator), now=1e4)
    check_capacity(plan, cluster)
    by_id = {j.id: j for j in jobs}
    for a in plan.allocations:
        job = by_id[a.job_id]
        assert a.gpus == job.gpus
        assert sum(n for _, n in a.placement) == job.gpus
        assert all(n > 0 for _, n in a.placement)
        assert a.share.cpus >= 1 and a.share.mem_gb > 0
        # The recorded speedup is the profile's, at the share the job really gets.
        if job.profile is not None:
            assert a.speedup == pytest.approx(job.profile.speedup(a.share, cluster.fair))
        else:
            assert a.share == cluster.fair and a.speedup == 1.0
    placed = {a.job_id for a in plan.allocations}
    assert len(placed) == len(plan.allocations)
    assert placed | set(plan.skipped) == set(by_id)
    assert not placed & set(plan.skipped)


@pytest.mark.parametrize("allocator", ["tune-ref", "tune", "tune-plus", "opt", "greedy",
                                       "proportional"])
@SETTINGS
@given(cluster=clusters(reserved=True), jobs=job_mixes())
def test_no_admitted_job_below_proportional(allocator, cluster, jobs):
    plan = make_plan(jobs, cluster, get_policy("fifo"), get_allocator(allocator), now=0)
    for a in plan.allocations:
        if allocator == "greedy" and a.how not in ("ideal", "capped"):
            continue
        assert a.speedup >= FLOOR, a


@pytest.mark.parametrize("allocator", ALLOCATOR_NAMES)
@settings(max_examples=examples(60), deadline=None)
@given(cluster=clusters(reserved=True), jobs=job_mixes())
def test_plans_are_deterministic(allocator, cluster, jobs):
    policy = get_policy("las")
    a = make_plan(jobs, cluster, policy, get_allocator(allocator), now=5.0)
    b = make_plan(list(jobs), cluster, policy, get_allocator(allocator), now=5.0)
    assert a == b


@pytest.mark.parametrize("allocator", ["tune", "tune-plus", "tune-ref", "opt"])
@SETTINGS
@given(cluster=clusters(), jobs=job_mixes())
def test_tune_places_every_job_the_gpus_admit(allocator, cluster, jobs):
    """Peer downgrade means an admitted job never fails for lack of cores or memory. tune-ref
    is the paper's TUNE, made for servers of one shape; where its own steps fail (servers of
    several shapes: a 1-core server beside 8-GPU ones, a 3-GPU job holding an 8-GPU server's
    memory) it falls back on TUNE's, so it holds the property everywhere too."""
    plan = make_plan(jobs, cluster, get_policy("fifo"), get_allocator(allocator), now=0)
    for job_id, reason in plan.skipped.items():
        assert reason.startswith("needs "), (job_id, reason)


@SETTINGS
@given(cluster=clusters(), jobs=job_mixes())
def test_opt_bound_above_every_plan(cluster, jobs):
    policy = get_policy("fifo")
    opt = make_plan(jobs, cluster, policy, get_allocator("opt", opt_time_limit_s=10), now=0)
    assert opt.fallback is None
    assert opt.bound is not None
    for name in ("tune-ref", "tune", "tune-plus", "proportional"):
        other = make_plan(jobs, cluster, policy, get_allocator(name), now=0)
        assert {a.job_id for a in other.allocations} == {a.job_id for a in opt.allocations}, (
            name, other.skipped)
        assert opt.bound >= other.total_speedup - 1e-6, name
    assert opt.bound >= opt.total_speedup - 1e-6


@pytest.mark.parametrize("allocator", ["tune", "tune-plus", "opt", "greedy", "proportional"])
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(reserved=True), jobs=job_mixes(), data=st.data())
def test_no_job_planned_past_its_site_limit(allocator, cluster, jobs, data):
    """A job with a site limit (QOS/association, as the controller computes it: never below
    proportional) gets at most that, and still at least its proportional throughput.
    (tune-ref, the paper's reference TUNE, knows no limits and is not used by drivers.)"""
    fair = cluster.fair
    limited = []
    for j in jobs:
        if data.draw(st.booleans()):
            lim = PerGpu(data.draw(st.integers(fair.cpus, 24)),
                         data.draw(st.floats(fair.mem_gb, 600.0)))
            j = dataclasses.replace(j, limit=lim)
        limited.append(j)
    plan = make_plan(limited, cluster, get_policy("fifo"), get_allocator(allocator), now=0)
    by_id = {j.id: j for j in limited}
    for a in plan.allocations:
        lim = by_id[a.job_id].limit
        if lim is not None:
            assert a.share.within(lim), (a, lim)
        if allocator != "greedy" or a.how in ("ideal", "capped"):
            assert a.speedup >= FLOOR, a


@pytest.mark.parametrize("allocator", ["tune-ref", "tune", "tune-plus", "opt", "greedy",
                                       "proportional"])
@SETTINGS
@given(cluster=clusters(reserved=True), jobs=job_mixes(),
       policy=st.sampled_from(["fifo", "srtf", "las", "ftf"]))
def test_policy_order_is_respected(allocator, cluster, jobs, policy):
    """A job skipped for want of GPUs really had too few left by the jobs the policy
    ranks before it: no allocator hands its GPUs to a job ranked lower."""
    pol = get_policy(policy)
    plan = make_plan(jobs, cluster, pol, get_allocator(allocator), now=1e4)
    placed = plan.by_job()
    free = sum(r.gpus for r in cluster.free())
    seen: set[int] = set()
    for job in pol.order(jobs, 1e4):
        if job.id in seen:
            continue
        seen.add(job.id)
        if job.id in placed:
            free -= job.gpus
        elif plan.skipped[job.id].startswith("needs "):
            assert job.gpus > free, (job.id, plan.skipped[job.id], free)
