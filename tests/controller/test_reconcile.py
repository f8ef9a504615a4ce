"""Reconcile and classify on hand-made Slurm jobs (no Slurm needed)."""

from __future__ import annotations

from synergy_slurm.config import Config
from synergy_slurm.controller.actions import (
    CANNOT,
    RAISE,
    RELEASE,
    SHAPE_RELEASE,
    reconcile_pending,
)
from synergy_slurm.controller.classify import classify, profile_key, runnable
from synergy_slurm.core import Allocation, PerGpu, Plan
from synergy_slurm.slurm.model import SlurmJob

FAIR = PerGpu(3, 62.5)


def job(i, **kw) -> SlurmJob:
    base = dict(job_id=i, user="u", state="PENDING", partition="gpu", gpus=1, gpus_per_job=1,
                priority=100, reason="Resources")
    base.update(kw)
    return SlurmJob(**base)


def plan_of(*allocs) -> Plan:
    return Plan(tuple(Allocation(i, 1, share, (("n1", 1),), 1.5, "ideal")
                      for i, share in allocs))


def test_held_jobs_are_shaped_and_released_eligible_ones_only_raised():
    held = job(1, priority=0, reason="JobHeldUser",
               admin_comment="synergy.managed=1,synergy.held=1")
    same = job(2, priority=0, reason="JobHeldUser", admin_comment="synergy.held=1",
               cpus_per_gpu=3, mem_per_gpu_mb=62500)
    up = job(3)
    down = job(4)
    mem_only = job(5, cpus_per_gpu=3, mem_per_gpu_mb=62500)
    waiting = job(6, priority=0, reason="JobHeldUser", admin_comment="synergy.held=1")
    plan = plan_of((1, PerGpu(1, 20.0)), (2, PerGpu(3, 62.5)), (3, PerGpu(12, 125.0)),
                   (4, PerGpu(1, 20.0)), (5, PerGpu(3, 125.0)))
    acts = {a.job_id: a for a in reconcile_pending([held, same, up, down, mem_only, waiting],
                                                   plan, FAIR)}
    assert acts[1].kind == SHAPE_RELEASE and acts[1].after.cpus_per_gpu == 1
    assert acts[1].after.mem_per_gpu_mb == 20000
    assert acts[2].kind == RELEASE
    assert acts[3].kind == RAISE and acts[3].after.cpus_per_gpu == 12
    assert acts[4].kind == CANNOT and not acts[4].mutating
    assert acts[5].kind == RAISE and acts[5].after.mem_per_gpu_mb == 125000
    assert 6 not in acts   # not planned this round: stays held, no action


def test_classification_reasons():
    cfg = Config()
    assert classify(job(1), cfg, frozenset()).managed
    cases = {
        "not a GPU job": job(2, gpus=0, gpus_per_job=None),
        "partition cpu not managed": job(3, partition="cpu"),
        "user opted out": job(4, user="alice"),
        "job opted out": job(5, comment="synergy:off"),
        "heterogeneous job": job(6, het_job_id=6),
        "--gpus-per-socket jobs are not reshaped": job(7, gpus_per_job=None,
                                                       gpus_per_socket=1),
        "--gpus-per-task jobs are not reshaped": job(8, gpus_per_job=None, gpus_per_task=1),
        "--gpus over several nodes is not reshaped": job(9, num_nodes=2),
    }
    for reason, j in cases.items():
        v = classify(j, cfg, frozenset({"alice"}))
        assert not v.managed and v.reason == reason
    assert classify(job(10, array_job_id=7, array_task_id=3), cfg, frozenset()).managed
    # A pending array (its tasks not split yet) is managed as one job: one shape for all.
    pending_array = job(11, array_job_id=11, array_task_id=None)
    assert pending_array.pending_array and classify(pending_array, cfg, frozenset()).managed


def test_runnable_and_profile_key():
    assert runnable(job(1))
    assert not runnable(job(2, reason="Dependency"))
    assert not runnable(job(3, priority=0, reason="JobHeldUser"))     # a user's own hold
    assert runnable(job(4, priority=0, reason="JobHeldUser", admin_comment="synergy.held=1"))
    assert not runnable(job(5, state="RUNNING"))
    assert profile_key(job(6, admin_comment="x,synergy.profile=res18")) == "res18"
    assert profile_key(job(7, comment="run synergy:profile=gnmt please")) == "gnmt"
    # Like the hook, the key stops at the first character a key cannot have.
    assert profile_key(job(8, comment="synergy:profile=bad!key")) == "bad"
    assert profile_key(job(10, comment="synergy:profile=" + "k" * 65)) is None
    assert profile_key(job(9, admin_comment="synergy.profile=../etc")) is None


def test_a_job_the_hook_left_for_its_own_shape_is_not_managed():
    """The hook tags a job that sets its own cores or memory (-c, --mem-per-cpu, ...)
    synergy.managed=0,synergy.own=KEY; the controller leaves it with the same reason."""
    from synergy_slurm.config import Config
    from synergy_slurm.controller.classify import classify
    from synergy_slurm.slurm.model import SlurmJob

    job = SlurmJob(1, "alice", "PENDING", "gpu", gpus=2, gpus_per_job=2,
                   comment="synergy:profile=res18",
                   admin_comment="synergy.managed=0,synergy.own=cpus-per-task")
    v = classify(job, Config(), frozenset())
    assert not v.managed
    assert v.reason == "-c/--cpus-per-task sets the job's cores or memory itself: left as " \
                       "submitted"
    plain = SlurmJob(2, "alice", "PENDING", "gpu", gpus=2, gpus_per_job=2,
                     comment="synergy:profile=res18")
    assert classify(plain, Config(), frozenset()).managed
