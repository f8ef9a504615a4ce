"""plan_round: the one round the simulator and the controller share: pending jobs planned
into what running jobs leave, then requeues of running jobs by the rule."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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

# Hungry: twice as fast with 8 cores per GPU as with the fair 4.
HUNGRY = Profile("h", (2, 4, 8), (62.5, 125), ((0.5, 0.5), (1, 1), (2, 2)))
# Two servers of 2 GPUs, 16 cores and 250 GB, planned with a fair share of 4 cores/GPU.
SERVERS = ClusterState.uniform(2, gpus=2, cpus=16, mem_gb=250).servers
FAIR = PerGpu(4, 62.5)
FIFO = get_policy("fifo")


def cluster_with(running: list[tuple[JobSpec, Allocation]]) -> ClusterState:
    return ClusterState(SERVERS, tuple(
        (name, a.share.times(n)) for _, a in running for name, n in a.placement), FAIR)


def running_job(job_id: int, server: str, submitted: float = 0.0,
                remaining_s: float = 10_000) -> tuple[JobSpec, Allocation]:
    spec = JobSpec(job_id, 1, submitted=submitted, duration_s=remaining_s,
                   remaining_s=remaining_s, profile=HUNGRY)
    return spec, Allocation(job_id, 1, FAIR, ((server, 1),), 1.0, "running")


def servers() -> list[str]:
    return [s.name for s in SERVERS]


def test_pending_are_planned_into_what_running_jobs_leave():
    a, b = servers()
    running = [running_job(1, a), running_job(2, a)]
    cl = cluster_with(running)
    pending = [JobSpec(10, 2, submitted=5, profile=HUNGRY)]
    rp = plan_round(pending, running, cl, FIFO, get_allocator("tune"), RequeueRule(), {}, 10)
    alloc = rp.plan.get(10)
    assert alloc is not None and alloc.servers == (b,)   # server a's GPUs are taken
    assert rp.requeues == ()                               # budget 0: none


def test_requeue_when_it_pays_by_budget_interval_and_order():
    a, b = servers()
    running = [running_job(1, a, submitted=2), running_job(2, b, submitted=1)]
    cl = cluster_with(running)
    tune = get_allocator("tune")
    rule = RequeueRule(restart_cost_s=60, min_interval_s=600, budget=1)
    rp = plan_round([], running, cl, FIFO, tune, rule, {}, 1000)
    # One per round, and the policy's first (job 2 was submitted first).
    assert [r.job_id for r in rp.requeues] == [2]
    assert rp.requeues[0].demand.share.cpus == 8 and rp.requeues[0].saves_s > 60
    # Job 2 was requeued 100 s ago (< 600 s): job 1 goes instead.
    rp = plan_round([], running, cl, FIFO, tune, rule, {2: 900}, 1000)
    assert [r.job_id for r in rp.requeues] == [1]
    # Both within the interval: none.
    rp = plan_round([], running, cl, FIFO, tune, rule, {1: 900, 2: 900}, 1000)
    assert rp.requeues == ()
    # A restart that costs more than it saves is never made.
    costly = RequeueRule(restart_cost_s=1e6, budget=5)
    assert plan_round([], running, cl, FIFO, tune, costly, {}, 1000).requeues == ()
    # The GPU-proportional baseline never requeues.
    assert plan_round([], running, cl, FIFO, get_allocator("proportional"),
                      RequeueRule(budget=5), {}, 1000).requeues == ()


def test_requeues_use_only_what_the_new_plan_leaves_idle():
    a, _ = servers()
    running = [running_job(1, a)]
    cl = cluster_with(running)
    # A pending 1-GPU hungry job on server a would take the idle cores first.
    only_a = ClusterState(cl.servers[:1], cl.reserved, FAIR)
    pending = [JobSpec(10, 1, submitted=5, profile=HUNGRY)]
    rp = plan_round(pending, running, only_a, FIFO, get_allocator("tune"),
                    RequeueRule(budget=1), {}, 10)
    got = rp.plan.get(10)
    assert got is not None and got.share.cpus == 8        # the pending job's ideal first
    grown = sum(r.demand.share.cpus - 4 for r in rp.requeues)
    assert 4 + got.share.cpus + grown <= 16


def test_rule_rejects_negative_settings():
    with pytest.raises(ValueError):
        RequeueRule(budget=-1)


def test_the_simulator_and_the_controller_plan_through_plan_round_only():
    """Neither driver calls an allocator, a policy's order or the requeue step itself."""
    root = Path(__file__).resolve().parents[2] / "synergy_slurm"
    for path in [root / "sim" / "engine.py", *sorted((root / "controller").glob("*.py"))]:
        calls = {n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                 for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)}
        assert not calls & {"allocate", "order", "requeues", "make_plan"}, path
