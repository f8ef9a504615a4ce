"""Room kept for free GPUs where running jobs cannot be lowered (Allocator.keeps_room):
the controller's TUNE gives a job more than its proportional share only from what the free
GPUs beside it do not need, for as many GPUs as jobs wait for; the paper's rounds do not
keep any (they lower a job again at the next round)."""

from __future__ import annotations

from synergy_slurm.core import (
    Allocation,
    ClusterState,
    JobSpec,
    PerGpu,
    RequeueRule,
    get_allocator,
    get_policy,
    make_plan,
    plan_round,
)
from synergy_slurm.core.requeue import room_left

FIFO = get_policy("fifo")
ONE = ClusterState.uniform(1)        # 8 GPUs, 24 cores, 500 GB: 3 cores, 62.5 GB per GPU
S0 = ONE.servers[0].name


def jobs_of(profiles, *specs):
    return [JobSpec(i, g, submitted=float(i), duration_s=100, remaining_s=100,
                    profile=profiles[m]) for i, (m, g) in enumerate(specs)]


def plan_of(jobs, cluster, keeps_room):
    return make_plan(jobs, cluster, FIFO, get_allocator("tune", keeps_room=keeps_room),
                     now=0).by_job()


def test_a_hungry_job_leaves_the_waiting_jobs_their_share(paper_profiles):
    # alexnet wants 12 cores; six 1-GPU res18 jobs wait behind it for 3 each at least.
    jobs = jobs_of(paper_profiles, ("alexnet", 1), *[("res18", 1)] * 6)
    kept = plan_of(jobs, ONE, True)
    assert kept[0].share.cpus == 6             # 24 - 6 x 3 left to the res18 jobs
    assert all(kept[i].share.cpus >= 3 for i in range(1, 7))
    # The paper's TUNE gives alexnet its ideal first and lowers it for the others (a round
    # can lower it again; Slurm cannot lower it once it runs).
    paper = plan_of(jobs, ONE, False)
    assert paper[0].share.cpus == 3 and paper[0].how == "peer-downgraded"


def test_room_is_kept_for_as_many_gpus_as_jobs_wait_for(paper_profiles):
    # Alone, alexnet gets its ideal: nothing waits for the seven GPUs left.
    (alone,) = plan_of(jobs_of(paper_profiles, ("alexnet", 1)), ONE, True).values()
    assert alone.share == PerGpu(12, 125.0)
    # One gnmt behind it (its ideal is 1 core, 20 GB): room for one GPU at the
    # proportional share is kept, so alexnet still gets its 12 cores, 125 GB.
    p = plan_of(jobs_of(paper_profiles, ("alexnet", 1), ("gnmt", 1)), ONE, True)
    assert p[0].share == PerGpu(12, 125.0) and p[1].share == PerGpu(1, 20.0)
    # Five res18 jobs behind it need 15 cores: alexnet gets 9 (its 9-core grid point).
    p = plan_of(jobs_of(paper_profiles, ("alexnet", 1), *[("res18", 1)] * 5), ONE, True)
    assert p[0].share.cpus == 9 and all(p[i].share.cpus == 3 for i in range(1, 6))
    # Five gnmt jobs take 1 core each: what the room kept for them and they left idle is
    # handed back to alexnet at the end of the round (its ideal again).
    p = plan_of(jobs_of(paper_profiles, ("alexnet", 1), *[("gnmt", 1)] * 5), ONE, True)
    assert p[0].share.cpus == 12


def test_a_share_within_the_proportional_one_is_never_held_back(paper_profiles):
    # Two cores free beside 7 busy GPUs: a gnmt (1 core) still starts although a waiting
    # res18 could not; room is kept only against shares above the proportional one.
    busy = ClusterState(ONE.servers, ((S0, PerGpu(3, 62.5).times(7)),))
    p = plan_of(jobs_of(paper_profiles, ("gnmt", 1), ("res18", 1)), busy, True)
    assert p[0].share == PerGpu(1, 20.0) and 1 not in p


def test_requeues_keep_room_only_while_jobs_wait(paper_profiles):
    fair = PerGpu(3, 62.5)
    # A server with 4 free GPUs and 14 free cores: a requeue to 9 cores (+6) leaves 8,
    # under the 12 that four waiting 1-GPU jobs need at the proportional share.
    assert not room_left([14.0, 300.0, 4.0], fair, PerGpu(9, 62.5), 6, 0.0, waiting_gpus=4)
    assert room_left([14.0, 300.0, 4.0], fair, PerGpu(9, 62.5), 6, 0.0, waiting_gpus=2)
    assert room_left([14.0, 300.0, 4.0], fair, PerGpu(9, 62.5), 6, 0.0, waiting_gpus=0)
    # In plan_round: a running res18 at 3 cores, 7 GPUs free; with nothing pending it is
    # requeued into its ideal, with 7 res18 jobs pending that the plan gives all GPUs and
    # cores to, it is not.
    res18 = paper_profiles["res18"]
    spec = JobSpec(99, 1, submitted=0.0, duration_s=1000, remaining_s=1000, profile=res18,
                   may_requeue=True)
    alloc = Allocation(99, 1, fair, ((S0, 1),), 1.0, "running")
    cluster = ClusterState(ONE.servers, ((S0, fair.times(1)),))
    rule = RequeueRule(restart_cost_s=10, budget=1)
    tune = get_allocator("tune", keeps_room=True)
    alone = plan_round([], [(spec, alloc)], cluster, FIFO, tune, rule, {}, 0.0)
    assert [r.job_id for r in alone.requeues] == [99]
    busy = plan_round(jobs_of(paper_profiles, *[("res18", 1)] * 7), [(spec, alloc)], cluster,
                      FIFO, tune, rule, {}, 0.0)
    assert busy.requeues == ()


def test_a_job_of_several_gpus_leaves_room_for_the_gpus_beside_it(paper_profiles):
    # 7 GPUs and 20 cores free. res18 on 2 GPUs wants 9 cores each, two 1-GPU res18 jobs
    # wait behind it: 2 x 9 = 18 would leave 2 cores where they need 6; 2 x 6 = 12 leaves 8.
    cluster = ClusterState(ONE.servers, ((S0, PerGpu(4, 20.0).times(1)),))
    jobs = jobs_of(paper_profiles, ("res18", 2), ("res18", 1), ("res18", 1))
    p = plan_of(jobs, cluster, True)
    assert p[0].share.cpus == 6
    assert set(p) == {0, 1, 2} and all(p[i].share.cpus >= 3 for i in (1, 2))
