"""Which running jobs the controller offers the core for lowering their memory in place
(its facts, controller/requeue.running_jobs; the one rule, core.reshape_candidates)."""

from __future__ import annotations

from synergy_slurm.controller.requeue import running_jobs
from synergy_slurm.core import JobSpec, PerGpu, Profile, reshape_candidates
from synergy_slurm.slurm.model import NodeAlloc, SlurmJob

FAIR = PerGpu(4, 60.0)
FLAT = Profile("flat", (2, 4, 8), (20.0, 60.0, 120.0), ((0.5,) * 3, (1.0,) * 3, (1.5,) * 3))


def running(job_id: int, alloc: tuple[NodeAlloc, ...], resizing: bool = False) -> SlurmJob:
    return SlurmJob(job_id, "u", "RUNNING", "gpu", gpus=sum(a.gpus for a in alloc),
                    gpus_per_job=sum(a.gpus for a in alloc), cpus_per_gpu=4,
                    nodes=tuple(a.node for a in alloc), alloc=alloc, resizing=resizing)


def spec(job: SlurmJob, profile: Profile | None = FLAT) -> JobSpec:
    return JobSpec(job.job_id, job.gpus, profile=profile, remaining_s=1000)


def shrinkable(pairs, fair):
    """What the core may shrink of these running jobs, each with its use measured."""
    return reshape_candidates(running_jobs(pairs, fair, {j.job_id: 0.0 for j, _ in pairs}))[1]


def test_a_job_whose_memory_is_being_lowered_is_not_offered_again():
    """Slurm refuses a second resize until every node answered the first ("Job can not be
    altered now"), and the allocation still shows the old memory: offering the job would
    plan memory that is not free yet and fail the update."""
    one = running(1, (NodeAlloc("n1", 4, 120000, 1),))
    busy = running(2, (NodeAlloc("n2", 4, 120000, 1),), resizing=True)
    offered = shrinkable([(one, spec(one)), (busy, spec(busy))], FAIR)
    assert [s.id for s, _ in offered] == [1]
    [(_, alloc)] = offered
    assert alloc.share == PerGpu(4, 120.0) and alloc.placement == (("n1", 1),)


def test_uneven_gpus_across_nodes_and_unprofiled_jobs_are_not_offered():
    """Slurm sets a running job's memory per node: a job with 1 GPU on one node and 3 on
    another cannot be lowered to one per-GPU share; without a profile nothing says what
    memory it needs."""
    uneven = running(1, (NodeAlloc("n1", 4, 60000, 1), NodeAlloc("n2", 12, 180000, 3)))
    even = running(2, (NodeAlloc("n1", 8, 240000, 2), NodeAlloc("n2", 8, 240000, 2)))
    blind = running(3, (NodeAlloc("n3", 4, 120000, 1),))
    offered = shrinkable([(uneven, spec(uneven)), (even, spec(even)),
                          (blind, spec(blind, None))], FAIR)
    assert [s.id for s, _ in offered] == [2]


def test_a_job_whose_use_was_not_measured_is_not_offered():
    one = running(1, (NodeAlloc("n1", 4, 120000, 1),))
    held = running_jobs([(one, spec(one))], FAIR, {})
    assert reshape_candidates(held) == ([], [])
