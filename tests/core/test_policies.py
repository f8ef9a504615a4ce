"""The base policies' orders (ascending keys, ties by arrival then id)."""

from __future__ import annotations

import pytest

from synergy_slurm.core import JobSpec, get_policy


def ids(policy, jobs, now=1000.0):
    return [j.id for j in get_policy(policy).order(jobs, now)]


def test_fifo_orders_by_arrival_then_id():
    jobs = [JobSpec(3, 1, submitted=5), JobSpec(1, 1, submitted=9), JobSpec(2, 1, submitted=5)]
    assert ids("fifo", jobs) == [2, 3, 1]


def test_slurm_orders_by_slurms_priority_then_submission_then_id():
    # Slurm's queue sort: priority descending, then submit time, then job id.
    jobs = [JobSpec(1, 1, submitted=1, priority=100), JobSpec(2, 1, submitted=2, priority=900),
            JobSpec(4, 1, submitted=3, priority=500), JobSpec(3, 1, submitted=3, priority=500),
            JobSpec(5, 1, submitted=0, priority=0)]       # held: Slurm ranks it on release
    assert ids("slurm", jobs) == [2, 3, 4, 1, 5]
    # Without priorities (the simulator's traces) it is FIFO.
    plain = [JobSpec(i, 1, submitted=10 - i) for i in range(4)]
    assert ids("slurm", plain) == ids("fifo", plain)


def test_srtf_orders_by_remaining_time_at_proportional_speed():
    jobs = [JobSpec(0, 1, submitted=0, remaining_s=500), JobSpec(1, 1, submitted=1,
            remaining_s=100), JobSpec(2, 1, submitted=2, remaining_s=100)]
    assert ids("srtf", jobs) == [1, 2, 0]


def test_las_orders_by_attained_service_times_gpus():
    jobs = [JobSpec(0, 4, submitted=0, attained_s=100),   # 400
            JobSpec(1, 1, submitted=1, attained_s=300),   # 300
            JobSpec(2, 8, submitted=2, attained_s=0)]     # 0
    assert ids("las", jobs) == [2, 1, 0]


def test_ftf_orders_by_finish_time_fairness_ascending():
    # rho = (now - arrival + remaining) / duration
    jobs = [JobSpec(0, 1, submitted=0, duration_s=1000, remaining_s=1000),   # 2.0
            JobSpec(1, 1, submitted=900, duration_s=100, remaining_s=50),    # 1.5
            JobSpec(2, 1, submitted=500, duration_s=2000, remaining_s=2000)]  # 1.25
    assert ids("ftf", jobs, now=1000) == [2, 1, 0]


def test_unknown_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown policy 'drf'"):
        get_policy("drf")
