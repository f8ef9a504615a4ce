"""The controller model (whatif, simulate --no-preempt) behaves as Slurm does: jobs queue
from their submission, Slurm's backfill keeps the higher jobs' reservations, placement is
cons_tres's, partitions stay apart, fixed outcomes and start-up are not sped up, and
synergy's controller acts on its own rounds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from synergy_slurm.core import ClusterState, Profile, Resources, Server
from synergy_slurm.core.pools import Pool
from synergy_slurm.sim.config import SlurmConfig
from synergy_slurm.sim.simulate import simulate
from synergy_slurm.sim.trace import TraceJob

ONE = ClusterState.uniform(1, gpus=8, cpus=24, mem_gb=500.0)


def hungry():
    """Twice as fast with 6 cores per GPU as with 3."""
    return Profile("h", (3, 6), (62.5, 125), ((1, 1), (2, 2)), iter_time_s=1.0)


def flat():
    return Profile("m", (1, 3), (10, 62.5), ((1, 1), (1, 1)), iter_time_s=1.0)


def kept():
    """As fast as the flat one, for a hair more with 70 GB per GPU: its ideal is above the
    proportional share (62.5 GB), so the 22.05 hook holds it (decide.needs_no_hold)."""
    return Profile("k", (1, 3), (10, 70), ((1, 1.001), (1, 1.001)), iter_time_s=1.0)


PROFILES = {"h": hungry(), "m": flat(), "k": kept()}


def run(trace, allocator="proportional", cluster=ONE, **kw):
    cfg = SlurmConfig(cluster, allocator=allocator, round_s=5.0, **kw)
    return {j.job_id: j for j in simulate(trace, PROFILES, cfg).jobs}


def job(i, t, gpus, work, limit=1000.0, model="m", **kw):
    return TraceJob(i, model, t, 1, gpus, work_s=work, time_limit_s=limit, **kw)


def test_the_plain_replay_keeps_slurms_reservations_instead_of_skipping_ahead():
    # A holds 6 GPUs (limit 1000 s); B needs all 8 and reserves the node from A's limit.
    # C (2 GPUs, limit 2000) would still run then: it waits behind B, as in Slurm (the
    # core's admission loop alone would start it at once). D (limit 100) ends before the
    # reservation: the backfill starts it at its next pass.
    trace = [job(1, 0, 6, 900), job(2, 1, 8, 100), job(3, 2, 2, 100, limit=2000),
             job(4, 3, 2, 50, limit=100)]
    got = run(trace)
    assert got[2].start == 900.0               # B when A really ends
    assert got[3].start >= got[2].finish       # C never went ahead of B
    assert got[4].start == 5.0                 # D backfilled at the pass after it came
    assert got[4].finish <= 1000.0


def test_jct_runs_from_the_submission():
    got = run([job(1, 0, 8, 100), job(2, 10, 8, 100)])
    assert got[2].arrival == 10.0 and got[2].start == 100.0 and got[2].jct_s == 190.0


def test_a_job_asking_per_node_waits_where_a_gpus_job_spreads():
    two = ClusterState.uniform(2, gpus=8, cpus=24, mem_gb=500.0)
    trace = [job(1, 0, 6, 500), job(2, 0, 6, 500), job(3, 1, 4, 100),
             job(4, 1, 4, 100, gpus_per_node=4)]
    got = run(trace, cluster=two)
    assert got[3].start == 1.0                 # --gpus=4: 2 + 2 over both nodes
    assert got[4].start == 500.0               # --gres=gpu:4: whole node only


def test_partitions_are_apart():
    n1, n2 = (Server(n, Resources(8, 24, 500.0)) for n in ("n1", "n2"))
    cluster = ClusterState((n1, n2))
    pools = (Pool("a", ClusterState((n1,))), Pool("b", ClusterState((n2,))))
    trace = [job(1, 0, 8, 300, partition="a"), job(2, 1, 8, 100, partition="a")]
    for allocator in ("proportional", "tune"):
        got = run(trace, allocator, cluster, pools=pools)
        assert got[2].start == 300.0          # n2 stands idle: not its partition


def test_fixed_outcomes_and_start_up_are_not_sped_up():
    # The hungry profile runs twice as fast at 6 cores/GPU, which synergy gives it here.
    trace = [job(1, 0, 1, 400, model="h", startup_s=100),
             job(2, 0, 1, 400, model="h", fixed_s=500)]
    plain, syn = run(trace), run(trace, "tune")
    assert plain[1].finish == pytest.approx(500.0)
    assert syn[1].finish == pytest.approx(300.0)      # 100 s start-up + 400 s / 2
    assert plain[2].finish == syn[2].finish == pytest.approx(500.0)


def test_the_controller_releases_held_jobs_on_its_rounds_after_the_release_delay():
    trace = [job(1, 0, 1, 100, model="h"), job(2, 3, 1, 100, model="h"),
             job(3, 43, 1, 100, model="h")]
    got = run(trace, "tune", controller_interval_s=10.0, release_delay_s=2.0)
    assert got[1].start == 2.0                 # the round at its arrival, then the delay
    assert got[2].start == 12.0                # the next round (t=10), then the delay
    # Rounds keep their period while none is needed (after t=20 nothing waits): job 3
    # waits for the round at t=50, not one run at its arrival (the model ran one at 43).
    assert got[3].start == 52.0
    # Where Slurm honours lowering (26.05) a known profile is not held: it starts at its
    # submission with the hook's shape.
    got = run(trace, "tune", controller_interval_s=10.0, release_delay_s=2.0,
              lowers_pending=True)
    assert got[2].start == 3.0


def test_a_job_released_without_delay_starts_at_the_release():
    # No release delay, Slurm's backfill every 300 s: the release itself wakes Slurm's
    # scheduler, as an update does; job 2 (arrived at 23) starts at the round at 30, not
    # at the next pass or when job 1 ends.
    cfg = SlurmConfig(ONE, allocator="tune", round_s=300.0, controller_interval_s=10.0,
                      release_delay_s=0.0)
    got = {j.job_id: j for j in simulate([job(1, 3, 1, 100, model="h"),
                                          job(2, 23, 1, 100, model="h")], PROFILES,
                                         cfg).jobs}
    assert (got[1].start, got[2].start) == (3.0, 30.0)


def test_a_known_shape_within_the_proportional_share_is_never_held():
    # 22.05 (lowering ignored), the controller's rounds at t=0, 10, ...: the round at 0
    # saw job 1 held and wrote a table that holds every known profile; the round at 10
    # saw none held: the flat profile's ideal (1 core, 10 GB per GPU) is within the
    # proportional share, final at submission (decide.needs_no_hold), and job 2 starts at
    # its submission; the hungry one (6 cores) submitted with it waits for the round at
    # t=20. With hold_known off it starts as soon, at its table shape.
    trace = [job(1, 0, 1, 100, model="h"), job(2, 13, 1, 100, model="m"),
             job(3, 13, 1, 100, model="h")]
    got = run(trace, "tune", controller_interval_s=10.0, release_delay_s=2.0)
    assert (got[1].start, got[2].start, got[3].start) == (2.0, 13.0, 22.0)
    got = run(trace, "tune", controller_interval_s=10.0, release_delay_s=2.0,
              hold_known=False)
    assert got[3].start == 13.0


def test_while_a_held_job_waits_every_known_profile_is_held():
    # A (8 GPUs) runs; B (8 GPUs, hungry) waits held for A's GPUs; C (flat, its shape
    # within the proportional share) comes later. Unheld, C would wait in Slurm's queue
    # and Slurm's scheduler would start it the moment A ends, before the controller's
    # next round released B (decide.no_hold_share): the paper's mix at 8 jobs an hour
    # lost synergy's whole gain that way. Held, C waits for B, in the controller's order.
    trace = [job(1, 0, 8, 105, model="h"), job(2, 1, 8, 100, model="h"),
             job(3, 15, 8, 100, model="m")]
    got = run(trace, "tune", controller_interval_s=10.0, release_delay_s=2.0)
    assert got[2].start < got[3].start
    assert got[3].start >= got[2].finish


def test_a_job_the_controller_released_is_pending_to_its_next_round():
    # A (5 GPUs) is released at its arrival and Slurm starts it after the release delay;
    # the round in between sees it pending, as the controller sees it in Slurm's queue, so
    # B (8 GPUs) is not released into A's GPUs. Released early, B would wait in Slurm's
    # queue and keep C (2 GPUs, long limit) from the 2 GPUs A leaves free until B ran
    # (seed 17 of e2e_whatif on the mixed site: the forecast's 4-GPU A100 jobs so waited
    # in Slurm and started 90 s before they did for real).
    trace = [job(1, 0, 5, 300, model="k"), job(2, 1, 8, 100, model="k"),
             job(3, 5, 2, 100, limit=2000, model="k")]
    got = run(trace, "tune", controller_interval_s=1.0, release_delay_s=2.0)
    assert got[1].start == 2.0
    assert got[3].start == 7.0                 # released at its arrival's round, beside A
    assert got[2].start == pytest.approx(got[1].finish + 2.0)   # held until A ended


def test_held_jobs_are_invisible_to_slurms_backfill():
    # On 22.05 every managed job is held: the controller, not Slurm, decides who goes
    # (TUNE's admission in policy order, skipping what does not fit); without synergy
    # Slurm keeps B's reservation.
    trace = [job(1, 0, 5, 900, model="k"), job(2, 1, 8, 100, model="k"),
             job(3, 2, 2, 100, limit=2000, model="k")]
    plain, syn = run(trace), run(trace, "tune")
    assert plain[3].start >= plain[2].finish
    assert syn[3].start < syn[2].start


def test_a_job_larger_than_its_partition_never_runs():
    got = run([job(1, 0, 16, 100)])
    assert got[1].start is None and got[1].finish is None


def test_the_hook_shapes_known_profiles_at_their_ideal_on_26_05():
    cfg = SlurmConfig(ONE, allocator="tune", round_s=5.0,
                    lowers_pending=True, controller_interval_s=1000.0)
    res = simulate([job(1, 0, 1, 400, model="h"), job(2, 1, 1, 400, model="h")],
                   PROFILES, cfg)
    # Both start unheld at 6 cores (the ideal), twice as fast as proportional.
    assert all(j.finish - j.start == pytest.approx(200.0) for j in res.jobs)


def test_a_requeue_budget_with_nothing_to_requeue_changes_nothing_and_skips_idle_rounds():
    """Where no running job may be requeued (none opted in), the controller's rounds that
    see nothing new find what the last found: replaying them or skipping them gives the
    same jobs, and the budget costs no rounds."""
    trace = [job(i, 7.0 * i, 1 + i % 3, 60.0 + 13 * (i % 5), model="hm"[i % 2])
             for i in range(30)]
    kw = dict(controller_interval_s=2.0, requeue_opt_in=True, requeue_interval_s=10.0,
              restart_cost_s=5.0)
    without = run(trace, "tune", **kw)
    rounds = {}

    def counting(budget):
        n = {"rounds": 0}
        cfg = SlurmConfig(ONE, allocator="tune", round_s=5.0,
                        requeue_budget=budget, **kw)
        res = simulate(trace, PROFILES, cfg, on_round=lambda *_: n.__setitem__(
            "rounds", n["rounds"] + 1))
        rounds[budget] = n["rounds"]
        return {j.job_id: j for j in res.jobs}

    assert counting(2) == counting(0) == without
    assert rounds[2] == rounds[0]


def test_skipping_the_rounds_that_cannot_requeue_gives_the_same_jobs(monkeypatch):
    """A requeue a round did not make does not pay later (what a restart saves shrinks
    as the job runs) until something starts, ends or comes, or a job's requeue interval
    ends: the model runs only those rounds, and gives the jobs a round every interval
    gives, requeues included."""
    from synergy_slurm.sim import controller_model

    trace = [job(i, 10.0 * i, 1 + i % 3, 60.0 + 13 * (i % 5), model="hm"[i % 2],
                 requeue_ok=True) for i in range(30)]
    cfg = SlurmConfig(ONE, allocator="tune", round_s=5.0, controller_interval_s=2.0,
                      requeue_opt_in=True, requeue_interval_s=10.0, restart_cost_s=5.0,
                      requeue_budget=1)

    rounds = []
    real_round = controller_model._Model._controller
    monkeypatch.setattr(controller_model._Model, "_controller",
                        lambda self, t: (rounds.append(t), real_round(self, t)))

    def jobs_and_rounds():
        rounds.clear()
        res = simulate(trace, PROFILES, cfg)
        return {j.job_id: j for j in res.jobs}, len(rounds)

    skipping, few = jobs_and_rounds()
    # As if a requeue were always due: a round every interval.
    monkeypatch.setattr(controller_model._Model, "_next_requeue_due",
                        lambda self: -float("inf"))
    every, many = jobs_and_rounds()
    assert sum(j.restarts for j in every.values()) >= 3
    assert skipping == every
    assert few < many


def test_a_key_the_closed_loop_suspects_is_held_as_unknown_by_the_hook(paper_profiles):
    """The controller leaves a key it caps for some user out of the hook's table
    (controller/daemon.py): the hook holds that key's later jobs, of every user, as
    unknown until a round shapes each by its own user's cap. On 26.05 (known profiles not
    held) the model started them at once, at the profile's shape, by the hook's rule for a
    known key."""
    from synergy_slurm.core.usage import UsageRule
    from synergy_slurm.sim.trace import mislabel

    cl = ClusterState.uniform(1, gpus=8, cpus=48, mem_gb=500.0)
    lies = list(mislabel([TraceJob(0, "gnmt", 0, 9_000, 1),
                          TraceJob(1, "gnmt", 1000, 9_000, 1)], 1.0, "alexnet", users=1))
    trace = [*lies, TraceJob(2, "alexnet", 1000, 9_000, 1, user="u1")]
    cfg = SlurmConfig(cl, allocator="tune", round_s=5.0, lowers_pending=True,
                      controller_interval_s=600.0, release_delay_s=2.0,
                      usage=UsageRule(min_observed_s=300))
    got = {j.job_id: j for j in simulate(trace, paper_profiles, cfg).jobs}
    assert got[0].start == 0.0              # nothing suspect yet: started at submission
    # Judged suspect at the round at 600 s: both later jobs wait for the round at 1200 s.
    assert got[1].start == got[2].start == 1202.0
    off = simulate(trace, paper_profiles, replace(cfg, usage=None)).jobs
    assert [j.start for j in off] == [0.0, 1000.0, 1000.0]
